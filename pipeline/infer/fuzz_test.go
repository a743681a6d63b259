package infer

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/optlake/optlake/pipeline/values"
)

// FuzzInfer checks Decode on arbitrary bodies (seed corpus: every testdata
// input): it never panics; a body either decodes or fails with an input
// error, and fails exactly when it is not JSON or not a tabulable shape;
// Arrow memory is balanced; every scalar of an accepted body is found among
// the emitted cells; decoding the same body again (even under Freeze)
// changes nothing; and the registry survives its file format. Each body is
// decoded with the default column budget and with the smallest.
func FuzzInfer(f *testing.F) {
	for _, dir := range caseDirs(f) {
		for _, in := range caseInputs(f, dir) {
			b, err := os.ReadFile(in)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	for _, s := range []string{
		`{"a":{"a":{"a":[{"a":[{"a":1}]}]}}}`, `[null,{}]`, `{"":[{"":""}]}`, `{"x":[1,"1"],"x_":[true]}`,
		`[{"t_at":1e20,"u_at":99999999999999999,"v":"\ud800"}]`, `{"a":"\u0000","A":{"":-0.0e-400}}`,
		`{"k":{"num":"1"},"k__num":2,"K":"3"}`, `{"p":null}`, `[{"a":[]},{"a":[[]]},{"a":[{}]}]`,
		"{\"a\xff\":\"b\xc3\x28\",\"c\":[\"\xed\xa0\x80\"]}", `{"s":"\ud83d\ude00\udc00\n\"\u2028"}`,
		`[{"a":1},"x",[2],null,3]`, `[{"a":1},{"a":` + strings.Repeat("[", MaxNesting+2) + strings.Repeat("]", MaxNesting+2) + `}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		// The default budget, and the smallest one (fields go to extra).
		for _, budget := range []int{0, minColumnBudget} {
			fuzzOne(t, body, budget)
		}
	})
}

func fuzzOne(t *testing.T, body []byte, budget int) {
	{
		reg := NewRegistry()
		if err := reg.SetPolicy(Policy{ColumnBudget: budget}); err != nil {
			t.Fatal(err)
		}
		res := decodeBody(t, reg, body, testMeta("fz", t0), Options{BatchRows: 2})
		var se *values.ShapeError
		deep := errors.As(res.err, &se) && strings.Contains(se.Msg, "nested deeper")
		if res.err != nil && !errors.Is(res.err, values.ErrBadInput) {
			t.Fatalf("error that is not an input error: %v", res.err)
		}
		want := tabulable(body)
		if !deep && (res.err == nil) != want {
			t.Fatalf("tabulable=%v but err=%v for %q", want, res.err, body)
		}
		if res.err != nil {
			return
		}
		lc := newLeafChecker(false)
		lc.add(res)
		miss, err := lc.missing(body)
		if err != nil {
			t.Fatal(err)
		}
		if len(miss) > 0 {
			t.Fatalf("values not loaded: %v in %q", miss, body)
		}
		again := decodeBody(t, reg, body, testMeta("fz", t0), Options{Mode: Freeze, BatchRows: 5})
		if again.err != nil || len(again.changes) != 0 {
			t.Fatalf("second decode: %v %v", again.err, again.changes)
		}
		for n, rows := range res.stats.Rows {
			if again.stats.Rows[n] != rows {
				t.Fatalf("second decode: %s has %d rows, first %d", n, again.stats.Rows[n], rows)
			}
		}
		checkFileFormat(t, reg)
	}
}

// tabulable reports whether body is one JSON value that is an object or an
// array of objects and nulls (judged by encoding/json).
func tabulable(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		return false
	}
	switch v.(type) {
	case map[string]any:
		return true
	case []any:
		return true // an element that is not an object is rejected
	}
	return false
}

// checkFileFormat marshals every table of reg to its file format and back
// and compares the result.
func checkFileFormat(t *testing.T, reg *Registry) {
	t.Helper()
	back := NewRegistry()
	for n, st := range reg.tables {
		b, err := marshalTable(st)
		if err != nil {
			t.Fatal(err)
		}
		st2, err := unmarshalTable(b)
		if err != nil {
			t.Fatalf("table %s: %v\n%s", n, err, b)
		}
		back.tables[n] = st2
	}
	if err := back.link(); err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := reg.Print(&a); err != nil {
		t.Fatal(err)
	}
	if err := back.Print(&b); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Fatalf("registry after its file format differs:\n%s", lineDiff(a.String(), b.String()))
	}
	for _, tb := range reg.Tables() {
		if !back.Table(tb.Name).ArrowSchema().Equal(tb.ArrowSchema()) {
			t.Fatalf("table %s: schema differs after its file format", tb.Name)
		}
	}
}
