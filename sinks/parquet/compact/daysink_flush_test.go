package compact

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/optlake/optlake/schema"
)

// A day of two tables is published with its largest partition beside the
// other; a crash (the hook's panic, in both publishes) at a step of the
// publish reaches FlushDay's caller once both have stopped, each
// partition holds its rows exactly (old files or new, never a row twice
// or missing), and the next replay, recovered first, writes both.
func TestDaySinkFlushDayOfTwoTablesCrash(t *testing.T) {
	ctx := context.Background()
	tables := []struct {
		t     *schema.Table
		snaps int
		rows  int
	}{{schema.Instruments, 4, 120}, {schema.Rejects, 2, 30}}
	replay := func(ds *DaySink) {
		for _, tb := range tables {
			for k := range tb.snaps {
				replaySnap(t, ds, tb.t, snapAt(day1, k), tb.rows, 1, true)
			}
		}
	}
	for _, step := range []string{"journal", "swap"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			for _, tb := range tables {
				for k := range tb.snaps {
					writeSnap(t, dir, tb.t, snapAt(day1, k), tb.rows, 1)
				}
			}
			lake := localLake(dir)
			lake.Crash = crashAt(step) // both publishes stop there
			ds := newDaySink(t, lake)
			replay(ds)
			if !crashing(t, func() error { return ds.FlushDay(ctx, day1.Format(time.DateOnly)) }) {
				t.Fatalf("no crash at %s", step)
			}
			for _, tb := range tables { // a file twice or missing would show in the count
				part := partDir(dir, tb.t.Name, day1)
				if got := len(rows(t, filepath.Join(part, "*.parquet"))); got != tb.snaps*tb.rows {
					t.Fatalf("%s after the crash: %d rows, want %d", tb.t.Name, got, tb.snaps*tb.rows)
				}
			}
			lake = localLake(dir)
			if err := lake.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			ds = newDaySink(t, lake)
			replay(ds)
			if err := ds.FlushDay(ctx, day1.Format(time.DateOnly)); err != nil {
				t.Fatal(err)
			}
			ds.Close(ctx)
			for _, tb := range tables {
				part := partDir(dir, tb.t.Name, day1)
				onlyCompacted(t, part)
				if got := len(rows(t, filepath.Join(part, "*.parquet"))); got != tb.snaps*tb.rows {
					t.Fatalf("%s: %d rows, want %d", tb.t.Name, got, tb.snaps*tb.rows)
				}
			}
		})
	}
}
