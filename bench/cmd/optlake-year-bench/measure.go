package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/optlake/optlake/lake/layout"
	"github.com/optlake/optlake/storage"
)

// Report is what the bench prints.
type Report struct {
	Days        int      `json:"days"`
	Instruments int      `json:"instruments"`
	Every       string   `json:"every"`
	Gen         genStats `json:"generated"`
	// Rows: row name -> lake ("day1", "dayN") -> measurement.
	Rows  map[string]map[string]Proc `json:"rows"`
	Bytes map[string]int64           `json:"bytes"` // lake's tables, files, DuckDB's sorted file
	// Replay: replays of 150 snapshots and of a month, per format.
	Replay []ReplayRow `json:"replay,omitempty"`
}

// Proc is one timed command (the fastest of the runs).
type Proc struct {
	Wall    float64 `json:"wall_seconds"`
	CPU     float64 `json:"cpu_seconds"`
	PeakRSS int64   `json:"peak_rss_bytes"`
	// On a bucket: the requests sent, and the server's CPU meanwhile.
	Requests  int64   `json:"requests,omitempty"`
	ServerCPU float64 `json:"server_cpu_seconds,omitempty"`
}

// rowNames are the report's rows, in order.
var rowNames = append([]string{"run (first of the UTC day)", "run (next)", "status", "history NAME", "schema", "compact (one day of per-snapshot files)"}, historyRows...)

func measure(ctx context.Context, bin, day1, dayN string, cfg config, rep *Report) error {
	// Each lake is served the venue its history continues: a venue that
	// started today would make the year's next listing differ from its
	// events state in thousands of instruments.
	sims := map[string]string{}
	for key, days := range map[string]int{"day1": 1, "dayN": cfg.days} {
		addr, stop, err := serveSimAfter(cfg, days)
		if err != nil {
			return err
		}
		defer stop()
		sims[key] = addr
	}
	rep.Rows = map[string]map[string]Proc{}
	if *icebergOnly {
		return measureIceberg(ctx, bin, sims, day1, dayN, cfg, rep)
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	if *icebergBucketOnly {
		return measureIcebergBucket(ctx, bin, sims, day1, dayN, "BTC-PERPETUAL", cfg, rep)
	}
	if cfg.bucketOnly {
		return measureBucket(ctx, bin, sims, day1, dayN, "BTC-PERPETUAL", cfg, rep)
	}
	open := openDayDir(dayN, cfg)
	for _, l := range []struct{ key, dir string }{{"day1", day1}, {"dayN", dayN}} {
		// Runs change the lake: each is timed on a hard-linked copy (a
		// committed file never changes in place).
		for r := range cfg.runs {
			cp := l.dir + ".run"
			if err := hardCopy(ctx, l.dir, cp); err != nil {
				return err
			}
			if err := lastSweptYesterday(cp); err != nil {
				return err
			}
			args := []string{"run", "--api-url", "http://" + sims[l.key], "--data-dir", cp, "--endpoints", "instruments",
				"--source", source, "--compact", "--log-level", "warn"}
			for _, name := range rowNames[:2] {
				p, err := timed(ctx, bin, args...)
				if err != nil {
					return err
				}
				keep(rep, name, l.key, p, r == 0)
			}
			os.RemoveAll(cp)
		}
		// compact of one day: today's per-snapshot files in a copy of the
		// lake (the flags name the day: the rest of the lake is compacted).
		for r := range cfg.runs {
			cp := l.dir + ".compact"
			part := filepath.Join("instruments", "date="+today.Format(time.DateOnly))
			if err := hardCopy(ctx, l.dir, cp); err != nil {
				return err
			}
			if out, err := exec.CommandContext(ctx, "cp", "-al", "--no-target-directory", filepath.Join(open, part), filepath.Join(cp, part)).CombinedOutput(); err != nil {
				return fmt.Errorf("copy open day: %v %s", err, out)
			}
			p, err := timed(ctx, bin, "compact", "--data-dir", cp, "--from", today.Format(time.DateOnly),
				"--to", today.AddDate(0, 0, 1).Format(time.DateOnly), "--tables", "instruments")
			if err != nil {
				return err
			}
			keep(rep, "compact (one day of per-snapshot files)", l.key, p, r == 0)
			os.RemoveAll(cp)
		}
		if err := measureCatchUp(ctx, bin, sims[l.key], l.key, l.dir, cfg, rep); err != nil {
			return err
		}
		if err := measureQueries(ctx, l.key, l.dir, false, cfg, rep); err != nil {
			return err
		}
		inst := "BTC-PERPETUAL"
		for _, c := range []struct {
			row  string
			args []string
		}{
			{"status", []string{"status", "--data-dir", l.dir}},
			{"history NAME", []string{"history", inst, "--data-dir", l.dir, "--format", "csv"}},
			{"schema", []string{"schema", "--data-dir", l.dir}},
		} {
			for r := range cfg.runs {
				p, err := timed(ctx, bin, c.args...)
				if err != nil {
					return err
				}
				keep(rep, c.row, l.key, p, r == 0)
			}
		}
	}
	if err := measureHistory(ctx, bin, day1, dayN, "BTC-PERPETUAL", cfg, rep); err != nil {
		return err
	}
	if err := measureBucket(ctx, bin, sims, day1, dayN, "BTC-PERPETUAL", cfg, rep); err != nil {
		return err
	}
	if err := measureIcebergBucket(ctx, bin, sims, day1, dayN, "BTC-PERPETUAL", cfg, rep); err != nil {
		return err
	}
	if err := measureReplay(ctx, bin, filepath.Dir(dayN), dayN, cfg, rep); err != nil {
		return err
	}
	rep.Bytes = map[string]int64{}
	for _, tb := range []string{"instruments", "instrument_events", "raw", "_ledger"} {
		n, files, err := tree(filepath.Join(dayN, tb))
		if err != nil {
			return err
		}
		rep.Bytes[tb], rep.Bytes[tb+" files"] = n, files
	}
	if !cfg.noDuck && !cfg.noDuckSort {
		node, err := exec.LookPath("node")
		if err != nil {
			return fmt.Errorf("node: %w", err)
		}
		script := filepath.Join(cfg.repo, "tools", "duckdb", "compact_bench.mjs")
		if abs, err := filepath.Abs(script); err == nil {
			script = abs
		}
		// DuckDB sorts the rows of the lake's last sortDays days (a year's
		// 315M rows would spill over 25 GB to disk): the same files' bytes
		// are the lake's side of the ratio.
		files, ours, err := lastDays(filepath.Join(dayN, "instruments"), sortDays)
		if err != nil {
			return err
		}
		progress("DuckDB's sorted single file of the instruments rows of %d days", len(files))
		list, err := os.CreateTemp(filepath.Dir(dayN), "duckdb-sort-*.txt")
		if err != nil {
			return err
		}
		defer os.Remove(list.Name())
		out := filepath.Join(filepath.Dir(dayN), "duckdb-sorted.parquet")
		cmd := exec.CommandContext(ctx, node, script, "sort", "--in-list", list.Name(), "--out", out)
		if _, err := list.WriteString(strings.Join(files, "\n") + "\n"); err != nil {
			return err
		}
		list.Close()
		cmd.Dir = filepath.Dir(script)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("duckdb sort: %v: %s", err, b)
		}
		fi, err := os.Stat(out)
		if err != nil {
			return err
		}
		rep.Bytes["duckdb sorted instruments"] = fi.Size()
		rep.Bytes["duckdb sorted instruments days"] = int64(len(files))
		rep.Bytes["instruments of those days"] = ours
		os.Remove(out)
	}
	return measureIceberg(ctx, bin, sims, day1, dayN, cfg, rep)
}

// keep records p as the row's measurement on lake when it is the first or
// faster than the one kept.
func keep(rep *Report, row, lake string, p Proc, first bool) {
	m := rep.Rows[row]
	if m == nil {
		m = map[string]Proc{}
		rep.Rows[row] = m
	}
	if old, ok := m[lake]; first || !ok || p.Wall < old.Wall {
		m[lake] = p
	}
}

// lastSweptYesterday makes the lake's last daily temp-file sweep that of
// yesterday's first run (the next run is the first of the UTC day), and
// gives each closed day's partitions the time they last changed: the
// end of their day (the compaction of a closed day), and the compacted
// days' mark yesterday's runs left (compactedToYesterday), with
// compaction's trash empty (emptyTrash).
func lastSweptYesterday(dir string) error {
	if err := compactedToYesterday(dir); err != nil {
		return err
	}
	if err := emptyTrash(dir); err != nil {
		return err
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	swept := today.Add(-24*time.Hour + 5*time.Minute)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		day, ok := strings.CutPrefix(d.Name(), "date=")
		if !ok {
			return nil
		}
		t, err := time.Parse(time.DateOnly, day)
		if err != nil {
			return nil
		}
		if end := t.Add(24*time.Hour + time.Minute); end.Before(time.Now()) {
			return os.Chtimes(p, end, end)
		}
		return nil
	})
	if err != nil {
		return err
	}
	marker := filepath.Join(dir, storage.CleanedMarker)
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		return err
	}
	return os.Chtimes(marker, swept, swept)
}

// timed runs the binary once: wall, CPU, peak RSS.
func timed(ctx context.Context, bin string, args ...string) (Proc, error) {
	return timedIn(ctx, "", nil, bin, args...)
}

// timedIn is timed in the folder dir ("": this one), stdin read from in.
func timedIn(ctx context.Context, dir string, in io.Reader, bin string, args ...string) (Proc, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytes.Buffer
	cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = dir, in, nil, &stderr
	start := time.Now()
	err := cmd.Run()
	p := Proc{Wall: time.Since(start).Seconds()}
	if cmd.ProcessState == nil {
		return p, fmt.Errorf("%s %s: %w", filepath.Base(bin), args[0], err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		p.PeakRSS = ru.Maxrss * 1024
		p.CPU = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	if err != nil {
		return p, fmt.Errorf("%s %s: %v: %s", filepath.Base(bin), args[0], err, strings.TrimSpace(stderr.String()))
	}
	return p, nil
}

// emptyTrash removes what compaction's trash holds in the lake dir. The
// generator compacts its 365 days within minutes, so their replaced files
// are all in the trash at once (730 folders), and the first run an hour
// later deletes them all; a year of runs empties each day's an hour after
// its compaction.
func emptyTrash(dir string) error {
	trash := filepath.Join(dir, filepath.FromSlash(layout.TrashDir))
	ents, err := os.ReadDir(trash)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(trash, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// sortDays is how many of the lake's last days DuckDB sorts into one
// file for the bytes row.
const sortDays = 30

// lastDays is the Parquet files of table's last n day folders and their
// bytes.
func lastDays(table string, n int) ([]string, int64, error) {
	days, err := filepath.Glob(filepath.Join(table, "date=*"))
	if err != nil {
		return nil, 0, err
	}
	slices.Sort(days)
	days = days[max(0, len(days)-n):]
	var files []string
	var size int64
	for _, d := range days {
		fs, err := filepath.Glob(filepath.Join(d, "*.parquet"))
		if err != nil {
			return nil, 0, err
		}
		for _, f := range fs {
			fi, err := os.Stat(f)
			if err != nil {
				return nil, 0, err
			}
			size += fi.Size()
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		return nil, 0, fmt.Errorf("%s: no day files", table)
	}
	return files, size, nil
}

// tree is the bytes and files under dir.
func tree(dir string) (n, files int64, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n += fi.Size()
		files++
		return nil
	})
	return n, files, err
}

func printReport(r Report) {
	fmt.Printf("## A long history: %d days of %d instruments every %s (synthesised in %.0f s: %d snapshots, %d instrument rows, %d events)\n\n",
		r.Days, r.Instruments, r.Every, r.Gen.Seconds, r.Gen.Snapshots, r.Gen.Rows, r.Gen.Events)
	fmt.Printf("| command | day 1 wall s | day %d wall s | ratio | day 1 CPU s | day %d CPU s | ratio | day 1 RSS MiB | day %d RSS MiB |\n", r.Days, r.Days, r.Days)
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for _, row := range rowNames {
		if _, ok := r.Rows[row]; !ok {
			continue
		}
		a, b := r.Rows[row]["day1"], r.Rows[row]["dayN"]
		fmt.Printf("| %s | %.3f | %.3f | %.2f× | %.3f | %.3f | %.2f× | %.1f | %.1f |\n", row, a.Wall, b.Wall, b.Wall/a.Wall, a.CPU, b.CPU, b.CPU/a.CPU,
			float64(a.PeakRSS)/(1<<20), float64(b.PeakRSS)/(1<<20))
	}
	fmt.Println()
	printBucket(r)
	printReplay(r)
	fmt.Printf("| the lake after %d days | bytes | files |\n|---|---|---|\n", r.Days)
	for _, tb := range []string{"instruments", "instrument_events", "raw", "_ledger"} {
		fmt.Printf("| %s | %s | %d |\n", tb, mib(r.Bytes[tb]), r.Bytes[tb+" files"])
	}
	if d := r.Bytes["duckdb sorted instruments"]; d > 0 {
		days := r.Bytes["duckdb sorted instruments days"]
		fmt.Printf("| instruments, the last %d days | %s | %d |\n| DuckDB's sorted zstd file of those rows | %s | 1 |\n\ninstruments: %.2f× DuckDB's bytes (target ≤ 1.0×)\n",
			days, mib(r.Bytes["instruments of those days"]), days, mib(d), float64(r.Bytes["instruments of those days"])/float64(d))
	}
	fmt.Println()
}

func mib(b int64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }

// openDayDir is where today's per-snapshot files are written, beside the
// lakes.
func openDayDir(dayN string, cfg config) string {
	today := time.Now().UTC().Truncate(24 * time.Hour)
	return filepath.Join(filepath.Dir(dayN), "open-day-"+today.Format(time.DateOnly)+"-"+fmt.Sprint(cfg.instruments)+"-"+cfg.every.String())
}

// ensureOpenDay writes today's per-snapshot files unless a finished
// write left them (fresh false).
func ensureOpenDay(ctx context.Context, dir string, cfg config) (bool, error) {
	if _, err := os.Stat(filepath.Join(dir, genMarker)); err == nil {
		return false, nil
	}
	progress("writing a day of per-snapshot files (%s)", dir)
	os.RemoveAll(dir)
	if err := writeOpenDay(ctx, dir, cfg); err != nil {
		return false, fmt.Errorf("open day: %w", err)
	}
	return true, os.WriteFile(filepath.Join(dir, genMarker), []byte("{}\n"), 0o644)
}
