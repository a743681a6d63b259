package iceberg_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/lake/layout"
	"github.com/optlake/optlake/schema"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/sinks/sinktest"
	"github.com/optlake/optlake/storage"
	icego "github.com/optlake/optlake/third_party/iceberg-go"
	icetable "github.com/optlake/optlake/third_party/iceberg-go/table"
)

// compactDay is the day after sinktest's snapshots: their day is closed.
var compactDay = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func compactLake(t *testing.T, lake *iceberg.Warehouse, crash func(string)) compact.Report {
	t.Helper()
	c := lake.Compaction(crash)
	defer c.Close()
	rep, err := compact.Compact(context.Background(), compact.Options{Target: c, Now: func() time.Time { return compactDay }})
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	return rep
}

// digest is ClickHouse's (chDB 26.7) row count and order-free hash of
// every row of the Iceberg table name in dir, at its current snapshot or,
// with snap != 0, at that snapshot (time travel).
func digest(t *testing.T, ch *testenv.ChDB, name string, snap int64) string {
	t.Helper()
	q := "SELECT count(), sum(cityHash64(formatRow('TSV', *))) FROM " + icebergSource(t, ch, name)
	if snap != 0 {
		q += fmt.Sprintf(" SETTINGS iceberg_snapshot_id = %d", snap)
	}
	out, err := ch.Query(context.Background(), q+" FORMAT TSV;")
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if strings.HasPrefix(out, "0\t") {
		t.Fatalf("%s: no rows", name)
	}
	return out
}

// prunedWheres are a filter on one snapshot of sinktest's three (tick 2)
// read with ClickHouse's Iceberg pruning (partition and min-max) on and
// off: a manifest whose partition or bounds are wrong loses rows only
// with it on.
func prunedWheres() []string {
	const w = "WHERE snapshot_time >= '2026-11-22 09:30:02' AND snapshot_time < '2026-11-22 09:30:03'"
	var out []string
	for _, on := range []int{1, 0} {
		out = append(out, fmt.Sprintf("%s SETTINGS use_iceberg_partition_pruning = %d, input_format_parquet_filter_push_down = %d, use_iceberg_metadata_files_cache = 0", w, on, on))
	}
	return out
}

// filtered is ClickHouse's digest of table name's rows under where.
func filtered(t *testing.T, ch *testenv.ChDB, name, where string) string {
	t.Helper()
	q := fmt.Sprintf("SELECT count(), sum(cityHash64(formatRow('TSV', *))) FROM %s %s FORMAT TSV;", icebergSource(t, ch, name), where)
	out, err := ch.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// planned is how many records the files hold that iceberg-go's scan
// planning (a second planner: it prunes by the manifests' partitions and
// bounds) picks for snapshot tick 2 of sinktest's in table name.
func planned(t *testing.T, lake *iceberg.Warehouse, name string) int64 {
	t.Helper()
	tbl, _, err := lake.Table(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	lo := time.Date(2026, 11, 22, 9, 30, 2, 0, time.UTC).UnixMicro()
	ref := icego.Reference("snapshot_time")
	tasks, err := tbl.Scan(icetable.WithRowFilter(icego.NewAnd(icego.GreaterThanEqual(ref, icego.Timestamp(lo)),
		icego.LessThan(ref, icego.Timestamp(lo+1e6))))).PlanFiles(context.Background())
	if err != nil {
		t.Fatalf("%s: plan: %v", name, err)
	}
	var n int64
	for _, task := range tasks {
		n += task.File.Count()
	}
	return n
}

// checkSortOrder: each table declares the order compaction writes its
// files in (schema.SortKey ascending, nulls first), and its compacted
// files name it (CheckFiles checks their rows are in it).
func checkSortOrder(t *testing.T, lake *iceberg.Warehouse, tables []*schema.Table) {
	t.Helper()
	for _, tb := range tables {
		tbl, _, err := lake.Table(context.Background(), tb.Name)
		if err != nil {
			t.Fatal(err)
		}
		order := tbl.SortOrder()
		var names []string
		for _, f := range order.Fields() {
			src, _ := tbl.Schema().FindFieldByID(f.SourceIDs[0])
			names = append(names, fmt.Sprintf("%s %s %s %s", src.Name, f.Transform, f.Direction, f.NullOrder))
		}
		var want []string
		for _, k := range schema.SortKey(tb.Name) {
			want = append(want, k+" identity asc nulls-first")
		}
		if strings.Join(names, ", ") != strings.Join(want, ", ") {
			t.Errorf("%s: sort order %v, want %v", tb.Name, names, want)
		}
		tasks, err := tbl.Scan().PlanFiles(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			if id := task.File.SortOrderID(); pq.IsCompacted(filepath.Base(task.File.FilePath())) && (id == nil || *id != order.OrderID()) {
				t.Errorf("%s: compacted file %s names sort order %v, want %d", tb.Name, task.File.FilePath(), id, order.OrderID())
			}
		}
	}
}

func table(t *testing.T, lake *iceberg.Warehouse, name string) (files, snaps int, op string, id int64) {
	t.Helper()
	tbl, ok, err := lake.Table(context.Background(), name)
	if err != nil || !ok {
		t.Fatalf("table %s: %v %v", name, ok, err)
	}
	cur := tbl.CurrentSnapshot()
	fmt.Sscan(cur.Summary.Properties["total-data-files"], &files)
	return files, len(tbl.Metadata().Snapshots()), string(cur.Summary.Operation), cur.SnapshotID
}

// TestCompactIsOneReplace: compaction of an Iceberg lake is one replace
// commit per table and day: the current snapshot holds one data file for
// the day, ClickHouse reads the same rows as before, and time travel to
// the snapshot before the compaction still reads them (until it expires).
func TestCompactIsOneReplace(t *testing.T) { forEachCatalog(t, testCompactIsOneReplace) }

func testCompactIsOneReplace(t *testing.T) {
	dir := t.TempDir()
	lake := load(t, storage.NewLocal(dir), 1, 2, 3)
	ch := testenv.NewChDB(t)
	ch.Workdir = dir
	before := map[string]string{}
	prev := map[string]int64{}
	tick2 := map[string]string{}
	tick2Rows := map[string]int64{}
	for _, tb := range sinktest.Tables {
		before[tb.Name] = digest(t, ch, tb.Name, 0)
		_, _, _, prev[tb.Name] = table(t, lake, tb.Name)
		tick2[tb.Name] = filtered(t, ch, tb.Name, prunedWheres()[1])
		if strings.HasPrefix(tick2[tb.Name], "0\t") {
			t.Fatalf("%s: no rows of tick 2", tb.Name)
		}
		tick2Rows[tb.Name] = planned(t, lake, tb.Name)
	}
	rep := compactLake(t, lake, nil)
	if len(rep.Partitions) != len(sinktest.Tables) {
		t.Fatalf("compacted %d partitions, want %d: %+v", len(rep.Partitions), len(sinktest.Tables), rep)
	}
	for _, tb := range sinktest.Tables {
		files, snaps, op, _ := table(t, lake, tb.Name)
		if files != 1 || snaps != 4 || op != "replace" {
			t.Errorf("%s after compaction: %d data files, %d snapshots, operation %q; want 1, 4, replace", tb.Name, files, snaps, op)
		}
		if got := digest(t, ch, tb.Name, 0); got != before[tb.Name] {
			t.Errorf("%s: compacted reads %s, before %s", tb.Name, got, before[tb.Name])
		}
		if got := digest(t, ch, tb.Name, prev[tb.Name]); got != before[tb.Name] {
			t.Errorf("%s: time travel to the snapshot before compaction reads %s, want %s", tb.Name, got, before[tb.Name])
		}
		// Filtered reads over the compacted day, pruning on and off.
		for _, w := range prunedWheres() {
			if got := filtered(t, ch, tb.Name, w); got != tick2[tb.Name] {
				t.Errorf("%s compacted, %s: %s, before %s", tb.Name, w, got, tick2[tb.Name])
			}
		}
		if got := planned(t, lake, tb.Name); got < tick2Rows[tb.Name] {
			t.Errorf("%s compacted: iceberg-go plans files of %d rows for tick 2, which has %d", tb.Name, got, tick2Rows[tb.Name])
		}
	}
	checkFiles(t, storage.NewLocal(dir), sinktest.Tables)
	checkSortOrder(t, lake, sinktest.Tables)
	// Nothing new: nothing to do.
	if rep := compactLake(t, lake, nil); len(rep.Partitions) != 0 {
		t.Errorf("a second compaction compacted %d partitions", len(rep.Partitions))
	}
	// A new snapshot of the day is merged into its compacted file.
	load(t, storage.NewLocal(dir), 4)
	want := digest(t, ch, schema.Instruments.Name, 0)
	compactLake(t, lake, nil)
	if files, _, _, _ := table(t, lake, schema.Instruments.Name); files != 1 {
		t.Errorf("instruments after a second compaction: %d data files, want 1", files)
	}
	if got := digest(t, ch, schema.Instruments.Name, 0); got != want {
		t.Errorf("instruments after a second compaction reads %s, want %s", got, want)
	}
	// A replay of the snapshot only the second compaction holds is parked
	// (the sink asks the first compacted file it lists, the newest), not
	// appended beside it.
	load(t, storage.NewLocal(dir), 4)
	if got := digest(t, ch, schema.Instruments.Name, 0); got != want {
		t.Errorf("instruments after a replay of the second compaction's snapshot reads %s, want %s", got, want)
	}
}

// TestCompactReplayParked: a replay of a compacted snapshot is parked, not
// appended (the compacted file holds its rows), and the next compaction
// replaces that snapshot's rows: never counted twice.
func TestCompactReplayParked(t *testing.T) {
	dir := t.TempDir()
	st := storage.NewLocal(dir)
	lake := load(t, st, 1, 2)
	ch := testenv.NewChDB(t)
	ch.Workdir = dir
	want := digest(t, ch, schema.Instruments.Name, 0)
	compactLake(t, lake, nil)
	load(t, st, 1, 2, 1) // replays, one of them twice
	parked, err := st.List(context.Background(), layout.ParkedDir+schema.Instruments.Name+"/")
	if err != nil || len(parked) != 2 {
		t.Fatalf("parked files: %v %v, want 2", parked, err)
	}
	if got := digest(t, ch, schema.Instruments.Name, 0); got != want {
		t.Errorf("after the replays: %s, want %s", got, want)
	}
	compactLake(t, lake, nil)
	if got := digest(t, ch, schema.Instruments.Name, 0); got != want {
		t.Errorf("after compacting the replays: %s, want %s", got, want)
	}
	if parked, _ := st.List(context.Background(), layout.ParkedDir); len(parked) != 0 {
		t.Errorf("parked files left after their compaction: %v", parked)
	}
}

// crashed is the panic of the crash hook of TestCompactCrashBeforeCommit.
var errCrashed = errors.New("crashed")

// TestCompactCrashBeforeCommit: a compaction stopped before its commit
// leaves the table at its last commit (readers see nothing of it) and its
// written file as an orphan, which expiry deletes once past the grace; the
// next compaction does the work.
func TestCompactCrashBeforeCommit(t *testing.T) { forEachCatalog(t, testCompactCrashBeforeCommit) }

func testCompactCrashBeforeCommit(t *testing.T) {
	dir := t.TempDir()
	lake := load(t, storage.NewLocal(dir), 1, 2)
	ch := testenv.NewChDB(t)
	ch.Workdir = dir
	name := schema.Instruments.Name
	want := digest(t, ch, name, 0)
	_, _, _, id := table(t, lake, name)
	func() {
		defer func() {
			if r := recover(); r != errCrashed {
				t.Fatalf("compaction did not stop at the hook: %v", r)
			}
		}()
		compactLake(t, lake, func(step string) {
			if step == "staged" {
				panic(errCrashed)
			}
		})
	}()
	if _, _, _, got := table(t, openLake(t, storage.NewLocal(dir)), name); got != id {
		t.Fatalf("current snapshot %d after a crash before the commit, want %d", got, id)
	}
	orphans := compactedFiles(t, dir, name)
	if len(orphans) != 1 {
		t.Fatalf("%d compacted files after the crash, want 1 (the orphan)", len(orphans))
	}
	if got := digest(t, ch, name, 0); got != want {
		t.Errorf("after the crash: %s, want %s", got, want)
	}
	lake = openLake(t, storage.NewLocal(dir))
	compactLake(t, lake, nil)
	if files, _, _, _ := table(t, lake, name); files != 1 {
		t.Errorf("after the next compaction: %d data files, want 1", files)
	}
	ageAll(t, dir, 2*time.Hour)
	if _, err := lake.Expire(context.Background(), []string{name}, time.Hour, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(orphans[0]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the crash's orphan %s is still there past the grace: %v", orphans[0], err)
	}
	if got := digest(t, ch, name, 0); got != want {
		t.Errorf("after expiry: %s, want %s", got, want)
	}
}

// TestExpire: snapshots older than keep leave the metadata (the current
// one stays); files no snapshot references are deleted only once older
// than the grace, referenced ones never; ClickHouse reads the same rows.
func TestExpire(t *testing.T) { forEachCatalog(t, testExpire) }

func testExpire(t *testing.T) {
	dir := t.TempDir()
	lake := load(t, storage.NewLocal(dir), 1, 2, 3)
	ch := testenv.NewChDB(t)
	ch.Workdir = dir
	name := schema.Instruments.Name
	want := digest(t, ch, name, 0)
	compactLake(t, lake, nil)
	snapFiles := perSnapshotFiles(t, dir, name)
	if len(snapFiles) != 3 {
		t.Fatalf("%d per-snapshot files, want 3", len(snapFiles))
	}

	// A week's retention: nothing is that old.
	rep, err := lake.Expire(context.Background(), nil, 7*24*time.Hour, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep) != len(sinktest.Tables) || rep[0].Expired != 0 || rep[0].Deleted != 0 {
		t.Errorf("a week's retention expired or deleted something: %+v", rep)
	}
	if _, snaps, _, _ := table(t, lake, name); snaps != 4 {
		t.Errorf("%d snapshots after expiring nothing, want 4", snaps)
	}

	// Expire every snapshot but the current one; the files they alone
	// held are younger than the grace: they stay.
	if _, err := lake.Expire(context.Background(), []string{name}, 0, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, snaps, _, _ := table(t, lake, name); snaps != 1 {
		t.Errorf("%d snapshots after expiring all but the current, want 1", snaps)
	}
	if n := len(perSnapshotFiles(t, dir, name)); n != 3 {
		t.Errorf("%d of 3 unreferenced files left inside the grace period", n)
	}

	// Past the grace: they go; what the current snapshot references stays.
	ageAll(t, dir, 2*time.Hour)
	rep, err = lake.Expire(context.Background(), []string{name}, 0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(perSnapshotFiles(t, dir, name)); n != 0 {
		t.Errorf("%d unreferenced data files left past the grace period", n)
	}
	if rep[0].Deleted < 3 {
		t.Errorf("deleted %d files, want at least the 3 data files", rep[0].Deleted)
	}
	if n := len(compactedFiles(t, dir, name)); n != 1 {
		t.Errorf("%d compacted files left, want the 1 referenced", n)
	}
	if _, inCatalog := catalogOf(t); !inCatalog { // a catalog's lake writes no hint
		if _, err := os.Stat(filepath.Join(dir, name, "metadata/version-hint.text")); err != nil {
			t.Errorf("version-hint.text: %v", err)
		}
	}
	if got := digest(t, ch, name, 0); got != want {
		t.Errorf("after expiry: %s, want %s", got, want)
	}
	// Other tables were not asked for: untouched.
	if _, snaps, _, _ := table(t, lake, schema.Runs.Name); snaps != 4 {
		t.Errorf("runs: %d snapshots, want 4", snaps)
	}
}

// ageAll sets the modification time of every file under dir back by d.
func ageAll(t *testing.T, dir string, d time.Duration) {
	t.Helper()
	old := time.Now().Add(-d)
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		return os.Chtimes(p, old, old)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func dayFiles(t *testing.T, dir, table string, compacted bool) []string {
	t.Helper()
	all, err := filepath.Glob(filepath.Join(dir, table, "date=*", "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range all {
		if pq.IsCompacted(filepath.Base(f)) == compacted {
			out = append(out, f)
		}
	}
	return out
}

func compactedFiles(t *testing.T, dir, table string) []string { return dayFiles(t, dir, table, true) }
func perSnapshotFiles(t *testing.T, dir, table string) []string {
	return dayFiles(t, dir, table, false)
}

// TestCompactOnBucket: on a bucket (versitygw) too, compaction is one
// replace commit and expiry deletes what no snapshot references (grace 0
// here: a bucket's objects cannot be aged); the table reads the same rows
// throughout (iceberg-go's own scan through the store).
func TestCompactOnBucket(t *testing.T) { forEachCatalog(t, testCompactOnBucket) }

func testCompactOnBucket(t *testing.T) {
	ctx := context.Background()
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	st, err := storage.Open(ctx, g.URL("lake", "ice"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lake := load(t, st, 1, 2, 3)
	name := schema.Instruments.Name
	rows := func() int64 {
		t.Helper()
		tbl, _, err := lake.Table(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		at, err := tbl.Scan().ToArrowTable(ctx)
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		defer at.Release()
		return at.NumRows()
	}
	want := rows()
	compactLake(t, lake, nil)
	if files, _, op, _ := table(t, lake, name); files != 1 || op != "replace" {
		t.Errorf("after compaction: %d data files, operation %q; want 1, replace", files, op)
	}
	if got := rows(); got != want {
		t.Errorf("after compaction: %d rows, want %d", got, want)
	}
	checkFiles(t, st, sinktest.Tables)
	if _, err := lake.Expire(ctx, []string{name}, 0, 0); err != nil {
		t.Fatal(err)
	}
	objs, err := st.List(ctx, name+"/date=")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || !pq.IsCompacted(filepath.Base(objs[0].Name)) {
		t.Errorf("data files left after expiry: %v, want the one compacted", objs)
	}
	if got := rows(); got != want {
		t.Errorf("after expiry: %d rows, want %d", got, want)
	}
}

// TestCompactCrashAfterCommit: a compaction stopped after its commit,
// before it deleted the parked files it consumed, leaves them; the next
// compaction applies them again to the same rows: the same table.
func TestCompactCrashAfterCommit(t *testing.T) { forEachCatalog(t, testCompactCrashAfterCommit) }

func testCompactCrashAfterCommit(t *testing.T) {
	dir := t.TempDir()
	st := storage.NewLocal(dir)
	lake := load(t, st, 1, 2)
	ch := testenv.NewChDB(t)
	ch.Workdir = dir
	name := schema.Instruments.Name
	want := digest(t, ch, name, 0)
	compactLake(t, lake, nil)
	load(t, st, 1) // a replay: parked
	parked := layout.ParkedDir + name + "/"
	func() {
		defer func() {
			if r := recover(); r != errCrashed {
				t.Fatalf("compaction did not stop at the hook: %v", r)
			}
		}()
		compactLake(t, lake, func(step string) {
			if step == "committed" {
				panic(errCrashed)
			}
		})
	}()
	if objs, _ := st.List(context.Background(), parked); len(objs) != 1 {
		t.Fatalf("parked files after a crash past the commit: %v, want the 1 consumed", objs)
	}
	if got := digest(t, ch, name, 0); got != want {
		t.Errorf("after the crash: %s, want %s", got, want)
	}
	lake = openLake(t, st)
	compactLake(t, lake, nil)
	if objs, _ := st.List(context.Background(), parked); len(objs) != 0 {
		t.Errorf("parked files after the next compaction: %v", objs)
	}
	if files, _, _, _ := table(t, lake, name); files != 1 {
		t.Errorf("after the next compaction: %d data files, want 1", files)
	}
	if got := digest(t, ch, name, 0); got != want {
		t.Errorf("after the next compaction: %s, want %s", got, want)
	}
}

// TestStampNameListsFirst: a later compaction's file name sorts before an
// earlier one's and before any Parquet compaction's (any id).
func TestStampNameListsFirst(t *testing.T) {
	at := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	older := iceberg.StampName(pq.CompactedName("ffffffffffffffff", 0), at)
	newer := iceberg.StampName(pq.CompactedName("ffffffffffffffff", 0), at.Add(time.Millisecond))
	for _, later := range []string{older, pq.CompactedName("0000000000000000", 0)} {
		if !(newer < later) {
			t.Errorf("%s does not sort before %s", newer, later)
		}
	}
	if !pq.IsCompacted(newer) {
		t.Errorf("%s is not a compacted file's name", newer)
	}
}

// TestCompactMillisAndMicros: a day of millisecond files (a Parquet lake's,
// registered by convert) and microsecond ones (an Iceberg lake's own)
// compacts into one microsecond file with the same rows; a replay of a
// millisecond snapshot after it replaces its rows, not doubles them.
func TestCompactMillisAndMicros(t *testing.T) {
	dir := t.TempDir()
	st := storage.NewLocal(dir)
	names := parquetLake(t, st, 2)
	lake := iceberg.New(st, nil)
	if _, err := lake.Sync(context.Background(), schema.Instruments, names, nil); err != nil {
		t.Fatal(err)
	}
	loadLake(t, st, lake, 3)
	ch := testenv.NewChDB(t)
	ch.Workdir = dir
	name := schema.Instruments.Name
	want := digest(t, ch, name, 0)
	// Each file on its own: file() over a glob infers one schema, from
	// whichever file it lists first, and reads every file with it.
	units := func() map[string]string {
		files, err := filepath.Glob(filepath.Join(dir, name, "date=*", "*.parquet"))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, f := range files {
			rel, _ := filepath.Rel(dir, f)
			out, err := ch.Query(context.Background(), fmt.Sprintf("SELECT toTypeName(snapshot_time) FROM file('%s', Parquet) LIMIT 1 FORMAT TSV;", rel))
			if err != nil {
				t.Fatal(err)
			}
			m[filepath.Base(f)] = strings.TrimSpace(out)
		}
		return m
	}
	before := units()
	micros := 0
	for _, typ := range before {
		if strings.HasPrefix(typ, "DateTime64(6") {
			micros++
		}
	}
	if len(before) != 3 || !strings.HasPrefix(before[filepath.Base(names[0])], "DateTime64(3") || micros != 1 {
		t.Fatalf("snapshot_time's types before compaction: %v, want two ms files and one µs file", before)
	}
	compactLake(t, lake, nil)
	checkFiles(t, st, []*schema.Table{schema.Instruments})
	if got := digest(t, ch, name, 0); got != want {
		t.Errorf("compacted: %s, want %s", got, want)
	}
	for f, typ := range units() {
		if pq.IsCompacted(f) && !strings.HasPrefix(typ, "DateTime64(6") {
			t.Errorf("compacted file %s has snapshot_time %s, want microseconds", f, typ)
		}
	}
	// A replay of a millisecond snapshot the compacted file holds: parked,
	// then merged in place of its rows.
	loadLake(t, st, lake, 1)
	compactLake(t, lake, nil)
	checkFiles(t, st, []*schema.Table{schema.Instruments})
	if got := digest(t, ch, name, 0); got != want {
		t.Errorf("after a replay and compaction: %s, want %s", got, want)
	}
}
