package transform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/internal/arrowpool"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/venuesim"
)

// A decoder whose columns come from a recycling pool (UseColumns, as a
// replay's) emits what a decoder on Go memory emits, listing after listing,
// each listing's records released before the next reuses their buffers
// (poisoned when freed: a buffer not zeroed on reuse, or still written
// after it was handed to a record, shows), and holds no column memory
// between listings, whether the last one loaded, failed, ended on a row it
// rejected, or failed to emit.
func TestDecoderColumnsFromAPool(t *testing.T) {
	sim := func(n, group int, f venuesim.Faults) []byte {
		var b bytes.Buffer
		s := venuesim.New(venuesim.Config{Seed: int64(n), Instruments: n, GroupSize: group, Faults: f})
		if err := s.WriteInstruments(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	odd := venuesim.Faults{WrongTypes: true, ExtraFields: true, IndexPriceVariants: true}
	bodies := [][]byte{
		sim(3000, 200, odd), sim(2900, 200, venuesim.Faults{}), sim(3100, 300, odd), sim(40, 7, odd),
		[]byte(`[{"instruments":[1,"a",{"instrument_name":null},{`),
		[]byte(listing(fullInstrument, inst(map[string]string{"strike": `"x"`}), inst(map[string]string{"instrument_name": `""`}))),
		[]byte(listing(inst(map[string]string{"instrument_name": `""`}))), // a row begun, none committed
		sim(5000, 1000, odd), sim(1, 1, venuesim.Faults{}),
	}
	mem := memory.NewCheckedAllocator(arrowpool.NewPoisoned(64 << 20))
	for _, opt := range []Options{{}, {BatchRows: 1000, ReadBuffer: 4096}} {
		d := NewInstrumentDecoder(opt)
		d.UseColumns(mem)
		for i, body := range bodies {
			o := decodeOnce(d, body)
			if got, want := mem.CurrentAlloc(), int(totalBytes(o.recs)); got != want {
				t.Fatalf("opt %+v body %d: %d bytes allocated, its records hold %d", opt, i, got, want)
			}
			want := decodeWith(t, body, true, opt) // Go memory
			sameAs(t, fmt.Sprintf("opt %+v body %d: pooled", opt, i), o, want)
			o.release()
			want.release()
			mem.AssertSize(t, 0)
		}
		_, err := d.Decode(context.Background(), bytes.NewReader(bodies[0]), testMeta, func(*schema.Table, arrow.Record) error {
			return errors.New("sink down")
		})
		if err == nil {
			t.Fatal("a failed emit did not fail the decode")
		}
		mem.AssertSize(t, 0)
		d.Release()
	}
}

// totalBytes is the column memory of the instruments records of recs
// (the bytes a pool allocated for them are at least theirs).
func totalBytes(recs []arrow.Record) int64 {
	var n int64
	for _, r := range recs {
		if r.Schema().Equal(schema.Instruments.ArrowSchema()) {
			for _, c := range r.Columns() {
				for _, b := range c.Data().Buffers()[1:] {
					if b != nil {
						n += int64(b.Cap())
					}
				}
			}
		}
	}
	return n
}
