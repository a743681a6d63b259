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

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/lake"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// An Iceberg lake through `optlake run`: the format chosen at the first run
// is kept by the later runs (no flag), the other format is refused (exit
// 2), compaction is refused, and ClickHouse 26.7 (chDB, icebergLocal) reads
// every table with the rows of its Parquet files; the account field that
// appears at tick 4 reads back null in the earlier snapshots.
func TestIcebergLakeEndToEnd(t *testing.T) {
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
	if res := optlake(t, "compact", "--data-dir", dir); res.code != exitUsage {
		t.Errorf("compact of an Iceberg lake: exit %d, %q", res.code, lastLine(res.stderr))
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
	for _, name := range icebergTables(t, dir, 4) { // instruments, instrument_events, runs, account_summary, …
		ice, files, err := ch.IcebergDigest(context.Background(), name, "")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ice != files || strings.HasPrefix(ice, "0\t") {
			t.Errorf("%s: icebergLocal %s, Parquet files %s", name, ice, files)
		}
	}
	if got := q("SELECT count(), countIf(portfolio_margin IS NULL), uniqExact(snapshot_time) FROM icebergLocal('account_summary') FORMAT TSV;"); got != fmt.Sprintf("%d\t4\t%d", ticks, ticks) {
		t.Errorf("account_summary (rows, null portfolio_margin, snapshots) = %q", got)
	}
	checkLedgerSnapshots(t, dir, ticks)
	checkStatusFormat(t, dir)
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
