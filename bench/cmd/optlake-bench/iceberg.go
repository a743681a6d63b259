package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/optlake/optlake/internal/testenv/icebergrest"
)

// icebergRuns is the fewest timed runs of each format in the iceberg part.
const icebergRuns = 3

// lakeKinds are the lakes of the iceberg part, in the order they take
// turns: the Parquet lake (the reference), the Iceberg lake without a
// catalog, in a SQLite catalog, and in a REST catalog (the project's test
// server over a SQLite catalog, on loopback; its own CPU is not counted,
// as a catalog server's is not a run's).
var lakeKinds = []string{"parquet", "iceberg", "iceberg_sqlite", "iceberg_rest"}

// restBenchToken is the bearer token of the bench's REST catalog.
const restBenchToken = "optlake-bench-token"

// iceberg measures the every-5-minutes job's per-run cost on an Iceberg
// lake next to a Parquet lake (issue 32): `optlake run --endpoints
// instruments` of the listing, a next snapshot into a lake that holds one
// already, in two data directories, one per table format, the formats
// alternating run by run in the same process so that both see the same
// machine. The Iceberg run also registers each table's file (a footer
// read, a manifest, a manifest list, the next metadata version).
func (b *benchRun) iceberg(ctx context.Context, bin string, l Listing) error {
	addr, stop, err := serveListing(l.Path)
	if err != nil {
		return err
	}
	defer stop()
	formats := lakeKinds
	rest, err := icebergrest.New(filepath.Join(b.work, "iceberg-rest-catalog.db"), icebergrest.Options{Token: restBenchToken})
	if err != nil {
		return fmt.Errorf("iceberg rest catalog: %w", err)
	}
	defer rest.Close()
	defer os.Remove(filepath.Join(b.work, "iceberg-rest-catalog.db"))
	flags := map[string][]string{
		"parquet":        {"--table-format", "parquet"},
		"iceberg":        {"--table-format", "iceberg"},
		"iceberg_sqlite": {"--table-format", "iceberg", "--iceberg-catalog", "sql", "--iceberg-catalog-uri", "sqlite:" + filepath.Join(b.work, "iceberg-sqlite-catalog.db")},
		"iceberg_rest":   {"--table-format", "iceberg", "--iceberg-catalog", "rest", "--iceberg-catalog-uri", rest.URL},
	}
	os.Remove(filepath.Join(b.work, "iceberg-sqlite-catalog.db"))
	defer os.Remove(filepath.Join(b.work, "iceberg-sqlite-catalog.db"))
	dirs := map[string]string{}
	ms := map[string]*Measurement{}
	for _, f := range formats {
		dirs[f] = filepath.Join(b.work, "iceberg-data-"+string(f))
		os.RemoveAll(dirs[f])
		if b.cfg.keep == "" {
			defer os.RemoveAll(dirs[f])
		}
		ms[f] = b.rep.add(icebergKey(f), l.Label, "optlake")
	}
	sum := filepath.Join(b.work, "iceberg-summary.json")
	run := func(f string) error {
		args := append([]string{"run", "--api-url", "http://" + addr, "--data-dir", dirs[f], "--endpoints", "instruments",
			"--source", "venue-sim", "--summary-json", sum, "--log-level", "warn"}, flags[f]...)
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "OPTLAKE_ICEBERG_CATALOG_TOKEN="+restBenchToken)
		pr, err := runProc(ctx, cmd, "")
		if err != nil {
			return fmt.Errorf("%s lake: %w", f, err)
		}
		r, err := readSummary(sum)
		if err != nil {
			return err
		}
		if r.Rows != int64(l.Instruments) {
			return fmt.Errorf("%s lake: optlake run loaded %d rows, want %d", f, r.Rows, l.Instruments)
		}
		r.Seconds, r.PeakRSS, r.CPUSeconds = pr.Wall.Seconds(), pr.PeakRSS, pr.CPU
		ms[f].Runs = append(ms[f].Runs, r)
		return nil
	}
	for _, f := range formats { // the first snapshot of each lake, not timed
		if err := run(f); err != nil {
			return err
		}
		ms[f].Runs = nil
	}
	for i := range max(b.cfg.runs, icebergRuns) {
		for j := range formats {
			f := formats[(i+j)%len(formats)] // who goes first alternates
			if err := run(f); err != nil {
				return err
			}
			r := ms[f].Runs[len(ms[f].Runs)-1]
			b.progress("optlake run (next snapshot, %s lake) %s run %d: %.2fs, CPU %.2fs", f, l.Label, i+1, r.Seconds, r.CPUSeconds)
		}
	}
	for _, f := range formats {
		ms[f].finish()
	}
	return nil
}

func icebergKey(f string) string { return "e2e_next_" + f }

// icebergRows are the main table's rows of the iceberg part: each
// listing's next-snapshot run on each lake; each Iceberg one (with and
// without a catalog) against the Parquet one's wall time, target ≤ 1.3×.
func (r *Report) icebergRows() []Row {
	var out []Row
	for _, l := range r.Listings {
		pq := r.get(icebergKey(lakeKinds[0]), l.Label)
		if pq == nil {
			continue
		}
		for _, f := range lakeKinds {
			m := r.get(icebergKey(f), l.Label)
			if m == nil {
				continue
			}
			row := Row{Stage: "`optlake run` every 5 minutes, next snapshot, " + lakeName(f) + " lake", Listing: m.Listing,
				Seconds: m.Best.Seconds, CPUSeconds: m.Best.CPUSeconds, RowsPerSec: m.Best.RowsPerSec(), MBPerSec: m.Best.MBPerSec(), PeakRSS: m.Best.PeakRSS}
			if m != pq {
				ratio := m.Best.Seconds / pq.Best.Seconds
				row.Reference, row.Ratio, row.Target, row.Met = "wall of the Parquet lake's run", fmt.Sprintf("%.2f×", ratio), "≤ 1.3× Parquet", yesNo(ratio <= 1.3)
			}
			out = append(out, row)
		}
	}
	return out
}

// lakeName is a lake kind of the iceberg part as the table names it.
func lakeName(f string) string {
	switch f {
	case "iceberg_sqlite":
		return "Iceberg (SQLite catalog)"
	case "iceberg_rest":
		return "Iceberg (REST catalog)"
	case "iceberg":
		return "Iceberg"
	}
	return "Parquet"
}
