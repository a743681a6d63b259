package transform

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/venuesim"
)

// BenchmarkDecodeInstruments measures decode+flatten into Arrow batches of a
// 100,000-instrument listing from the simulator (MB/s of JSON; rows/s is
// reported as a custom metric).
func BenchmarkDecodeInstruments(b *testing.B) {
	for _, shape := range []struct {
		name  string
		group int
		bare  bool
	}{{"groups200", 200, false}, {"groups3", 33334, false}, {"bare", 200, true}} {
		b.Run(shape.name, func(b *testing.B) {
			sim := venuesim.New(venuesim.Config{Seed: 1, Instruments: 100_000, GroupSize: shape.group})
			var body bytes.Buffer
			if err := sim.WriteInstruments(&body); err != nil {
				b.Fatal(err)
			}
			if shape.bare {
				// The same instruments without their groups (they hold
				// no arrays, so "]}" only closes a group).
				bare := bytes.ReplaceAll(body.Bytes(), []byte(`]},{"instruments":[`), []byte(","))
				bare = bytes.Replace(bare, []byte(`[{"instruments":[`), []byte("["), 1)
				bare = append(bytes.TrimSuffix(bytes.TrimSpace(bare), []byte("]}]")), ']')
				body.Reset()
				body.Write(bare)
			}
			decodeLoop(b, body.Bytes(), false, 100_000)
		})
	}
}

// BenchmarkDecodeSmallSnapshot decodes the realistic ~3,000-instrument
// listing with a new decoder per snapshot, as run and replay do: the fixed
// cost per snapshot (batch memory sized to the data, not to BatchRows) shows
// in B/op.
func BenchmarkDecodeSmallSnapshot(b *testing.B) {
	sim := venuesim.New(venuesim.Config{Seed: 1, Instruments: 3_000, GroupSize: 200})
	var body bytes.Buffer
	if err := sim.WriteInstruments(&body); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(body.Len()))
	b.ReportAllocs()
	b.ResetTimer()
	var rows int64
	for i := 0; i < b.N; i++ {
		d := NewInstrumentDecoder(Options{})
		st, err := d.Decode(context.Background(), bytes.NewReader(body.Bytes()), testMeta, func(*schema.Table, arrow.Record) error { return nil })
		d.Release()
		if err != nil {
			b.Fatal(err)
		}
		rows += st.Rows
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

// venueNumbers are numbers as the venue writes them.
var venueNumbers = []string{"0.00025", "200000", "0.01", "10", "0.0003", "25", "0.0001", "1", "0", "0.1",
	"80000", "0.0005", "2.5", "1795593424503", "32503708800000", "-0.5e-3", "94517.25"}

func BenchmarkParseNumber(b *testing.B) {
	bs := make([][]byte, len(venueNumbers))
	for i, s := range venueNumbers {
		bs[i] = []byte(s + ",")
	}
	b.ResetTimer()
	var sum float64
	for i := 0; i < b.N; i++ {
		for _, s := range bs {
			f, _, _ := parseNumber(s, 0)
			sum += f
		}
	}
	_ = sum
}

// BenchmarkDecodeSnapshotReused decodes the realistic ~3,000-instrument
// listing as replay does: one decoder reused listing after listing (the
// runner's pool), the body held in memory and scanned in place
// (jsontok.InMemory). What it measures is the decode itself, the fast path
// above all, without a new decoder's first allocations.
func BenchmarkDecodeSnapshotReused(b *testing.B) {
	sim := venuesim.New(venuesim.Config{Seed: 1, Instruments: 3_000, GroupSize: 200})
	var body bytes.Buffer
	if err := sim.WriteInstruments(&body); err != nil {
		b.Fatal(err)
	}
	decodeLoop(b, body.Bytes(), true, 3_000)
}

// decodeLoop decodes body b.N times with one decoder (read in place when
// inMem, as jsontok.InMemory) and reports rows/s; each decode must load
// rows rows.
func decodeLoop(b *testing.B, body []byte, inMem bool, rows int64) {
	decodeLoopWith(b, Options{}, body, inMem, rows)
}

// BenchmarkDecodeUniqueNames is the cost of Options.UniqueNames (what the
// pipeline decodes with) on the realistic listing read in place, as a
// replay does, and on a 100,000-instrument one: compare off and on.
func BenchmarkDecodeUniqueNames(b *testing.B) {
	for _, n := range []int{3_000, 100_000} {
		sim := venuesim.New(venuesim.Config{Seed: 1, Instruments: n, GroupSize: 200})
		var body bytes.Buffer
		if err := sim.WriteInstruments(&body); err != nil {
			b.Fatal(err)
		}
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("%d/unique=%v", n, on), func(b *testing.B) {
				decodeLoopWith(b, Options{UniqueNames: on}, body.Bytes(), true, int64(n))
			})
		}
	}
}

func decodeLoopWith(b *testing.B, opt Options, body []byte, inMem bool, rows int64) {
	d := NewInstrumentDecoder(opt)
	defer d.Release()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var r io.Reader = bytes.NewReader(body)
		if inMem {
			r = &inMemory{Reader: bytes.NewReader(nil), body: body}
		}
		st, err := d.Decode(context.Background(), r, testMeta, func(*schema.Table, arrow.Record) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		if st.Rows != rows {
			b.Fatalf("%d rows, want %d", st.Rows, rows)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
