package main

import (
	"testing"

	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/memsink"
	"github.com/optlake/optlake/sinks/sinktest"
)

// TestCrashSinkForwards: the load crash hook's sink has every optional
// capability of the sink it wraps.
func TestCrashSinkForwards(t *testing.T) {
	sinktest.Forwarding(t, func(_ testing.TB, inner sinks.Sink) sinks.Sink {
		return crashSink{Sink: inner, at: "never"}
	}, nil)
}

// The load crash hook's sink keeps the sinks.Sink contract (sinktest),
// here around an in-memory sink, its hook at no step.
func TestCrashSinkConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{New: func(t testing.TB) (sinks.Sink, sinktest.Reader) {
		mem := memsink.New("")
		return crashSink{Sink: mem, at: "never"}, sinktest.InMemory(mem.Records)
	}})
}
