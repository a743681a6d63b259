package compact

import (
	"testing"

	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/sinktest"
)

// TestDaySinkForwards: the replay's day sink is as atomic as its fallback
// (the per-snapshot sink of the tables without a sort key).
func TestDaySinkForwards(t *testing.T) {
	sinktest.Forwarding(t, func(t testing.TB, inner sinks.Sink) sinks.Sink {
		ds, err := NewDaySink(DayOptions{Fallback: inner, Compact: Options{Target: localLake(t.TempDir())}})
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}, map[sinktest.Capability]string{
		sinktest.DaySink:   "it holds days of its own: its FlushDay writes the day it holds",
		sinktest.Versioned: "a day's file replaces the partition's files: no versions (an Iceberg lake's replay keeps its per-snapshot sink)",
	})
}

// The replay's day sink keeps the sinks.Sink contract (sinktest: the rows
// a Writer commits are read once their day is flushed), its tables
// without a sort key in per-snapshot files.
func TestDaySinkConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{New: func(t testing.TB) (sinks.Sink, sinktest.Reader) {
		dir := t.TempDir()
		return newDaySink(t.(*testing.T), localLake(dir)), sinktest.ParquetFiles{Dir: dir}
	}})
}
