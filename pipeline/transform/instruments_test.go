package transform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/pipeline/values"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

var testMeta = sinks.Snapshot{
	Time:     time.Date(2026, 11, 22, 10, 0, 0, 123e6, time.UTC),
	RunID:    "0193-run",
	Source:   "venue.test",
	Endpoint: "instruments",
}

// decoded is what one Decode produced, as plain Go values (nil = null).
type decoded struct {
	rows    []map[string]any
	rejects []map[string]any
	batches int
	stats   Stats
	err     error
}

func rowsOf(rec arrow.Record) []map[string]any {
	var out []map[string]any
	for i := 0; i < int(rec.NumRows()); i++ {
		m := map[string]any{}
		for c, f := range rec.Schema().Fields() {
			col := rec.Column(c)
			if col.IsNull(i) {
				m[f.Name] = nil
				continue
			}
			switch a := col.(type) {
			case *array.String:
				m[f.Name] = a.Value(i)
			case *array.Float64:
				m[f.Name] = a.Value(i)
			case *array.Int64:
				m[f.Name] = a.Value(i)
			case *array.Boolean:
				m[f.Name] = a.Value(i)
			case *array.Timestamp:
				m[f.Name] = time.UnixMilli(int64(a.Value(i))).UTC()
			}
		}
		out = append(out, m)
	}
	return out
}

func decode(t *testing.T, body string, opt Options) decoded {
	t.Helper()
	return decodeReader(t, strings.NewReader(body), opt)
}

func decodeReader(t *testing.T, r io.Reader, opt Options) decoded {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	opt.Mem = mem
	d := NewInstrumentDecoder(opt)
	var out decoded
	out.stats, out.err = d.Decode(context.Background(), r, testMeta, func(tb *schema.Table, rec arrow.Record) error {
		if !rec.Schema().Equal(tb.ArrowSchema()) {
			t.Errorf("record schema differs from schema.%s", tb.Name)
		}
		switch tb {
		case schema.Instruments:
			out.rows = append(out.rows, rowsOf(rec)...)
			out.batches++
		case schema.Rejects:
			out.rejects = append(out.rejects, rowsOf(rec)...)
		default:
			t.Errorf("unexpected table %s", tb.Name)
		}
		return nil
	})
	d.Release()
	mem.AssertSize(t, 0)
	return out
}

const fullInstrument = `{"base_currency":"BTC","block_trade_commission":0.00015,"block_trade_min_trade_amount":25,"block_trade_tick_size":0.0001,"contract_size":1,"counter_currency":"USD","creation_timestamp":1763596800000,"deployed":true,"expiration_timestamp":1764230400000,"index_price":"95012.35","instrument_id":"210838","instrument_name":"BTC-27NOV26-100000-C","instrument_type":"reversed","is_active":true,"kind":"option","maker_commission":0.0003,"min_trade_amount":0.1,"option_type":"call","quote_currency":"BTC","rfq":false,"settlement_currency":"BTC","settlement_period":"week","strike":100000,"taker_commission":0.0003,"tick_size":0.0005}`

// inst returns fullInstrument with members replaced (value "" removes it).
func inst(repl map[string]string) string {
	s := fullInstrument
	for k, v := range repl {
		i := strings.Index(s, `"`+k+`":`)
		if i < 0 {
			s = s[:len(s)-1] + `,"` + k + `":` + v + `}`
			continue
		}
		j := i + len(k) + 3
		depth, inStr := 0, false
		for ; j < len(s); j++ {
			c := s[j]
			if inStr {
				if c == '\\' {
					j++
				} else if c == '"' {
					inStr = false
				}
				continue
			}
			if c == '"' {
				inStr = true
			} else if c == '{' || c == '[' {
				depth++
			} else if c == '}' || c == ']' {
				if depth == 0 {
					break
				}
				depth--
			} else if c == ',' && depth == 0 {
				break
			}
		}
		if v == "" {
			if s[j] == ',' {
				j++
			} else if s[i-1] == ',' {
				i--
			}
			s = s[:i] + s[j:]
		} else {
			s = s[:i] + `"` + k + `":` + v + s[j:]
		}
	}
	return s
}

func listing(insts ...string) string {
	return `[{"instruments":[` + strings.Join(insts, ",") + `]}]`
}

func TestDecodeFullRow(t *testing.T) {
	got := decode(t, listing(fullInstrument), Options{})
	if got.err != nil || len(got.rows) != 1 || len(got.rejects) != 0 {
		t.Fatalf("err=%v rows=%d rejects=%v", got.err, len(got.rows), got.rejects)
	}
	r := got.rows[0]
	want := map[string]any{
		"snapshot_time": testMeta.Time, "run_id": "0193-run", "source": "venue.test",
		"base_currency": "BTC", "block_trade_commission": 0.00015, "block_trade_min_trade_amount": 25.0,
		"block_trade_tick_size": 0.0001, "contract_size": 1.0, "counter_currency": "USD",
		"creation_timestamp": int64(1763596800000), "deployed": true, "expiration_timestamp": int64(1764230400000),
		"index_price": 95012.35, "index_price_raw": "95012.35", "instrument_id": "210838",
		"instrument_name": "BTC-27NOV26-100000-C", "instrument_type": "reversed", "is_active": true,
		"kind": "option", "maker_commission": 0.0003, "min_trade_amount": 0.1, "option_type": "call",
		"quote_currency": "BTC", "rfq": false, "settlement_currency": "BTC", "settlement_period": "week",
		"strike": 100000.0, "taker_commission": 0.0003, "tick_size": 0.0005,
		"creation_time":   time.Date(2025, 11, 20, 0, 0, 0, 0, time.UTC),
		"expiration_time": time.Date(2025, 11, 27, 8, 0, 0, 0, time.UTC),
		"extra":           nil,
	}
	if len(r) != len(schema.Instruments.Columns) {
		t.Errorf("row has %d columns, schema %d", len(r), len(schema.Instruments.Columns))
	}
	for k, w := range want {
		if g := r[k]; g != w {
			t.Errorf("%s = %#v, want %#v", k, g, w)
		}
	}
}

func TestDecodeValueRules(t *testing.T) {
	type check map[string]any
	cases := []struct {
		name   string
		inst   string
		opt    Options
		want   check  // expected column values of the loaded row
		reject string // substring of the reject reason; "" = row loads
	}{
		{name: "index_price empty", inst: inst(map[string]string{"index_price": `""`}), want: check{"index_price": nil, "index_price_raw": ""}},
		{name: "index_price word", inst: inst(map[string]string{"index_price": `"abc"`}), want: check{"index_price": nil, "index_price_raw": "abc"}},
		{name: "index_price exponent", inst: inst(map[string]string{"index_price": `"1e3"`}), want: check{"index_price": 1000.0, "index_price_raw": "1e3"}},
		{name: "index_price negative", inst: inst(map[string]string{"index_price": `"-0.5"`}), want: check{"index_price": -0.5}},
		{name: "index_price plus sign", inst: inst(map[string]string{"index_price": `"+12.5"`}), want: check{"index_price": 12.5, "index_price_raw": "+12.5"}},
		{name: "index_price NaN", inst: inst(map[string]string{"index_price": `"NaN"`}), want: check{"index_price": nil, "index_price_raw": "NaN"}},
		{name: "index_price Inf", inst: inst(map[string]string{"index_price": `"Infinity"`}), want: check{"index_price": nil}},
		{name: "index_price overflow is null not clamped", inst: inst(map[string]string{"index_price": `"1e400"`}), want: check{"index_price": nil, "index_price_raw": "1e400"}},
		{name: "index_price hex", inst: inst(map[string]string{"index_price": `"0x10"`}), want: check{"index_price": nil}},
		{name: "index_price spaces", inst: inst(map[string]string{"index_price": `" 12"`}), want: check{"index_price": nil, "index_price_raw": " 12"}},
		{name: "index_price escaped", inst: inst(map[string]string{"index_price": `"\u0031\u0032"`}), want: check{"index_price": 12.0, "index_price_raw": "12"}},
		{name: "index_price as JSON number", inst: inst(map[string]string{"index_price": `1000.50`}), want: check{"index_price": 1000.5, "index_price_raw": "1000.50"}},
		{name: "index_price null", inst: inst(map[string]string{"index_price": `null`}), want: check{"index_price": nil, "index_price_raw": nil}},
		{name: "index_price bool", inst: inst(map[string]string{"index_price": `true`}), reject: "index_price: expected string, got bool"},
		{name: "timestamps in seconds", inst: inst(map[string]string{"creation_timestamp": "1763596800", "expiration_timestamp": "1764230400"}),
			want: check{"creation_timestamp": int64(1763596800), "creation_time": time.Date(2025, 11, 20, 0, 0, 0, 0, time.UTC), "expiration_time": time.Date(2025, 11, 27, 8, 0, 0, 0, time.UTC)}},
		{name: "timestamps in microseconds", inst: inst(map[string]string{"creation_timestamp": "1763596800123456"}),
			want: check{"creation_time": time.Date(2025, 11, 20, 0, 0, 0, 123e6, time.UTC)}},
		{name: "timestamps in nanoseconds", inst: inst(map[string]string{"creation_timestamp": "1763596800123456789"}),
			want: check{"creation_time": time.Date(2025, 11, 20, 0, 0, 0, 123e6, time.UTC)}},
		{name: "unit forced to seconds", inst: inst(map[string]string{"creation_timestamp": "1763596800000"}), opt: Options{TimestampUnit: UnitSeconds},
			want: check{"creation_timestamp": int64(1763596800000), "creation_time": nil}},
		{name: "unit forced to ms", inst: inst(map[string]string{"creation_timestamp": "1763596800"}), opt: Options{TimestampUnit: UnitMillis},
			want: check{"creation_time": time.Date(1970, 1, 21, 9, 53, 16, 800e6, time.UTC)}},
		{name: "timestamp exponent integer", inst: inst(map[string]string{"creation_timestamp": "1.7635968e12"}), want: check{"creation_timestamp": int64(1763596800000)}},
		{name: "timestamp fractional", inst: inst(map[string]string{"creation_timestamp": "1763596800000.5"}), reject: "creation_timestamp: 1763596800000.5 is not an integer"},
		{name: "timestamp beyond int64", inst: inst(map[string]string{"expiration_timestamp": "99999999999999999999"}), reject: "outside the int64 range"},
		{name: "timestamp huge exponent", inst: inst(map[string]string{"expiration_timestamp": "1e999999999"}), reject: "outside the int64 range"},
		{name: "timestamp negative", inst: inst(map[string]string{"creation_timestamp": "-1000"}), want: check{"creation_time": time.Date(1969, 12, 31, 23, 43, 20, 0, time.UTC)}},
		{name: "timestamp as string", inst: inst(map[string]string{"creation_timestamp": `"1763596800000"`}), reject: "creation_timestamp: expected integer, got string"},
		{name: "nulls load as null", inst: inst(map[string]string{"strike": "null", "option_type": "null", "is_active": "null", "expiration_timestamp": "null"}),
			want: check{"strike": nil, "option_type": nil, "is_active": nil, "expiration_timestamp": nil, "expiration_time": nil}},
		{name: "missing fields load as null", inst: inst(map[string]string{"strike": "", "tick_size": "", "deployed": ""}), want: check{"strike": nil, "tick_size": nil, "deployed": nil}},
		{name: "strike as string", inst: inst(map[string]string{"strike": `"oops"`}), reject: "strike: expected number, got string"},
		{name: "is_active as string", inst: inst(map[string]string{"is_active": `"yes"`}), reject: "is_active: expected bool, got string"},
		{name: "kind as number", inst: inst(map[string]string{"kind": `1`}), want: check{"kind": "1"}},
		{name: "integer id kept as its text", inst: inst(map[string]string{"instrument_id": `364671`}), want: check{"instrument_id": "364671"}},
		{name: "number kept exactly as sent", inst: inst(map[string]string{"instrument_id": `-1.50e3`}), want: check{"instrument_id": "-1.50e3"}},
		{name: "string field as bool", inst: inst(map[string]string{"kind": `true`}), reject: "kind: expected string, got bool"},
		{name: "strike as object", inst: inst(map[string]string{"strike": `{"v":1}`}), reject: "strike: expected number, got object"},
		{name: "float overflow rejected", inst: inst(map[string]string{"strike": `1e400`}), reject: "strike: 1e400 is outside the float64 range"},
		{name: "float underflow rejected", inst: inst(map[string]string{"strike": `1e-400`}), reject: "strike: 1e-400 is outside the float64 range (nonzero, smaller than"},
		{name: "float underflow negative rejected", inst: inst(map[string]string{"tick_size": `-0.000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001`}), reject: "tick_size: -0.000"},
		{name: "float subnormal rejected", inst: inst(map[string]string{"strike": `7e-324`}), reject: "strike: 7e-324 is outside the float64 range"},
		{name: "float zero with a tiny exponent loads", inst: inst(map[string]string{"strike": `0.0e-400`}), want: check{"strike": 0.0}},
		{name: "float smallest normal loads", inst: inst(map[string]string{"strike": `2.2250738585072014e-308`}), want: check{"strike": 2.2250738585072014e-308}},
		{name: "index_price underflow is null not zero", inst: inst(map[string]string{"index_price": `"1e-400"`}), want: check{"index_price": nil, "index_price_raw": "1e-400"}},
		{name: "index_price number underflow is null not zero", inst: inst(map[string]string{"index_price": `-1e-400`}), want: check{"index_price": nil, "index_price_raw": "-1e-400"}},
		{name: "no instrument_name", inst: inst(map[string]string{"instrument_name": ""}), reject: "instrument_name is missing"},
		{name: "null instrument_name", inst: inst(map[string]string{"instrument_name": "null"}), reject: "instrument_name is null"},
		{name: "empty instrument_name", inst: inst(map[string]string{"instrument_name": `""`}), reject: "instrument_name is empty"},
		{name: "invalid utf-8", inst: inst(map[string]string{"kind": "\"opt\xffion\""}), reject: "kind: invalid UTF-8"},
		{name: "unknown fields kept in extra", inst: fullInstrument[:len(fullInstrument)-1] + `,"venue_tag":"a","greeks_hint":{"x": [1, 2.50]}}`,
			want: check{"extra": `{"venue_tag":"a","greeks_hint":{"x": [1, 2.50]}}`, "strike": 100000.0}},
		{name: "escaped strings", inst: inst(map[string]string{"instrument_id": `"a\"b\\c\n\u00e9\ud83d\ude00"`}), want: check{"instrument_id": "a\"b\\c\né😀"}},
		{name: "duplicate key last wins", inst: fullInstrument[:len(fullInstrument)-1] + `,"tick_size":0.5}`, want: check{"tick_size": 0.5}},
		{name: "instrument is not an object", inst: `"BTC-PERPETUAL"`, reject: "instrument is a JSON string, expected an object"},
		{name: "instrument is null", inst: `null`, reject: "instrument is a JSON null, expected an object"},
		{name: "unknown member nested 10,000 deep", inst: fullInstrument[:len(fullInstrument)-1] + `,"greeks":` + deepValue(10_000) + `}`, reject: "greeks: JSON nested deeper than 512 levels"},
		{name: "unknown member nested just deep enough", inst: fullInstrument[:len(fullInstrument)-1] + `,"greeks":` + deepValue(510) + `}`,
			want: check{"extra": `{"greeks":` + deepValue(510) + `}`}},
		{name: "number field nested 10,000 deep", inst: inst(map[string]string{"strike": deepValue(10_000)}), reject: "strike: expected number, got array"},
		{name: "index_price nested 10,000 deep", inst: inst(map[string]string{"index_price": `{"v":` + deepValue(10_000) + `}`}), reject: "index_price: expected string, got object"},
		{name: "instrument nested 10,000 deep", inst: deepValue(10_000), reject: "instrument is a JSON array, expected an object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := decode(t, listing(tc.inst), tc.opt)
			if got.err != nil {
				t.Fatalf("decode: %v", got.err)
			}
			if tc.reject != "" {
				if len(got.rows) != 0 || len(got.rejects) != 1 {
					t.Fatalf("rows=%d rejects=%d, want the row rejected", len(got.rows), len(got.rejects))
				}
				rj := got.rejects[0]
				if !strings.Contains(rj["reason"].(string), tc.reject) {
					t.Errorf("reason %q, want it to contain %q", rj["reason"], tc.reject)
				}
				if want := strings.ToValidUTF8(tc.inst, "\uFFFD"); rj["raw"] != want {
					t.Errorf("raw = %q, want the row as received %q", rj["raw"], want)
				}
				if rj["endpoint"] != "instruments" || rj["row_index"] != int64(0) || rj["run_id"] != testMeta.RunID {
					t.Errorf("reject meta = %v", rj)
				}
				if got.stats.Rejects != 1 || got.stats.Rows != 0 {
					t.Errorf("stats = %+v", got.stats)
				}
				return
			}
			if len(got.rows) != 1 || len(got.rejects) != 0 {
				t.Fatalf("rows=%d rejects=%v, want one row", len(got.rows), got.rejects)
			}
			for k, w := range tc.want {
				if g := got.rows[0][k]; g != w {
					t.Errorf("%s = %#v, want %#v", k, g, w)
				}
			}
		})
	}
}

// deepValue is a JSON value nesting arrays and objects n levels deep.
func deepValue(n int) string {
	var open, close strings.Builder
	for i := range n {
		if i%2 == 0 {
			open.WriteString(`[1,`)
			close.WriteString("]")
		} else {
			open.WriteString(`{"k":`)
			close.WriteString("}")
		}
	}
	c := []byte(close.String())
	slices.Reverse(c)
	return open.String() + `"end"` + string(c)
}

// One value nested 10,000 deep in a large listing is one rejected row:
// the rows around it load.
func TestDeepValueRejectsOneRow(t *testing.T) {
	var insts []string
	for i := range 3000 {
		insts = append(insts, inst(map[string]string{"instrument_name": fmt.Sprintf(`"BTC-%d"`, i)}))
	}
	insts[1500] = insts[1500][:len(insts[1500])-1] + `,"greeks":` + deepValue(10_000) + `}`
	body := `[{"instruments":[` + strings.Join(insts[:2000], ",") + `]},{"instruments":[` + strings.Join(insts[2000:], ",") + `]}]`
	got := decode(t, body, Options{BatchRows: 500})
	if got.err != nil {
		t.Fatalf("decode: %v", got.err)
	}
	if len(got.rows) != 2999 || len(got.rejects) != 1 || got.stats.Rows != 2999 || got.stats.Rejects != 1 {
		t.Fatalf("rows=%d rejects=%d stats=%+v, want 2999 and 1", len(got.rows), len(got.rejects), got.stats)
	}
	if rj := got.rejects[0]; rj["row_index"] != int64(1500) || !strings.Contains(rj["reason"].(string), "nested deeper than") || rj["raw"] != insts[1500] {
		t.Errorf("reject: index %v reason %q, raw as received %v", rj["row_index"], rj["reason"], rj["raw"] == insts[1500])
	}
	if got.rows[1500]["instrument_name"] != "BTC-1501" {
		t.Errorf("row after the reject: %v", got.rows[1500]["instrument_name"])
	}
}

func TestDecodeShapes(t *testing.T) {
	cases := []struct {
		name      string
		body      string
		rows      int
		rejects   int
		err       string // substring; "" = success
		inputErr  bool
		rowsAfter int // rows with instrument_name BTC-2 (ordering check)
	}{
		{name: "empty listing", body: `[]`},
		{name: "empty group", body: `[{"instruments":[]}]`},
		{name: "null instruments", body: `[{"instruments":null}]`},
		{name: "group without instruments", body: `[{}]`},
		{name: "bare instruments", body: `[` + fullInstrument + `,` + fullInstrument + `]`, rows: 2},
		{name: "bare instrument rejected", body: `[{"kind":"option"}]`, rejects: 1},
		{name: "group with a name and null instruments", body: `[{"instrument_name":"G","instruments":null}]`},
		{name: "group with instruments last", body: `[{"instrument_name":"G","strike":"x","instruments":[` + fullInstrument + `]}]`, rows: 1},
		{name: "mixed", body: `[` + fullInstrument + `,{"instruments":[` + fullInstrument + `]},{}]`, rows: 2},
		{name: "element number", body: `[{"instruments":[]},1]`, err: "listing element 1 is a JSON number, expected an instrument or an", inputErr: true},
		{name: "element null", body: `[null]`, err: "listing element 0 is a JSON null", inputErr: true},
		{name: "group with other keys", body: `[{"currency":"BTC","instruments":[` + fullInstrument + `],"count":{"n":1}}]`, rows: 1},
		{name: "several groups", body: `[{"instruments":[` + fullInstrument + `,` + fullInstrument + `]},{"instruments":[]},{"instruments":[` + fullInstrument + `]}]`, rows: 3},
		{name: "whitespace everywhere", body: " [ { \"instruments\" : [ " + strings.ReplaceAll(fullInstrument, ",", " ,\n\t") + " ] } ]\n", rows: 1},
		{name: "bad row among good", body: listing(fullInstrument, inst(map[string]string{"strike": `"x"`}), fullInstrument), rows: 2, rejects: 1},
		{name: "top level object", body: `{"instruments":[]}`, err: "listing is a JSON object, expected an array", inputErr: true},
		{name: "top level string", body: `"x"`, err: "listing is a JSON string", inputErr: true},
		{name: "element not object", body: `[[]]`, err: "listing element 0 is a JSON array", inputErr: true},
		{name: "instruments not array", body: `[{"instruments":{"a":1}}]`, err: `"instruments" is a JSON object, expected an array`, inputErr: true},
		{name: "truncated", body: listing(fullInstrument)[:200], err: "unexpected end of input", inputErr: true},
		{name: "malformed", body: `[{"instruments":[{"kind":"option"}}]}]`, err: "invalid JSON", inputErr: true},
		{name: "trailing comma", body: `[{"instruments":[` + fullInstrument + `,]}]`, err: "trailing comma", inputErr: true},
		{name: "trailing garbage", body: `[] x`, err: "unexpected data after the listing", inputErr: true},
		{name: "empty body", body: ``, err: "unexpected end of input", inputErr: true},
		{name: "bad number", body: listing(inst(map[string]string{"strike": "01"})), err: "invalid number", inputErr: true},
		{name: "bad literal", body: listing(inst(map[string]string{"rfq": "tru"})), err: "invalid literal", inputErr: true},
		{name: "control char in string", body: listing(inst(map[string]string{"kind": "\"a\x01\""})), err: "control character", inputErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := decode(t, tc.body, Options{})
			if tc.err == "" {
				if got.err != nil {
					t.Fatalf("decode: %v", got.err)
				}
			} else {
				if got.err == nil || !strings.Contains(got.err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", got.err, tc.err)
				}
				if errors.Is(got.err, values.ErrBadInput) != tc.inputErr {
					t.Errorf("errors.Is(err, values.ErrBadInput) = %v", !tc.inputErr)
				}
				return
			}
			if len(got.rows) != tc.rows || len(got.rejects) != tc.rejects {
				t.Errorf("rows=%d rejects=%d, want %d/%d", len(got.rows), len(got.rejects), tc.rows, tc.rejects)
			}
			if got.stats.Rows != int64(tc.rows) || got.stats.Rejects != int64(tc.rejects) {
				t.Errorf("stats = %+v", got.stats)
			}
		})
	}
}

// Batches are bounded and rows keep their order, whatever the reader's
// chunking (one byte at a time crosses every buffer boundary).
func TestDecodeBatchesAndChunking(t *testing.T) {
	var insts []string
	for i := 0; i < 250; i++ {
		insts = append(insts, inst(map[string]string{
			"instrument_name": `"I-` + strings.Repeat("x", i%7) + `"`,
			"instrument_id":   `"` + strings.Repeat("é", i%5) + `\u00e9"`,
			"extra_field":     `{"i":` + strings.Repeat("1", 1+i%3) + `}`,
		}))
	}
	body := `[{"instruments":[` + strings.Join(insts[:100], ",") + `]},{"instruments":[` + strings.Join(insts[100:], ",") + `]}]`
	whole := decode(t, body, Options{BatchRows: 64})
	if whole.err != nil || len(whole.rows) != 250 || whole.batches != 4 {
		t.Fatalf("err=%v rows=%d batches=%d", whole.err, len(whole.rows), whole.batches)
	}
	for _, r := range []io.Reader{iotest.OneByteReader(strings.NewReader(body)), iotest.HalfReader(strings.NewReader(body))} {
		got := decodeReader(t, r, Options{BatchRows: 64, ReadBuffer: 4096})
		if got.err != nil || len(got.rows) != 250 {
			t.Fatalf("chunked: err=%v rows=%d", got.err, len(got.rows))
		}
		for i := range got.rows {
			for k, v := range whole.rows[i] {
				if got.rows[i][k] != v {
					t.Fatalf("row %d %s = %v, want %v", i, k, got.rows[i][k], v)
				}
			}
		}
	}
}

// A read error (connection reset mid-body) is returned as such, not as bad
// input, so the caller can retry.
func TestDecodeReadError(t *testing.T) {
	boom := errors.New("connection reset by peer")
	body := listing(fullInstrument, fullInstrument)
	r := io.MultiReader(strings.NewReader(body[:300]), iotest.ErrReader(boom))
	got := decodeReader(t, r, Options{})
	if !errors.Is(got.err, boom) || errors.Is(got.err, values.ErrBadInput) {
		t.Fatalf("err = %v", got.err)
	}
}

func TestDecodeCancel(t *testing.T) {
	var insts []string
	for i := 0; i < 100; i++ {
		insts = append(insts, fullInstrument)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := NewInstrumentDecoder(Options{BatchRows: 10})
	defer d.Release()
	n := 0
	_, err := d.Decode(ctx, strings.NewReader(listing(insts...)), testMeta, func(*schema.Table, arrow.Record) error {
		n++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || n != 1 {
		t.Fatalf("err=%v emits=%d", err, n)
	}
}

// The epoch fields' times at the edges of the detected units: appendTimes
// writes two epoch milliseconds as they are without values.EpochToMillis
// (autoMillis), and must write what EpochToMillis gives for every value,
// in each unit, with one of the fields null or not.
func TestEpochTimesAtTheUnitEdges(t *testing.T) {
	edges := []int64{0, -1, 1e11 - 1, 1e11, 1e11 + 1, 1763596800000, 32503708800000, 1e14 - 1, 1e14, 1e14 + 1,
		253402300799999, 253402300800000, -62135596800000, 1e17 - 1, 1e17}
	for _, v := range edges {
		if ms, ok := values.EpochToMillis(v, values.UnitAuto); autoMillis(v) && (ms != v || !ok) {
			t.Errorf("autoMillis(%d), but EpochToMillis gives %d, %v", v, ms, ok)
		}
	}
	for _, unit := range []TimeUnit{UnitAuto, UnitMillis, UnitSeconds} {
		for i, v := range edges {
			other := edges[(i+3)%len(edges)]
			for _, exp := range []string{strconv.FormatInt(other, 10), "null"} {
				body := listing(inst(map[string]string{"creation_timestamp": strconv.FormatInt(v, 10), "expiration_timestamp": exp}))
				got := decode(t, body, Options{TimestampUnit: unit})
				if got.err != nil || len(got.rows) != 1 {
					t.Fatalf("%s: %v, %d rows", body, got.err, len(got.rows))
				}
				for field, epoch := range map[string]string{"creation_time": strconv.FormatInt(v, 10), "expiration_time": exp} {
					var want any
					if e, err := strconv.ParseInt(epoch, 10, 64); err == nil {
						if ms, ok := values.EpochToMillis(e, unit); ok {
							want = time.UnixMilli(ms).UTC()
						}
					}
					if g := got.rows[0][field]; fmt.Sprint(g) != fmt.Sprint(want) {
						t.Errorf("unit %v, epoch %s: %s = %v, want %v", unit, epoch, field, g, want)
					}
				}
			}
		}
	}
}
