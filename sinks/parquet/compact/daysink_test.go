package compact

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	pq "github.com/optlake/optlake/sinks/parquet"
)

var day2 = day1.AddDate(0, 0, 1)

// newDaySink is a replay sink on the lake with small memory budgets, so that
// writers and days spill runs and the merge works through them.
func newDaySink(t *testing.T, lake *ParquetLake) *DaySink {
	t.Helper()
	fb, err := pq.New(pq.Options{Store: lake.St})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := NewDaySink(DayOptions{Fallback: fb, WriterBytes: 16 << 10, Compact: Options{Lake: lake, ChunkBytes: 64 << 10, FanIn: 4}})
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
		for k := range 6 {
			replaySnap(t, ds, schema.Instruments, snapAt(d, k), 150+k, 1, true)
			if d == day1 && k == 1 {
				replaySnap(t, ds, schema.Rejects, rj, 40, 1, true)
			}
		}
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

	rep, err := Compact(ctx, Options{Lake: lake, Now: func() time.Time { return day2.AddDate(0, 0, 3) }})
	if err != nil || len(rep.Partitions) != 0 {
		t.Fatalf("compaction after the replay: %+v, %v", rep, err)
	}
}

// A replay stopped at every step of its day's publish (as a crash would)
// leaves the day readable — its old files or its new one, no row twice or
// missing — and the next replay recovers and writes it exactly.
func TestDaySinkCrashAtEveryStep(t *testing.T) {
	ctx := context.Background()
	ref := t.TempDir()
	for k := range 4 {
		writeSnap(t, ref, schema.Instruments, snapAt(day1, k), 120, 1)
	}
	want := rows(t, filepath.Join(partDir(ref, "instruments", day1), "*.parquet"))
	for _, step := range append(slices.Clone(MergeSteps), Steps...) {
		t.Run(step, func(t *testing.T) {
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
			stopped := func() (stopped bool) {
				defer func() {
					if r := recover(); r != nil {
						if _, ok := r.(crashed); !ok {
							panic(r)
						}
						stopped = true
					}
				}()
				if err := ds.FlushDay(ctx, day1.Format(time.DateOnly)); err != nil {
					t.Fatal(err)
				}
				return false
			}()
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
