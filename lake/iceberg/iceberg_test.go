package iceberg_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"github.com/apache/arrow-go/v18/parquet/file"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	icetable "github.com/optlake/optlake/third_party/iceberg-go/table"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/sinks/sinktest"
	"github.com/optlake/optlake/storage"
)

// load writes the snapshots at ticks into st through the Iceberg sink.
func load(t *testing.T, st storage.Store, ticks ...int) *iceberg.Warehouse {
	t.Helper()
	return loadLake(t, st, openLake(t, st), ticks...)
}

// loadLake is load through lake.
func loadLake(t *testing.T, st storage.Store, lake *iceberg.Warehouse, ticks ...int) *iceberg.Warehouse {
	t.Helper()
	pq, err := parquet.New(parquet.Options{Store: st, Iceberg: true, Park: compact.Parking(st)})
	if err != nil {
		t.Fatal(err)
	}
	s := iceberg.NewSink(pq, lake)
	for _, tick := range ticks {
		d := sinktest.Snapshot(t, tick, 250)
		for _, tb := range sinktest.Tables {
			sinktest.Load(t, s, tb, d.Snap, d.Records(tb))
		}
		d.Release()
	}
	return lake
}

// checkTables compares every table of the lake in dir, read by ClickHouse
// (chDB 26.7) through the test's catalog (icebergLocal without one), with
// its Parquet files read with the same column types: the same row count
// and hash, also under where, a filter on the snapshot time (which prunes
// by the day partition and the bounds). The tables' columns, then every
// digest, are read in one chDB process each.
func checkTables(t *testing.T, dir string, tables []*schema.Table, where string) {
	t.Helper()
	ch := testenv.NewChDB(t)
	ch.Workdir = dir
	srcs := make([]string, len(tables))
	for i, tb := range tables {
		srcs[i] = icebergSource(t, ch, tb.Name)
	}
	structs, err := ch.Structures(context.Background(), srcs)
	if err != nil {
		t.Fatal(err)
	}
	wheres := []string{""}
	if where != "" {
		wheres = append(wheres, where)
	}
	var q strings.Builder
	const digest = "SELECT count(), sum(cityHash64(formatRow('TSV', *))) FROM %s %s FORMAT TSV;\n"
	for i, tb := range tables {
		fmt.Fprintf(&q, digest, fmt.Sprintf("file('%s/date=*/*.parquet', Parquet, '%s')", tb.Name, structs[i]), "")
		for _, w := range wheres {
			fmt.Fprintf(&q, digest, srcs[i], w)
		}
	}
	out, err := ch.Query(context.Background(), q.String())
	if err != nil {
		t.Fatalf("digests: %v", err)
	}
	lines := strings.Split(out, "\n")
	if len(lines) != len(tables)*(1+len(wheres)) {
		t.Fatalf("digests: %d lines for %d tables:\n%s", len(lines), len(tables), out)
	}
	for _, tb := range tables {
		files := lines[0]
		lines = lines[1:]
		if strings.HasPrefix(files, "0\t") {
			t.Fatalf("%s: no rows in the Parquet files", tb.Name)
		}
		for _, w := range wheres {
			if ice := lines[0]; ice != files {
				t.Errorf("%s: icebergLocal %s: %s, Parquet files %s", tb.Name, w, ice, files)
			}
			lines = lines[1:]
		}
	}
}

// checkFiles checks every data file of the current snapshot of each table
// against the file itself (iceberg.Warehouse.CheckFiles): partition, bounds,
// null and value counts, size and record count.
func checkFiles(t *testing.T, st storage.Store, tables []*schema.Table) {
	t.Helper()
	lake := openLake(t, st)
	for _, tb := range tables {
		n, ok, err := lake.CheckFiles(context.Background(), tb.Name)
		if err != nil {
			t.Errorf("%v", err)
		}
		if !ok || n == 0 {
			t.Errorf("%s: no data files checked (table exists: %v)", tb.Name, ok)
		}
	}
}

// TestReadWithClickHouse: ClickHouse 26.7 (chDB) reads every table of the
// Iceberg lake with icebergLocal and sees the rows of the Parquet files.
func TestReadWithClickHouse(t *testing.T) { forEachCatalog(t, testReadWithClickHouse) }

func testReadWithClickHouse(t *testing.T) {
	dir := t.TempDir()
	load(t, storage.NewLocal(dir), 1, 2, 3)
	checkFiles(t, storage.NewLocal(dir), sinktest.Tables)
	checkTables(t, dir, sinktest.Tables, "WHERE snapshot_time >= '2026-11-22 09:30:01' AND snapshot_time < '2026-11-22 09:30:04'")
}

// TestAppendIsOneSnapshot: each snapshot's file of a table is one Iceberg
// snapshot, summarized with the optlake run id.
func TestAppendIsOneSnapshot(t *testing.T) { forEachCatalog(t, testAppendIsOneSnapshot) }

func testAppendIsOneSnapshot(t *testing.T) {
	st := storage.NewLocal(t.TempDir())
	lake := load(t, st, 1, 2)
	tbl, ok, err := lake.Table(context.Background(), schema.Instruments.Name)
	if err != nil || !ok {
		t.Fatalf("table: %v %v", ok, err)
	}
	snaps := tbl.Metadata().Snapshots()
	if len(snaps) != 2 {
		t.Fatalf("%d Iceberg snapshots, want 2", len(snaps))
	}
	cur := tbl.CurrentSnapshot()
	if got := cur.Summary.Properties["optlake.run-id"]; got != sinktest.Snapshot(t, 2, 250).Snap.RunID {
		t.Errorf("current snapshot's optlake.run-id = %q", got)
	}
	if got := cur.Summary.Properties["added-data-files"]; got != "1" {
		t.Errorf("added-data-files = %q, want 1", got)
	}
}

// TestReplayReplaces: loading a snapshot again (a replay or catch-up
// writes a new version of its file) replaces the file in the table
// instead of adding it twice.
func TestReplayReplaces(t *testing.T) { forEachCatalog(t, testReplayReplaces) }

func testReplayReplaces(t *testing.T) {
	dir := t.TempDir()
	st := storage.NewLocal(dir)
	load(t, st, 1, 2)
	ch := testenv.NewChDB(t)
	ch.Workdir = dir
	checkTables(t, dir, []*schema.Table{schema.Instruments}, "")
	want := digest(t, ch, schema.Instruments.Name, 0)
	lake := load(t, st, 2)
	tbl, _, err := lake.Table(context.Background(), schema.Instruments.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got := tbl.CurrentSnapshot().Summary.Properties["total-data-files"]; got != "2" {
		t.Errorf("total-data-files after a replay = %q, want 2", got)
	}
	checkFiles(t, st, sinktest.Tables)
	if got := digest(t, ch, schema.Instruments.Name, 0); got != want {
		t.Errorf("instruments after a replay: %s, want %s", got, want)
	}
}

// TestConcurrentAppends: writers racing for the same next metadata version
// (the lease keeps runs to one, this is the commit's own guard) all land:
// the loser of each race retries on the winner's state.
func TestConcurrentAppends(t *testing.T) { forEachCatalog(t, testConcurrentAppends) }

func testConcurrentAppends(t *testing.T) {
	dir := t.TempDir()
	st := storage.NewLocal(dir)
	load(t, st, 1) // the tables exist
	errs := make(chan error, 4)
	for tick := 2; tick <= 5; tick++ {
		go func() {
			defer func() { errs <- nil }()
			load(t, st, tick)
		}()
	}
	for range 4 {
		<-errs
	}
	if t.Failed() {
		return
	}
	lake := openLake(t, st)
	tbl, _, err := lake.Table(context.Background(), schema.Runs.Name)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tbl.Metadata().Snapshots()); n != 5 {
		t.Errorf("%d Iceberg snapshots of runs, want 5", n)
	}
	checkTables(t, dir, []*schema.Table{schema.Runs, schema.Instruments}, "")
}

// TestEmptySnapshot: a snapshot without rows of a table (an empty file)
// commits nothing and fails nothing; the table keeps its rows.
func TestEmptySnapshot(t *testing.T) {
	dir := t.TempDir()
	st := storage.NewLocal(dir)
	lake := load(t, st, 1)
	pq, err := parquet.New(parquet.Options{Store: st, Iceberg: true, Park: compact.Parking(st)})
	if err != nil {
		t.Fatal(err)
	}
	d := sinktest.Snapshot(t, 2, 250)
	defer d.Release()
	sinktest.Load(t, iceberg.NewSink(pq, lake), schema.Rejects, d.Snap, nil)
	tbl, _, err := lake.Table(context.Background(), schema.Rejects.Name)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tbl.Metadata().Snapshots()); n != 1 {
		t.Errorf("%d Iceberg snapshots of rejects after an empty one, want 1", n)
	}
}

// TestStatisticsOnEveryColumn: an Iceberg lake's per-snapshot files carry
// statistics on every column, the schema's Unfiltered ones too (a hive
// lake's leave them out), so the manifests bound every column and engines
// can prune on any.
func TestStatisticsOnEveryColumn(t *testing.T) {
	dir := t.TempDir()
	load(t, storage.NewLocal(dir), 1)
	files, err := filepath.Glob(filepath.Join(dir, schema.Instruments.Name, "date=*", "*.parquet"))
	if err != nil || len(files) != 1 {
		t.Fatalf("files: %v %v", files, err)
	}
	r, err := file.OpenParquetFile(files[0], false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for rg := range r.NumRowGroups() {
		for i := range r.MetaData().Schema.NumColumns() {
			cc, err := r.MetaData().RowGroup(rg).ColumnChunk(i)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := cc.StatsSet(); err != nil || !ok {
				t.Errorf("column %s has no statistics (%v)", r.MetaData().Schema.Column(i).Name(), err)
			}
		}
	}
	checkFiles(t, storage.NewLocal(dir), []*schema.Table{schema.Instruments})
}

// fileHashes is the size and sha256 of every data file under dir's table
// folders, by path.
func fileHashes(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*", "date=*", "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = fmt.Sprintf("%d bytes, sha256 %x", len(b), sha256.Sum256(b))
	}
	return out
}

// TestCommittedFilesNeverChange: a data file, once committed, keeps its
// bytes through later snapshots, replays (before and after a compaction),
// a table written twice in one run (inferred_columns is) and compaction;
// the table still counts each snapshot once and its manifests match its
// files.
func TestCommittedFilesNeverChange(t *testing.T) {
	dir := t.TempDir()
	st := storage.NewLocal(dir)
	lake := load(t, st, 1, 2)
	seen := fileHashes(t, dir)
	same := func(step string) {
		t.Helper()
		now := fileHashes(t, dir)
		for f, h := range seen {
			if got, ok := now[f]; !ok {
				t.Errorf("%s: committed file %s is gone", step, f)
			} else if got != h {
				t.Errorf("%s: committed file %s changed: %s, was %s", step, f, got, h)
			}
		}
		for f, h := range now {
			seen[f] = h
		}
		checkFiles(t, st, sinktest.Tables)
	}
	load(t, st, 3)
	same("a new snapshot")
	load(t, st, 2)
	same("a replay")
	// A table loaded twice in one snapshot, the second time with other
	// rows (inferred_columns is rewritten whole as tables evolve).
	pqs, err := parquet.New(parquet.Options{Store: st, Iceberg: true, Park: compact.Parking(st)})
	if err != nil {
		t.Fatal(err)
	}
	d := sinktest.Snapshot(t, 3, 250)
	sinktest.Load(t, iceberg.NewSink(pqs, lake), schema.Instruments, d.Snap, d.Records(schema.Instruments)[:1])
	d.Release()
	same("a table written again in a run")
	load(t, st, 3) // tick 3 whole again
	same("a replay")
	ch := testenv.NewChDB(t)
	ch.Workdir = dir
	want := digest(t, ch, schema.Instruments.Name, 0)
	compactLake(t, lake, nil)
	same("a compaction")
	load(t, st, 1)
	same("a replay of a compacted snapshot")
	compactLake(t, lake, nil)
	same("a second compaction")
	if got := digest(t, ch, schema.Instruments.Name, 0); got != want {
		t.Errorf("instruments read %s at the end, want %s", got, want)
	}
}

// TestManifestListBounded: the manifest list of a table that took many
// appends (one per snapshot) stays bounded: manifests are merged, not one
// more per commit (a fast append's list grew by one each time); the table
// still holds every snapshot's rows, once.
func TestManifestListBounded(t *testing.T) {
	st := storage.NewLocal(t.TempDir())
	lake := iceberg.New(st, nil)
	pq, err := parquet.New(parquet.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	s := iceberg.NewSink(pq, lake)
	const commits = 130
	var rows int64
	for tick := 1; tick <= commits; tick++ {
		d := sinktest.Snapshot(t, 1+tick%5, 5) // the fixtures' rows, as snapshots of their own
		d.Snap.Time = d.Snap.Time.Add(time.Duration(tick) * time.Minute)
		d.Snap.RunID = fmt.Sprintf("%s-%03d", d.Snap.RunID, tick)
		recs := d.Records(schema.Instruments)
		for _, r := range recs {
			rows += r.NumRows()
		}
		sinktest.Load(t, s, schema.Instruments, d.Snap, recs)
		d.Release()
	}
	tbl, ok, err := lake.Table(context.Background(), schema.Instruments.Name)
	if err != nil || !ok {
		t.Fatalf("table: %v %v", ok, err)
	}
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := tbl.CurrentSnapshot().Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) > icetable.ManifestMinMergeCountDefault {
		t.Errorf("%d manifests in the list after %d appends, want at most %d", len(mfs), commits, icetable.ManifestMinMergeCountDefault)
	}
	var files, live int64
	for _, m := range mfs {
		files += int64(m.AddedDataFiles() + m.ExistingDataFiles())
		live += m.AddedRows() + m.ExistingRows()
	}
	if files != commits || live != rows {
		t.Errorf("the manifests hold %d files of %d rows, want %d of %d", files, live, commits, rows)
	}
	t.Logf("%d appends: %d manifests", commits, len(mfs))
}
