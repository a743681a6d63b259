package parquet

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/sinktest"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// BenchmarkSnapshotFile is one snapshot's instruments file of the
// simulator's realistic listing (3,000 rows), what the every-5-minutes run
// and a replay write per snapshot: Open, Write, Commit into a local store.
func BenchmarkSnapshotFile(b *testing.B) {
	var body bytes.Buffer
	sim := venuesim.New(venuesim.Config{Seed: 1})
	if err := sim.WriteInstruments(&body); err != nil {
		b.Fatal(err)
	}
	sn := sinks.Snapshot{Time: sim.Now(), RunID: "bench", Source: "venue-sim", Endpoint: "instruments"}
	dec := transform.NewInstrumentDecoder(transform.Options{})
	defer dec.Release()
	var recs []arrow.Record
	if _, err := dec.Decode(context.Background(), &body, sn, func(t *schema.Table, rec arrow.Record) error {
		if t == schema.Instruments {
			rec.Retain()
			recs = append(recs, rec)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for _, level := range []int{1, 3} {
		b.Run(fmt.Sprintf("zstd%d", level), func(b *testing.B) { benchSnapshotFile(b, recs, sn, level) })
	}
}

func benchSnapshotFile(b *testing.B, recs []arrow.Record, sn sinks.Snapshot, level int) {
	s, err := New(Options{Store: storage.NewLocal(b.TempDir()), CompressionLevel: level})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var c sinks.Committed
	for b.Loop() {
		c = sinktest.Load(b, s, schema.Instruments, sn, recs)
	}
	b.ReportMetric(float64(c.Bytes), "file-B")
}
