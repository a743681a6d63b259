// Command optlake-year-bench measures what optlake costs on a lake with a
// long history, against the same commands on day 1 of the same lake: it
// synthesises (gen.go) the Parquet lake `optlake run --compact` every five
// minutes of a 3,000-instrument venue leaves after -days closed days (90 by
// default; -days 365 for the year), and a day-1 lake of the same venue, then
// times the built binary on each (a subprocess: wall, CPU, peak RSS):
//
//   - the next `run` (the instruments listing of the simulator, whose
//     clock is the lake's next snapshot), the first of the UTC day and a
//     later one;
//   - `status`, `history NAME` (one instrument over the whole history),
//     `schema`;
//   - `compact` of one day's per-snapshot files;
//   - catch-up of 12 pending snapshots (their loads left pending in the
//     ledger, their raw bodies archived);
//   - the lake's bytes for the history against DuckDB writing the same
//     instrument rows as one sorted zstd Parquet file.
//
// The report is markdown on stdout; -json writes it as JSON too.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/optlake/optlake/bench"
	"github.com/optlake/optlake/venuesim"
)

type config struct {
	days, instruments, rawDays, runs, rowGroupRows int
	every                                          time.Duration
	keep, jsonOut, optlake, repo                   string
	noDuck, noDuckSort, bucketOnly                 bool
}

func main() {
	var cfg config
	flag.IntVar(&cfg.days, "days", 90, "closed days of history (365: the year)")
	flag.IntVar(&cfg.instruments, "instruments", venuesim.DefaultInstruments, "instruments per listing")
	flag.DurationVar(&cfg.every, "every", 5*time.Minute, "the job's schedule (snapshots every)")
	flag.IntVar(&cfg.rawDays, "raw-days", 1, "days of raw archive kept (the last ones)")
	flag.IntVar(&cfg.runs, "runs", 3, "timed runs of each command (the fastest is reported)")
	flag.StringVar(&cfg.keep, "keep", "", "keep the lakes in this directory, and reuse one already generated with the same flags")
	flag.StringVar(&cfg.jsonOut, "json", "", "also write the report as JSON to this file")
	flag.StringVar(&cfg.optlake, "optlake", "", "the optlake binary (default: REPO/bin/optlake, built when missing)")
	flag.StringVar(&cfg.repo, "repo", ".", "optlake repository root")
	flag.IntVar(&cfg.rowGroupRows, "row-group-rows", 0, "rows of a compacted row group (0: compaction's default)")
	flag.BoolVar(&cfg.noDuck, "no-duckdb", false, "skip DuckDB (its queries and its sorted file)")
	flag.BoolVar(&cfg.noDuckSort, "no-duckdb-sort", false, "skip DuckDB's sorted file of the instruments rows (the bytes row; 90 days took DuckDB past 19 GiB)")
	flag.BoolVar(&cfg.bucketOnly, "bucket-only", false, "time only the rows of the lake on a bucket (versitygw)")
	reqLog := flag.String("bucket-requests", "", "write every request the bucket rows send to this file")
	flag.Parse()
	if *reqLog != "" {
		f, err := os.Create(*reqLog)
		if err != nil {
			fmt.Fprintln(os.Stderr, "optlake-year-bench:", err)
			os.Exit(1)
		}
		defer f.Close()
		requestLog = f
	}
	if err := run(context.Background(), cfg); err != nil {
		fmt.Fprintln(os.Stderr, "optlake-year-bench:", err)
		os.Exit(1)
	}
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[year-bench] "+format+"\n", args...)
}

func run(ctx context.Context, cfg config) error {
	repo, err := filepath.Abs(cfg.repo)
	if err != nil {
		return err
	}
	work, done, err := bench.WorkDir(cfg.keep, "optlake-year-bench-")
	if err != nil {
		return err
	}
	defer done()
	unlock, err := lockWork(work)
	if err != nil {
		return err
	}
	defer unlock()
	bin, err := bench.Binary(ctx, repo, cfg.optlake, progress)
	if err != nil {
		return err
	}
	rep := Report{Days: cfg.days, Instruments: cfg.instruments, Every: cfg.every.String()}
	lakes := map[int]string{}
	generated := false
	for _, days := range []int{1, cfg.days} {
		c := cfg
		c.days = days
		dir := filepath.Join(work, fmt.Sprintf("lake-%dd-%d-%s", days, cfg.instruments, cfg.every))
		lakes[days] = dir
		gs, fresh, err := ensureLake(ctx, dir, c)
		if err != nil {
			return fmt.Errorf("generate %d days: %w", days, err)
		}
		generated = generated || fresh
		if days == cfg.days {
			rep.Gen = gs
		}
	}
	if *onlyRows {
		return measureOnly(ctx, onlyBins(bin), lakes[1], lakes[cfg.days], cfg)
	}
	fresh := false
	if !cfg.bucketOnly && !*icebergBucketOnly {
		if fresh, err = ensureOpenDay(ctx, openDayDir(lakes[cfg.days], cfg), cfg); err != nil {
			return err
		}
	}
	for _, days := range []int{1, cfg.days} {
		iceFresh, err := ensureIcebergLake(ctx, lakes[days])
		if err != nil {
			return fmt.Errorf("iceberg lake of %d days: %w", days, err)
		}
		fresh = fresh || iceFresh
	}
	iceFresh, err := ensureIcebergBuckets(ctx, cfg, lakes[1], lakes[cfg.days])
	if err != nil {
		return err
	}
	fresh = fresh || iceFresh
	if generated || fresh {
		// A child's ru_maxrss starts at its parent's peak (Linux keeps it
		// across exec): the commands are timed by a new bench process, small,
		// on the lakes just generated (it takes the work folder's lock).
		unlock()
		return remeasure(ctx, work)
	}
	if err := measure(ctx, bin, lakes[1], lakes[cfg.days], cfg, &rep); err != nil {
		return err
	}
	if *icebergBucketOnly {
		printIcebergBucket(rep)
	} else if !*icebergOnly {
		printReport(rep)
	}
	printIceberg(rep)
	if cfg.jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(cfg.jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ensureLake generates the lake in dir, or reuses one a finished
// generation with the same flags left there (fresh false).
func ensureLake(ctx context.Context, dir string, cfg config) (genStats, bool, error) {
	var gs genStats
	if b, err := os.ReadFile(filepath.Join(dir, genMarker)); err == nil && json.Unmarshal(b, &gs) == nil && gs.Days == cfg.days {
		progress("reusing %s (%d days)", dir, gs.Days)
		return gs, false, nil
	}
	os.RemoveAll(dir)
	progress("generating %d days of %d instruments every %s in %s", cfg.days, cfg.instruments, cfg.every, dir)
	gs, err := generate(ctx, dir, cfg)
	return gs, true, err
}

// remeasure runs this bench again with the same flags, its lakes kept in
// work (reused).
func remeasure(ctx context.Context, work string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"-keep", work}
	flag.Visit(func(f *flag.Flag) {
		if f.Name != "keep" {
			args = append(args, "-"+f.Name+"="+f.Value.String())
		}
	})
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}
