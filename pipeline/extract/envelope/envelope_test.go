package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/optlake/optlake/pipeline/values"
)

func splice(t *testing.T, body string, spec Spec) (string, Result, error) {
	t.Helper()
	var out bytes.Buffer
	s := NewStream(&out, spec.Instruments)
	res, err := Splice(strings.NewReader(body), s, spec)
	if err == nil {
		s.Close()
	}
	return out.String(), res, err
}

func TestSplice(t *testing.T) {
	errs := &Errors{Path: "error", Code: "code", Message: "error.message", RetryCodes: []string{"10028"}}
	for _, tc := range []struct {
		name, body string
		spec       Spec
		want       string // the stream, or the error's text
		values     map[string]string
		bad        bool // values.ErrBadInput
	}{
		{name: "jsonrpc result", body: `{"jsonrpc":"2.0","result":[{"a":1},{"a":2}],"usIn":1}`, spec: Spec{Records: "result"}, want: `[{"a":1},{"a":2}]`},
		{name: "nested with cursor after the rows", body: `{"result":{"data":[1, 2],"next":"c2"}}`, spec: Spec{Records: "result.data", Capture: []string{"result.next"}},
			want: `[1,2]`, values: map[string]string{"result.next": `"c2"`}},
		{name: "array index", body: `[{"rows":[3]}]`, spec: Spec{Records: "0.rows"}, want: `[3]`},
		{name: "object is one row", body: `{"result":{"b":1}}`, spec: Spec{Records: "result"}, want: `[{"b":1}]`},
		{name: "null is none", body: `{"result":null}`, spec: Spec{Records: "result"}, want: `[]`},
		{name: "whole body", body: ` [ {"x" : "y"} ] `, spec: Spec{}, want: `[{"x" : "y"}]`},
		{name: "missing records", body: `{"data":[]}`, spec: Spec{Records: "result"}, want: `no records at "result"`, bad: true},
		{name: "not JSON", body: `{"result":[1,}`, spec: Spec{Records: "result"}, want: "", bad: true},
		{name: "trailing data", body: `{"result":[]} x`, spec: Spec{Records: "result"}, want: "unexpected data", bad: true},
		{name: "venue error retried", body: `{"error":{"code":10028,"message":"too_many_requests"}}`, spec: Spec{Records: "result", Errors: errs}, want: "venue error 10028: too_many_requests"},
		{name: "null error is no error", body: `{"error":null,"result":[1]}`, spec: Spec{Records: "result", Errors: errs}, want: `[1]`},
		{name: "grouped instruments", body: `[{"instruments":[{"instrument_name":"A"},{"instrument_name":"B"}],"x":1},{"instruments":null}]`, spec: Spec{Instruments: true},
			want: `[{"instruments":[{"instrument_name":"A"},{"instrument_name":"B"}]}]`},
		{name: "bare instruments", body: `{"result":[{"instrument_name":"A","strike":1},{"instrument_name":"B"}]}`, spec: Spec{Records: "result", Instruments: true},
			want: `[{"instruments":[{"instrument_name":"A","strike":1},{"instrument_name":"B"}]}]`},
		{name: "group whose instruments key is not first", body: `{"result":[{"currency":"BTC","n":[1,{"a":2}],"instruments":[{"instrument_name":"A"}],"x":1},{"instrument_name":"B"}]}`, spec: Spec{Records: "result", Instruments: true},
			want: `[{"instruments":[{"instrument_name":"A"},{"instrument_name":"B"}]}]`},
		{name: "no instruments", body: `{"result":[]}`, spec: Spec{Records: "result", Instruments: true}, want: `[]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, res, err := splice(t, tc.body, tc.spec)
			if err != nil {
				if !strings.Contains(err.Error(), tc.want) || errors.Is(err, values.ErrBadInput) != tc.bad {
					t.Fatalf("error %v (bad input %v), want %q (bad input %v)", err, errors.Is(err, values.ErrBadInput), tc.want, tc.bad)
				}
				var ve *VenueError
				if errors.As(err, &ve) && !ve.Retry {
					t.Errorf("code 10028 is in retry_codes: %+v", ve)
				}
				return
			}
			if out != tc.want || tc.bad {
				t.Errorf("stream %s, want %s", out, tc.want)
			}
			for k, v := range tc.values {
				if string(res.Values[k]) != v {
					t.Errorf("value %s = %s, want %s", k, res.Values[k], v)
				}
			}
		})
	}
}

// Pages written to one stream make one array.
func TestStreamAcrossPages(t *testing.T) {
	var out bytes.Buffer
	s := NewStream(&out, false)
	for _, page := range []string{`{"d":[1,2]}`, `{"d":[]}`, `{"d":[3]}`} {
		if _, err := Splice(strings.NewReader(page), s, Spec{Records: "d"}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if out.String() != `[1,2,3]` {
		t.Errorf("stream %s", out.String())
	}
}

func FuzzSplice(f *testing.F) {
	f.Add(`{"result":{"data":[{"a":1}],"next":"x"}}`, "result.data", false)
	f.Add(`[{"instruments":[{"a":1}]},{"b":2}]`, "", true)
	f.Add(`{"error":{"code":1},"result":[]}`, "result", false)
	f.Add(`{"a":[[1],[2]]}`, "a.1", false)
	f.Fuzz(func(t *testing.T, body, path string, instruments bool) {
		var out bytes.Buffer
		s := NewStream(&out, instruments)
		_, err := Splice(strings.NewReader(body), s, Spec{Records: path, Instruments: instruments,
			Errors: &Errors{Path: "error", Code: "error.code"}, Capture: []string{"result.next"}})
		if err != nil {
			return
		}
		s.Close()
		// What the decoders read is always one JSON document, and it is
		// built only from the body: a body that is not JSON never passes.
		if !json.Valid(out.Bytes()) {
			t.Fatalf("body %q path %q: stream %q is not JSON", body, path, out.String())
		}
		if !json.Valid([]byte(body)) {
			t.Fatalf("body %q is not JSON but was spliced", body)
		}
	})
}
