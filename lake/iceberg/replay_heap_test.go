package iceberg_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/sinktest"
	"github.com/optlake/optlake/storage"
)

// TestReplayHeapBounded: a replay through ReplaySink keeps nothing of a
// committed day reachable. The heap in use after a full collection stays
// the same from day 2 to day 10; when each snapshot of the table's
// metadata held pointers into the append that made it (its producer, with
// the day's data files, and the transaction's metadata builder), it grew
// by every day's data files (about 0.8 MB a day here).
func TestReplayHeapBounded(t *testing.T) {
	ctx := context.Background()
	st := storage.NewLocal(t.TempDir())
	lake := iceberg.New(st, nil)
	pq, err := parquet.New(parquet.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	r := iceberg.NewReplaySink(iceberg.NewSink(pq, lake))
	defer r.Close(ctx)
	d := sinktest.Snapshot(t, 1, 1000)
	defer d.Release()
	recs := d.Records(schema.Instruments)
	const days, perDay = 10, 60
	start := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	heap := make([]uint64, 0, days)
	for day := range days {
		date := start.AddDate(0, 0, day)
		for i := range perDay {
			snap := d.Snap
			snap.Time = date.Add(time.Duration(i) * 5 * time.Minute)
			snap.RunID = fmt.Sprintf("run-%02d-%04d", day, i)
			sinktest.Load(t, r, schema.Instruments, snap, recs)
		}
		if err := r.FlushDay(ctx, date.Format(time.DateOnly)); err != nil {
			t.Fatal(err)
		}
		heap = append(heap, heapInUse())
	}
	grew := int64(heap[days-1]) - int64(heap[1])
	t.Logf("heap in use after day 2: %.2f MB, after day %d: %.2f MB", float64(heap[1])/1e6, days, float64(heap[days-1])/1e6)
	const bound = 1 << 20
	if grew > bound {
		t.Errorf("the heap in use grew by %.2f MB from day 2 to day %d of a replay (%d snapshots a day), want at most %.2f MB: committed days stay reachable",
			float64(grew)/1e6, days, perDay, float64(bound)/1e6)
	}
}

// heapInUse is the heap in use after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
