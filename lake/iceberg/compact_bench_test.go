package iceberg_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/sinks/sinktest"
	"github.com/optlake/optlake/storage"
)

// BenchmarkCompactDay is an Iceberg lake's daily upkeep of one table on a
// local disk: a day of the every-5-minutes job (288 snapshots of 1,000
// instruments) compacted in one replace commit, then every snapshot but
// the current expired and the 288 files deleted. It reports each step's
// seconds (compact-s, expire-s); run it with -benchtime=1x.
//
// format=parquet is the same day's compaction of a Parquet lake, for
// comparison: what the Iceberg commit adds.
func BenchmarkCompactDay(b *testing.B) {
	for _, format := range []string{"parquet", "iceberg"} {
		b.Run("format="+format, func(b *testing.B) { benchCompactDay(b, format == "iceberg") })
	}
}

func benchCompactDay(b *testing.B, ice bool) {
	const snapshots = 288
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		st := storage.NewLocal(b.TempDir())
		pq, err := parquet.New(parquet.Options{Store: st})
		if err != nil {
			b.Fatal(err)
		}
		lake := iceberg.New(st, nil)
		d := sinktest.Snapshot(b, 1, 1000)
		recs := d.Records(schema.Instruments)
		for n := range snapshots {
			snap := d.Snap
			snap.RunID = fmt.Sprintf("run-%06d", n)
			sinktest.Load(b, pq, schema.Instruments, snap, recs)
			name := filepath.ToSlash(parquet.Path(schema.Instruments, snap))
			if !ice {
				continue
			}
			if _, err := lake.Append(ctx, schema.Instruments, []string{name}, nil, iceberg.Fresh()); err != nil {
				b.Fatal(err)
			}
		}
		d.Release()
		b.StartTimer()
		start := time.Now()
		var c compact.Target = lake.Compaction(nil)
		if !ice {
			c = compact.For(st, nil, nil)
		}
		rep, err := compact.Compact(ctx, compact.Options{Target: c, Now: func() time.Time { return compactDay }})
		c.Close()
		if err != nil || len(rep.Partitions) != 1 {
			b.Fatalf("compact: %v %+v", err, rep)
		}
		mid := time.Now()
		b.ReportMetric(mid.Sub(start).Seconds(), "compact-s")
		if !ice {
			continue
		}
		reps, err := lake.Expire(ctx, nil, 0, 0)
		if err != nil || reps[0].Deleted < snapshots {
			b.Fatalf("expire: %v %+v", err, reps)
		}
		b.ReportMetric(time.Since(mid).Seconds(), "expire-s")
	}
}
