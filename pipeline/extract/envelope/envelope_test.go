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
	f.Add(`{"error":[],"result":{"A":{"x":1},"B":[1,2],"C":"s"}}`, "result", false)
	f.Fuzz(func(t *testing.T, body, path string, instruments bool) {
		var out bytes.Buffer
		s := NewStream(&out, instruments)
		spec := Spec{Records: path, Instruments: instruments,
			Errors: &Errors{Path: "error", Code: "error.code"}, Capture: []string{"result.next"}, Last: []string{"id"}}
		if len(body)%2 == 1 { // the shapes too: keyed objects, positional rows, success codes
			spec.Shape = Shape{Key: "k", Columns: []string{"a", "b"}}
			spec.Errors = &Errors{Path: "error", NonEmpty: true, Code: "code", OK: []string{"0"}}
		}
		_, err := Splice(strings.NewReader(body), s, spec)
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

// Venue semantics: success codes, non-empty error arrays, errors whatever
// the records path, keyed objects, positional rows, the last record.
func TestVenueSemantics(t *testing.T) {
	okx := &Errors{Code: "code", Message: "msg", OK: []string{"0"}, RetryCodes: []string{"50011"}}
	bybit := &Errors{Code: "retCode", Message: "retMsg", OK: []string{"0"}}
	kraken := &Errors{Path: "error", Message: "error.0", NonEmpty: true}
	for _, tc := range []struct {
		name, body string
		spec       Spec
		want       string // the stream, or the error's text
		retry      bool
		last       map[string]string
	}{
		{name: "okx success", body: `{"code":"0","msg":"","data":[{"instId":"A"}]}`, spec: Spec{Records: "data", Errors: okx}, want: `[{"instId":"A"}]`},
		{name: "okx error code", body: `{"code":"51000","msg":"Parameter instType error","data":[]}`, spec: Spec{Records: "data", Errors: okx}, want: "venue error 51000: Parameter instType error"},
		{name: "okx retryable code", body: `{"code":"50011","msg":"Rate limit reached","data":[]}`, spec: Spec{Records: "data", Errors: okx}, want: "venue error 50011: Rate limit reached", retry: true},
		{name: "error after the rows writes none and may be retried", body: `{"data":[{"a":1}],"code":"50011","msg":"busy"}`, spec: Spec{Records: "data", Errors: okx}, want: "venue error 50011: busy", retry: true},
		{name: "no code at all is an error", body: `{"data":[{"a":1}]}`, spec: Spec{Records: "data", Errors: okx}, want: "venue error: no code at code (success is 0)"},
		{name: "bybit numeric code", body: `{"retCode":0,"retMsg":"OK","result":{"list":[1]}}`, spec: Spec{Records: "result.list", Errors: bybit}, want: `[1]`},
		{name: "bybit error", body: `{"retCode":10004,"retMsg":"error sign!","result":{}}`, spec: Spec{Records: "result.list", Errors: bybit}, want: "venue error 10004: error sign!"},
		{name: "errors without records: the whole body is judged", body: `{"code":"50113","msg":"Invalid Sign"}`, spec: Spec{Errors: okx}, want: "venue error 50113: Invalid Sign"},
		{name: "errors without records: a present error path", body: `{"error":{"code":13009,"message":"unauthorized"}}`, spec: Spec{Errors: &Errors{Path: "error", Code: "code", Message: "message"}}, want: "venue error 13009: unauthorized"},
		{name: "errors without records: success loads the body", body: `{"code":"0","data":[]}`, spec: Spec{Errors: okx}, want: `[{"code":"0","data":[]}]`},
		{name: "a code for 4xx answers only does not judge a 2xx body", body: `{"code":200,"msg":"success"}`, spec: Spec{Errors: &Errors{Code: "code", Message: "msg"}}, want: `[{"code":200,"msg":"success"}]`},
		{name: "kraken empty error array", body: `{"error":[],"result":{"XXBT":"0.5"}}`, spec: Spec{Records: "result", Errors: kraken}, want: `[{"XXBT":"0.5"}]`},
		{name: "kraken error", body: `{"error":["EAPI:Invalid nonce"]}`, spec: Spec{Records: "result", Errors: kraken}, want: "venue error: EAPI:Invalid nonce"},
		{name: "keyed objects", body: `{"error":[],"result":{"XXBTZUSD":{"altname":"XBTUSD"},"XETHZUSD":{"altname":"ETHUSD"},"E":{}}}`, spec: Spec{Records: "result", Shape: Shape{Key: "pair"}},
			want: `[{"pair":"XXBTZUSD","altname":"XBTUSD"},{"pair":"XETHZUSD","altname":"ETHUSD"},{"pair":"E"}]`},
		{name: "keyed scalars", body: `{"result":{"XXBT":"0.5","ZUSD":"10.1"}}`, spec: Spec{Records: "result", Shape: Shape{Key: "asset"}},
			want: `[{"asset":"XXBT","value":"0.5"},{"asset":"ZUSD","value":"10.1"}]`},
		{name: "keyed arrays by position", body: `{"result":{"A":[1,"x"]}}`, spec: Spec{Records: "result", Shape: Shape{Key: "k", Columns: []string{"n", "s"}}},
			want: `[{"k":"A","n":1,"s":"x"}]`},
		{name: "rows by position", body: `{"result":[[1,"a"],[2,"b",true],{"o":1}]}`, spec: Spec{Records: "result", Shape: Shape{Columns: []string{"id", "name"}}},
			want: `[{"id":1,"name":"a"},{"id":2,"name":"b","2":true},{"o":1}]`},
		{name: "keyed instruments are bare instruments", body: `{"result":{"A":{"strike":1}}}`, spec: Spec{Records: "result", Instruments: true, Shape: Shape{Key: "instrument_name"}},
			want: `[{"instruments":[{"instrument_name":"A","strike":1}]}]`},
		{name: "the last record", body: `{"code":"0","data":[{"billId":"9","x":{"y":1}},{"billId":"7","x":{"y":2}}]}`, spec: Spec{Records: "data", Errors: okx, Last: []string{"billId", "x.y"}},
			want: `[{"billId":"9","x":{"y":1}},{"billId":"7","x":{"y":2}}]`, last: map[string]string{"billId": `"7"`, "x.y": `2`}},
		{name: "rewritten records", body: `{"data":[{"a":1}]}`, spec: Spec{Records: "data", Instruments: true, Rewrite: func(dst, raw []byte) []byte {
			return append(append(append(dst[:0], `{"instrument_name":"X","v":`...), raw...), '}')
		}},
			want: `[{"instruments":[{"instrument_name":"X","v":{"a":1}}]}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, res, err := splice(t, tc.body, tc.spec)
			if err != nil {
				var ve *VenueError
				if !errors.As(err, &ve) || err.Error() != tc.want {
					t.Fatalf("error %v, want %q", err, tc.want)
				}
				if ve.Retry != tc.retry {
					t.Errorf("retry %v, want %v", ve.Retry, tc.retry)
				}
				if out != "" {
					t.Errorf("an error body wrote rows: %s", out)
				}
				return
			}
			if out != tc.want {
				t.Errorf("stream %s, want %s", out, tc.want)
			}
			for k, v := range tc.last {
				if string(res.Last[k]) != v {
					t.Errorf("last %s = %s, want %s", k, res.Last[k], v)
				}
			}
		})
	}
}

func TestClassify(t *testing.T) {
	e := &Errors{Code: "code", Message: "msg", RetryCodes: []string{"-1021"}}
	for _, tc := range []struct {
		body, want string
		retry      bool
	}{
		{`{"code":-1021,"msg":"Timestamp for this request is outside of the recvWindow."}`, "venue error -1021: Timestamp for this request is outside of the recvWindow.", true},
		{`{"code":-2015,"msg":"Invalid API-key, IP, or permissions for action."}`, "venue error -2015: Invalid API-key, IP, or permissions for action.", false},
	} {
		ve := Classify([]byte(tc.body), e)
		if ve == nil || ve.Error() != tc.want || ve.Retry != tc.retry {
			t.Errorf("%s: %+v, want %q retry %v", tc.body, ve, tc.want, tc.retry)
		}
	}
	if ve := Classify([]byte(`<html>bad gateway</html>`), e); ve != nil {
		t.Errorf("not JSON: %+v", ve)
	}
	if ve := Classify([]byte(`{"other":1}`), e); ve != nil {
		t.Errorf("no code: %+v", ve)
	}
}

func TestErrorsCheck(t *testing.T) {
	for _, tc := range []struct {
		e    Errors
		want string
	}{
		{Errors{}, "path or code is required"},
		{Errors{Path: "e", OK: []string{"0"}}, "code is required"},
		{Errors{Code: "c", NonEmpty: true}, "non_empty: path is required"},
		{Errors{Code: "c", OK: []string{"0"}}, ""},
	} {
		err := tc.e.Check()
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.e, err, tc.want)
		}
	}
}

// A value nested past jsontok.MaxDepth inside a listing's records is
// passed on as received (the decoder rejects its one instrument), on every
// path through the splicer: bare and grouped instruments, keyed records,
// and the error pass over a body read twice; an account endpoint's too.
func TestDeepValueInListing(t *testing.T) {
	deep := strings.Repeat(`[1,{"k":`, 5000) + `"end"` + strings.Repeat("}]", 5000)
	okx := &Errors{Code: "code", Message: "msg", OK: []string{"0"}}
	a := `{"instrument_name":"A","greeks":` + deep + `}`
	for _, tc := range []struct {
		name, body string
		spec       Spec
		want       string
	}{
		{name: "bare", body: `{"result":[` + a + `,{"instrument_name":"B"}]}`, spec: Spec{Records: "result", Instruments: true},
			want: `[{"instruments":[` + a + `,{"instrument_name":"B"}]}]`},
		{name: "judged first", body: `{"code":"0","data":[` + a + `,{"instrument_name":"B"}]}`, spec: Spec{Records: "data", Instruments: true, Errors: okx},
			want: `[{"instruments":[` + a + `,{"instrument_name":"B"}]}]`},
		{name: "grouped", body: `[{"x":` + deep + `,"instruments":[` + a + `]},{"instrument_name":"B"}]`, spec: Spec{Instruments: true},
			want: `[{"instruments":[` + a + `,{"instrument_name":"B"}]}]`},
		{name: "keyed", body: `{"result":{"A":{"greeks":` + deep + `},"B":{}}}`, spec: Spec{Records: "result", Instruments: true, Shape: Shape{Key: "instrument_name"}},
			want: `[{"instruments":[` + a + `,{"instrument_name":"B"}]}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := splice(t, tc.body, tc.spec)
			if err != nil {
				t.Fatalf("error %v, want the records passed on", err)
			}
			if out != tc.want {
				t.Errorf("stream (%d bytes) is not the records as received (%d bytes)", len(out), len(tc.want))
			}
		})
	}
	// An account endpoint's record likewise: its decoder rejects the row.
	if out, _, err := splice(t, `{"result":[{"a":`+deep+`},{"b":1}]}`, Spec{Records: "result"}); err != nil || out != `[{"a":`+deep+`},{"b":1}]` {
		t.Errorf("an account body nested past MaxDepth: %v, %d bytes, want the records as received", err, len(out))
	}
}

// A records key named like a member of its rows would put the key in the
// row twice (the decoder keeps the later one: one of them lost): a column
// or "value" of that name is refused by Check, an object row holding the
// member fails the body (and its endpoint), naming the row.
func TestKeyNamedLikeAMember(t *testing.T) {
	for _, s := range []Shape{{Key: "open", Columns: []string{"time", "open"}}, {Key: "value"}} {
		if err := s.Check(); err == nil || !strings.Contains(err.Error(), "name the rows' key otherwise") {
			t.Errorf("%+v: Check %v", s, err)
		}
	}
	if err := (Shape{Key: "pair", Columns: []string{"time"}}).Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	out, _, err := splice(t, `{"result":{"XXBTZUSD":{"altname":"XBTUSD"},"XETHZUSD":{"altname":"ETHUSD","pair":"x"}}}`, Spec{Records: "result", Shape: Shape{Key: "pair"}})
	if err == nil || !strings.Contains(err.Error(), `the row "XETHZUSD" has a member "pair" of its own`) {
		t.Fatalf("error %v, out %s", err, out)
	}
	// A nested member of that name, or the name inside a value, is no
	// collision.
	out, _, err = splice(t, `{"result":{"A":{"x":{"pair":1},"s":"\"pair\""}}}`, Spec{Records: "result", Shape: Shape{Key: "pair"}})
	if err != nil || out != `[{"pair":"A","x":{"pair":1},"s":"\"pair\""}]` {
		t.Errorf("stream %s, error %v", out, err)
	}
}
