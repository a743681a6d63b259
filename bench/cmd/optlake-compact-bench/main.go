// Command optlake-compact-bench measures `optlake compact` on a realistic
// archive: S snapshots of the simulator's listing (default 300 × 3,000
// instruments, one UTC day), written by optlake's own decoder and Parquet
// sink as `optlake run` writes them. It reports, in one run:
//
//   - bytes of the day's instruments: per-snapshot files, optlake's
//     compacted file, DuckDB's own sorted single file of the same rows
//     (ORDER BY the key, zstd) — and bytes per row;
//   - `optlake compact` (the built binary, a subprocess): wall time,
//     rows/s, peak RSS (ru_maxrss);
//   - DuckDB (threads=1) times of the three notebook queries on the
//     per-snapshot lake and on the compacted lake (fastest of -runs, after
//     a warm-up), and on DuckDB's sorted file for reference; all must
//     answer the same.
//
// Targets (issue 15): compacted ≤ 1.0× DuckDB's bytes, queries ≥ 7× faster,
// peak RSS ≤ 256 MiB. The report is markdown on stdout; -json writes it as
// JSON too. Exit 1 when a part fails to run (a missed target is reported,
// not an error).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/bench"
	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// day is the archive's (closed) day.
var day = time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)

type config struct {
	snapshots, instruments, runs int
	keep, jsonOut, optlake, repo string
}

// Report is what the bench prints.
type Report struct {
	Snapshots   int     `json:"snapshots"`
	Rows        int64   `json:"rows"`
	PerSnapshot int64   `json:"per_snapshot_bytes"`
	Compacted   int64   `json:"compacted_bytes"`
	DuckDB      int64   `json:"duckdb_sorted_bytes"`
	CompactSec  float64 `json:"compact_seconds"`
	RowsPerSec  float64 `json:"compact_rows_per_second"`
	PeakRSS     int64   `json:"compact_peak_rss_bytes"`
	CompactCPU  float64 `json:"compact_cpu_seconds"`
	DuckVersion string  `json:"duckdb_version"`
	// Queries: query -> lake ("per_snapshot", "compacted", "duckdb_sorted") -> ms.
	Queries map[string]map[string]float64 `json:"queries_ms"`
	Output  string                        `json:"compact_output"`
}

func main() {
	var cfg config
	flag.IntVar(&cfg.snapshots, "snapshots", 300, "snapshots in the archive (one day: spaced 24h/snapshots apart)")
	flag.IntVar(&cfg.instruments, "instruments", venuesim.DefaultInstruments, "instruments per listing")
	flag.IntVar(&cfg.runs, "runs", 5, "timed runs of each query (the fastest is reported)")
	flag.StringVar(&cfg.keep, "keep", "", "keep the lakes in this directory (default: a temp dir removed at exit)")
	flag.StringVar(&cfg.jsonOut, "json", "", "also write the report as JSON to this file")
	flag.StringVar(&cfg.optlake, "optlake", "", "the optlake binary (default: REPO/bin/optlake, built when missing)")
	flag.StringVar(&cfg.repo, "repo", ".", "optlake repository root")
	flag.Parse()
	if err := run(context.Background(), cfg); err != nil {
		fmt.Fprintln(os.Stderr, "optlake-compact-bench:", err)
		os.Exit(1)
	}
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[compact-bench] "+format+"\n", args...)
}

func run(ctx context.Context, cfg config) error {
	repo, err := filepath.Abs(cfg.repo)
	if err != nil {
		return err
	}
	work, done, err := bench.WorkDir(cfg.keep, "optlake-compact-bench-")
	if err != nil {
		return err
	}
	defer done()
	bin, err := bench.Binary(ctx, repo, cfg.optlake, progress)
	if err != nil {
		return err
	}
	per := filepath.Join(work, "per-snapshot")
	comp := filepath.Join(work, "compacted")
	os.RemoveAll(per)
	os.RemoveAll(comp)
	rep := Report{Snapshots: cfg.snapshots}
	progress("writing %d snapshots of %d instruments", cfg.snapshots, cfg.instruments)
	if rep.Rows, err = generate(ctx, per, cfg); err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	part := filepath.Join("instruments", "date="+day.Format(time.DateOnly))
	if rep.PerSnapshot, err = dirBytes(filepath.Join(per, part)); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", per, comp).CombinedOutput(); err != nil {
		return fmt.Errorf("copy lake: %v %s", err, out)
	}

	progress("optlake compact")
	cmd := exec.CommandContext(ctx, bin, "compact", "--data-dir", comp, "--to", day.AddDate(0, 0, 1).Format(time.DateOnly))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("optlake compact: %v: %s", err, stderr.String())
	}
	rep.CompactSec = time.Since(start).Seconds()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rep.PeakRSS = ru.Maxrss * 1024
		rep.CompactCPU = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	rep.RowsPerSec = float64(rep.Rows) / rep.CompactSec
	rep.Output = strings.TrimSpace(stdout.String())
	if rep.Compacted, err = dirBytes(filepath.Join(comp, part)); err != nil {
		return err
	}

	node, err := exec.LookPath("node")
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	script := filepath.Join(repo, "tools", "duckdb", "compact_bench.mjs")
	progress("DuckDB's sorted single file")
	var sorted struct {
		Version  string `json:"version"`
		Rows     int64  `json:"rows"`
		OutBytes int64  `json:"out_bytes"`
	}
	if err := nodeJSON(ctx, node, script, &sorted, "sort", "--in", filepath.Join(per, part, "*.parquet"), "--out", filepath.Join(work, "duckdb-sorted.parquet")); err != nil {
		return err
	}
	if sorted.Rows != rep.Rows {
		return fmt.Errorf("DuckDB sorted %d rows, the lake has %d", sorted.Rows, rep.Rows)
	}
	rep.DuckDB, rep.DuckVersion = sorted.OutBytes, sorted.Version

	progress("DuckDB queries on both lakes")
	inst := venuesim.New(venuesim.Config{Seed: 1, Instruments: cfg.instruments}).Instruments()[0].InstrumentName
	var q struct {
		Queries map[string]map[string]float64 `json:"queries"`
	}
	if err := nodeJSON(ctx, node, script, &q, "query", "--runs", fmt.Sprint(cfg.runs), "--instrument", inst,
		"--lake", "per_snapshot="+filepath.Join(per, "instruments", "*", "*.parquet"),
		"--lake", "compacted="+filepath.Join(comp, "instruments", "*", "*.parquet"),
		"--lake", "duckdb_sorted="+filepath.Join(work, "duckdb-sorted.parquet")); err != nil {
		return err
	}
	rep.Queries = q.Queries
	print(rep)
	if cfg.jsonOut != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(cfg.jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// generate writes the archive's per-snapshot instruments files through
// optlake's decoder and Parquet sink, the simulator one tick per snapshot.
func generate(ctx context.Context, dir string, cfg config) (int64, error) {
	sim := venuesim.New(venuesim.Config{Seed: 1, Instruments: cfg.instruments})
	sink, err := pq.New(pq.Options{Store: storage.NewLocal(dir)})
	if err != nil {
		return 0, err
	}
	dec := transform.NewInstrumentDecoder(transform.Options{})
	defer dec.Release()
	every := 24 * time.Hour / time.Duration(cfg.snapshots)
	var rows int64
	var body bytes.Buffer
	for k := range cfg.snapshots {
		if k > 0 {
			sim.Advance(1)
		}
		body.Reset()
		if err := sim.WriteInstruments(&body); err != nil {
			return 0, err
		}
		ts := day.Add(time.Duration(k) * every).Truncate(time.Millisecond)
		snap := sinks.Snapshot{Time: ts, RunID: fmt.Sprintf("019%05d-0000-7000-8000-000000000000", k), Source: "venue.sim", Endpoint: "instruments"}
		w, err := sink.Open(ctx, schema.Instruments, snap)
		if err != nil {
			return 0, err
		}
		_, err = dec.Decode(ctx, &body, snap, func(t *schema.Table, rec arrow.Record) error {
			if t != schema.Instruments {
				return nil // rejects: none from a clean listing
			}
			rows += rec.NumRows()
			return w.Write(ctx, rec)
		})
		if err != nil {
			w.Abort()
			return 0, err
		}
		if _, err := w.Commit(ctx); err != nil {
			return 0, err
		}
	}
	return rows, nil
}

func dirBytes(dir string) (int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			return 0, err
		}
		n += fi.Size()
	}
	return n, nil
}

func nodeJSON(ctx context.Context, node, script string, v any, args ...string) error {
	cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
	cmd.Dir = filepath.Dir(script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", filepath.Base(script), args[0], err, strings.TrimSpace(stderr.String()))
	}
	return json.Unmarshal(stdout.Bytes(), v)
}

func mib(b int64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func print(r Report) {
	fmt.Printf("## Compaction (`optlake compact`): %d snapshots, %d instrument rows, one day\n\n", r.Snapshots, r.Rows)
	fmt.Println("| instruments day | bytes | bytes/row | vs DuckDB sorted |")
	fmt.Println("|---|---|---|---|")
	for _, x := range []struct {
		name string
		b    int64
	}{{"per-snapshot files", r.PerSnapshot}, {"optlake compacted", r.Compacted}, {"DuckDB sorted single file", r.DuckDB}} {
		fmt.Printf("| %s | %s | %.2f | %.2f× |\n", x.name, mib(x.b), float64(x.b)/float64(r.Rows), float64(x.b)/float64(r.DuckDB))
	}
	fmt.Printf("\ncompaction: %.1f s wall, %.1f s CPU, %.0f rows/s, peak RSS %s\n\n", r.CompactSec, r.CompactCPU, r.RowsPerSec, mib(r.PeakRSS))
	fmt.Printf("| DuckDB %s query (threads=1) | per-snapshot ms | compacted ms | speed-up | DuckDB sorted file ms |\n", r.DuckVersion)
	fmt.Println("|---|---|---|---|---|")
	minSpeed := 1e9
	for _, q := range []string{"count_per_snapshot_currency", "instrument_history", "btc_index_history"} {
		a, b := r.Queries[q]["per_snapshot"], r.Queries[q]["compacted"]
		fmt.Printf("| %s | %.1f | %.1f | %.1f× | %.1f |\n", q, a, b, a/b, r.Queries[q]["duckdb_sorted"])
		minSpeed = min(minSpeed, a/b)
	}
	fmt.Println()
	fmt.Printf("targets: compacted ≤ 1.0× DuckDB bytes: %.2f× %s · queries ≥ 7× faster: %.1f× %s · peak RSS ≤ 256 MiB: %s %s\n\n",
		float64(r.Compacted)/float64(r.DuckDB), verdict(r.Compacted <= r.DuckDB), minSpeed, verdict(minSpeed >= 7), mib(r.PeakRSS), verdict(r.PeakRSS <= 256<<20))
	fmt.Println("```")
	fmt.Println(r.Output)
	fmt.Println("```")
}
