package fieldmap

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/optlake/optlake/schema"
)

func ptr(s string) *string { return &s }

func TestApply(t *testing.T) {
	okx := Map{
		{Column: "instrument_name", From: "instId"},
		{Column: "strike", From: "stk"},
		{Column: "expiration_timestamp", From: "expTime"},
		{Column: "option_type", From: "optType", Values: map[string]string{"C": "call", "P": "put"}},
		{Column: "kind", Value: "option"},
		{Column: "is_active", From: "state", Values: map[string]string{"live": "true"}, Default: ptr("false")},
		{Column: "quote_currency", From: "quoteCcy"},
		{Column: "contract_size", From: "ctMult"},
	}
	for _, tc := range []struct {
		name string
		m    Map
		in   string
		want string
	}{
		{"okx: string numbers, codes, constants, the rest kept",
			okx, `{"instId":"BTC-USD-231222-36000-C","stk":"36000","expTime":"1703232000000","optType":"C","state":"live","quoteCcy":"","ctMult":"0.01","uly":"BTC-USD","maxLmtSz":"10000"}`,
			`{"instrument_name":"BTC-USD-231222-36000-C","strike":36000,"expiration_timestamp":1703232000000,"option_type":"call","kind":"option","is_active":true,"contract_size":0.01,"uly":"BTC-USD","maxLmtSz":"10000"}`},
		{"a value not listed takes the default",
			okx, `{"instId":"X","state":"suspend","optType":"P"}`,
			`{"instrument_name":"X","option_type":"put","kind":"option","is_active":false}`},
		{"a value that does not convert is kept as received (the decoder rejects it)",
			okx, `{"instId":"X","stk":"n/a","expTime":"soon"}`,
			`{"instrument_name":"X","strike":"n/a","expiration_timestamp":"soon","kind":"option"}`},
		{"nested paths; the parent stays in extra",
			Map{{Column: "instrument_name", From: "symbol"}, {Column: "tick_size", From: "priceFilter.tickSize"}, {Column: "min_trade_amount", From: "filters.1.minQty"}},
			`{"symbol":"BTC-29DEC23-40000-C","priceFilter":{"tickSize":"5","minPrice":"5"},"filters":[{"a":1},{"minQty":"0.01"}]}`,
			`{"instrument_name":"BTC-29DEC23-40000-C","tick_size":5,"min_trade_amount":0.01,"priceFilter":{"tickSize":"5","minPrice":"5"},"filters":[{"a":1},{"minQty":"0.01"}]}`},
		{"times: ISO, seconds, fractional seconds",
			Map{{Column: "instrument_name", From: "n"}, {Column: "creation_timestamp", From: "c", Time: "iso"}, {Column: "expiration_timestamp", From: "e", Time: "s"}},
			`{"n":"A","c":"2023-12-22T08:00:00.250Z","e":1703232000.5}`,
			`{"instrument_name":"A","creation_timestamp":1703232000250,"expiration_timestamp":1703232000500}`},
		{"a venue field named like a mapped column is dropped; an unmapped one passes",
			Map{{Column: "instrument_name", From: "symbol"}},
			`{"instrument_name":"old","symbol":"new","kind":"option","strike":5}`,
			`{"instrument_name":"new","kind":"option","strike":5}`},
		{"integer ids stay numbers for the decoder to keep as text; scale",
			Map{{Column: "instrument_name", From: "name"}, {Column: "instrument_id", From: "id"}, {Column: "strike", From: "strike_e8", Scale: 1e-8}},
			`{"name":"A","id":364671,"strike_e8":"3600000000000"}`,
			`{"instrument_name":"A","instrument_id":364671,"strike":36000}`},
		{"scaled outside float64's range: the exact product, which the decoder rejects",
			Map{{Column: "instrument_name", From: "name"}, {Column: "strike", From: "s", Scale: 2}, {Column: "tick_size", From: "t", Scale: 0.5}, {Column: "contract_size", From: "c", Scale: 1e10}, {Column: "min_trade_amount", From: "m", Scale: 2}},
			`{"name":"A","s":"1e-400","t":1e-308,"c":1e300,"m":"-1e-310"}`,
			`{"instrument_name":"A","strike":2e-400,"tick_size":5e-309,"contract_size":1e+310,"min_trade_amount":-2e-310}`},
		{"decimals: a number at the record's count of decimal places (Bitget's tick); a missing or bad count leaves it as sent",
			Map{{Column: "instrument_name", From: "symbol"}, {Column: "tick_size", From: "priceEndStep", Decimals: "pricePlace"}, {Column: "min_trade_amount", From: "minTradeNum", Decimals: "volumePlace"}},
			`{"symbol":"BTCUSDT","priceEndStep":"5","pricePlace":"10","minTradeNum":"0.001","volumePlace":"x"}`,
			`{"instrument_name":"BTCUSDT","tick_size":5e-10,"min_trade_amount":0.001,"pricePlace":"10","volumePlace":"x"}`},
		{"decimals move the point of any number exactly: an exponent lowered, a count of 0 unchanged",
			Map{{Column: "instrument_name", From: "n"}, {Column: "tick_size", From: "t", Decimals: "d"}, {Column: "contract_size", From: "c", Decimals: "z"}, {Column: "strike", From: "s", Decimals: "d"}, {Column: "min_trade_amount", From: "m", Decimals: "d"}},
			`{"n":"A","t":"2.5E+3","d":2,"c":0.1,"z":"0","s":"1e-400","m":"1e99999999999999999999"}`,
			`{"instrument_name":"A","tick_size":2.5e1,"contract_size":0.1e0,"strike":1e-402,"min_trade_amount":1e99999999999999999999,"d":2,"z":"0"}`},
		{"a part of a text",
			Map{{Column: "instrument_name", From: "symbol"}, {Column: "strike", From: "symbol", Split: "-", Part: 2}, {Column: "option_type", From: "symbol", Split: "-", Part: -1, Values: map[string]string{"C": "call", "P": "put"}}, {Column: "base_currency", From: "symbol", Split: "-", Part: 7}},
			`{"symbol":"BTC-29DEC23-40000-C"}`,
			`{"instrument_name":"BTC-29DEC23-40000-C","strike":40000,"option_type":"call"}`},
		{"not an object", okx, `[1,2]`, `[1,2]`},
		{"null and absent are null", okx, `{"instId":"A","stk":null}`, `{"instrument_name":"A","kind":"option"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mp, err := New(tc.m, schema.Instruments)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(mp.Apply(nil, []byte(tc.in))); got != tc.want {
				t.Errorf("got\n %s\nwant\n %s", got, tc.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		m    Map
		want string
	}{
		{Map{{Column: "name", From: "x"}}, `name: not a column of instruments (want one of base_currency,`},
		{Map{{Column: "extra", From: "x"}}, `extra: not a column`},
		{Map{{Column: "strike", From: "x"}, {Column: "strike", From: "y"}}, "mapped twice"},
		{Map{{Column: "strike"}}, "want a field name (from) or a constant (value)"},
		{Map{{Column: "strike", From: "a", Value: "1"}}, "want a field name (from) or a constant (value)"},
		{Map{{Column: "strike", From: "a", Time: "s"}}, "strike is not one"},
		{Map{{Column: "creation_timestamp", From: "a", Time: "days"}}, `time "days" (want one of iso, s, ms, us, ns)`},
		{Map{{Column: "kind", From: "a", Scale: 2}}, "scale multiplies numbers"},
		{Map{{Column: "strike", Value: "1", Split: "-"}}, "from is required"},
		{Map{{Column: "kind", From: "a", Decimals: "b"}}, "decimals shifts a field's number"},
		{Map{{Column: "tick_size", Value: "1", Decimals: "b"}}, "decimals shifts a field's number"},
		{Map{{Column: "strike", From: "a", Part: 2}}, "part goes with split"},
	} {
		err := tc.m.Check(schema.Instruments)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.m, err, tc.want)
		}
	}
}

// A mapped record is always one JSON object when the record is one.
func FuzzApply(f *testing.F) {
	f.Add(`{"instId":"BTC-USD-231222-36000-C","stk":"36000","expTime":"1703232000000","optType":"C","f":{"t":"5"}}`)
	f.Add(`{"instId":"A","stk":"1e999","expTime":"2023-12-22T08:00:00Z","optType":7,"f":[1]}`)
	f.Add(`{"instId":"A","stk":"-2.5E+7","d":"30"}`)
	mp, err := New(Map{
		{Column: "instrument_name", From: "instId"},
		{Column: "strike", From: "stk", Scale: 2},
		{Column: "expiration_timestamp", From: "expTime", Time: "iso"},
		{Column: "creation_timestamp", From: "expTime", Time: "s"},
		{Column: "option_type", From: "optType", Values: map[string]string{"C": "call"}},
		{Column: "tick_size", From: "f.t"},
		{Column: "base_currency", From: "instId", Split: "-", Part: -1},
		{Column: "is_active", From: "optType"},
		{Column: "min_trade_amount", From: "stk", Decimals: "d"},
	}, schema.Instruments)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(in), &obj) != nil {
			return
		}
		out := mp.Apply(nil, []byte(in))
		var got map[string]json.RawMessage
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: mapped to %s: %v", in, out, err)
		}
	})
}
