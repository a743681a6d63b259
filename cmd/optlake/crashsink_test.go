package main

import (
	"testing"

	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/sinktest"
)

// TestCrashSinkForwards: the load crash hook's sink has every optional
// capability of the sink it wraps.
func TestCrashSinkForwards(t *testing.T) {
	sinktest.Forwarding(t, func(_ testing.TB, inner sinks.Sink) sinks.Sink {
		return crashSink{Sink: inner, at: "never"}
	}, nil)
}
