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
// the listing's shape, and every instrument element of a valid listing comes
// out either as a row or as a reject.
func FuzzDecodeInstruments(f *testing.F) {
	seeds := []string{
		listing(fullInstrument),
		listing(fullInstrument, inst(map[string]string{"strike": `"x"`}), inst(map[string]string{"instrument_name": ""})),
		listing(inst(map[string]string{"index_price": `"1e3"`, "extra": `{"a":[1,{"b":null}]}`})),
		`[{"instruments":null},{},{"x":1,"instruments":[1,"a",null,{}]}]`,
		`[]`, `{}`, `[[]]`, `"\ud800"`, `[{"instruments":[{"instrument_name":"\u00e9\ud83d\ude00"}]}]`,
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
		var groups []map[string]json.RawMessage
		shapeOK := json.Unmarshal(body, &groups) == nil
		want := 0
		for _, g := range groups {
			raw, ok := g["instruments"]
			if !ok || string(raw) == "null" {
				continue
			}
			var elems []json.RawMessage
			if json.Unmarshal(raw, &elems) != nil {
				shapeOK = false
				break
			}
			want += len(elems)
		}
		if shapeOK != (err == nil) {
			t.Fatalf("shape ok=%v but decode err=%v for %q", shapeOK, err, body)
		}
		// Duplicate "instruments" keys make encoding/json keep the last one.
		if err == nil && bytes.Count(body, []byte(`"instruments"`)) <= len(groups) && int64(want) != rows+rejects {
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
