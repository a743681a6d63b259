package compact

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/schema"
	pq "github.com/optlake/optlake/sinks/parquet"
)

// BenchmarkPublishReplayedDay publishes a replayed instruments day of 150
// snapshots of the same 3,000 instruments (the bench archive's shape; as
// on a venue, an instrument's values the same in every snapshot, random
// from one to the next instrument), packed past the day's budget and
// written by direct.go at the replay's zstd level and page size: the
// order, the column workers and the file. The snapshots' commits (the
// sink's sort and pack) are not timed.
func BenchmarkPublishReplayedDay(b *testing.B) {
	needCoresB(b)
	ctx := context.Background()
	const snaps, rows = 150, 3000
	base := genRecord(schema.Instruments, snapAt(day1, 0), rows, 1)
	defer base.Release()
	u := schema.Instruments.ArrowSchema()
	recs := make([]arrow.Record, snaps)
	for k := range recs {
		snap := snapAt(day1, k)
		cols := slices.Clone(base.Columns())
		st := array.NewTimestampBuilder(memory.DefaultAllocator, u.Field(u.FieldIndices("snapshot_time")[0]).Type.(*arrow.TimestampType))
		run := array.NewStringBuilder(memory.DefaultAllocator)
		for range rows {
			st.Append(arrow.Timestamp(snap.Time.UnixMilli()))
			run.Append(snap.RunID)
		}
		cols[u.FieldIndices("snapshot_time")[0]] = st.NewArray()
		cols[u.FieldIndices("run_id")[0]] = run.NewArray()
		st.Release()
		run.Release()
		recs[k] = array.NewRecord(u, cols, rows)
		cols[u.FieldIndices("snapshot_time")[0]].Release()
		cols[u.FieldIndices("run_id")[0]].Release()
		defer recs[k].Release()
	}
	p := Partition{Table: schema.Instruments.Name, Date: day1.Format(time.DateOnly)}
	var cpu time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		lake := localLake(b.TempDir())
		fb, err := pq.New(pq.Options{Store: lake.St, Park: Parking(lake.St)})
		if err != nil {
			b.Fatal(err)
		}
		ds, err := NewDaySink(DayOptions{Fallback: fb, Compact: Options{Target: lake, CompressionLevel: 3, PageBytes: 512 << 10}})
		if err != nil {
			b.Fatal(err)
		}
		for k, rec := range recs {
			w, err := ds.Open(ctx, schema.Instruments, snapAt(day1, k))
			if err != nil {
				b.Fatal(err)
			}
			if err := w.Write(ctx, rec); err != nil {
				b.Fatal(err)
			}
			if _, err := w.Commit(ctx); err != nil {
				b.Fatal(err)
			}
		}
		d := ds.days[p]
		d.mu.Lock()
		d.wait()
		d.mu.Unlock()
		r, err := d.replayed()
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		before := cpuTime(b)
		pr, err := PublishDay(ctx, ds.opt.Compact, p, r)
		cpu += cpuTime(b) - before
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if !pr.direct {
			b.Fatal("the day was merged, not written directly")
		}
		if err := ds.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// needCoresB is needCores for a benchmark.
func needCoresB(b *testing.B) {
	b.Helper()
	if pq.ColumnWorkers(schema.Instruments.ArrowSchema()) == 0 {
		b.Skip("one core: a replayed day is merged, neither packed nor written directly")
	}
}
