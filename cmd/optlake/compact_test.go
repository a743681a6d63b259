package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/lake"
	"github.com/optlake/optlake/lake/layout"
	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/schema"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// compactDay is the (closed) day the compaction tests' snapshots are in.
var compactDay = time.Date(2026, 1, 10, 23, 57, 0, 0, time.UTC)

// buildLake takes n snapshots of every endpoint of a small simulated
// venue (300 instruments) whose account schemas drift, into dir, on
// compactDay (the last one past midnight, on the next day). The clock
// stays at the last snapshot.
func buildLake(t *testing.T, dir string, n int) (url string, clk *testClock) {
	t.Helper()
	return buildLakeOf(t, dir, n, 300)
}

// buildLakeOf is buildLake of a venue listing instruments instruments.
func buildLakeOf(t *testing.T, dir string, n, instruments int) (url string, clk *testClock) {
	t.Helper()
	sim, url := startSim(t, venuesim.Config{Seed: 11, Instruments: instruments, Faults: venuesim.Faults{SchemaDrift: true}})
	clk = pinClock(compactDay)
	for k := range n {
		if k > 0 {
			clk.next()
			sim.Advance(2)
		}
		if res := clk.optlake(t, "run", "--api-url", url, "--data-dir", dir); res.code != 0 {
			t.Fatalf("run %d: exit %d\n%s", k, res.code, res.stderr)
		}
	}
	return url, clk
}

// lakeRows returns, per table and day partition, the rows DuckDB reads
// there (every column, union by name), as sorted JSON texts with sorted
// keys. One DuckDB process reads every partition: a process per partition
// made the compaction tests spend minutes starting DuckDB.
func lakeRows(t *testing.T, dir string) map[string][]string {
	t.Helper()
	return lakesRows(t, map[string]string{"": dir})[""]
}

// lakesRows is lakeRows of several lakes (dirs by name) in one DuckDB
// process: each lake's map by its name.
func lakesRows(t *testing.T, dirs map[string]string) map[string]map[string][]string {
	t.Helper()
	var sels []string
	for name, dir := range dirs {
		parts, _ := filepath.Glob(filepath.Join(dir, "*", "date=*"))
		for _, p := range parts {
			rel, _ := filepath.Rel(dir, p)
			if strings.HasPrefix(rel, "raw") {
				continue
			}
			if f, _ := filepath.Glob(filepath.Join(p, "*.parquet")); len(f) == 0 {
				continue
			}
			sels = append(sels, fmt.Sprintf(`SELECT '%s' AS l, '%s' AS p, to_json(t)::VARCHAR AS j FROM read_parquet('%s/*.parquet', union_by_name=true, hive_partitioning=false) t`, name, rel, p))
		}
	}
	out := map[string]map[string][]string{}
	for name := range dirs {
		out[name] = map[string][]string{}
	}
	if len(sels) == 0 {
		return out
	}
	res := testenv.DuckDBQuery(t, strings.Join(sels, "\nUNION ALL\n"))
	for _, r := range res.Rows {
		// Re-marshal through a map: the keys sorted, whatever the column
		// order of the files.
		dec := json.NewDecoder(strings.NewReader(fmt.Sprint(r[2])))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("row of %s %s: %v", r[0], r[1], err)
		}
		b, _ := json.Marshal(m)
		l, p := fmt.Sprint(r[0]), fmt.Sprint(r[1])
		out[l][p] = append(out[l][p], string(b))
	}
	for _, lake := range out {
		for _, rows := range lake {
			slices.Sort(rows)
		}
	}
	return out
}

// lakeRowsGo is lakeRows read by arrow-go's Parquet reader in this
// process instead of DuckDB (a process per call): the same map of sorted
// rows, each a JSON object of every column of its partition (columns a
// file lacks are null, as DuckDB's union_by_name gives them). Its values'
// texts are arrow's, not DuckDB's: compare it only with itself. The crash
// tests check each step with it and DuckDB once.
func lakeRowsGo(t *testing.T, dir string) map[string][]string {
	t.Helper()
	parts, _ := filepath.Glob(filepath.Join(dir, "*", "date=*"))
	out := map[string][]string{}
	for _, p := range parts {
		rel, _ := filepath.Rel(dir, p)
		if strings.HasPrefix(rel, "raw") {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(p, "*.parquet"))
		var rows []map[string]any
		cols := map[string]bool{}
		for _, f := range files {
			rows = append(rows, parquetRows(t, f, cols)...)
		}
		for _, r := range rows {
			for c := range cols {
				if _, ok := r[c]; !ok {
					r[c] = nil
				}
			}
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatalf("row of %s: %v", rel, err)
			}
			out[rel] = append(out[rel], string(b))
		}
	}
	for _, rows := range out {
		slices.Sort(rows)
	}
	return out
}

// parquetRows reads the Parquet file f into a map per row, each column's
// name added to cols.
func parquetRows(t *testing.T, f string, cols map[string]bool) []map[string]any {
	t.Helper()
	r, err := file.OpenParquetFile(f, false)
	if err != nil {
		t.Fatalf("open %s: %v", f, err)
	}
	defer r.Close()
	fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{BatchSize: 4096}, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("read %s: %v", f, err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("read %s: %v", f, err)
	}
	defer tbl.Release()
	rows := make([]map[string]any, tbl.NumRows())
	for i := range rows {
		rows[i] = map[string]any{}
	}
	for c := range int(tbl.NumCols()) {
		name := tbl.Schema().Field(c).Name
		cols[name] = true
		i := 0
		for _, a := range tbl.Column(c).Data().Chunks() {
			for k := range a.Len() {
				rows[i][name] = a.GetOneForMarshal(k)
				i++
			}
		}
	}
	return rows
}

func sameLake(t *testing.T, what string, got, want map[string][]string) {
	t.Helper()
	for p, rows := range want {
		g := got[p]
		if len(g) != len(rows) {
			t.Fatalf("%s: %s has %d rows, want %d", what, p, len(g), len(rows))
		}
		for i := range g {
			if g[i] != rows[i] {
				t.Fatalf("%s: %s: row differs\n got %s\nwant %s", what, p, g[i], rows[i])
			}
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d partitions, want %d", what, len(got), len(want))
	}
}

// checkCompacted checks every partition of compactDay holds compacted
// files only, and nothing of a compaction is left under way.
func checkCompacted(t *testing.T, dir string) {
	t.Helper()
	parts, _ := filepath.Glob(filepath.Join(dir, "*", "date="+compactDay.Format(time.DateOnly)))
	n := 0
	for _, p := range parts {
		if schema.SortKey(filepath.Base(filepath.Dir(p))) == nil || filepath.Base(filepath.Dir(p)) == "raw" {
			continue // not a compacted table
		}
		ents, _ := os.ReadDir(p)
		for _, e := range ents {
			if !pq.IsCompacted(e.Name()) {
				t.Errorf("%s: %s is not compacted", p, e.Name())
			}
		}
		n++
	}
	if n < 3 {
		t.Fatalf("only %d partitions on %s", n, compactDay.Format(time.DateOnly))
	}
	for _, sub := range []string{"stage", "journal", "tmp", "pending"} {
		var left []string
		filepath.WalkDir(filepath.Join(dir, ".compact", sub), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				left = append(left, p)
			}
			return nil
		})
		if len(left) > 0 {
			t.Errorf("left in .compact/%s: %v", sub, left)
		}
	}
}

// A lake from `optlake run` (instruments, events, runs, account tables
// whose columns drift), compacted by `optlake compact`: every partition's
// rows unchanged; a replay of the day afterwards is parked (readers see
// the rows once) and the next compact gives the rows the same replay gives
// an uncompacted lake; a second compact does nothing. (100 instruments:
// each lake read costs about half a millisecond a row under -race, and
// 300 were one page and row group per file just as 100 are.)
func TestCompactCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, clk := buildLakeOf(t, dir, 4, 100)
	before := lakeRows(t, dir)
	ref := filepath.Join(t.TempDir(), "ref") // the same lake, never compacted
	if out, err := exec.Command("cp", "-a", dir, ref).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}

	res := clk.optlake(t, "compact", "--data-dir", dir, "--to", compactDay.AddDate(0, 0, 1).Format(time.DateOnly))
	if res.code != 0 {
		t.Fatalf("compact: exit %d\n%s", res.code, res.stderr)
	}
	if !strings.Contains(res.stdout, "instruments: 1 day(s), 3 files -> 1") {
		t.Fatalf("compact output:\n%s", res.stdout)
	}
	checkCompacted(t, dir)
	sameLake(t, "after compact", lakeRows(t, dir), before)

	// Replay the compacted day from the raw archive: written compacted
	// directly, the same rows over the compacted day as over the
	// per-snapshot one, not doubled.
	replay := []string{"replay", "--from", compactDay.Format(time.DateOnly), "--to", compactDay.AddDate(0, 0, 1).Format(time.DateOnly),
		"--endpoints", "instruments,account_summary,positions_with_mints,account_balance"}
	for _, d := range []string{dir, ref} {
		if res := clk.optlake(t, append(replay, "--data-dir", d)...); res.code != 0 {
			t.Fatalf("replay: exit %d\n%s", res.code, res.stderr)
		}
	}
	checkCompacted(t, dir)
	sameLake(t, "after replay", lakeRows(t, dir), lakeRows(t, ref))
	res = clk.optlake(t, "compact", "--data-dir", dir, "--to", compactDay.AddDate(0, 0, 1).Format(time.DateOnly))
	if res.code != 0 {
		t.Fatalf("compact after replay: exit %d\n%s", res.code, res.stderr)
	}
	checkCompacted(t, dir)
	sameLake(t, "after replay and compact", lakeRows(t, dir), lakeRows(t, ref))

	res = clk.optlake(t, "compact", "--data-dir", dir, "--to", compactDay.AddDate(0, 0, 1).Format(time.DateOnly))
	if res.code != 0 || !strings.Contains(res.stdout, "compacted 0 partition(s)") {
		t.Fatalf("second compact: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	// Usage errors.
	if res := clk.optlake(t, "compact", "--data-dir", dir, "--from", "yesterday"); res.code != exitUsage {
		t.Fatalf("--from yesterday: exit %d", res.code)
	}
}

// kill -9 at each step of a compaction (runs spilled, new file written,
// then each step of its publish): readers see every row exactly once right
// after the crash, and the next compact finishes or undoes it by itself.
func TestCompactCrashAtEachStep(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	url, clk := buildLake(t, base, 3)
	// The other tables compacted once here: each step crashes a compaction
	// of instruments, and its next compact (of every table) then has only
	// instruments to finish (compacting every table again at every step
	// was most of this test's time under -race).
	var others []string
	parts, _ := filepath.Glob(filepath.Join(base, "*", "date="+compactDay.Format(time.DateOnly)))
	for _, p := range parts {
		if tb := filepath.Base(filepath.Dir(p)); tb != "raw" && tb != "instruments" && schema.SortKey(tb) != nil {
			others = append(others, tb)
		}
	}
	if len(others) < 2 {
		t.Fatalf("tables besides instruments on %s: %v", compactDay.Format(time.DateOnly), others)
	}
	if res := clk.optlake(t, "compact", "--data-dir", base, "--to", compactDay.AddDate(0, 0, 1).Format(time.DateOnly), "--tables", strings.Join(others, ",")); res.code != 0 {
		t.Fatalf("compact of %v: exit %d\n%s", others, res.code, res.stderr)
	}
	// Each step is checked by arrow-go's reader (lakeRowsGo) as it goes,
	// and every step's final lake by DuckDB in one process at the end: a
	// DuckDB process per check made this test spend most of its time
	// starting DuckDB.
	want, wantDuck := lakeRowsGo(t, base), lakeRows(t, base)
	if len(want) != len(wantDuck) {
		t.Fatalf("arrow-go reads %d partitions, DuckDB %d", len(want), len(wantDuck))
	}
	for p, rows := range wantDuck {
		if len(want[p]) != len(rows) {
			t.Fatalf("%s: arrow-go reads %d rows, DuckDB %d", p, len(want[p]), len(rows))
		}
	}
	to := compactDay.AddDate(0, 0, 1).Format(time.DateOnly)
	// The next day, for every step: the steps run in parallel, so none may
	// move the clock (the crashing compact, a process of its own, has the
	// real one).
	clk = pinClock(compactDay.AddDate(0, 0, 1))
	steps := append(slices.Clone(compact.MergeSteps), compact.Steps...)
	root := t.TempDir() // the steps' lakes, kept for DuckDB after them
	finals := map[string]string{}
	for _, step := range steps {
		finals[step] = filepath.Join(root, step)
	}
	t.Run("steps", func(t *testing.T) {
		for _, step := range steps {
			crashStep(t, step, base, finals[step], to, url, clk, want)
		}
	})
	if t.Failed() {
		return
	}
	// (The steps that also ran on the next day have its partitions too.)
	for step, got := range lakesRows(t, finals) {
		for p, rows := range wantDuck {
			if !slices.Equal(got[p], rows) {
				t.Errorf("%s: after the next compact, read by DuckDB: %s differs", step, p)
			}
		}
	}
}

// crashStep crashes a compaction of instruments in a copy (dir) of the
// lake base at step, checks the lake right after (arrow-go's reader: want),
// recovers it and checks it again; the caller reads dir with DuckDB.
func crashStep(t *testing.T, step, base, dir, to, url string, clk *testClock, want map[string][]string) {
	t.Run(step, func(t *testing.T) {
		t.Parallel()
		if out, err := exec.Command("cp", "-a", base, dir).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
		cmd := exec.Command(os.Args[0], "compact", "--data-dir", dir, "--to", to, "--tables", "instruments")
		cmd.Env = append(os.Environ(), "OPTLAKE_TEST_AS_CLI=1", crashEnv+"="+step)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ProcessState.Sys() == nil || !strings.Contains(ee.Error(), "killed") {
			t.Fatalf("compact did not die at %s: %v\n%s", step, err, out)
		}
		sameLake(t, "right after the crash", lakeRowsGo(t, dir), want)
		if step == "sorted" || step == "journal" || step == "swap" {
			// A plain run (no --compact) on the next day recovers it too.
			if res := clk.optlake(t, "run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments"); res.code != 0 {
				t.Fatalf("run after the crash: exit %d\n%s", res.code, res.stderr)
			}
			for _, sub := range []string{"journal", "stage"} {
				if ents, _ := os.ReadDir(filepath.Join(dir, ".compact", sub)); len(ents) != 0 {
					t.Fatalf("run left .compact/%s: %d entries", sub, len(ents))
				}
			}
			got := lakeRowsGo(t, dir)
			for p, rows := range want {
				if !slices.Equal(got[p], rows) {
					t.Fatalf("after the run: %s differs", p)
				}
			}
		}
		res := clk.optlake(t, "compact", "--data-dir", dir, "--to", to)
		if res.code != 0 {
			t.Fatalf("compact after the crash: exit %d\n%s", res.code, res.stderr)
		}
		checkCompacted(t, dir)
		got := lakeRowsGo(t, dir)
		for p, rows := range want {
			if !slices.Equal(got[p], rows) {
				t.Fatalf("after the next compact: %s differs", p)
			}
		}
	})
}

// run --compact (here from the config file): a snapshot after midnight
// compacts the day that closed, in the same process; today stays as
// written; rows unchanged.
func TestRunCompact(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, url := startSim(t, venuesim.Config{Seed: 12, Instruments: 200})
	cfg := filepath.Join(t.TempDir(), "optlake.yaml")
	if err := os.WriteFile(cfg, []byte("compact: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	clk := pinClock(compactDay) // 23:57
	var before map[string][]string
	for k := range 4 {
		if k > 0 {
			clk.next()
		}
		if k == 3 {
			before = lakeRows(t, dir) // day 1 complete
		}
		res := clk.optlake(t, "run", "--config", cfg, "--api-url", url, "--data-dir", dir, "--endpoints", "instruments")
		if res.code != 0 {
			t.Fatalf("run %d: exit %d\n%s", k, res.code, res.stderr)
		}
		if k < 3 && strings.Contains(res.stdout, "compacted") {
			t.Fatalf("run %d compacted an open day:\n%s", k, res.stdout)
		}
		if k == 3 && !strings.Contains(res.stdout, "instruments: 1 day(s), 3 files -> 1") {
			t.Fatalf("run after midnight did not compact the closed day:\n%s", res.stdout)
		}
	}
	checkCompacted(t, dir)
	after := lakeRows(t, dir)
	for p, rows := range before {
		if !slices.Equal(after[p], rows) {
			t.Fatalf("%s: rows changed by run --compact", p)
		}
	}
	today := filepath.Join(dir, "instruments", "date="+compactDay.AddDate(0, 0, 1).Format(time.DateOnly))
	if ents, _ := os.ReadDir(today); len(ents) != 1 || pq.IsCompacted(ents[0].Name()) {
		t.Fatalf("today's partition: %v", ents)
	}
}

// run --compact looks at the days from its mark on (layout.CompactedBefore), not
// at every day of the history at every run: once a closed day is
// compacted, a per-snapshot file that appears in it without a load the
// run knows of is left to `optlake compact`; a catch-up of a snapshot of
// that day moves the mark back, and the next run compacts it.
func TestRunCompactLooksFromItsMark(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, url := startSim(t, venuesim.Config{Seed: 14, Instruments: 50})
	clk := pinClock(compactDay) // 23:57
	run := func(what string) result {
		t.Helper()
		res := clk.optlake(t, "run", "--compact", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments")
		if res.code != 0 {
			t.Fatalf("%s: exit %d\n%s", what, res.code, res.stderr)
		}
		return res
	}
	run("day 1")
	clk.next()
	clk.next()
	clk.next()   // 00:00 of day 2
	run("day 2") // compacts day 1, marks day 2
	mark, err := os.ReadFile(filepath.Join(dir, layout.CompactedBefore))
	day2 := compactDay.AddDate(0, 0, 1).Format(time.DateOnly)
	if err != nil || strings.TrimSpace(string(mark)) != day2 {
		t.Fatalf("mark %q (%v), want %s", mark, err, day2)
	}
	// A per-snapshot file of day 1 copied back in: the mark hides it.
	day1 := filepath.Join(dir, "instruments", "date="+compactDay.Format(time.DateOnly))
	ents, _ := os.ReadDir(filepath.Join(dir, "instruments", "date="+day2))
	if len(ents) != 1 {
		t.Fatalf("day 2: %v", ents)
	}
	data, err := os.ReadFile(filepath.Join(dir, "instruments", "date="+day2, ents[0].Name()))
	if err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(day1, compactDay.Add(time.Minute).Format(storage.TimeLayout)+"-stray.parquet")
	if err := os.WriteFile(stray, data, 0o644); err != nil {
		t.Fatal(err)
	}
	clk.next()
	if res := run("day 2, later"); strings.Contains(res.stdout, "compacted") {
		t.Fatalf("a run compacted a day before its mark:\n%s", res.stdout)
	}
	if _, err := os.Stat(stray); err != nil {
		t.Fatalf("the day before the mark was looked at: %v", err)
	}
	// A catch-up of a day-1 snapshot lowers the mark: the next run
	// compacts day 1 again (the stray file with it).
	lk, err := lake.Read(context.Background(), storage.NewLocal(dir), lake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := &built{store: storage.NewLocal(dir), lake: lk, log: slog.New(slog.DiscardHandler)}
	b.reopenCaughtUpDays(context.Background(), &pipeline.Summary{CatchUp: &pipeline.CatchUpResult{
		Snapshots: []pipeline.CaughtUp{{SnapshotTime: compactDay}}}})
	if got := lk.Compaction().ClosedFrom(context.Background()); got != compactDay.Format(time.DateOnly) {
		t.Fatalf("compaction from %q after a catch-up of day 1", got)
	}
	clk.next()
	if res := run("after the catch-up"); !strings.Contains(res.stdout, "instruments: 1 day(s)") {
		t.Fatalf("day 1 not compacted again:\n%s", res.stdout)
	}
	if _, err := os.Stat(stray); err == nil {
		t.Fatalf("the stray file of day 1 is still there")
	}
}
