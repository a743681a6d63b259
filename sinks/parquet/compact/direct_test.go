package compact

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/internal/arrowpool"
	"github.com/optlake/optlake/schema"
	pq "github.com/optlake/optlake/sinks/parquet"
)

// daySnap is one replayed snapshot of a test day: snapshot k of day1, n
// instruments rows whose names are drawn from names (so that some rows
// share the whole key: same name, same snapshot), values from seed.
type daySnap struct {
	k, n, names int
	seed        uint64
}

// daySnaps are count snapshots of varying sizes, committed out of their
// time order.
func daySnaps(count, rows, names int, seed uint64) []daySnap {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]daySnap, count)
	for i, k := range r.Perm(count) {
		out[i] = daySnap{k: k, n: rows/2 + r.IntN(rows), names: names, seed: seed + uint64(i)}
	}
	return out
}

// dayRun is what replayDay saw of the day before its publish.
type dayStats struct {
	packed, spilled, inMemory int // runs
	direct                    bool
	packFiles                 []string // left in the spill folder after the publish
}

// replayDay replays snaps into a fresh lake through a DaySink of opt and
// writerBytes and returns the day's one file, its manifest's ID blanked
// (random per compaction), and what the day's runs were.
func replayDay(t *testing.T, opt Options, writerBytes int64, snaps []daySnap) ([]byte, dayStats) {
	t.Helper()
	return replayTableDay(t, schema.Instruments, opt, writerBytes, snaps, nil)
}

// replayTableDay is replayDay of table tbl, into a lake that before
// (when set) fills first.
func replayTableDay(t *testing.T, tbl *schema.Table, opt Options, writerBytes int64, snaps []daySnap, before func(t *testing.T, dir string)) ([]byte, dayStats) {
	t.Helper()
	files, st := replayDayFiles(t, tbl, opt, writerBytes, snaps, before)
	if len(files) != 1 {
		t.Fatalf("the day holds %d files, want one", len(files))
	}
	return files[0], st
}

// replayDayFiles is replayTableDay of a day of any number of files: each
// file's bytes (the manifest ID blanked), in name order.
func replayDayFiles(t *testing.T, tbl *schema.Table, opt Options, writerBytes int64, snaps []daySnap, before func(t *testing.T, dir string)) ([][]byte, dayStats) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	if before != nil {
		before(t, dir)
	}
	lake := localLake(dir)
	fb, err := pq.New(pq.Options{Store: lake.St, Park: Parking(lake.St)})
	if err != nil {
		t.Fatal(err)
	}
	opt.Target = lake
	ds, err := NewDaySink(DayOptions{Fallback: fb, WriterBytes: writerBytes, Compact: opt})
	if err != nil {
		t.Fatal(err)
	}
	commitSnaps(t, ds, tbl, snaps, 0)
	var st dayStats
	p := Partition{Table: tbl.Name, Date: day1.Format(time.DateOnly)}
	d := ds.days[p]
	d.mu.Lock()
	d.wait()
	for _, r := range d.runs {
		switch {
		case r.packed != nil:
			st.packed++
		case r.Path != "":
			st.spilled++
		default:
			st.inMemory++
		}
	}
	d.mu.Unlock()
	r, err := d.replayed()
	if err != nil {
		t.Fatal(err)
	}
	pr, err := PublishDay(ctx, ds.opt.Compact, p, r)
	if err != nil {
		t.Fatal(err)
	}
	st.direct = pr.direct
	st.packFiles = packFiles(t, dir)
	if err := ds.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var files [][]byte
	for _, name := range names(t, partDir(dir, tbl.Name, day1)) {
		if !pq.IsCompacted(name) {
			t.Fatalf("%s in the day's partition", name)
		}
		b, err := os.ReadFile(filepath.Join(partDir(dir, tbl.Name, day1), name))
		if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimPrefix(name, "compacted-")[:16]
		if !bytes.Contains(b, []byte(id)) {
			t.Fatalf("no manifest ID %q in %s", id, name)
		}
		files = append(files, bytes.ReplaceAll(b, []byte(id), []byte("0123456789abcdef")))
	}
	return files, st
}

// commitSnaps writes and commits snaps of table tbl into the sink, their
// values from their seeds + seed.
func commitSnaps(t *testing.T, ds *DaySink, tbl *schema.Table, snaps []daySnap, seed uint64) {
	t.Helper()
	ctx := context.Background()
	for _, s := range snaps {
		snap := snapAt(day1, s.k)
		w, err := ds.Open(ctx, tbl, snap)
		if err != nil {
			t.Fatal(err)
		}
		rec := genRecordNamed(tbl, snap, s.n, s.seed+seed, func(r *rand.Rand, _ int) string { return fmt.Sprintf("ETH-%04d-P", r.IntN(s.names)) })
		err = w.Write(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// needCores skips a test of packs and the direct writer where the day
// neither packs nor is written directly: never for the flat tables, whose
// ColumnWorkers is 1 or more also on one core (the "one core" case of
// TestReplayedDayFallsBackToTheMerge).
func needCores(t *testing.T) {
	t.Helper()
	if pq.ColumnWorkers(schema.Instruments.ArrowSchema()) == 0 {
		t.Skip("one core: a replayed day is merged, neither packed nor written directly")
	}
}

// packFiles are the pack files under dir.
func packFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".pack") {
			out = append(out, path)
		}
		return nil
	})
	return out
}

// A replayed day packed past its budget and written without a merge
// (direct.go) is byte for byte the file the merges write: the same rows
// in the same order (rows sharing the whole key in the merge's order),
// the same pages, row groups and statistics; and so is a packed day
// merged after all (unpacked). No pack file is left.
func TestReplayedDayWrittenWithoutMergeIsTheMergedFile(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		opt        Options
		snaps      []daySnap
		wantPacked bool
		wantMix    bool // packed runs and runs in memory
	}{
		{"many packs, row groups of 1000 rows", Options{ChunkBytes: 96 << 10, RowGroupRows: 1000}, daySnaps(24, 160, 90, 1), true, false},
		{"packed and in memory", Options{ChunkBytes: 600 << 10, RowGroupRows: 1000}, daySnaps(29, 160, 90, 6), true, true},
		{"packs, small pages, many duplicates", Options{ChunkBytes: 128 << 10, RowGroupRows: 700, PageBytes: 2 << 10}, daySnaps(20, 200, 15, 2), true, false},
		{"all in memory", Options{ChunkBytes: 1 << 30, RowGroupRows: 1000}, daySnaps(10, 200, 300, 3), false, false},
		{"batches cut by row groups", Options{ChunkBytes: 2 << 20, RowGroupRows: 10000}, daySnaps(40, 700, 500, 4), true, false},
		{"one snapshot", Options{ChunkBytes: 1 << 30}, daySnaps(1, 300, 100, 5), false, false},
	}
	needCores(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // each in its own lakes
			merged := c.opt
			merged.noPack, merged.noDirect = true, true
			want, st := replayDay(t, merged, 64<<20, c.snaps)
			if st.packed > 0 || st.direct {
				t.Fatalf("the reference packed %d runs, direct %v", st.packed, st.direct)
			}
			unpacked := c.opt
			unpacked.noDirect = true
			got, st := replayDay(t, unpacked, 64<<20, c.snaps)
			if (st.packed > 0) != c.wantPacked || st.direct {
				t.Fatalf("packed %d runs, direct %v: the case does not exercise its path", st.packed, st.direct)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("packed and merged: a file of %d bytes, the merge's %d bytes differs", len(got), len(want))
			}
			if len(st.packFiles) > 0 {
				t.Fatalf("left behind: %v", st.packFiles)
			}
			got, st = replayDay(t, c.opt, 64<<20, c.snaps)
			if (st.packed > 0) != c.wantPacked || !st.direct || c.wantMix && st.inMemory == 0 {
				t.Fatalf("packed %d runs (%d in memory), direct %v: the case does not exercise its path", st.packed, st.inMemory, st.direct)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("written directly: a file of %d bytes, the merge's %d bytes differs", len(got), len(want))
			}
			if len(st.packFiles) > 0 {
				t.Fatalf("left behind: %v", st.packFiles)
			}
		})
	}
}

// The day is merged as before whenever it cannot be written directly:
// rows of an earlier compaction or another run's snapshot file in the
// partition, a snapshot large enough to spill its own run, a key whose
// rest is not integers (nothing packed); a key with two integer columns
// after the dictionary's is written directly. Either way the file is the
// merge's.
func TestReplayedDayFallsBackToTheMerge(t *testing.T) {
	snaps := daySnaps(16, 150, 60, 11)
	compacted := func(t *testing.T, dir string) { // an earlier replay's compacted day of three of the snapshots
		if _, err := os.Stat(dir); err != nil {
			t.Fatal(err)
		}
		replayInto(t, dir, snaps[:3])
	}
	later := func(t *testing.T, dir string) { writeSnap(t, dir, schema.Instruments, snapAt(day1, 60), 90, 8) }
	cases := []struct {
		name        string
		tbl         *schema.Table
		writerBytes int64
		before      func(t *testing.T, dir string)
		wantPacked  bool
		wantDirect  bool
	}{
		{"earlier compaction", schema.Instruments, 64 << 20, compacted, true, false},
		{"a later run's file", schema.Instruments, 64 << 20, later, true, false},
		{"a snapshot spills", schema.Instruments, 16 << 10, nil, false, false},
		{"string after the dictionary's columns", schema.Runs, 64 << 20, nil, false, false},
		{"two integers after the dictionary's columns", schema.Rejects, 64 << 20, nil, true, true},
		{"one core (packed and direct as on two)", schema.Instruments, 64 << 20, nil, true, true},
		{"more than the direct writer's memory", schema.Instruments, 64 << 20, nil, true, false},
	}
	cores := pq.ColumnWorkers(schema.Instruments.ArrowSchema()) > 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if strings.HasPrefix(c.name, "one core") {
				// Not in parallel: GOMAXPROCS is the process's. The
				// others wait for the test's function to return.
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			} else {
				t.Parallel() // each in its own lakes
			}
			if !cores && !strings.HasPrefix(c.name, "one core") {
				c.wantPacked, c.wantDirect = false, false
			}
			opt := Options{ChunkBytes: 64 << 10, RowGroupRows: 500}
			if strings.HasPrefix(c.name, "more than") {
				opt.directBytes = 64 << 10 // the day's order alone needs more
			}
			merged := opt
			merged.noPack, merged.noDirect = true, true
			want, _ := replayTableDay(t, c.tbl, merged, c.writerBytes, snaps, c.before)
			got, st := replayTableDay(t, c.tbl, opt, c.writerBytes, snaps, c.before)
			if (st.packed > 0) != c.wantPacked || st.direct != c.wantDirect {
				t.Fatalf("packed %d runs, direct %v; want packed %v, direct %v", st.packed, st.direct, c.wantPacked, c.wantDirect)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("a file of %d bytes, the merge's %d bytes differs", len(got), len(want))
			}
			if len(st.packFiles) > 0 {
				t.Fatalf("left behind: %v", st.packFiles)
			}
		})
	}
}

// A day whose file the merge would split (its bytes past MaxFileBytes
// before its last batch: here row groups of 2 rows, whose Parquet is many
// times its Arrow bytes) is merged after all, into the merge's files,
// not written directly as one file past the limit.
func TestReplayedDaySplitAsTheMergeSplitsIt(t *testing.T) {
	t.Parallel()
	needCores(t)
	snaps := daySnaps(4, 60, 20, 21)
	opt := Options{ChunkBytes: 32 << 10, RowGroupRows: 2, MaxFileBytes: 100 << 10, CompressionLevel: 1}
	merged := opt
	merged.noPack, merged.noDirect = true, true
	want, _ := replayDayFiles(t, schema.Instruments, merged, 64<<20, snaps, nil)
	if len(want) < 2 {
		t.Fatalf("the merge wrote %d files: the case does not split", len(want))
	}
	got, st := replayDayFiles(t, schema.Instruments, opt, 64<<20, snaps, nil)
	if st.packed == 0 || st.direct {
		t.Fatalf("packed %d runs, direct %v: want packed and merged", st.packed, st.direct)
	}
	if len(got) != len(want) {
		t.Fatalf("%d files, the merge's %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("file %d differs from the merge's", i)
		}
	}
	if len(st.packFiles) > 0 {
		t.Fatalf("left behind: %v", st.packFiles)
	}
}

// replayInto replays snaps into the lake in dir (merged: the default
// path is not what is tested there).
func replayInto(t *testing.T, dir string, snaps []daySnap) {
	t.Helper()
	ctx := context.Background()
	lake := localLake(dir)
	fb, err := pq.New(pq.Options{Store: lake.St, Park: Parking(lake.St)})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := NewDaySink(DayOptions{Fallback: fb, Compact: Options{Target: lake, noPack: true, noDirect: true}})
	if err != nil {
		t.Fatal(err)
	}
	commitSnaps(t, ds, schema.Instruments, snaps, 99)
	if err := ds.FlushDay(ctx, day1.Format(time.DateOnly)); err != nil {
		t.Fatal(err)
	}
	if err := ds.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// packingDay loads snaps into a DaySink of opt on a fresh lake, waits for
// its packs and returns the sink, the lake's folder and the day's pack
// file (failing when nothing was packed).
func packingDay(t *testing.T, opt Options, snaps []daySnap) (*DaySink, string, string) {
	t.Helper()
	needCores(t)
	dir := t.TempDir()
	lake := localLake(dir)
	fb, err := pq.New(pq.Options{Store: lake.St, Park: Parking(lake.St)})
	if err != nil {
		t.Fatal(err)
	}
	opt.Target = lake
	ds, err := NewDaySink(DayOptions{Fallback: fb, WriterBytes: 64 << 20, Compact: opt})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		replaySnap(t, ds, schema.Instruments, snapAt(day1, s.k), s.n, s.seed, true)
	}
	d := ds.days[Partition{Table: "instruments", Date: day1.Format(time.DateOnly)}]
	d.mu.Lock()
	d.wait()
	pf := d.pack
	d.mu.Unlock()
	if pf == nil {
		t.Fatal("nothing packed: the test does not exercise packs")
	}
	return ds, dir, pf.f.Name()
}

// A damaged pack file fails the day's publish (direct or merged after
// all) with an error, not a crash or wrong rows: the partition is left
// as it was, and the pack file is deleted.
func TestDamagedPackFailsTheDay(t *testing.T) {
	damages := []struct {
		name string
		do   func(t *testing.T, path string, strike packedCol)
	}{
		// the file still reads, node by node: only the checksum tells
		{"a value changed", func(t *testing.T, path string, strike packedCol) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b := make([]byte, 1)
			at := strike.off + strike.n - 3 // in the last value (the node ends with its children's count)
			if _, err := f.ReadAt(b, at); err != nil {
				t.Fatal(err)
			}
			b[0] ^= 0x01
			if _, err := f.WriteAt(b, at); err != nil {
				t.Fatal(err)
			}
		}},
		{"a byte flipped", func(t *testing.T, path string, _ packedCol) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x40
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated", func(t *testing.T, path string, _ packedCol) {
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, st.Size()/3); err != nil {
				t.Fatal(err)
			}
		}},
		{"zeroed", func(t *testing.T, path string, _ packedCol) {
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, make([]byte, st.Size()), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, direct := range []bool{true, false} {
		for _, dmg := range damages {
			t.Run(fmt.Sprintf("%s, direct %v", dmg.name, direct), func(t *testing.T) {
				ds, dir, path := packingDay(t, Options{ChunkBytes: 96 << 10, noDirect: !direct}, daySnaps(12, 150, 80, 21))
				d := ds.days[Partition{Table: "instruments", Date: day1.Format(time.DateOnly)}]
				var strike packedCol
				for _, r := range d.runs {
					if g := r.packed; g != nil {
						strike = g.runs[0].recs[0].cols[g.u.FieldIndices("strike")[0]]
						break
					}
				}
				dmg.do(t, path, strike)
				flushFailsOnPack(t, ds, dir)
			})
		}
	}
}

// A day dropped (the sink closed before its FlushDay) deletes its pack
// file.
func TestDroppedDayDeletesItsPack(t *testing.T) {
	ds, dir, path := packingDay(t, Options{ChunkBytes: 96 << 10}, daySnaps(12, 150, 80, 22))
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	ds.days[Partition{Table: "instruments", Date: day1.Format(time.DateOnly)}].drop()
	if left := packFiles(t, dir); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
	if err := ds.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The direct writer's order is the key's (nulls in every key column, ties
// of the whole key), and its dictionary columns, made from the values of
// the rows' ranks, are the columns the rows hold.
func TestDirectOrderAndKeyColumns(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	d := newKeyDict(dictSchema, dictKey)
	pool := arrowpool.New(1 << 20)
	var runs []Run
	defer func() { dropRuns(runs) }()
	for k := range 5 {
		so := &sorter{mem: memory.DefaultAllocator, pool: pool, u: dictSchema, key: dictKey, budget: 1 << 30, dict: d}
		for _, rec := range dictRecords(r, 200, 70, int64(1000*k)) {
			err := so.add(rec)
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
		}
		m, _ := so.sorted()
		if m.ids == nil {
			t.Fatal("a run without ids")
		}
		runs = append(runs, Run{Schema: dictSchema, mem: m, keyed: true})
	}
	units, refs, start, err := directOrder(runs, d.ranks(), d.cols)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 1000 {
		t.Fatalf("%d rows in the order, want 1000", len(refs))
	}
	for i := 1; i < len(refs); i++ {
		a, b := refs[i-1], refs[i]
		if c := compareRows(units[a.rec].kv, int(a.row), units[b.rec].kv, int(b.row)); c > 0 {
			t.Fatalf("row %d of the order sorts before row %d", i, i-1)
		}
	}
	for c := range d.cols {
		var kv keyValues
		kv.vals, kv.valid = d.prefixValues(c)
		arrs := make([]arrow.Array, len(units))
		for k, u := range units {
			arrs[k] = u.rec.Column(c)
		}
		for lo := 0; lo < len(refs); lo += 77 {
			hi := min(lo+77, len(refs))
			want, err := gatherArrays(pool, arrow.BinaryTypes.String, arrs, refs[lo:hi])
			if err != nil {
				t.Fatal(err)
			}
			got, err := keyColumn(pool, arrow.BinaryTypes.String, start, kv, lo, hi)
			if err != nil {
				t.Fatal(err)
			}
			if !array.Equal(got, want) {
				t.Fatalf("column %d, rows %d-%d:\n got %v\nwant %v", c, lo, hi, got, want)
			}
			got.Release()
			want.Release()
		}
	}
}

// sortRanks compares a rest of the key of one integer column without
// nulls as integers: the order is the one of compareRowsFrom's stable
// sort, ties (many here) in the order the rows came.
func TestSortRanksByIntegers(t *testing.T) {
	r := rand.New(rand.NewPCG(103, 2))
	d := newKeyDict(dictSchema, dictKey)
	pool := arrowpool.New(1 << 20)
	var runs []Run
	defer func() { dropRuns(runs) }()
	names := []string{"A", "AB", "BTC-1", "BTC-10", "\xff"}
	for k := range 4 {
		b := array.NewRecordBuilder(memory.DefaultAllocator, dictSchema)
		for i := range 600 {
			b.Field(0).(*array.StringBuilder).Append("s")
			b.Field(1).(*array.StringBuilder).Append(names[r.IntN(len(names))])
			b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(r.IntN(4) - 2))
			b.Field(3).(*array.Int64Builder).Append(int64(1000*k + i))
		}
		rec := b.NewRecord()
		b.Release()
		so := &sorter{mem: memory.DefaultAllocator, pool: pool, u: dictSchema, key: dictKey, budget: 1 << 30, dict: d}
		err := so.add(rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		m, _ := so.sorted()
		runs = append(runs, Run{Schema: dictSchema, mem: m, keyed: true})
	}
	units, refs, start, err := directOrder(runs, d.ranks(), d.cols)
	if err != nil {
		t.Fatal(err)
	}
	if restInts(units, d.cols) == nil {
		t.Fatal("snapshot_time not taken as integers")
	}
	for k := range len(start) - 1 { // each rank's rows in another order
		s := refs[start[k]:start[k+1]]
		r.Shuffle(len(s), func(a, b int) { s[a], s[b] = s[b], s[a] })
	}
	want := slices.Clone(refs)
	sortRanks(units, want, start, d.cols, false)
	sortRanks(units, refs, start, d.cols, true)
	if !slices.Equal(refs, want) {
		t.Fatal("the ranks sorted as integers are not in compareRowsFrom's stable order")
	}
}
