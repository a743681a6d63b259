package venuesim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// response is what a test request returned.
type response struct {
	status  int
	header  http.Header
	body    []byte
	readErr error
}

func serve(t *testing.T, s *Sim) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

// get performs a GET with optional headers (pairs of name, value). The
// transport does not decompress, so gzip bodies arrive as sent.
func get(t *testing.T, url string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, readErr := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: body, readErr: readErr}
}

// listing decodes a get_instruments body into its groups of raw instrument
// objects, checking that each group has exactly the key "instruments".
func listing(t *testing.T, body []byte) [][]json.RawMessage {
	t.Helper()
	var groups []map[string]json.RawMessage
	if err := json.Unmarshal(body, &groups); err != nil {
		t.Fatalf("decode listing: %v", err)
	}
	out := make([][]json.RawMessage, 0, len(groups))
	for i, g := range groups {
		if len(g) != 1 || g["instruments"] == nil {
			t.Fatalf("group %d: keys %v, want exactly [instruments]", i, keys(g))
		}
		var insts []json.RawMessage
		if err := json.Unmarshal(g["instruments"], &insts); err != nil {
			t.Fatalf("group %d: %v", i, err)
		}
		out = append(out, insts)
	}
	return out
}

func flat(groups [][]json.RawMessage) []json.RawMessage {
	var out []json.RawMessage
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// objectKeys returns the keys of a JSON object in document order.
func objectKeys(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", raw)
	}
	var out []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("token: %v", err)
		}
		out = append(out, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("value: %v", err)
		}
	}
	return out
}

func body(t *testing.T, s *Sim) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := s.WriteInstruments(&b); err != nil {
		t.Fatalf("WriteInstruments: %v", err)
	}
	return b.Bytes()
}

func decodeMap(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return m
}

// expected rebuilds, from an Instrument's typed fields, the map that decoding
// its JSON object must give.
func expected(t *testing.T, in Instrument) map[string]any {
	t.Helper()
	raw := func(b []byte) any {
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
		return v
	}
	var optionType, strike any
	if in.OptionType != nil {
		optionType = *in.OptionType
	}
	if in.Strike != nil {
		strike = *in.Strike
	}
	m := map[string]any{
		"base_currency":                in.BaseCurrency,
		"block_trade_commission":       in.BlockTradeCommission,
		"block_trade_min_trade_amount": in.BlockTradeMinTradeAmount,
		"block_trade_tick_size":        in.BlockTradeTickSize,
		"contract_size":                in.ContractSize,
		"counter_currency":             in.CounterCurrency,
		"creation_timestamp":           float64(in.CreationTimestamp),
		"deployed":                     in.Deployed,
		"expiration_timestamp":         float64(in.ExpirationTimestamp),
		"index_price":                  raw(in.IndexPriceJSON),
		"instrument_id":                in.InstrumentID,
		"instrument_name":              in.InstrumentName,
		"instrument_type":              in.InstrumentType,
		"is_active":                    in.IsActive,
		"kind":                         in.Kind,
		"maker_commission":             in.MakerCommission,
		"min_trade_amount":             in.MinTradeAmount,
		"option_type":                  optionType,
		"quote_currency":               in.QuoteCurrency,
		"rfq":                          in.RFQ,
		"settlement_currency":          in.SettlementCurrency,
		"settlement_period":            in.SettlementPeriod,
		"strike":                       strike,
		"taker_commission":             in.TakerCommission,
		"tick_size":                    in.TickSize,
	}
	if in.IndexPrice != nil {
		if ip, ok := m["index_price"].(string); !ok || ip != *in.IndexPrice {
			t.Fatalf("IndexPrice %q disagrees with IndexPriceJSON %s", *in.IndexPrice, in.IndexPriceJSON)
		}
	}
	for k, v := range in.WrongType {
		m[k] = raw(v)
	}
	for _, k := range in.Missing {
		delete(m, k)
	}
	for k, v := range in.Extra {
		m[k] = raw(v)
	}
	return m
}
