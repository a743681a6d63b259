package iceberg_test

import (
	"context"
	"strings"
	"testing"

	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/sinktest"
	"github.com/optlake/optlake/storage"
)

// TestSinkForwards: the Iceberg sink is as atomic as the Parquet sink it
// wraps (so the pipeline does not stage an Iceberg lake's paginated
// loads); it writes through the wrapped sink's Iceberg files, and refuses
// a sink that holds days.
func TestSinkForwards(t *testing.T) {
	wrap := func(t testing.TB, inner sinks.Sink) sinks.Sink {
		return iceberg.NewSink(inner, iceberg.New(storage.NewLocal(t.TempDir()), nil))
	}
	sinktest.Forwarding(t, wrap, map[sinktest.Capability]string{
		sinktest.DaySink:      "Commit appends the snapshot's file, which a sink that holds days has not written yet: refused",
		sinktest.Versioned:    "the sink picks the versions of its files itself",
		sinktest.IcebergFiles: "it asks the wrapped sink for its Iceberg files' sink, and writes through it",
	})
	probe := sinktest.NewCapable()
	s := wrap(t, probe)
	if n := probe.Calls(sinktest.IcebergFiles); n != 1 {
		t.Errorf("NewSink asked the wrapped sink for its Iceberg files %d times, want 1", n)
	}
	if _, err := s.Open(context.Background(), schema.Runs, sinktest.SnapshotOf(0)); err == nil || !strings.Contains(err.Error(), "holds rows until their day") {
		t.Errorf("Open over a sink that holds days: %v", err)
	}
}
