package events

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// refObserve is the row-by-row encoding that Builder.observe's column
// encoder replaced: the reference its payloads must equal byte for byte.
func refObserve(b *Builder, rec arrow.Record) error {
	cols := make([]column, len(fields)+numExtra)
	if err := bind(rec, cols); err != nil {
		return err
	}
	name := &cols[len(fields)+colName]
	exp := &cols[len(fields)+colExpiration]
	var p []byte
	for i := 0; i < int(rec.NumRows()); i++ {
		nm := name.arr.(*array.String).Value(i)
		p = p[:0]
		for k := range fields {
			c := &cols[k]
			if c.nulls && c.arr.IsNull(i) {
				p = appendNull(p)
				continue
			}
			switch fields[k].typ {
			case schema.String:
				p = appendString(p, c.arr.(*array.String).Value(i))
			case schema.Float64:
				p = appendFloat(p, c.f64[i])
			case schema.Int64:
				p = appendInt(p, c.i64[i])
			case schema.Bool:
				p = appendBool(p, c.bln.Value(i))
			}
		}
		if exp.nulls && exp.arr.IsNull(i) {
			p = appendNull(p)
		} else {
			p = appendInt(p, int64(exp.ts[i]))
		}
		if err := b.srt.add(nm, p); err != nil {
			return err
		}
		b.stats.Rows++
	}
	return nil
}

// entries returns a builder's rows in arrival order (name, payload).
func entries(b *Builder) [][2]string {
	var out [][2]string
	for i := range b.srt.ents {
		e := &b.srt.ents[i]
		c := b.srt.ar.chunks[e.chunk]
		out = append(out, [2]string{string(c[e.off : e.off+e.nlen]), string(c[e.off+e.nlen : e.off+e.nlen+e.plen])})
	}
	return out
}

// oddValue returns a value of type t for the encoder's edge cases: null,
// integral and non-integral floats (-0, ±2^53, NaN, ±Inf, huge), varint
// boundaries, empty and long strings.
func oddValue(r *rand.Rand, t schema.Type) any {
	if r.IntN(5) == 0 {
		return nil
	}
	switch t {
	case schema.String:
		return [...]string{"", "BTC", "a much longer string value that crosses a varint length boundary, " +
			"repeated enough to need a second length byte: 0123456789012345678901234567890123456789012345678901234567890123456789"}[r.IntN(3)]
	case schema.Float64:
		return [...]float64{0, math.Copysign(0, -1), 1, -1, 0.0003, 1 << 53, -(1 << 53), 1<<53 - 1, math.NaN(),
			math.Inf(1), math.Inf(-1), 1e300, 63, 64, -64, -65, 8191, 8192, 100000, 2.5}[r.IntN(20)]
	case schema.Int64:
		return [...]int64{0, -1, 63, 64, -64, -65, math.MaxInt64, math.MinInt64, 1 << 40}[r.IntN(9)]
	case schema.Bool:
		return r.IntN(2) == 0
	}
	panic(t)
}

// TestColumnEncoderMatchesRows feeds records with every edge case, also
// sliced (an offset into their buffers) and with nulls, to the column
// encoder and to the row-by-row reference: the rows must be the same bytes.
func TestColumnEncoderMatchesRows(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var rows []row
	for i := range 3*encodeBlock + 17 {
		over := []any{}
		for _, f := range fields {
			over = append(over, f.name, oddValue(r, f.typ))
		}
		if r.IntN(6) == 0 {
			over = append(over, "expiration_time", nil)
		} else {
			over = append(over, "expiration_time", t0.Add(time.Duration(r.Int64N(1<<40))*time.Millisecond))
		}
		rows = append(rows, inst(fmt.Sprintf("I-%04d", i%700), over...))
	}
	rec := record(t, memory.DefaultAllocator, "venue", at(0), rows)
	defer rec.Release()
	for _, sl := range [][2]int64{{0, rec.NumRows()}, {5, rec.NumRows()}, {3, 300}, {encodeBlock, encodeBlock + 1}} {
		part := rec.NewSlice(sl[0], sl[1])
		got, want := newBuilder("venue", at(0).UnixMilli(), Options{MemBytes: 1 << 30}), newBuilder("venue", at(0).UnixMilli(), Options{MemBytes: 1 << 30})
		if err := got.Observe(part); err != nil {
			t.Fatal(err)
		}
		if err := refObserve(want, part); err != nil {
			t.Fatal(err)
		}
		g, w := entries(got), entries(want)
		if len(g) != len(w) || len(g) != int(part.NumRows()) {
			t.Fatalf("slice %v: %d rows, reference %d", sl, len(g), len(w))
		}
		for i := range g {
			if g[i] != w[i] {
				t.Fatalf("slice %v row %d: payload\n%x\nwant\n%x", sl, i, g[i][1], w[i][1])
			}
		}
		if got.stats.Rows != want.stats.Rows {
			t.Fatalf("rows %d, want %d", got.stats.Rows, want.stats.Rows)
		}
		got.srt.close()
		want.srt.close()
		part.Release()
	}
}

// TestEncodeRowErrors: the first bad row of a block is reported, by its
// number in the snapshot, whatever its place in the block.
func TestEncodeRowErrors(t *testing.T) {
	long := string(bytes.Repeat([]byte("x"), maxName+1))
	for _, tc := range []struct {
		bad, later row
		want       string
	}{
		{inst(long), row{"instrument_name": nil}, "row 300 (\"xxx"},
		{row{"instrument_name": nil}, inst(long), "row 300: instrument_name is null"},
	} {
		var good, rows []row
		for i := range 10 { // the bad row is in the record's second block
			good = append(good, inst(fmt.Sprintf("A%03d", i)))
		}
		for i := range 2*encodeBlock + 10 {
			switch i {
			case 300 - len(good):
				rows = append(rows, tc.bad)
			case 300 - len(good) + 5: // a later bad row of the same block
				rows = append(rows, tc.later)
			default:
				rows = append(rows, inst(fmt.Sprintf("B%03d", i)))
			}
		}
		first := record(t, memory.DefaultAllocator, "venue", at(0), good)
		rec := record(t, memory.DefaultAllocator, "venue", at(0), rows)
		b := newBuilder("venue", at(0).UnixMilli(), Options{})
		if err := b.Observe(first); err != nil {
			t.Fatal(err)
		}
		err := b.Observe(rec)
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
			t.Errorf("error %v, want it to contain %q", err, tc.want)
		}
		b.srt.close()
		first.Release()
		rec.Release()
	}
}

// BenchmarkObserve1M encodes the rows of a 1,000,000-instrument snapshot
// (Observe alone, the part on the decoder's goroutine, without the
// sorter's spills), with the column
// encoder and with the row-by-row reference.
func BenchmarkObserve1M(b *testing.B) {
	f, err := benchFixture()
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		observe func(*Builder, arrow.Record) error
	}{{"columns", (*Builder).Observe}, {"rows", refObserve}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				bd := newBuilder("venue-sim", f.snap0.UnixMilli(), Options{MemBytes: 1 << 30})
				for _, r := range f.recs0 {
					if err := tc.observe(bd, r); err != nil {
						b.Fatal(err)
					}
					bd.srt.ents, bd.srt.keys = bd.srt.ents[:0], bd.srt.keys[:0] // no sort, no spill: the encoding alone
					bd.srt.ar.reset()
				}
				bd.srt.close()
			}
		})
	}
}

// The items' encoders, one value at a time (see fields.go), for refObserve.

func appendNull(b []byte) []byte { return append(b, tagNull) }

func appendString(b []byte, s string) []byte {
	b = append(b, tagValue)
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendFloat(b []byte, v float64) []byte {
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 && !(v == 0 && math.Signbit(v)) {
		b = append(b, tagInt)
		return binary.AppendVarint(b, int64(v))
	}
	b = append(b, tagValue)
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
}

func appendInt(b []byte, v int64) []byte {
	b = append(b, tagValue)
	return binary.AppendVarint(b, v)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, tagTrue)
	}
	return append(b, tagValue)
}

// A block of rows larger than chunkSize is split (so that its one arena
// span stays small and its uint32 offsets cannot wrap): no chunk grows
// past chunkSize when every row fits one, and the rows are those of the
// row-by-row reference.
func TestEncodeLargeBlock(t *testing.T) {
	field := ""
	for _, f := range fields {
		if f.typ == schema.String {
			field = f.name
			break
		}
	}
	big := string(bytes.Repeat([]byte("v"), 10<<10))
	var rows []row
	for i := range encodeBlock + 44 {
		rows = append(rows, inst(fmt.Sprintf("I-%04d", i), field, big[:len(big)-i]))
	}
	rec := record(t, memory.DefaultAllocator, "venue", at(0), rows)
	defer rec.Release()
	got, want := newBuilder("venue", at(0).UnixMilli(), Options{MemBytes: 1 << 30}), newBuilder("venue", at(0).UnixMilli(), Options{MemBytes: 1 << 30})
	defer got.srt.close()
	defer want.srt.close()
	if err := got.Observe(rec); err != nil {
		t.Fatal(err)
	}
	if err := refObserve(want, rec); err != nil {
		t.Fatal(err)
	}
	for i, c := range got.srt.ar.chunks {
		if cap(c) > chunkSize {
			t.Fatalf("chunk %d of %d bytes: a block was not split", i, cap(c))
		}
	}
	g, w := entries(got), entries(want)
	if len(g) != len(w) || len(g) != len(rows) || got.stats.Rows != int64(len(rows)) {
		t.Fatalf("%d rows (%d counted), reference %d, want %d", len(g), got.stats.Rows, len(w), len(rows))
	}
	for i := range g {
		if g[i] != w[i] {
			t.Fatalf("row %d differs from the reference", i)
		}
	}
}

// TestCheckRowsAsEachRow: the checks of a whole record (checkRows, the
// background Observe's) reject exactly the records that the checks row by
// row reject (checkRow, the Builder's), with the same error (the first bad
// row's), wherever the bad row is, in a record sliced at any offset; and a
// good record passes.
func TestCheckRowsAsEachRow(t *testing.T) {
	long := string(bytes.Repeat([]byte("x"), maxName+1))
	bad := map[string]row{
		"good":              nil,
		"null name":         {"instrument_name": nil},
		"long name":         {"instrument_name": long},
		"other source":      {"source": "t"},
		"longer source":     {"source": "ss"},
		"empty source":      {"source": ""},
		"null source":       {"source": nil},
		"other snapshot":    {"snapshot_time": at(2)},
		"null snapshot":     {"snapshot_time": nil},
		"source of the row": {"source": "s", "instrument_name": "s"},
	}
	for what, over := range bad {
		for _, pos := range []int{0, 1, 299, 599} {
			for _, off := range []int{0, 3} {
				rows := make([]row, 600+off)
				for i := range rows {
					rows[i] = inst(fmt.Sprintf("A%04d", i))
				}
				if over != nil {
					for k, v := range over {
						rows[off+pos][k] = v
					}
				}
				whole := record(t, memory.DefaultAllocator, "s", at(1), rows)
				rec := whole.NewSlice(int64(off), whole.NumRows())
				whole.Release()
				var errs [2]error
				for i, bg := range []bool{false, true} {
					d, err := NewDiffer(nil, sinks.Snapshot{Source: "s", Time: at(1)}, Options{Background: bg})
					if err != nil {
						t.Fatal(err)
					}
					errs[i] = d.Observe(rec)
					d.Close()
				}
				rec.Release()
				if (errs[0] == nil) != (over == nil || what == "source of the row") {
					t.Errorf("%s at %d (offset %d): row by row: %v", what, pos, off, errs[0])
				}
				if fmt.Sprint(errs[1]) != fmt.Sprint(errs[0]) {
					t.Errorf("%s at %d (offset %d): whole record: %v, row by row: %v", what, pos, off, errs[1], errs[0])
				}
			}
		}
	}
}
