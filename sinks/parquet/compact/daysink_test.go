package compact

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	pq "github.com/optlake/optlake/sinks/parquet"
)

var day2 = day1.AddDate(0, 0, 1)

// newDaySink is a replay sink on the lake with small memory budgets, so that
// writers and days spill runs and the merge works through them.
func newDaySink(t *testing.T, lake *Folders) *DaySink {
	t.Helper()
	fb, err := pq.New(pq.Options{Store: lake.St, Park: Parking(lake.St)})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := NewDaySink(DayOptions{Fallback: fb, WriterBytes: 16 << 10, Compact: Options{Target: lake, ChunkBytes: 64 << 10, FanIn: 4}})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// replaySnap writes table t's rows of snap into the day sink (committed,
// or aborted).
func replaySnap(t *testing.T, ds *DaySink, tbl *schema.Table, snap sinks.Snapshot, n int, seed uint64, commit bool) {
	t.Helper()
	ctx := context.Background()
	w, err := ds.Open(ctx, tbl, snap)
	if err != nil {
		t.Fatal(err)
	}
	rec := genRecord(tbl, snap, n, seed)
	defer rec.Release()
	if err := w.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if !commit {
		if err := w.Abort(); err != nil {
			t.Fatal(err)
		}
		return
	}
	c, err := w.Commit(ctx)
	if err != nil || c.Rows != int64(n) {
		t.Fatalf("commit: %+v, %v", c, err)
	}
}

func partDir(dir, table string, d time.Time) string {
	return filepath.Join(dir, table, "date="+d.Format(time.DateOnly))
}

// A replay through the day sink gives each table's day one compacted
// file, sorted, with exactly the rows of the per-snapshot layout: the
// replayed snapshots' earlier files replaced, a later run's file of the
// same day kept (merged in), an aborted snapshot absent. A second replay
// of one snapshot over the compacted day replaces its rows, and a
// compaction afterwards finds nothing to do.
func TestDaySinkWritesTheCompactedLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, ref := t.TempDir(), t.TempDir()
	for _, d := range []time.Time{day1, day2} {
		for k := range 6 {
			writeSnap(t, dir, schema.Instruments, snapAt(d, k), 150, 9) // what the replay replaces
			writeSnap(t, ref, schema.Instruments, snapAt(d, k), 150+k, 1)
		}
	}
	writeSnap(t, dir, schema.Instruments, snapAt(day1, 30), 70, 3) // a later run's, not replayed
	writeSnap(t, ref, schema.Instruments, snapAt(day1, 30), 70, 3)
	rj := snapAt(day1, 1)
	rj.Endpoint = "tickers"
	writeSnap(t, ref, schema.Rejects, rj, 40, 1)

	lake := localLake(dir)
	ds := newDaySink(t, lake)
	for _, d := range []time.Time{day1, day2} {
		var wg sync.WaitGroup // snapshots load at once, as replay's do
		for k := range 6 {
			wg.Go(func() {
				replaySnap(t, ds, schema.Instruments, snapAt(d, k), 150+k, 1, true)
				if d == day1 && k == 1 {
					replaySnap(t, ds, schema.Rejects, rj, 40, 1, true)
				}
			})
		}
		wg.Wait()
		replaySnap(t, ds, schema.Instruments, snapAt(d, 7), 50, 1, false) // a snapshot that failed
		if err := ds.FlushDay(ctx, d.Format(time.DateOnly)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ds.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		table string
		d     time.Time
		files int
	}{{"instruments", day1, 7}, {"instruments", day2, 6}, {"rejects", day1, 1}} {
		part, want := partDir(dir, c.table, c.d), partDir(ref, c.table, c.d)
		f := onlyCompacted(t, part)
		checkSorted(t, part, c.table)
		sameRows(t, part, rows(t, filepath.Join(part, "*.parquet")), rows(t, filepath.Join(want, "*.parquet")))
		if m := manifestOf(t, f); len(m.Files) != c.files {
			t.Fatalf("%s: manifest lists %d files, want %d", part, len(m.Files), c.files)
		}
	}

	// Replay snapshot 2 of day 1 again, with other values, over the
	// compacted day.
	ds = newDaySink(t, lake)
	replaySnap(t, ds, schema.Instruments, snapAt(day1, 2), 90, 5, true)
	if err := ds.FlushDay(ctx, day1.Format(time.DateOnly)); err != nil {
		t.Fatal(err)
	}
	ds.Close(ctx)
	os.Remove(filepath.Join(partDir(ref, "instruments", day1), filepath.Base(pq.Path(schema.Instruments, snapAt(day1, 2)))))
	writeSnap(t, ref, schema.Instruments, snapAt(day1, 2), 90, 5)
	part := partDir(dir, "instruments", day1)
	onlyCompacted(t, part)
	checkSorted(t, part, "instruments")
	sameRows(t, "second replay", rows(t, filepath.Join(part, "*.parquet")), rows(t, filepath.Join(partDir(ref, "instruments", day1), "*.parquet")))

	rep, err := Compact(ctx, Options{Target: lake, Now: func() time.Time { return day2.AddDate(0, 0, 3) }})
	if err != nil || len(rep.Partitions) != 0 {
		t.Fatalf("compaction after the replay: %+v, %v", rep, err)
	}
}

// A replay stopped at every step of its day's publish (as a crash would)
// leaves the day readable — its old files or its new one, no row twice or
// missing — and the next replay recovers and writes it exactly.
func TestDaySinkCrashAtEveryStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ref := t.TempDir()
	for k := range 4 {
		writeSnap(t, ref, schema.Instruments, snapAt(day1, k), 120, 1)
	}
	want := rows(t, filepath.Join(partDir(ref, "instruments", day1), "*.parquet"))
	for _, step := range append(slices.Clone(MergeSteps), Steps...) {
		t.Run(step, func(t *testing.T) {
			t.Parallel() // each step in its own lake
			dir := t.TempDir()
			for k := range 4 {
				writeSnap(t, dir, schema.Instruments, snapAt(day1, k), 120, 1)
			}
			lake := localLake(dir)
			lake.Crash = crashAt(step)
			ds := newDaySink(t, lake)
			ds.opt.Compact.Crash = crashAt(step)
			for k := range 4 {
				replaySnap(t, ds, schema.Instruments, snapAt(day1, k), 120, 1, true)
			}
			stopped := crashing(t, func() error { return ds.FlushDay(ctx, day1.Format(time.DateOnly)) })
			if !stopped {
				t.Fatalf("no crash at %s", step)
			}
			part := partDir(dir, "instruments", day1)
			if n, dup, err := readPartition(part); err != nil || dup != "" || n != 4*120 {
				t.Fatalf("after the crash: %d rows (want %d), dup %q, %v", n, 4*120, dup, err)
			}
			// The next replay recovers first (as the CLI does), then
			// writes the day.
			lake = localLake(dir)
			if err := lake.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			ds = newDaySink(t, lake)
			for k := range 4 {
				replaySnap(t, ds, schema.Instruments, snapAt(day1, k), 120, 1, true)
			}
			if err := ds.FlushDay(ctx, day1.Format(time.DateOnly)); err != nil {
				t.Fatal(err)
			}
			ds.Close(ctx)
			onlyCompacted(t, part)
			sameRows(t, "after recovery", rows(t, filepath.Join(part, "*.parquet")), want)
			if m := manifestOf(t, onlyCompacted(t, part)); len(m.Files) != 4 {
				t.Fatalf("manifest lists %d files, want 4", len(m.Files))
			}
		})
	}
}

// On a bucket (a real versitygw): a replay over per-snapshot objects and a
// later run's object gives one compacted object with exactly the replayed
// rows and the later run's; cut at each step of its publish, no row a
// reader saw and the day keeps goes missing, and the next replay, after
// Recover, gives the same exact day.
func TestDaySinkOnBucket(t *testing.T) {
	t.Parallel()
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	ctx := context.Background()
	ref := t.TempDir()
	for k := range 4 {
		writeSnap(t, ref, schema.Instruments, snapAt(day1, k), 100+k, 1)
	}
	writeSnap(t, ref, schema.Instruments, snapAt(day1, 20), 30, 3)
	want := rows(t, filepath.Join(partDir(ref, "instruments", day1), "*.parquet"))
	replay := func(t *testing.T, lake *Folders) *DaySink {
		ds := newDaySink(t, lake)
		for k := range 4 {
			replaySnap(t, ds, schema.Instruments, snapAt(day1, k), 100+k, 1, true)
		}
		return ds
	}
	for _, step := range append([]string{"none"}, BucketSteps...) {
		t.Run(step, func(t *testing.T) {
			t.Parallel() // each step on its own prefix of the one server
			l := newBucketLake(t, g, "replay-"+step)
			for k := range 4 {
				l.write(t, schema.Instruments, snapAt(day1, k), 100, 9) // what the replay replaces
			}
			l.write(t, schema.Instruments, snapAt(day1, 20), 30, 3) // a later run's
			glob := filepath.Join(l.dir, "instruments", "date=2026-11-20", "*.parquet")
			visible := rows(t, glob)
			if step != "none" {
				ds := replay(t, &Folders{St: l.st, Crash: crashAt(step)})
				stopped := crashing(t, func() error { return ds.FlushDay(ctx, day1.Format(time.DateOnly)) })
				if !stopped {
					t.Fatalf("never reached step %s", step)
				}
				ds.Close(ctx)
				after := rows(t, glob)
				for _, r := range want { // the later run's rows, and the replayed ones if visible
					_, was := slices.BinarySearch(visible, r)
					if _, now := slices.BinarySearch(after, r); was && !now {
						t.Fatalf("crash at %s: a row went missing: %s", step, r)
					}
				}
				if err := (&Folders{St: l.st}).Recover(ctx); err != nil {
					t.Fatal(err)
				}
			}
			ds := replay(t, &Folders{St: l.st})
			if err := ds.FlushDay(ctx, day1.Format(time.DateOnly)); err != nil {
				t.Fatal(err)
			}
			ds.Close(ctx)
			sameRows(t, "after the replay", rows(t, glob), want)
			l.onlyCompactedObject(t, "instruments/date=2026-11-20")
			if got := l.objects(t, ".compact/"); len(got) != 0 {
				t.Fatalf("left behind: %v", got)
			}
		})
	}
}

// newMergingDaySink keeps every snapshot's rows in memory (no writer
// spills) and a day budget of a few snapshots, so that the day's runs are
// merged into spilled runs while snapshots load, and FlushDay merges more
// spilled runs than FanIn.
func newMergingDaySink(t *testing.T, lake *Folders) *DaySink {
	t.Helper()
	fb, err := pq.New(pq.Options{Store: lake.St, Park: Parking(lake.St)})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := NewDaySink(DayOptions{Fallback: fb, WriterBytes: 64 << 20, Compact: Options{Target: lake, ChunkBytes: 96 << 10, FanIn: 3, noPack: true}})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// Snapshots are merged a few at a time while the day loads (runs in
// memory, then spilled runs merged in the background); the
// day's file holds exactly the snapshots' rows, sorted, whatever the
// merges did, with the later run's file of the day merged in.
func TestDaySinkMergesRunsWhileLoading(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, ref := t.TempDir(), t.TempDir()
	for k := range 16 {
		writeSnap(t, dir, schema.Instruments, snapAt(day1, k), 60, 9) // what the replay replaces
		writeSnap(t, ref, schema.Instruments, snapAt(day1, k), 100+k, uint64(k))
	}
	writeSnap(t, dir, schema.Instruments, snapAt(day1, 40), 70, 3) // a later run's, not replayed
	writeSnap(t, ref, schema.Instruments, snapAt(day1, 40), 70, 3)

	ds := newMergingDaySink(t, localLake(dir))
	// One commit after the other (the day's merges run beside them), so
	// that the merges started do not depend on timing.
	for k := range 16 {
		replaySnap(t, ds, schema.Instruments, snapAt(day1, k), 100+k, uint64(k), true)
	}
	d := ds.days[Partition{Table: "instruments", Date: day1.Format(time.DateOnly)}]
	d.mu.Lock()
	d.wait()
	merges, spilledRuns := d.merges, 0
	for _, r := range d.runs {
		if r.Path != "" {
			spilledRuns++
		}
	}
	d.mu.Unlock()
	if merges < 4 || spilledRuns <= 3 {
		t.Fatalf("%d merges while loading, %d spilled runs: the test does not exercise them", merges, spilledRuns)
	}
	if err := ds.FlushDay(ctx, day1.Format(time.DateOnly)); err != nil {
		t.Fatal(err)
	}
	if err := ds.Close(ctx); err != nil {
		t.Fatal(err)
	}
	part := partDir(dir, "instruments", day1)
	onlyCompacted(t, part)
	checkSorted(t, part, "instruments")
	sameRows(t, "merged day", rows(t, filepath.Join(part, "*.parquet")), rows(t, filepath.Join(partDir(ref, "instruments", day1), "*.parquet")))
}

// A merge of the day's runs that fails (here its spill folder is gone and
// a file stands in its place) fails the commits after it and the day's
// FlushDay; the partition keeps its files, and nothing is left in memory.
func TestDaySinkMergeFailureLeavesTheDay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	for k := range 6 {
		writeSnap(t, dir, schema.Instruments, snapAt(day1, k), 60, 9)
	}
	part := partDir(dir, "instruments", day1)
	before := rows(t, filepath.Join(part, "*.parquet"))
	lake := localLake(dir)
	ds := newMergingDaySink(t, lake)
	replaySnap(t, ds, schema.Instruments, snapAt(day1, 0), 100, 1, true)
	tmp, err := lake.TempDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	failed := false
	for k := 1; k < 6; k++ {
		w, err := ds.Open(ctx, schema.Instruments, snapAt(day1, k))
		if err != nil {
			t.Fatal(err)
		}
		rec := genRecord(schema.Instruments, snapAt(day1, k), 100, 1)
		if err := w.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		if _, err := w.Commit(ctx); err != nil {
			failed = true
		}
	}
	err = ds.FlushDay(ctx, day1.Format(time.DateOnly))
	if err == nil || !strings.Contains(err.Error(), "merge the day's runs") {
		t.Fatalf("FlushDay after a failed merge: %v", err)
	}
	if !failed {
		t.Error("no commit failed after the merge did")
	}
	os.Remove(tmp)
	if err := ds.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sameRows(t, "the day after the failure", rows(t, filepath.Join(part, "*.parquet")), before)
	if got := names(t, part); len(got) != 6 {
		t.Fatalf("partition holds %v, want its 6 files", got)
	}
}

// An account table whose columns change during the day (one added, a list
// added, one gone), replayed through a day sink that merges while it
// loads: runs of different columns are merged into one (nulls where a
// run lacks a column), and the day's file, not flat, is written by
// pqarrow's writer; it holds exactly the per-snapshot files' rows.
func TestDaySinkEvolvingColumns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, ref := t.TempDir(), t.TempDir()
	versions := evolvingAccountTable()
	ds := newMergingDaySink(t, localLake(dir))
	for k := range 12 {
		s := snapAt(day1, k)
		s.Endpoint = "position"
		writeSnap(t, ref, versions[k/3], s, 300, uint64(k))
		replaySnap(t, ds, versions[k/3], s, 300, uint64(k), true)
	}
	if d := ds.days[Partition{Table: "position", Date: day1.Format(time.DateOnly)}]; d.merges < 2 {
		t.Fatalf("%d merges while loading: the test does not exercise them", d.merges)
	}
	if err := ds.FlushDay(ctx, day1.Format(time.DateOnly)); err != nil {
		t.Fatal(err)
	}
	if err := ds.Close(ctx); err != nil {
		t.Fatal(err)
	}
	part := partDir(dir, "position", day1)
	onlyCompacted(t, part)
	checkSorted(t, part, "position")
	sameRows(t, "position", rows(t, filepath.Join(part, "*.parquet")), rows(t, filepath.Join(partDir(ref, "position", day1), "*.parquet")))
}

// orderedRows are the rows of the partition's compacted file in file
// order, each as its JSON text.
func orderedRows(t *testing.T, part string) []string {
	t.Helper()
	res := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT * EXCLUDE (file_row_number) FROM read_parquet('%s/compacted-*.parquet', file_row_number=true) ORDER BY file_row_number`, part))
	out := make([]string, len(res.Rows))
	for i, r := range res.Rows {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

// A day whose runs all stay in memory is merged once, straight into its
// file; a day merged a few snapshots at a time into spilled runs while it
// loads (and whose writers spill too) is merged again from them. Both
// write the same file: the same rows in the same order.
func TestDaySinkInMemoryAndSpilledMergesWriteTheSameFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fileOf := func(ds *DaySink, dir string, wantSpilled bool) []string {
		for k := range 12 {
			replaySnap(t, ds, schema.Instruments, snapAt(day1, k), 150+7*k, uint64(k), true)
		}
		d := ds.days[Partition{Table: "instruments", Date: day1.Format(time.DateOnly)}]
		d.mu.Lock()
		d.wait()
		spilledRuns := 0
		for _, r := range d.runs {
			if r.Path != "" {
				spilledRuns++
			}
		}
		d.mu.Unlock()
		if (spilledRuns > 2) != wantSpilled {
			t.Fatalf("%d spilled runs: the test does not exercise the path", spilledRuns)
		}
		if err := ds.FlushDay(ctx, day1.Format(time.DateOnly)); err != nil {
			t.Fatal(err)
		}
		if err := ds.Close(ctx); err != nil {
			t.Fatal(err)
		}
		part := partDir(dir, "instruments", day1)
		onlyCompacted(t, part)
		return orderedRows(t, part)
	}
	inMem, spilled, writers := t.TempDir(), t.TempDir(), t.TempDir()
	memStore := localLake(inMem).St
	fb, err := pq.New(pq.Options{Store: memStore, Park: Parking(memStore)})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := NewDaySink(DayOptions{Fallback: fb, WriterBytes: 64 << 20, Compact: Options{Target: localLake(inMem), ChunkBytes: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	want := fileOf(ds, inMem, false)
	if len(want) == 0 {
		t.Fatal("no rows")
	}
	sameRows(t, "merged through spilled runs", fileOf(newMergingDaySink(t, localLake(spilled)), spilled, true), want)
	sameRows(t, "writers' spilled runs merged", fileOf(newDaySink(t, localLake(writers)), writers, true), want)
}
