package iceberg_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/sinktest"
	"github.com/optlake/optlake/storage"
)

// BenchmarkAppend is the Iceberg cost of one snapshot of one table on a
// local disk: registering its committed Parquet file (footer read, the
// manifest, the manifest list, the next metadata version) — the Parquet
// file's own writing is outside the timer. history is how many snapshots
// the table holds before: a new snapshot's cost must not grow with it.
func BenchmarkAppend(b *testing.B) {
	for _, history := range []int{1, 200} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) {
			ctx := context.Background()
			st := storage.NewLocal(b.TempDir())
			pq, err := parquet.New(parquet.Options{Store: st})
			if err != nil {
				b.Fatal(err)
			}
			lake := iceberg.New(st, nil)
			d := sinktest.Snapshot(b, 1, 1000)
			defer d.Release()
			recs := d.Records(schema.Instruments)
			n := 0
			next := func() string { // a new snapshot's committed file
				snap := d.Snap
				snap.RunID = fmt.Sprintf("run-%06d", n)
				n++
				sinktest.Load(b, pq, schema.Instruments, snap, recs)
				return filepath.ToSlash(parquet.Path(schema.Instruments, snap))
			}
			for range history {
				if _, err := lake.Append(ctx, schema.Instruments, []string{next()}, nil, iceberg.Fresh()); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				name := next()
				b.StartTimer()
				if _, err := lake.Append(ctx, schema.Instruments, []string{name}, nil, iceberg.Fresh()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
