package iceberg_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/sinktest"
	"github.com/optlake/optlake/storage"
)

// TestCompactionFollowsTheMark: run --compact on an Iceberg lake starts at
// the compacted days' mark, as on a Parquet lake (before, every run planned
// every table's files to find the days to compact, so a run cost more as
// the lake aged), and a replayed day, whose per-snapshot files wait for
// compaction, moves the mark back to it.
func TestCompactionFollowsTheMark(t *testing.T) {
	ctx := context.Background()
	st := storage.NewLocal(t.TempDir())
	lake := iceberg.New(st, nil)
	cst := lake.Compaction(nil)
	if got := cst.ClosedFrom(ctx); got != "" {
		t.Fatalf("a new lake's compaction starts at %q, want every day", got)
	}
	if err := cst.Closed(ctx, "2026-10-05"); err != nil {
		t.Fatal(err)
	}
	if got := cst.ClosedFrom(ctx); got != "2026-10-05" {
		t.Fatalf("after every day before 2026-10-05 is compacted, compaction starts at %q, want 2026-10-05", got)
	}
	pq, err := parquet.New(parquet.Options{Store: st, Iceberg: true})
	if err != nil {
		t.Fatal(err)
	}
	r := iceberg.NewReplaySink(iceberg.NewSink(pq, lake))
	defer r.Close(ctx)
	d := sinktest.Snapshot(t, 1, 20)
	defer d.Release()
	day := time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		snap := d.Snap
		snap.Time = day.Add(time.Duration(i) * 5 * time.Minute)
		snap.RunID = fmt.Sprintf("run-%d", i)
		sinktest.Load(t, r, schema.Instruments, snap, d.Records(schema.Instruments))
	}
	if err := r.FlushDay(ctx, day.Format(time.DateOnly)); err != nil {
		t.Fatal(err)
	}
	if got := cst.ClosedFrom(ctx); got != "2026-10-02" {
		t.Fatalf("after a replay of 2026-10-02, compaction starts at %q, want 2026-10-02 (its files wait for compaction)", got)
	}
}
