package memsink

import (
	"testing"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/sinktest"
)

type reader struct{ s *Sink }

func (r reader) Rows(t testing.TB, tb *schema.Table) []sinktest.Row {
	return sinktest.Rows(tb, sinktest.Exact, r.s.Records(tb.Name)...)
}

func (reader) Time(ms int64) (int64, bool) { return ms, true }

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{New: func(t testing.TB) (sinks.Sink, sinktest.Reader) {
		s := New("")
		return s, reader{s}
	}})
}
