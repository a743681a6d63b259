package transform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/pipeline/values"
	"github.com/optlake/optlake/schema"
)

// FuzzDecodeInstruments checks the decoder against encoding/json: it never
// panics or hangs, it fails exactly the bodies that are not valid JSON or not
// the listing's shape, and every instrument of a valid listing (in a group or
// bare) comes out either as a row or as a reject.
func FuzzDecodeInstruments(f *testing.F) {
	seeds := []string{
		listing(fullInstrument),
		listing(fullInstrument, inst(map[string]string{"strike": `"x"`}), inst(map[string]string{"instrument_name": ""})),
		listing(inst(map[string]string{"index_price": `"1e3"`, "extra": `{"a":[1,{"b":null}]}`})),
		`[{"instruments":null},{},{"x":1,"instruments":[1,"a",null,{}]}]`,
		`[]`, `{}`, `[[]]`, `[null]`, `[1]`, `"\ud800"`,
		// Bare instruments, mixed with groups; a group's key anywhere.
		`[` + fullInstrument + `,{"instrument_name":"b","instruments":null},{"kind":"option"},{"instruments":[` + fullInstrument + `]}]`,
		`[{"instrument_name":"g","strike":"x","instruments":[{"instrument_name":"a"}],"instruments":[]},{},{"instrument_name":"c","x":[1]}]`, `[{"instruments":[{"instrument_name":"\u00e9\ud83d\ude00"}]}]`,
		// Values nested past the scanner's MaxDepth: each one rejected row,
		// or an ignored member of a group; malformed inside, a failed listing.
		listing(fullInstrument, inst(map[string]string{"greeks": deepValue(600)}), inst(map[string]string{"strike": deepValue(600)}), deepValue(600)),
		`[{"x":` + deepValue(600) + `,"instruments":[{"instrument_name":"a","y":` + deepValue(700) + `}]},{"instrument_name":"b","z":` + deepValue(600) + `}]`,
		listing(inst(map[string]string{"greeks": strings.Repeat("[", 600) + "}" + strings.Repeat("]", 599)})),
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if nesting(body) > 10_000 {
			t.Skip("deeper than encoding/json's limit")
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		d := NewInstrumentDecoder(Options{BatchRows: 3, Mem: mem, ReadBuffer: 4096})
		var rows, rejects int64
		st, err := d.Decode(context.Background(), bytes.NewReader(body), testMeta, func(tb *schema.Table, rec arrow.Record) error {
			if tb == schema.Rejects {
				rejects += rec.NumRows()
			} else {
				rows += rec.NumRows()
			}
			return nil
		})
		d.Release()
		mem.AssertSize(t, 0)
		if err != nil && !errors.Is(err, values.ErrBadInput) {
			t.Fatalf("error that is not an input error: %v", err)
		}
		if err == nil && (st.Rows != rows || st.Rejects != rejects) {
			t.Fatalf("stats %+v, emitted %d/%d", st, rows, rejects)
		}
		if !json.Valid(body) {
			if err == nil {
				t.Fatalf("accepted invalid JSON %q", body)
			}
			return
		}
		// Each element is a group (an object with "instruments": null or
		// an array) or, without that key, one instrument; {} is an empty
		// group. Anything but an object fails the listing.
		var elems []json.RawMessage
		// A JSON null unmarshals into a nil slice, but a listing of null
		// is an error (an array is expected), as the decoder says.
		shapeOK := json.Unmarshal(body, &elems) == nil && elems != nil
		want, dupInstruments := 0, false
		for _, e := range elems {
			var g map[string]json.RawMessage
			if len(bytes.TrimSpace(e)) == 0 || bytes.TrimSpace(e)[0] != '{' || json.Unmarshal(e, &g) != nil {
				shapeOK = false
				break
			}
			dupInstruments = dupInstruments || keyCount(e, "instruments") > 1
			raw, ok := g["instruments"]
			switch {
			case !ok && len(g) > 0:
				want++
				continue
			case !ok || string(raw) == "null":
				continue
			}
			var list []json.RawMessage
			if json.Unmarshal(raw, &list) != nil {
				shapeOK = false
				break
			}
			want += len(list)
		}
		if shapeOK != (err == nil) {
			t.Fatalf("shape ok=%v but decode err=%v for %q", shapeOK, err, body)
		}
		// Duplicate "instruments" keys make encoding/json keep the last one.
		// Counted as decoded keys: the bytes "instruments" miss a key
		// written with escapes ("instrumen\u0074s", testdata seed).
		if err == nil && !dupInstruments && int64(want) != rows+rejects {
			t.Fatalf("%d instrument elements, %d rows + %d rejects", want, rows, rejects)
		}
	})
}

// nesting is how deep b's arrays and objects nest, brackets inside
// strings not counted (they hid a nesting: testdata seed).
func nesting(b []byte) int {
	depth, max := 0, 0
	in := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case in:
		case c == '[' || c == '{':
			depth++
			if depth > max {
				max = depth
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return max
}

// keyCount is how many of the JSON object obj's own keys are key once
// decoded (escapes and all).
func keyCount(obj []byte, key string) int {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0
	}
	n := 0
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return n
		}
		if k == key {
			n++
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return n
		}
	}
	return n
}
