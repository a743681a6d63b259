package compact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/storage"
)

var day1 = time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)

// snapAt is snapshot k of day d (every 5 minutes).
func snapAt(d time.Time, k int) sinks.Snapshot {
	ts := d.Add(time.Duration(k)*5*time.Minute + 123*time.Millisecond)
	return sinks.Snapshot{Time: ts, RunID: fmt.Sprintf("0193-%s", ts.Format("150405")), Source: "venue.test", Endpoint: "instruments"}
}

// genRecord builds n rows of table t for snap: key columns unique per row
// (in shuffled order, so that sorting matters), every other column random
// from seed, nulls in nullable columns, lists of 0-3 elements.
func genRecord(t *schema.Table, snap sinks.Snapshot, n int, seed uint64) arrow.Record {
	return genRecordNamed(t, snap, n, seed, func(_ *rand.Rand, i int) string { return fmt.Sprintf("BTC-%05d-C", i) })
}

// genRecordNamed is genRecord with row i's instrument_name name(r, i).
func genRecordNamed(t *schema.Table, snap sinks.Snapshot, n int, seed uint64, name func(r *rand.Rand, i int) string) arrow.Record {
	r := rand.New(rand.NewPCG(seed, uint64(snap.Time.UnixMilli())))
	b := array.NewRecordBuilder(memory.DefaultAllocator, t.ArrowSchema())
	defer b.Release()
	order := r.Perm(n)
	for _, i := range order {
		for c, col := range t.Columns {
			f := b.Field(c)
			switch col.Name {
			case "snapshot_time":
				f.(*array.TimestampBuilder).Append(arrow.Timestamp(snap.Time.UnixMilli()))
				continue
			case "run_id":
				f.(*array.StringBuilder).Append(snap.RunID)
				continue
			case "source":
				f.(*array.StringBuilder).Append(snap.Source)
				continue
			case "instrument_name":
				f.(*array.StringBuilder).Append(name(r, i))
				continue
			case "account":
				f.(*array.StringBuilder).Append(fmt.Sprintf("acct-%d", i%3))
				continue
			case "row_index":
				f.(*array.Int64Builder).Append(int64(i))
				continue
			case "endpoint":
				f.(*array.StringBuilder).Append(snap.Endpoint)
				continue
			}
			if col.Nullable && r.IntN(8) == 0 {
				f.AppendNull()
				continue
			}
			if col.List {
				lb := f.(*array.ListBuilder)
				lb.Append(true)
				for range r.IntN(4) {
					appendRandom(lb.ValueBuilder(), col.Type, r)
				}
				continue
			}
			appendRandom(f, col.Type, r)
		}
	}
	return b.NewRecord()
}

func appendRandom(f array.Builder, ty schema.Type, r *rand.Rand) {
	switch ty {
	case schema.String:
		f.(*array.StringBuilder).Append([]string{"BTC", "ETH", "option", "future", "a \"quoted\" ünïcode", ""}[r.IntN(6)])
	case schema.Float64:
		f.(*array.Float64Builder).Append(float64(r.IntN(100000)) / 7)
	case schema.Int64:
		f.(*array.Int64Builder).Append(r.Int64N(1 << 50))
	case schema.Bool:
		f.(*array.BooleanBuilder).Append(r.IntN(2) == 0)
	case schema.TimestampMs:
		f.(*array.TimestampBuilder).Append(arrow.Timestamp(1_790_000_000_000 + r.Int64N(1e10)))
	}
}

// writeSnap writes table t's rows of snap through the Parquet sink, as a
// lake's table format makes it (a compacted day's snapshot parked).
func writeSnap(tb testing.TB, dir string, t *schema.Table, snap sinks.Snapshot, n int, seed uint64) {
	tb.Helper()
	st := storage.NewLocal(dir)
	s, err := pq.New(pq.Options{Store: st, Park: Parking(st)})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	w, err := s.Open(ctx, t, snap)
	if err != nil {
		tb.Fatal(err)
	}
	rec := genRecord(t, snap, n, seed)
	defer rec.Release()
	if err := w.Write(ctx, rec); err != nil {
		tb.Fatal(err)
	}
	if _, err := w.Commit(ctx); err != nil {
		tb.Fatal(err)
	}
}

// rows returns the rows of the glob as DuckDB reads them (union by name),
// each as its JSON text, sorted: a multiset to compare.
func rows(t *testing.T, glob string) []string {
	t.Helper()
	res := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT * FROM read_parquet('%s', union_by_name=true, hive_partitioning=false)`, glob))
	var out []string
	for _, r := range res.Rows {
		m := map[string]any{}
		for i, c := range res.Columns {
			m[c.Name] = r[i]
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}

func sameRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: row differs:\n got %s\nwant %s", what, got[i], want[i])
		}
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// checkSorted reads every compacted file of the partition with DuckDB in
// file order and checks the key never goes down.
func checkSorted(t *testing.T, dir, table string) {
	t.Helper()
	key := schema.SortKey(table)
	cols := strings.Join(key, ", ")
	res := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT %s FROM read_parquet('%s/compacted-*.parquet', file_row_number=true, filename=true) ORDER BY filename, file_row_number`, cols, dir))
	for i := 1; i < len(res.Rows); i++ {
		a, b := res.Rows[i-1], res.Rows[i]
		for k := range key {
			sa, sb := fmt.Sprint(a[k]), fmt.Sprint(b[k])
			if key[k] == "row_index" {
				sa, sb = fmt.Sprintf("%020s", sa), fmt.Sprintf("%020s", sb)
			}
			if sa < sb {
				break
			}
			if sa > sb {
				t.Fatalf("%s: row %d %v comes after %v", dir, i, b, a)
			}
		}
	}
	if len(res.Rows) == 0 {
		t.Fatalf("%s: no rows", dir)
	}
}

// onlyCompacted checks the partition holds one compacted file and nothing
// else, and returns its path.
func onlyCompacted(t *testing.T, part string) string {
	t.Helper()
	got := names(t, part)
	if len(got) != 1 || !pq.IsCompacted(got[0]) || !strings.HasSuffix(got[0], "-000.parquet") {
		t.Fatalf("%s holds %v, want one compacted file", part, got)
	}
	return filepath.Join(part, got[0])
}

func manifestOf(t *testing.T, path string) *pq.Manifest {
	t.Helper()
	m, err := pq.ReadManifest(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCompactKeepsRowsSortsAndIsIdempotent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	day2 := day1.AddDate(0, 0, 1)
	for k := range 6 {
		writeSnap(t, dir, schema.Instruments, snapAt(day1, k), 200, 1)
		writeSnap(t, dir, schema.Runs, snapAt(day1, k), 3, 2)
		s := snapAt(day1, k)
		s.Endpoint = "position"
		writeSnap(t, dir, schema.Rejects, s, 4, 3)
		writeSnap(t, dir, schema.InstrumentEvents, snapAt(day1, k), 30, 4)
	}
	writeSnap(t, dir, schema.Instruments, snapAt(day2, 0), 50, 1)
	tables := []string{"instruments", "runs", "rejects", "instrument_events"}
	before := map[string][]string{}
	for _, tb := range tables {
		before[tb] = rows(t, filepath.Join(dir, tb, "date=2026-11-20", "*.parquet"))
	}
	day2Before := names(t, filepath.Join(dir, "instruments", "date=2026-11-21"))

	now := func() time.Time { return day2.Add(time.Hour) } // day2 is today: not closed
	rep, err := Compact(context.Background(), Options{Target: localLake(dir), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Partitions) != 4 {
		t.Fatalf("compacted %d partitions, want 4: %+v", len(rep.Partitions), rep)
	}
	for _, tb := range tables {
		part := filepath.Join(dir, tb, "date=2026-11-20")
		onlyCompacted(t, part)
		sameRows(t, tb, rows(t, filepath.Join(part, "*.parquet")), before[tb])
		checkSorted(t, part, tb)
		m := manifestOf(t, onlyCompacted(t, part))
		if len(m.Files) != 6 || m.Table != tb || m.Date != "2026-11-20" {
			t.Fatalf("%s manifest: %d files, table %s, date %s", tb, len(m.Files), m.Table, m.Date)
		}
	}
	if got := names(t, filepath.Join(dir, "instruments", "date=2026-11-21")); !slices.Equal(got, day2Before) {
		t.Fatalf("today's partition changed: %v, was %v", got, day2Before)
	}
	// Row groups: one file, zstd, the manifest's rows.
	res := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT DISTINCT compression FROM parquet_metadata('%s')`, onlyCompacted(t, filepath.Join(dir, "instruments", "date=2026-11-20"))))
	if len(res.Rows) != 1 || res.Rows[0][0] != "ZSTD" {
		t.Fatalf("compression: %v", res.Rows)
	}

	// A second compaction has nothing to do.
	m1 := manifestOf(t, onlyCompacted(t, filepath.Join(dir, "instruments", "date=2026-11-20")))
	rep, err = Compact(context.Background(), Options{Target: localLake(dir), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Partitions) != 0 || rep.Skipped != 4 {
		t.Fatalf("second compaction: %+v", rep)
	}
	if m2 := manifestOf(t, onlyCompacted(t, filepath.Join(dir, "instruments", "date=2026-11-20"))); m2.ID != m1.ID {
		t.Fatal("second compaction rewrote the day")
	}
	// --to tomorrow includes today.
	rep, err = Compact(context.Background(), Options{Target: localLake(dir), Now: now, To: "2026-11-22", Tables: []string{"instruments"}})
	if err != nil || len(rep.Partitions) != 1 || rep.Partitions[0].Date != "2026-11-21" {
		t.Fatalf("--to: %+v %v", rep, err)
	}
	// No staging or temp file is left in any table folder, nor anything in stage/tmp.
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		p, _ = filepath.Rel(dir, p)
		if strings.HasPrefix(p, ".compact/") && (strings.Contains(p, "/stage/") || strings.Contains(p, "/tmp/") || strings.Contains(p, "/journal/")) && !d.IsDir() {
			t.Errorf("left behind: %s", p)
		}
		if !strings.HasPrefix(p, ".compact") && !d.IsDir() && strings.HasPrefix(d.Name(), ".") && d.Name() != ".optlake.lock" {
			t.Errorf("hidden file in the lake: %s", p)
		}
		return nil
	})
}

// TestReplayAndLateLoadAfterCompaction: a replay of a compacted snapshot
// (with changed rows, as after a schema change) is parked, readers keep
// seeing every row once, and the next compaction replaces the snapshot's
// rows; a late load of a new snapshot is visible at once and merged by the
// next compaction.
func TestReplayAndLateLoadAfterCompaction(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for k := range 5 {
		writeSnap(t, dir, schema.Instruments, snapAt(day1, k), 100, 1)
	}
	part := filepath.Join(dir, "instruments", "date=2026-11-20")
	glob := filepath.Join(part, "*.parquet")
	now := func() time.Time { return day1.AddDate(0, 0, 2) }
	if _, err := Compact(context.Background(), Options{Target: localLake(dir), Now: now}); err != nil {
		t.Fatal(err)
	}
	compacted := rows(t, glob)

	// Replay snapshot 2 with other values (seed 9) and fewer rows.
	writeSnap(t, dir, schema.Instruments, snapAt(day1, 2), 60, 9)
	onlyCompacted(t, part)
	sameRows(t, "after replay, before compaction", rows(t, glob), compacted)

	// Late load of a snapshot the day never had.
	writeSnap(t, dir, schema.Instruments, snapAt(day1, 7), 80, 1)
	late := rows(t, glob)
	if len(late) != len(compacted)+80 {
		t.Fatalf("after the late load: %d rows, want %d", len(late), len(compacted)+80)
	}

	// Expected after the next compaction: snapshots 0,1,3,4 as before, 2
	// as replayed, 7 as loaded.
	ref := t.TempDir()
	for _, k := range []int{0, 1, 3, 4} {
		writeSnap(t, ref, schema.Instruments, snapAt(day1, k), 100, 1)
	}
	writeSnap(t, ref, schema.Instruments, snapAt(day1, 7), 80, 1)
	writeSnap(t, ref, schema.Instruments, snapAt(day1, 2), 60, 9)
	want := rows(t, filepath.Join(ref, "instruments", "date=2026-11-20", "*.parquet"))

	rep, err := Compact(context.Background(), Options{Target: localLake(dir), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Partitions) != 1 || rep.Partitions[0].Replaced != 100 {
		t.Fatalf("recompaction: %+v", rep)
	}
	sameRows(t, "after recompaction", rows(t, glob), want)
	checkSorted(t, part, "instruments")
	onlyCompacted(t, part)
	if m := manifestOf(t, onlyCompacted(t, part)); len(m.Files) != 6 {
		t.Fatalf("manifest lists %d files, want 6", len(m.Files))
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, ".compact", "pending", "instruments", "date=2026-11-20")); len(ents) != 0 {
		t.Fatalf("parked files left: %d", len(ents))
	}
	// The same replay once more: parked again, compacted again, same rows.
	writeSnap(t, dir, schema.Instruments, snapAt(day1, 2), 60, 9)
	if _, err := Compact(context.Background(), Options{Target: localLake(dir), Now: now}); err != nil {
		t.Fatal(err)
	}
	sameRows(t, "after a second replay", rows(t, glob), want)
}

// accountTable is an inferred account table with the given extra columns.
func accountTable(extra ...schema.Column) *schema.Table {
	return &schema.Table{Name: "position", Columns: append(schema.AccountMetaColumns(""), extra...), Key: schema.AccountKey, PartitionTime: "snapshot_time"}
}

// evolvingAccountTable is an account table's columns over four
// snapshots: three added, one after the other, then one gone.
func evolvingAccountTable() []*schema.Table {
	size := schema.Column{Name: "size", Type: schema.Float64, Nullable: true}
	dir := schema.Column{Name: "direction", Type: schema.String, Nullable: true}
	tags := schema.Column{Name: "tags", Type: schema.String, List: true}
	opened := schema.Column{Name: "opened", Type: schema.TimestampMs, Nullable: true}
	return []*schema.Table{
		accountTable(size),
		accountTable(size, dir),
		accountTable(size, dir, tags),
		accountTable(dir, tags, opened), // size gone
	}
}

func TestEvolvingAccountSchema(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	versions := evolvingAccountTable()
	for k := range 8 {
		s := snapAt(day1, k)
		s.Endpoint = "position"
		writeSnap(t, dir, versions[k/2], s, 25, uint64(k))
	}
	part := filepath.Join(dir, "position", "date=2026-11-20")
	glob := filepath.Join(part, "*.parquet")
	before := rows(t, glob)
	if _, err := Compact(context.Background(), Options{Target: localLake(dir), Now: func() time.Time { return day1.AddDate(0, 0, 1) }}); err != nil {
		t.Fatal(err)
	}
	sameRows(t, "position", rows(t, glob), before)
	checkSorted(t, part, "position")
	res := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT count(*) FILTER (WHERE size IS NULL), count(*) FILTER (WHERE opened IS NOT NULL), count(*) FROM '%s'`, onlyCompacted(t, part)))
	if fmt.Sprint(res.Rows[0][2]) != "200" {
		t.Fatalf("rows: %v", res.Rows)
	}
}

// TestReaderNeverSeesDuplicatesOrGaps reads the partition in a loop (list,
// then read every file, like a query engine's glob) while late loads and
// compactions alternate; every complete read sees each row exactly once.
func TestReaderNeverSeesDuplicatesOrGaps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	part := filepath.Join(dir, "instruments", "date=2026-11-20")
	now := func() time.Time { return day1.AddDate(0, 0, 1) }
	writeSnap(t, dir, schema.Instruments, snapAt(day1, 0), 300, 1)
	var lower, upper atomic.Int64 // rows surely committed; rows maybe committed
	lower.Store(300)
	upper.Store(300)
	var stop atomic.Bool
	var reads, races atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			lo := lower.Load()
			n, dup, err := readPartition(part)
			hi := upper.Load()
			if err != nil {
				if os.IsNotExist(err) || strings.Contains(err.Error(), "no such file") {
					races.Add(1) // listed before a swap, opened after: an error, never wrong rows
					continue
				}
				errc <- err
				return
			}
			if dup != "" {
				errc <- fmt.Errorf("row %s seen twice", dup)
				return
			}
			if n < lo || n > hi {
				errc <- fmt.Errorf("read %d rows, want between %d and %d", n, lo, hi)
				return
			}
			reads.Add(1)
		}
	}()
	for k := 1; k <= 12; k++ {
		upper.Add(300)
		writeSnap(t, dir, schema.Instruments, snapAt(day1, k), 300, 1)
		lower.Add(300)
		if k%3 == 0 {
			// and a replay of a compacted snapshot: same rows, parked
			writeSnap(t, dir, schema.Instruments, snapAt(day1, k-2), 300, 1)
		}
		if _, err := Compact(context.Background(), Options{Target: localLake(dir), Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	for reads.Load() < 5 {
		time.Sleep(10 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	n, dup, err := readPartition(part)
	if err != nil || dup != "" || n != 13*300 {
		t.Fatalf("final read: %d rows (want %d), dup %q, %v", n, 13*300, dup, err)
	}
	t.Logf("%d complete reads, %d reads raced a swap", reads.Load(), races.Load())
}

// readPartition lists the partition's .parquet files and reads their keys:
// rows read, and the first key seen twice.
func readPartition(part string) (int64, string, error) {
	ents, err := os.ReadDir(part)
	if err != nil {
		return 0, "", err
	}
	seen := map[string]bool{}
	var n int64
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".parquet") {
			continue
		}
		r, err := file.OpenParquetFile(filepath.Join(part, e.Name()), false)
		if err != nil {
			return 0, "", err
		}
		fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{BatchSize: 4096}, memory.DefaultAllocator)
		if err != nil {
			r.Close()
			return 0, "", err
		}
		tbl, err := fr.ReadTable(context.Background())
		r.Close()
		if err != nil {
			return 0, "", err
		}
		names := tbl.Column(tbl.Schema().FieldIndices("instrument_name")[0]).Data().Chunks()
		times := tbl.Column(tbl.Schema().FieldIndices("snapshot_time")[0]).Data().Chunks()
		for c := range names {
			ns, ts := names[c].(*array.String), times[c].(*array.Timestamp)
			for i := range ns.Len() {
				k := fmt.Sprintf("%s@%d", ns.Value(i), ts.Value(i))
				if seen[k] {
					tbl.Release()
					return n, k, nil
				}
				seen[k] = true
				n++
			}
		}
		tbl.Release()
	}
	return n, "", nil
}

// crashAt is a Crash hook that stops a compaction at step, as a crash
// would: the goroutine unwinds without running the publish's later steps.
type crashed struct{ step string }

func crashAt(step string) func(string) {
	return func(s string) {
		if s == step {
			panic(crashed{s})
		}
	}
}

// compactCrashing runs Compact and reports whether it stopped at the hook.
func compactCrashing(t *testing.T, opt Options) bool {
	t.Helper()
	return crashing(t, func() error {
		_, err := Compact(context.Background(), opt)
		return err
	})
}

// crashing runs fn and reports whether it stopped at a crash hook (a
// crashed panic); another panic goes on, an error fails t.
func crashing(t *testing.T, fn func() error) (stopped bool) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(crashed); !ok {
				panic(r)
			}
			stopped = true
		}
	}()
	if err := fn(); err != nil {
		t.Fatal(err)
	}
	return false
}

// The fallback swap (two renames, for filesystems without
// RENAME_EXCHANGE), stopped at every step including between its renames:
// the next compaction finishes or undoes it, rows exact. Also a small
// chunk budget and fan-in (multi-level merge), small row groups and a
// tiny file size (split files), and the trash emptied after its grace.
func TestFallbackSwapSplitFilesAndMultiLevelMerge(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	for k := range 12 {
		writeSnap(t, base, schema.Instruments, snapAt(day1, k), 400, 1)
	}
	want := rows(t, filepath.Join(base, "instruments", "date=2026-11-20", "*.parquet"))
	for _, step := range append([]string{"moved"}, Steps...) {
		t.Run(step, func(t *testing.T) {
			t.Parallel() // each step in its own copy of the lake, with its own clock
			now := day1.AddDate(0, 0, 1)
			clock := func() time.Time { return now }
			dir := filepath.Join(t.TempDir(), "data")
			if out, err := exec.Command("cp", "-a", base, dir).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v %s", err, out)
			}
			part := filepath.Join(dir, "instruments", "date=2026-11-20")
			opt := Options{Now: clock, ChunkBytes: 64 << 10, FanIn: 3, MergeBatchBytes: 64 << 10, RowGroupRows: 1000, MaxFileBytes: 8 << 10, SampleRows: 500}
			opt.Target = &Folders{St: noExchange{storage.NewLocal(dir)}, Now: clock, Crash: crashAt(step)}
			if !compactCrashing(t, opt) {
				t.Fatalf("never reached %s", step)
			}
			if step != "moved" { // between the renames the day is missing: the fallback's window
				sameRows(t, "right after the crash", rows(t, filepath.Join(part, "*.parquet")), want)
			}
			opt.Target = &Folders{St: noExchange{storage.NewLocal(dir)}, Now: clock}
			if _, err := Compact(context.Background(), opt); err != nil {
				t.Fatal(err)
			}
			sameRows(t, "after the next compaction", rows(t, filepath.Join(part, "*.parquet")), want)
			checkSorted(t, part, "instruments")
			got := names(t, part)
			if len(got) < 3 {
				t.Fatalf("want the day split into several files, got %v", got)
			}
			for i, n := range got {
				if !pq.IsCompacted(n) || !strings.HasSuffix(n, fmt.Sprintf("-%03d.parquet", i)) {
					t.Fatalf("unexpected files %v", got)
				}
			}
			res := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT max(row_group_num_rows) FROM parquet_metadata('%s/*.parquet')`, part))
			if fmt.Sprint(res.Rows[0][0]) != "1000" {
				t.Fatalf("row groups: %v", res.Rows)
			}
			// The trash keeps the replaced files for the grace period only.
			trash := filepath.Join(dir, ".compact", "trash")
			if ents, _ := os.ReadDir(trash); len(ents) == 0 {
				t.Fatal("nothing in the trash")
			}
			now = now.Add(2 * DefaultGrace)
			if err := (&Folders{St: storage.NewLocal(dir), Now: clock}).Recover(context.Background()); err != nil {
				t.Fatal(err)
			}
			if ents, _ := os.ReadDir(trash); len(ents) != 0 {
				t.Fatalf("trash not emptied after the grace period: %d", len(ents))
			}
		})
	}
}

// placeFails is a file system without RENAME_EXCHANGE whose rename of the
// stage into the partition's place fails (as on EIO), after the partition
// went to the trash.
type placeFails struct{ noExchange }

func (s placeFails) Rename(ctx context.Context, from, to string) error {
	if strings.HasPrefix(from, stageDir) && !strings.HasPrefix(to, trashDir) {
		return fmt.Errorf("rename %s: %w", from, syscall.EIO)
	}
	return s.noExchange.Rename(ctx, from, to)
}

// A fallback swap whose second rename fails leaves the day missing and the
// compaction failed, but the stage stays for the journal: the next
// compaction puts it in place, rows exact (without it the day would be
// lost).
func TestFallbackSwapFailedPlaceIsRecovered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	for k := range 3 {
		writeSnap(t, dir, schema.Instruments, snapAt(day1, k), 100, 1)
	}
	part := filepath.Join(dir, "instruments", "date=2026-11-20")
	want := rows(t, filepath.Join(part, "*.parquet"))
	now := func() time.Time { return day1.AddDate(0, 0, 1) }
	l := &Folders{St: placeFails{noExchange{storage.NewLocal(dir)}}, Now: now}
	if _, err := Compact(ctx, Options{Target: l, Now: now}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("compaction: %v, want the failed rename's EIO", err)
	}
	l.Close()
	if _, err := os.Stat(part); !os.IsNotExist(err) {
		t.Fatalf("the day is there (%v): the failure was not between the renames", err)
	}
	if _, err := Compact(ctx, Options{Target: localLake(dir), Now: now}); err != nil {
		t.Fatal(err)
	}
	onlyCompacted(t, part)
	sameRows(t, "after recovery", rows(t, filepath.Join(part, "*.parquet")), want)
}

// localLake is the lake of the local folder dir.
func localLake(dir string) *Folders { return &Folders{St: storage.NewLocal(dir)} }

// noExchange is a local folder whose file system refuses RENAME_EXCHANGE:
// publishes take the fallback swap.
type noExchange struct{ *storage.Local }

func (noExchange) Exchange(context.Context, string, string) error { return errors.ErrUnsupported }

// notLocal hides a store's optional abilities (storage.Swapper,
// storage.LocalFolder): a local folder published as a bucket is.
type notLocal struct{ storage.Store }
