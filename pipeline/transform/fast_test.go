package transform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/internal/jsontok"
	"github.com/optlake/optlake/pipeline/values"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/venuesim"
)

// outcome is everything one Decode produced.
type outcome struct {
	recs  []arrow.Record // instruments and rejects, in emit order
	tabs  []*schema.Table
	stats Stats
	err   error
	fast  int64 // rows the fast path decoded
}

func (o *outcome) release() {
	for _, r := range o.recs {
		r.Release()
	}
}

func decodeWith(t testing.TB, body []byte, fast bool, opt Options) outcome {
	t.Helper()
	d := NewInstrumentDecoder(opt)
	defer d.Release()
	d.noFast = !fast
	return decodeOnce(d, body)
}

// inMemory is a body held whole in memory, as replay's archive hands it
// over (jsontok.InMemory): the scanner reads it in place, and the fast
// path sees all of it at once.
type inMemory struct {
	*bytes.Reader
	body []byte
}

func (m *inMemory) InMemory() ([]byte, bool) {
	m.Reader.Reset(nil)
	return m.body, true
}

// decodeOnce decodes body with d, keeping what it emits.
func decodeOnce(d *InstrumentDecoder, body []byte) outcome {
	return decodeFrom(d, bytes.NewReader(body))
}

// decodeFrom decodes what r reads with d, keeping what it emits.
func decodeFrom(d *InstrumentDecoder, r io.Reader) outcome {
	var o outcome
	fast := d.fastRows
	o.stats, o.err = d.Decode(context.Background(), r, testMeta, func(tb *schema.Table, rec arrow.Record) error {
		rec.Retain()
		o.recs = append(o.recs, rec)
		o.tabs = append(o.tabs, tb)
		return nil
	})
	o.fast = d.fastRows - fast
	return o
}

// sameOutcome fails unless the fast path and the general path produced the
// same records, stats and error, and so did the fast path reading the body
// in place (inMemory).
func sameOutcome(t testing.TB, body []byte, opt Options) (fastRows int64) {
	t.Helper()
	f := decodeWith(t, body, true, opt)
	g := decodeWith(t, body, false, opt)
	d := NewInstrumentDecoder(opt)
	m := decodeFrom(d, &inMemory{Reader: bytes.NewReader(body), body: body})
	d.Release()
	defer f.release()
	defer g.release()
	defer m.release()
	if g.fast != 0 {
		t.Fatalf("general path counted %d fast rows", g.fast)
	}
	sameAs(t, "fast", f, g)
	sameAs(t, "fast in memory", m, g)
	return f.fast
}

// sameAs fails unless f (the fast path's outcome, by name) is g (the
// general path's).
func sameAs(t testing.TB, name string, f, g outcome) {
	t.Helper()
	if fmt.Sprint(f.err) != fmt.Sprint(g.err) {
		t.Fatalf("errors differ: %s %v, general %v", name, f.err, g.err)
	}
	if f.stats != g.stats {
		t.Fatalf("stats differ: %s %+v, general %+v", name, f.stats, g.stats)
	}
	if len(f.recs) != len(g.recs) {
		t.Fatalf("%s emitted %d records, general %d", name, len(f.recs), len(g.recs))
	}
	for i := range f.recs {
		if f.tabs[i] != g.tabs[i] {
			t.Fatalf("%s: record %d: table %s vs %s", name, i, f.tabs[i].Name, g.tabs[i].Name)
		}
		if !array.RecordEqual(f.recs[i], g.recs[i]) {
			fr, gr := rowsOf(f.recs[i]), rowsOf(g.recs[i])
			for j := range fr {
				if j < len(gr) && fmt.Sprint(fr[j]) != fmt.Sprint(gr[j]) {
					t.Fatalf("record %d (%s) row %d differs:\n%s %v\ngeneral %v", i, f.tabs[i].Name, j, name, fr[j], gr[j])
				}
			}
			t.Fatalf("%s: record %d (%s) differs", name, i, f.tabs[i].Name)
		}
		sameSlots(t, i, f.recs[i], g.recs[i])
	}
}

// sameSlots fails unless the fixed-width columns of two equal records hold
// the same bytes, null slots included: a row the fast path began and gave
// up leaves nothing behind (the general path leaves null slots zero).
func sameSlots(t testing.TB, i int, f, g arrow.Record) {
	t.Helper()
	for c := range int(f.NumCols()) {
		fd, gd := f.Column(c).Data(), g.Column(c).Data()
		var n int
		switch fd.DataType().ID() {
		case arrow.FLOAT64, arrow.INT64, arrow.TIMESTAMP:
			n = fd.Len() * 8
		case arrow.BOOL:
			n = fd.Len() / 8 // whole bytes; the last one's spare bits are not rows
		default:
			continue
		}
		if fb, gb := fd.Buffers()[1].Bytes()[:n], gd.Buffers()[1].Bytes()[:n]; !bytes.Equal(fb, gb) {
			t.Fatalf("record %d column %s: the values buffers differ (null slots included)", i, f.ColumnName(c))
		}
	}
}

func TestFastPathMatchesGeneralPath(t *testing.T) {
	sim := func(f venuesim.Faults, group int) []byte {
		var b bytes.Buffer
		s := venuesim.New(venuesim.Config{Seed: 7, Instruments: 3000, GroupSize: group, Faults: f})
		if err := s.WriteInstruments(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	pretty := strings.NewReplacer(`{"`, "{\n  \"", `,"`, ",\n  \"", `":`, `" : `).Replace(listing(fullInstrument, fullInstrument))
	cases := []struct {
		name     string
		body     []byte
		wantFast bool // at least 80% of the rows must take the fast path
	}{
		{"simulator", sim(venuesim.Faults{}, 200), true},
		{"simulator 3 groups", sim(venuesim.Faults{}, 1000), true},
		{"index price variants", sim(venuesim.Faults{IndexPriceVariants: true}, 200), true},
		{"wrong types", sim(venuesim.Faults{WrongTypes: true}, 200), true},
		{"extra fields", sim(venuesim.Faults{ExtraFields: true}, 200), true},
		{"timestamps in seconds", sim(venuesim.Faults{TimestampsInSeconds: true}, 200), true},
		{"pretty printed", []byte(pretty), true},
		// Bare instruments and groups mixed: a bare one takes the fast
		// path, a group is not tried as an instrument (groupStart).
		{"bare and grouped", []byte(`[` + fullInstrument + `,` + inst(map[string]string{"strike": "5"}) + `,{"instruments":[` + fullInstrument + `]},` +
			fullInstrument + `,{"instruments" :[` + fullInstrument + `]},{"kind":"future","instruments":[]},` + fullInstrument + `]`), true},
		{"repeated value texts", []byte(repeatedTexts()), true},
		// Deribit sends instrument_id as an integer: kept as its text.
		{"integer instrument ids", regexp.MustCompile(`"instrument_id":"(\d+)"`).ReplaceAll(sim(venuesim.Faults{}, 200), []byte(`"instrument_id":$1`)), true},
		{"edge values", []byte(listing(
			inst(map[string]string{"strike": "1e22"}),
			inst(map[string]string{"strike": "1e23", "instrument_name": `"b"`}),
			inst(map[string]string{"strike": "9007199254740993", "instrument_name": `"c"`}),
			inst(map[string]string{"strike": "-0", "tick_size": "0.000000000000000000000001", "instrument_name": `"d"`}),
			inst(map[string]string{"strike": "1E-5", "tick_size": "123456789012345678901234.5", "instrument_name": `"e"`}),
			inst(map[string]string{"strike": "1e400", "instrument_name": `"f"`}),
			inst(map[string]string{"strike": "01", "instrument_name": `"g"`}),
			inst(map[string]string{"creation_timestamp": "1.7e12", "instrument_name": `"h"`}),
			inst(map[string]string{"creation_timestamp": "-1234567890123456789", "instrument_name": `"i"`}),
			inst(map[string]string{"creation_timestamp": "12345678901234567890", "instrument_name": `"j"`}),
			inst(map[string]string{"index_price": `"+1.5"`, "instrument_name": `"k"`}),
			inst(map[string]string{"index_price": `"1.5 "`, "instrument_name": `"l"`}),
			inst(map[string]string{"index_price": `1.25`, "instrument_name": `"m"`}),
			inst(map[string]string{"index_price": `"1e999"`, "instrument_name": `"n"`}),
			inst(map[string]string{"instrument_name": `"o\u00e9"`}),
			inst(map[string]string{"instrument_name": `"pé"`}),
			inst(map[string]string{"kind": `"opt\"ion"`, "instrument_name": `"q"`}),
			inst(map[string]string{"kind": `"optionsXY\"z"`, "instrument_id": `"12345678é"`, "instrument_name": `"q2"`}),
			inst(map[string]string{"instrument_id": `"12345678\u0041"`, "instrument_name": `"q3-abcdefghijklmnopqrstuvwxyz-0123456789"`}),
			inst(map[string]string{"instrument_id": `-1.50e3`, "kind": `0`, "instrument_name": `"q4"`}),
			inst(map[string]string{"instrument_id": `1e400`, "instrument_name": `"q5"`}),
			inst(map[string]string{"instrument_id": `1e-400`, "instrument_name": `"q6"`}),
			inst(map[string]string{"instrument_id": `01`, "instrument_name": `"q7"`}),
			inst(map[string]string{"instrument_id": `-`, "instrument_name": `"q8"`}),
			inst(map[string]string{"instrument_name": `""`}),
			inst(map[string]string{"instrument_name": `null`}),
			inst(map[string]string{"instrument_name": ``}),
			inst(map[string]string{"rfq": `null`, "deployed": `nul`, "instrument_name": `"r"`}),
			inst(map[string]string{"is_active": `1`, "instrument_name": `"s"`}),
			`{"instrument_name":"t","instrument_name":"u"}`,
			`{"instrument_name":"v","base_currency":"ETH"}`,
			`{"instrument_name":"w","strike":1.5.5}`,
			`{"instrument_name":"x","new_field":1e400,"other" : "a b","flag":true,"n":null,"f":false,"neg":-0.5e-3}`,
			`{"instrument_name":"y","nested":{"a":[1,2]},"s":"\u00e9"}`,
			`{"instrument_name":"z","bad":01}`,
			`{"instrument_name":"z2","bad":tru}`,
		)), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, opt := range []Options{{}, {BatchRows: 7, ReadBuffer: 4096}} {
				fast := sameOutcome(t, tc.body, opt)
				rows := int64(bytes.Count(tc.body, []byte(`"instrument_name"`)))
				if tc.wantFast && fast < rows*8/10 {
					t.Errorf("opt %+v: fast path took %d of %d rows", opt, fast, rows)
				}
			}
		})
	}
}

// repeatedTexts is a listing whose instruments repeat the previous one's
// value texts, or start or end like them: a value text remembered by the
// fast path (textCache) must match only the same whole text.
func repeatedTexts() string {
	var insts []string
	for i, v := range []struct{ strike, ts, ip string }{
		{"1", "1795593424503", `"95012.35"`},
		{"1", "1795593424503", `"95012.35"`},
		{"10", "17955934245030", `"95012.350"`},
		{"1", "179559342450", `"95012.3"`},
		{"1.5", "1795593424503", `"95012.35"`},
		{"1.5e3", "1795593424503", `"95012.35 "`},
		{"1.5E3", "-1795593424503", `"x95012.35"`},
		{"1.5E3", "-1795593424503", `"x95012.35"`},
		{"1234567890123456", "1234567890123456", `"12345678901234"`},
		{"12345678901234567", "12345678901234567", `"123456789012345"`},
		{"1234567890123456", "1234567890123456", `"12345678901234"`},
		{"12345678", "12345678", `"123456"`},
		{"123456789", "123456789", `"1234567"`},
		{"12345678", "12345678", `"123456"`},
		{"-0", "0", `"0"`},
		{"0", "0", `"-0"`},
		{"null", "null", `null`},
		{"0", "0", `"0"`},
	} {
		insts = append(insts, inst(map[string]string{"strike": v.strike, "expiration_timestamp": v.ts, "index_price": v.ip,
			"instrument_name": fmt.Sprintf(`"i%d"`, i)}))
	}
	return listing(insts...)
}

// TestValueTextsAcrossListings: a decoder that decoded other listings
// before (its fast path remembers their value texts) decodes a listing as
// the general path of a new decoder does.
func TestValueTextsAcrossListings(t *testing.T) {
	d := NewInstrumentDecoder(Options{})
	defer d.Release()
	for _, body := range []string{
		listing(inst(map[string]string{"strike": "5", "tick_size": "0.5", "expiration_timestamp": "17", "index_price": `"95012.35"`})),
		listing(inst(map[string]string{"strike": "50", "tick_size": "0.55", "expiration_timestamp": "170", "index_price": `"95012.355"`})),
		listing(inst(map[string]string{"strike": "5", "tick_size": "0.5", "expiration_timestamp": "1", "index_price": `"95012.3"`})),
		repeatedTexts(),
	} {
		got := decodeOnce(d, []byte(body))
		want := decodeWith(t, []byte(body), false, Options{})
		if got.err != nil || want.err != nil || got.fast == 0 || len(got.recs) != len(want.recs) {
			t.Fatalf("errors %v, %v; fast rows %d; records %d, %d", got.err, want.err, got.fast, len(got.recs), len(want.recs))
		}
		for i := range got.recs {
			if !array.RecordEqual(got.recs[i], want.recs[i]) {
				t.Fatalf("listing %.80s...: record %d differs:\nreused decoder %v\nnew decoder    %v", body, i, rowsOf(got.recs[i]), rowsOf(want.recs[i]))
			}
			sameSlots(t, i, got.recs[i], want.recs[i]) // RecordEqual takes -0 for 0
		}
		got.release()
		want.release()
	}
}

// TestValueTextsAreReused: the fast path does take a repeated value text's
// value from its cache (the tests above would pass without the cache). A
// decoder whose cached values are spoiled after one listing writes the
// spoiled values for the next listing's same texts, in every number field
// and index_price.
func TestValueTextsAreReused(t *testing.T) {
	d := NewInstrumentDecoder(Options{})
	defer d.Release()
	body := []byte(listing(fullInstrument))
	first := decodeOnce(d, body)
	if first.err != nil || first.fast == 0 {
		t.Fatalf("first listing: %v, %d fast rows", first.err, first.fast)
	}
	first.release()
	spoiled := map[int]bool{}
	for fi := range d.texts {
		if c := &d.texts[fi]; c.n != 0 {
			c.v ^= 1 // the lowest mantissa bit of a float, the parity of an int
			spoiled[fi] = true
		}
	}
	if len(spoiled) < 10 {
		t.Fatalf("%d value texts cached after a listing of every field, want the number fields and index_price", len(spoiled))
	}
	got := decodeOnce(d, body)
	want := decodeWith(t, body, false, Options{})
	defer got.release()
	defer want.release()
	if got.err != nil || want.err != nil {
		t.Fatal(got.err, want.err)
	}
	differ := 0
	for c := range int(got.recs[0].NumCols()) {
		if !array.Equal(got.recs[0].Column(c), want.recs[0].Column(c)) {
			differ++
		}
	}
	// Each cached field's column differs, and so do the times parsed from
	// the two epoch fields.
	if differ < len(spoiled) {
		t.Errorf("%d columns took the spoiled cached values, want the %d cached fields' and more", differ, len(spoiled))
	}
}

// FuzzFastPath: for any body, the fast path changes nothing in the result,
// duplicate names (UniqueNames) included.
func FuzzFastPath(f *testing.F) {
	f.Add([]byte(listing(fullInstrument, fullInstrument)))
	f.Add([]byte(listing(inst(map[string]string{"strike": "1e22", "index_price": `"+1"`}))))
	f.Add([]byte(`[{"instruments":[{"instrument_name":"a","tick_size":0.5},{"instrument_name":"b","rfq":true} ,{}]}]`))
	f.Add([]byte(`[` + fullInstrument + `,{"instrument_name":"b","instruments":null},{"instruments":[{"instrument_name":"c","instruments":1}]},{}]`))
	f.Add([]byte(`[{"instrument_name":"g","rfq":true,"instruments":[{"instrument_name":"a"}]},{"instrument_name":"b","x":"y"}]`))
	f.Add([]byte(`[{"instrument_name":"a"},{"instruments":[{"instrument_name":"b"},{"instrument_name":"a"},{"instrument_name":"b","strike":"1"},{"instrument_name":"c"}]},{"instrument_name":"c"}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if bytes.Count(body, []byte("[")) > 200 || bytes.Count(body, []byte("{")) > 200 {
			t.Skip()
		}
		sameOutcome(t, body, Options{BatchRows: 2, ReadBuffer: 4096})
		sameOutcome(t, body, Options{BatchRows: 2, ReadBuffer: 4096, UniqueNames: true})
		// Windows of a few pending names (fewer than the rejects a batch
		// still takes).
		sameOutcome(t, body, Options{BatchRows: 5, ReadBuffer: 4096, UniqueNames: true})
	})
}

// FuzzParseNumber: parseNumber agrees with the JSON grammar and with
// strconv.ParseFloat, bit for bit, and refuses what overflows or underflows.
func FuzzParseNumber(f *testing.F) {
	for _, s := range []string{"0", "-0", "1", "0.1", "94517.25", "1e22", "1e23", "9007199254740993", "1E-5",
		"123456789012345678901234.5", "0.000000000000000000000001", "1e400", "-1e-400", "01", "1.", ".5", "-", "2.5e+3",
		"1795593424503", "12345678", "1234567:", "123456789012345678", "1234567890123456789", "-98765432.5", "9999999/",
		"1e-400", "0e-400", "-0.0e-999", "7e-324", "2.2250738585072014e-308", "2.2250738585072011e-308", "0.00000000000000000000000000001e-300"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, end, ok := parseNumber([]byte(s), 0)
		valid := jsontok.ValidNumber([]byte(s))
		want, err := strconv.ParseFloat(s, 64)
		finite := err == nil && !math.IsInf(want, 0) && !values.Underflows(want, s)
		if ok && end == len(s) {
			if !valid || !finite {
				t.Fatalf("parseNumber(%q) accepted it (valid %v, ParseFloat %v, %v)", s, valid, want, err)
			}
			if math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("parseNumber(%q) = %v (%x), ParseFloat %v (%x)", s, got, math.Float64bits(got), want, math.Float64bits(want))
			}
		} else if valid && finite {
			t.Fatalf("parseNumber(%q) refused a valid finite number (ok %v, end %d)", s, ok, end)
		}
		if v, e, ok := parseInt([]byte(s), 0); ok && e == len(s) {
			w, err := strconv.ParseInt(s, 10, 64)
			if err != nil || w != v || !valid {
				t.Fatalf("parseInt(%q) = %d, ParseInt %d, %v", s, v, w, err)
			}
		}
	})
}

// asciiStringSlow is asciiString one byte at a time, the reference for the
// word-at-a-time scan.
func asciiStringSlow(w []byte, p int) int {
	if w[p] != '"' {
		return -1
	}
	for q := p + 1; q < len(w); q++ {
		switch c := w[q]; {
		case c == '"':
			return q
		case c < 0x20 || c == '\\' || c >= 0x80:
			return -1
		}
	}
	return -1
}

// keyMatchSlow is keyPats[fi]'s match, byte by byte.
func keyMatchSlow(w []byte, p, fi int) bool {
	return bytes.HasPrefix(w[p:], []byte(`"`+venueFields[fi].name+`":`))
}

func keyMatch(w []byte, p, fi int) bool {
	k := &keyPats[fi]
	if len(w)-p >= 32 {
		return k.match32((*[32]byte)(w[p:]))
	}
	return k.matchShort(w[p:])
}

func TestScanHelpers(t *testing.T) {
	pad := strings.Repeat("x", 40)
	strs := []string{`""`, `"a"`, `"abcdefg"`, `"abcdefgh"`, `"abcdefghijklmnop"`, `"BTC-29NOV26-80000-C"`,
		`"abc\"d"`, `"abcdefgh\n"`, "\"abcdefghi\x1f\"", "\"abcdefghij\x7f\"", `"abcdefgé"`, `"abcdefghijkl`,
		"\"ab\x80\"", `"a\\"`, "\"\x00\"", `"~ !#"`}
	for _, s := range strs {
		for _, w := range []string{s, s + pad, s + `,"` + pad} {
			if got, want := asciiString([]byte(w), 0), asciiStringSlow([]byte(w), 0); got != want {
				t.Errorf("asciiString(%q) = %d, want %d", w, got, want)
			}
		}
	}
	for fi, f := range venueFields {
		for _, key := range []string{`"` + f.name + `":`, `"` + f.name + `" :`, `"` + f.name + `x":`,
			`"` + f.name[:len(f.name)-1] + `":`, `"` + strings.ToUpper(f.name[:1]) + f.name[1:] + `":`, `"` + f.name + `":1`} {
			for _, w := range []string{key, key + pad, "  " + key + pad} {
				p := strings.IndexByte(w, '"')
				if got, want := keyMatch([]byte(w), p, fi), keyMatchSlow([]byte(w), p, fi); got != want {
					t.Errorf("key %s at %q: match %v, want %v", f.name, w, got, want)
				}
			}
		}
	}
}

// FuzzScanHelpers: the word-at-a-time scans agree with byte loops.
func FuzzScanHelpers(f *testing.F) {
	f.Add([]byte(`"instrument_name":"BTC-29NOV26-80000-C","kind":"option"`), uint8(13))
	f.Add([]byte(`"abcdefgh\"ij"`), uint8(0))
	f.Fuzz(func(t *testing.T, w []byte, fi uint8) {
		for p := range w {
			if w[p] != '"' {
				continue
			}
			if got, want := asciiString(w, p), asciiStringSlow(w, p); got != want {
				t.Fatalf("asciiString(%q, %d) = %d, want %d", w, p, got, want)
			}
			i := int(fi) % len(venueFields)
			if got, want := keyMatch(w, p, i), keyMatchSlow(w, p, i); got != want {
				t.Fatalf("key %s at %q[%d:]: match %v, want %v", venueFields[i].name, w, p, got, want)
			}
		}
	})
}

// One decoder decoding listings one after the other (as run and replay
// reuse it) emits what a new decoder emits for each: its batches are sized
// from the previous listing, and grow or not, and its scanner is reused.
func TestDecoderReuse(t *testing.T) {
	sim := func(n, group int) []byte {
		var b bytes.Buffer
		s := venuesim.New(venuesim.Config{Seed: int64(n), Instruments: n, GroupSize: group, Faults: venuesim.Faults{WrongTypes: true}})
		if err := s.WriteInstruments(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	bodies := [][]byte{sim(3000, 200), sim(2900, 200), sim(3100, 300), sim(40, 7), []byte(`[{"instruments":[`), sim(5000, 1000), sim(1, 1)}
	for _, opt := range []Options{{}, {BatchRows: 1000, ReadBuffer: 4096}} {
		d := NewInstrumentDecoder(opt)
		for i, body := range bodies {
			o := decodeOnce(d, body)
			fresh := decodeWith(t, body, true, opt)
			if fmt.Sprint(o.err) != fmt.Sprint(fresh.err) || o.stats != fresh.stats || len(o.recs) != len(fresh.recs) {
				t.Fatalf("opt %+v body %d: reused decoder %v %+v %d records, new one %v %+v %d", opt, i, o.err, o.stats, len(o.recs), fresh.err, fresh.stats, len(fresh.recs))
			}
			for j := range o.recs {
				if o.tabs[j] != fresh.tabs[j] || !array.RecordEqual(o.recs[j], fresh.recs[j]) {
					t.Fatalf("opt %+v body %d: record %d differs", opt, i, j)
				}
				sameSlots(t, j, o.recs[j], fresh.recs[j])
			}
			o.release()
			fresh.release()
		}
		d.Release()
	}
}

// A decoder holds no Arrow memory between listings (the runner keeps idle
// decoders without releasing them), whether the last one loaded or failed.
func TestDecoderHoldsNoMemoryBetweenListings(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	d := NewInstrumentDecoder(Options{Mem: mem, BatchRows: 3})
	for i, body := range []string{
		listing(fullInstrument, inst(map[string]string{"strike": `"x"`}), inst(map[string]string{"instrument_name": ""})),
		`[{"instruments":[1,"a",{"instrument_name":null},{`,
	} {
		_, err := d.Decode(context.Background(), strings.NewReader(body), testMeta, func(*schema.Table, arrow.Record) error { return nil })
		if (err == nil) != (i == 0) {
			t.Fatalf("listing %d: %v", i, err)
		}
		mem.AssertSize(t, 0)
	}
}

// A listing whose last batches fail to emit (a sink error) leaves nothing
// for the next listing of a reused decoder: no Arrow memory held, and the
// next listing's rejects are its own.
func TestDecoderDropsRowsOfAFailedEmit(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	d := NewInstrumentDecoder(Options{Mem: mem, BatchRows: 100})
	bad := listing(fullInstrument, inst(map[string]string{"strike": `"x"`}), inst(map[string]string{"strike": `"y"`}))
	sinkDown := errors.New("sink down")
	_, err := d.Decode(context.Background(), strings.NewReader(bad), testMeta, func(tbl *schema.Table, rec arrow.Record) error {
		if tbl == schema.Instruments {
			return sinkDown
		}
		return nil
	})
	if !errors.Is(err, sinkDown) {
		t.Fatalf("first listing: %v, want the sink's error", err)
	}
	mem.AssertSize(t, 0)
	rejects := 0
	st, err := d.Decode(context.Background(), strings.NewReader(listing(fullInstrument, inst(map[string]string{"strike": `"z"`}))), testMeta, func(tbl *schema.Table, rec arrow.Record) error {
		if tbl == schema.Rejects {
			rejects += int(rec.NumRows())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Rejects != 1 || rejects != 1 {
		t.Fatalf("second listing: %d rejects counted, %d emitted; want 1 and 1 (its own)", st.Rejects, rejects)
	}
	mem.AssertSize(t, 0)
}
