package venuesim

import (
	"io"
	"strconv"
	"testing"
)

// countWriter discards and counts.
type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// BenchmarkWriteInstruments measures the listing writer; MB/s is the body
// throughput on one goroutine.
func BenchmarkWriteInstruments(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s := New(Config{Seed: 1, Instruments: n})
			var c countWriter
			if err := s.WriteInstruments(&c); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(c.n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := s.WriteInstruments(io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInstruments measures building the typed listing.
func BenchmarkInstruments(b *testing.B) {
	s := New(Config{Seed: 1, Instruments: 10_000})
	for b.Loop() {
		_ = s.Instruments()
	}
}

// BenchmarkAdvance measures one tick of a 1,000,000-instrument venue.
func BenchmarkAdvance(b *testing.B) {
	s := New(Config{Seed: 1, Instruments: 1_000_000})
	for b.Loop() {
		s.Advance(1)
	}
}
