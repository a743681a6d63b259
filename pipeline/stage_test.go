package pipeline

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/memsink"
	"github.com/optlake/optlake/sinks/sinktest"
)

// TestStageForwards: the stage has every optional capability of the sink
// it stages for.
func TestStageForwards(t *testing.T) {
	sinktest.Forwarding(t, func(_ testing.TB, inner sinks.Sink) sinks.Sink {
		return &stage{Sink: inner, mem: memory.DefaultAllocator}
	}, nil)
}

// The stage keeps the sinks.Sink contract (sinktest), here staging for an
// in-memory sink.
func TestStageConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{New: func(t testing.TB) (sinks.Sink, sinktest.Reader) {
		mem := memsink.New("")
		return &stage{Sink: mem, mem: memory.DefaultAllocator}, sinktest.InMemory(mem.Records)
	}})
}
