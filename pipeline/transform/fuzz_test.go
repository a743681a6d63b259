package transform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if nesting(body) > 400 {
			t.Skip("deeper than the decoder's documented limit")
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
		want, groups := 0, 0
		for _, e := range elems {
			var g map[string]json.RawMessage
			if len(bytes.TrimSpace(e)) == 0 || bytes.TrimSpace(e)[0] != '{' || json.Unmarshal(e, &g) != nil {
				shapeOK = false
				break
			}
			raw, ok := g["instruments"]
			switch {
			case !ok && len(g) > 0:
				want++
				continue
			case !ok || string(raw) == "null":
				continue
			}
			groups++
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
		if err == nil && bytes.Count(body, []byte(`"instruments"`)) <= groups && int64(want) != rows+rejects {
			t.Fatalf("%d instrument elements, %d rows + %d rejects", want, rows, rejects)
		}
	})
}

func nesting(b []byte) int {
	depth, max := 0, 0
	for _, c := range b {
		switch c {
		case '[', '{':
			depth++
			if depth > max {
				max = depth
			}
		case ']', '}':
			depth--
		}
	}
	return max
}
