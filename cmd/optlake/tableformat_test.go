package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/lake"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/storage"
	icetable "github.com/optlake/optlake/third_party/iceberg-go/table"
	"github.com/optlake/optlake/venuesim"
)

// An Iceberg lake through `optlake run`: the format chosen at the first run
// is kept by the later runs (no flag), the other format is refused (exit
// 2), and ClickHouse 26.7 (chDB, icebergLocal) reads every table with the
// rows of its Parquet files; the account field that appears at tick 4 reads
// back null in the earlier snapshots. Then `optlake compact` leaves one
// data file per table and day in the current snapshots (one replace
// commit each), ClickHouse reads the same rows, and its upkeep expires
// the snapshots older than --iceberg-keep-snapshots.
func TestIcebergLakeEndToEnd(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t, venuesim.Config{Seed: 12, Faults: venuesim.Faults{SchemaDrift: true}})
	dir := t.TempDir()
	args := []string{"run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments,account_summary",
		"--account", "main", "--account-header", "main:X-Account: main"}
	const ticks = 6
	for i := range ticks {
		a := args
		if i == 0 {
			a = append(a, "--table-format", "iceberg")
		} else {
			sim.Advance(1)
		}
		if res := optlake(t, a...); res.code != 0 {
			t.Fatalf("tick %d: exit %d\n%s", i, res.code, res.stderr)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, lake.FormatName)); err != nil || strings.TrimSpace(string(b)) != "iceberg" {
		t.Fatalf("recorded format: %q %v", b, err)
	}
	res := optlake(t, append(args, "--table-format", "parquet")...)
	if res.code != exitUsage || !strings.Contains(res.stderr, "is iceberg") {
		t.Errorf("--table-format parquet on an Iceberg lake: exit %d, %q", res.code, lastLine(res.stderr))
	}
	ch := testenv.NewChDB(t)
	ch.Workdir = dir
	q := func(sql string) string {
		t.Helper()
		out, err := ch.Query(context.Background(), sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return out
	}
	before := map[string]string{}
	tables := icebergTables(t, dir, 4) // instruments, instrument_events, runs, account_summary, …
	local := func(table string) string { return fmt.Sprintf("icebergLocal('%s')", table) }
	digests := icebergDigests(t, ch, tables, local)
	for i, name := range tables {
		ice, files := digests[2*i+1], digests[2*i]
		if ice != files || strings.HasPrefix(ice, "0\t") {
			t.Errorf("%s: icebergLocal %s, Parquet files %s", name, ice, files)
		}
		before[name] = ice
	}
	const summary = "SELECT count(), countIf(portfolio_margin IS NULL), uniqExact(snapshot_time) FROM icebergLocal('account_summary') FORMAT TSV;"
	if got := q(summary); got != fmt.Sprintf("%d\t4\t%d", ticks, ticks) {
		t.Errorf("account_summary (rows, null portfolio_margin, snapshots) = %q", got)
	}
	checkLedgerSnapshots(t, dir, ticks)
	checkStatusFormat(t, dir)

	res = optlake(t, "compact", "--data-dir", dir, "--to", "2100-01-01", "--iceberg-keep-snapshots", "0s")
	if res.code != 0 || !strings.Contains(res.stdout, "iceberg: expired") {
		t.Fatalf("compact of an Iceberg lake: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	checkHistory(t, dir, q)
	ice := iceberg.New(storage.NewLocal(dir), nil)
	// Each table's digest, and the days of those partitioned by time, in
	// one chDB process.
	var after strings.Builder
	tbls := map[string]*icetable.Table{}
	for _, name := range tables {
		fmt.Fprintf(&after, "SELECT count(), sum(cityHash64(formatRow('TSV', *))) FROM %s FORMAT TSV;\n", local(name))
		tbl, _, err := ice.Table(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if !tbl.Spec().IsUnpartitioned() { // else no partition time: not compacted
			tbls[name] = tbl
			fmt.Fprintf(&after, "SELECT uniqExact(toDate(snapshot_time)) FROM %s FORMAT TSV;\n", local(name))
		}
	}
	lines := strings.Split(q(after.String()), "\n")
	if len(lines) != len(tables)+len(tbls) {
		t.Fatalf("after compaction: %d lines for %d tables: %q", len(lines), len(tables), lines)
	}
	for _, name := range tables {
		got := lines[0]
		lines = lines[1:]
		if want := before[name]; got != want {
			t.Errorf("%s after compaction: %s, want %s", name, got, want)
		}
		tbl := tbls[name]
		if tbl == nil {
			continue
		}
		cur := tbl.CurrentSnapshot()
		days := lines[0]
		lines = lines[1:]
		if files := cur.Summary.Properties["total-data-files"]; files != days || len(tbl.Metadata().Snapshots()) != 1 {
			t.Errorf("%s after compaction: %s data files for %s day(s), %d snapshots (want 1 after expiry)", name, files, days, len(tbl.Metadata().Snapshots()))
		}
	}
	if got := q(summary); got != fmt.Sprintf("%d\t4\t%d", ticks, ticks) {
		t.Errorf("account_summary after compaction (rows, null portfolio_margin, snapshots) = %q", got)
	}
}

// run --compact on an Iceberg lake: the run after midnight compacts the
// closed day in one replace commit and runs the upkeep (here keeping no
// snapshot but the current one); ClickHouse reads the closed day's rows
// unchanged, and the table holds one file for it beside today's.
func TestRunCompactIceberg(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, url := startSim(t, venuesim.Config{Seed: 12, Instruments: 200})
	clk := pinClock(compactDay) // 23:57
	ch := testenv.NewChDB(t)
	ch.Workdir = dir
	day := fmt.Sprintf("SELECT count(), sum(cityHash64(formatRow('TSV', *))) FROM icebergLocal('instruments') WHERE toDate(snapshot_time) = '%s' FORMAT TSV;", compactDay.Format(time.DateOnly))
	var before string
	for k := range 4 {
		args := []string{"run", "--compact", "--iceberg-keep-snapshots", "0s", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments"}
		if k == 0 {
			args = append(args, "--table-format", "iceberg")
		} else {
			clk.next()
		}
		if k == 3 {
			var err error
			if before, err = ch.Query(context.Background(), day); err != nil {
				t.Fatal(err)
			}
		}
		res := clk.optlake(t, args...)
		if res.code != 0 {
			t.Fatalf("run %d: exit %d\n%s", k, res.code, res.stderr)
		}
		if k < 3 && strings.Contains(res.stdout, "compacted") {
			t.Fatalf("run %d compacted an open day:\n%s", k, res.stdout)
		}
		if k == 3 && (!strings.Contains(res.stdout, "instruments: 1 day(s), 3 files -> 1") || !strings.Contains(res.stdout, "iceberg: expired")) {
			t.Fatalf("run after midnight did not compact the closed day and expire:\n%s", res.stdout)
		}
	}
	if after, err := ch.Query(context.Background(), day); err != nil || after != before || strings.HasPrefix(after, "0\t") {
		t.Errorf("the closed day after run --compact: %q %v, before %q", after, err, before)
	}
	tbl, _, err := iceberg.New(storage.NewLocal(dir), nil).Table(context.Background(), "instruments")
	if err != nil {
		t.Fatal(err)
	}
	if files := tbl.CurrentSnapshot().Summary.Properties["total-data-files"]; files != "2" || len(tbl.Metadata().Snapshots()) != 1 {
		t.Errorf("instruments: %s data files (want 2: the compacted day and today's), %d snapshots (want 1)", files, len(tbl.Metadata().Snapshots()))
	}
}

// checkLedgerSnapshots: every settled instruments load of the lake in dir
// records the Iceberg snapshot id of its append, the instruments table's
// snapshot summarized with the load's run id; want loads in all.
func checkLedgerSnapshots(t *testing.T, dir string, want int) {
	t.Helper()
	tbl, ok, err := iceberg.New(storage.NewLocal(dir), nil).Table(context.Background(), "instruments")
	if err != nil || !ok {
		t.Fatalf("instruments table: %v %v", ok, err)
	}
	runOf := map[int64]string{}
	for _, s := range tbl.Metadata().Snapshots() {
		runOf[s.SnapshotID] = s.Summary.Properties["optlake.run-id"]
	}
	recs, _ := filepath.Glob(filepath.Join(dir, ledger.Dir, "done", "*", "*.json"))
	loads := 0
	for _, name := range recs {
		b, err := os.ReadFile(name)
		var rec ledger.Record
		if err == nil {
			err = json.Unmarshal(b, &rec)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, ld := range rec.Loads {
			if ld.Endpoint != "instruments" || ld.Sink != "parquet" {
				continue
			}
			loads++
			if id := ld.Snapshots["instruments"]; id == 0 || runOf[id] != rec.RunID {
				t.Errorf("%s: iceberg_snapshots %v: instruments snapshot of run %q, want %q", name, ld.Snapshots, runOf[id], rec.RunID)
			}
		}
	}
	if loads != want {
		t.Errorf("%d instruments loads in the ledger, want %d", loads, want)
	}
}

// An Iceberg lake on an S3 bucket (a real versitygw): runs with
// --table-format iceberg onto s3://…, then ClickHouse 26.7 (chDB) reads
// every table with icebergS3 through the server and sees the rows of the
// table's Parquet files (count and hash), also under a filter on the
// snapshot time that prunes by the day partition and the bounds.
func TestIcebergLakeOnBucket(t *testing.T) {
	t.Parallel()
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	url := g.URL("lake", "hist")
	dir := filepath.Join(g.Dir(), "lake", "hist")
	sim, api := startSim(t, venuesim.Config{Seed: 9, Faults: venuesim.Faults{SchemaDrift: true}})
	args := []string{"run", "--api-url", api, "--data-dir", url, "--endpoints", "instruments,account_summary",
		"--account", "main", "--account-header", "main:X-Account: main", "--table-format", "iceberg"}
	for i := range 3 {
		if i > 0 {
			sim.Advance(1)
		}
		if res := optlake(t, args...); res.code != 0 {
			t.Fatalf("run %d on the bucket: exit %d\n%s", i, res.code, res.stderr)
		}
	}
	tables := icebergTables(t, dir, 4)
	ch := testenv.NewChDB(t)
	ch.Workdir = dir
	for _, name := range tables {
		md := filepath.Join(dir, name, "metadata", "v1.metadata.json")
		if b, err := os.ReadFile(md); err != nil || !strings.Contains(string(b), `"location":"s3://lake/hist/`+name+`"`) {
			t.Fatalf("table location in %s: %.200s %v", md, b, err)
		}
		src := g.Endpoint() + "/lake/hist/" + name + "/"
		wheres := []string{""}
		if b, _ := os.ReadFile(md); strings.Contains(string(b), `"name":"snapshot_time"`) {
			wheres = append(wheres, "WHERE snapshot_time > (SELECT min(snapshot_time) FROM icebergS3('"+src+"', '"+testenv.S3AccessKey+"', '"+testenv.S3SecretKey+"'))")
		}
		for _, where := range wheres {
			ice, files, err := ch.IcebergS3Digest(context.Background(), src, name, where)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if where == "" && (ice != files || strings.HasPrefix(ice, "0\t")) {
				t.Errorf("%s: icebergS3 %s, Parquet files %s", name, ice, files)
			}
			if where != "" && (ice == files || strings.HasPrefix(ice, "0\t")) {
				t.Errorf("%s: icebergS3 %s: %s, want fewer rows than all of %s", name, where, ice, files)
			}
		}
	}
}

// icebergTables are the names of the Iceberg tables of the lake in dir (a
// folder with metadata/v1.metadata.json); fewer than least fails the test.
func icebergTables(t *testing.T, dir string, least int) []string {
	t.Helper()
	mds, _ := filepath.Glob(filepath.Join(dir, "*", "metadata", "v1.metadata.json"))
	if len(mds) < least {
		t.Fatalf("Iceberg tables in %s: %v, want at least %d", dir, mds, least)
	}
	names := make([]string, len(mds))
	for i, md := range mds {
		names[i] = filepath.Base(filepath.Dir(filepath.Dir(md)))
	}
	return names
}

// checkStatusFormat: status shows the lake in dir as Iceberg, with each
// table's current Iceberg snapshot, in JSON and in text.
func checkStatusFormat(t *testing.T, dir string) {
	t.Helper()
	res := optlake(t, "status", "--data-dir", dir, "--format", "json")
	var doc struct {
		Format string                `json:"table_format"`
		Tables []iceberg.TableStatus `json:"iceberg_tables"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil || res.code != 0 {
		t.Fatalf("status --format json: exit %d %v\n%s", res.code, err, res.stdout)
	}
	tbl, _, err := iceberg.New(storage.NewLocal(dir), nil).Table(context.Background(), "instruments")
	if err != nil {
		t.Fatal(err)
	}
	cur := tbl.CurrentSnapshot().SnapshotID
	i := slices.IndexFunc(doc.Tables, func(s iceberg.TableStatus) bool { return s.Table == "instruments" })
	if doc.Format != "iceberg" || i < 0 || doc.Tables[i].SnapshotID != cur || doc.Tables[i].Snapshots != len(tbl.Metadata().Snapshots()) {
		t.Errorf("status: format %q, tables %+v; want iceberg, instruments at snapshot %d", doc.Format, doc.Tables, cur)
	}
	text := optlake(t, "status", "--data-dir", dir).stdout
	if !strings.Contains(text, "table format: iceberg\n") || !strings.Contains(text, fmt.Sprintf("iceberg table instruments: snapshot %d ", cur)) {
		t.Errorf("status text:\n%s", text)
	}
}

// checkHistory: history on the Iceberg lake in dir reads an instrument's
// snapshots from the tables' current files: as many as ClickHouse reads
// through Iceberg, although the day folders still hold the files a
// compaction replaced (deleted only after the grace).
func checkHistory(t *testing.T, dir string, q func(string) string) {
	t.Helper()
	got := strings.Fields(q("SELECT instrument_name, count() FROM icebergLocal('instruments') GROUP BY 1 ORDER BY 1 LIMIT 1 FORMAT TSV;"))
	if len(got) != 2 {
		t.Fatalf("an instrument: %v", got)
	}
	res := optlake(t, "history", "--data-dir", dir, "--format", "json", got[0])
	var tl struct {
		Points []json.RawMessage `json:"snapshots"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &tl); err != nil || res.code != 0 {
		t.Fatalf("history %s: exit %d %v\n%s", got[0], res.code, err, res.stderr)
	}
	if fmt.Sprint(len(tl.Points)) != got[1] {
		t.Errorf("history %s after compaction: %d snapshots, Iceberg has %s rows", got[0], len(tl.Points), got[1])
	}
}
