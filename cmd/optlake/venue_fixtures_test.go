package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// fixtureVenue serves recorded answers of a real venue from
// testdata/venues/<dir>: a request gets the file named after its path's
// last segment, with ".<param>=<value>" for the first query parameter (in
// name order) that has a file of its own (a later page); 404 otherwise.
// It returns the URL and the requests seen (path and query).
func fixtureVenue(t *testing.T, dir string) (string, func() []string) {
	t.Helper()
	root := filepath.Join("testdata", "venues", dir)
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+"?"+r.URL.RawQuery)
		mu.Unlock()
		seg := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		q := r.URL.Query()
		keys := make([]string, 0, len(q))
		for k := range q {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		names := []string{}
		for _, k := range keys {
			names = append(names, seg+"."+k+"="+q.Get(k)+".json")
		}
		for _, n := range append(names, seg+".json") {
			if b, err := os.ReadFile(filepath.Join(root, n)); err == nil {
				w.Header().Set("Content-Type", "application/json")
				w.Write(b)
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

type endpointSummary struct {
	Endpoint string
	Rows     int64
	Rejects  int64
	Status   string
	Error    string
}

func readSummary(t *testing.T, path string) map[string]endpointSummary {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s struct{ Endpoints []endpointSummary }
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	out := map[string]endpointSummary{}
	for _, e := range s.Endpoints {
		out[e.Endpoint] = e
	}
	return out
}

// tableRows reads every row of a table of the Parquet lake.
func tableRows(t *testing.T, dir, table string) []map[string]any {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, table, "*", "*.parquet"))
	var rows []map[string]any
	for _, f := range files {
		rows = append(rows, parquetRows(t, f, map[string]bool{})...)
	}
	return rows
}

// Each profile of deploy/venues, run against its venue's recorded answers
// (the venue's own field names and types: integer ids, numbers in strings,
// codes of success, keyed objects, cursors in the last row), loads every
// row of every endpoint and every page, the listing with the instruments
// table's columns filled; a replay of the archive gives the same rows.
func TestVenueProfilesOnRealShapes(t *testing.T) {
	type listing struct {
		n int
		// futures: a listing of futures and perpetuals (a venue without
		// options), no strike or option type, an expiry on futures only.
		futures bool
		check   func(t *testing.T, row map[string]any)
	}
	for _, tc := range []struct {
		profile string
		rows    map[string]int64 // endpoint -> rows (child tables of nested lists included)
		listing *listing
		pages   []string // requests that must have been made (pages after the first)
	}{
		{profile: "deribit",
			rows: map[string]int64{"instruments": 3, "account_summary": 1, "positions": 2},
			listing: &listing{n: 3, check: func(t *testing.T, row map[string]any) {
				if id := row["instrument_id"]; id != "364671" && id != "364672" && id != "311532" {
					t.Errorf("instrument_id %v, want the integer's text", id)
				}
				if !strings.Contains(row["extra"].(string), `"price_index":"btc_usd"`) {
					t.Errorf("extra %v", row["extra"])
				}
			}}},
		{profile: "okx",
			rows: map[string]int64{"instruments": 4, "account_balance": 2, "positions": 1, "bills": 137},
			listing: &listing{n: 4, check: func(t *testing.T, row map[string]any) {
				if row["contract_size"] != 0.01 || row["base_currency"] != "BTC" || row["quote_currency"] != nil {
					t.Errorf("contract_size %v base %v quote %v", row["contract_size"], row["base_currency"], row["quote_currency"])
				}
				if want := !strings.HasSuffix(row["instrument_name"].(string), "50000-P"); row["is_active"] != want {
					t.Errorf("%s is_active %v (state live or suspend)", row["instrument_name"], row["is_active"])
				}
				if !strings.Contains(row["extra"].(string), `"uly":"BTC-USD"`) || strings.Contains(row["extra"].(string), `"instId"`) {
					t.Errorf("extra %v", row["extra"])
				}
			}},
			pages: []string{"/api/v5/account/bills?after=689999999999999307&instType=OPTION&limit=100"}},
		{profile: "binance",
			rows: map[string]int64{"instruments": 8, "account_summary": 3, "positions": 1, "trades": 163},
			listing: &listing{n: 8, check: func(t *testing.T, row map[string]any) {
				if row["tick_size"] != 5.0 || row["base_currency"] != "BTC" || row["is_active"] != true || row["maker_commission"] != 0.0002 {
					t.Errorf("tick %v base %v active %v maker %v", row["tick_size"], row["base_currency"], row["is_active"], row["maker_commission"])
				}
			}},
			pages: []string{"fromId=4611875134427365476"}},
		{profile: "bybit",
			rows: map[string]int64{"instruments": 6, "account_balance": 2, "positions": 5},
			listing: &listing{n: 6, check: func(t *testing.T, row map[string]any) {
				if row["tick_size"] != 5.0 || row["min_trade_amount"] != 0.01 || row["settlement_currency"] != "USDC" || row["creation_time"] == nil {
					t.Errorf("tick %v min %v settle %v created %v", row["tick_size"], row["min_trade_amount"], row["settlement_currency"], row["creation_time"])
				}
			}},
			pages: []string{"cursor=c2", "cursor=p2"}},
		{profile: "gate",
			rows: map[string]int64{"instruments": 8, "account_summary": 1, "positions": 1},
			listing: &listing{n: 8, check: func(t *testing.T, row map[string]any) {
				if row["quote_currency"] != "USDT" || row["contract_size"] != 0.0001 || row["min_trade_amount"] != 1.0 || row["creation_timestamp"] != int64(1702454400000) {
					t.Errorf("quote %v size %v min %v created %v", row["quote_currency"], row["contract_size"], row["min_trade_amount"], row["creation_timestamp"])
				}
			}}},
		{profile: "delta",
			rows: map[string]int64{"instruments": 4, "account_balance": 1, "positions": 1},
			listing: &listing{n: 4, check: func(t *testing.T, row map[string]any) {
				if id, _ := row["instrument_id"].(string); !strings.HasPrefix(id, "3000") {
					t.Errorf("instrument_id %v", row["instrument_id"])
				}
				if row["quote_currency"] != "USD" || row["creation_timestamp"] != int64(1702641600000) || row["is_active"] != (row["instrument_id"] != "30003") {
					t.Errorf("quote %v created %v active %v", row["quote_currency"], row["creation_timestamp"], row["is_active"])
				}
			}},
			pages: []string{"after=g3QAAAABZAALcHJvZHVjdF9pZGIAAAAh", "contract_types=call_options%2Cput_options&page_size=100"}},
		{profile: "derive",
			rows: map[string]int64{"instruments": 3, "account_summary": 2, "positions": 1},
			listing: &listing{n: 3, check: func(t *testing.T, row map[string]any) {
				if row["quote_currency"] != "USDC" || row["min_trade_amount"] != 0.1 || row["tick_size"] != 0.1 {
					t.Errorf("quote %v min %v tick %v", row["quote_currency"], row["min_trade_amount"], row["tick_size"])
				}
			}}},
		{profile: "kucoin",
			rows: map[string]int64{"instruments": 5, "account_summary": 1, "positions": 2, "ledger": 63},
			listing: &listing{n: 5, futures: true, check: func(t *testing.T, row map[string]any) {
				name := row["instrument_name"].(string)
				if row["is_active"] != (name != "SOLUSDTM") || row["maker_commission"] != 0.0002 || row["creation_timestamp"] == nil {
					t.Errorf("%s: active %v maker %v created %v", name, row["is_active"], row["maker_commission"], row["creation_timestamp"])
				}
				if inverse := row["settlement_currency"] == "XBT"; inverse != (row["contract_size"] == -1.0) {
					t.Errorf("%s: settles in %v, contract_size %v", name, row["settlement_currency"], row["contract_size"])
				}
				if name == "XBTMH26" && (row["kind"] != "future" || row["expiration_timestamp"] != int64(1774598400000)) {
					t.Errorf("%s: kind %v expires %v", name, row["kind"], row["expiration_timestamp"])
				}
			}},
			pages: []string{"/api/v1/transaction-history?maxCount=50&offset=71904878"}},
		{profile: "coinbase",
			rows: map[string]int64{"instruments": 5, "account_balance": 5, "positions": 2},
			listing: &listing{n: 5, futures: true, check: func(t *testing.T, row map[string]any) {
				name := row["instrument_name"].(string)
				if row["is_active"] != (name != "SLP-26DEC26-CDE") || row["contract_size"] == nil || row["min_trade_amount"] == nil {
					t.Errorf("%s: active %v size %v min %v", name, row["is_active"], row["contract_size"], row["min_trade_amount"])
				}
				if name == "BIT-26DEC26-CDE" && (row["expiration_timestamp"] != int64(1798300800000) || row["contract_size"] != 0.01 || row["tick_size"] != 5.0 || row["base_currency"] != "BTC") {
					t.Errorf("%s: expires %v size %v tick %v base %v", name, row["expiration_timestamp"], row["contract_size"], row["tick_size"], row["base_currency"])
				}
				if !strings.Contains(row["extra"].(string), `"product_venue"`) {
					t.Errorf("extra %v", row["extra"])
				}
			}},
			pages: []string{"cursor=ca8f5a2c-bd1d-4c2e-8b7c-3f3f0e1b5a11&limit=250"}},
		{profile: "bitget",
			rows: map[string]int64{"instruments": 5, "account_balance": 1, "positions": 2, "bills": 137},
			listing: &listing{n: 5, futures: true, check: func(t *testing.T, row map[string]any) {
				ticks := map[any]float64{"BTCUSDT": 0.1, "ETHUSDT": 0.01, "SOLUSDT": 0.001, "DOGEUSDT": 0.00001, "PEPEUSDT": 5e-10}
				if row["tick_size"] != ticks[row["instrument_name"]] {
					t.Errorf("%v: tick_size %v, want priceEndStep at pricePlace decimals %v", row["instrument_name"], row["tick_size"], ticks[row["instrument_name"]])
				}
				if row["is_active"] != (row["instrument_name"] != "PEPEUSDT") || row["settlement_currency"] != "USDT" || row["taker_commission"] != 0.0006 {
					t.Errorf("%v: active %v settle %v taker %v", row["instrument_name"], row["is_active"], row["settlement_currency"], row["taker_commission"])
				}
			}},
			pages: []string{"idLessThan=1111499428099688852&limit=100"}},
		{profile: "kraken",
			rows: map[string]int64{"asset_pairs": 2, "ohlc": 5, "balances": 5, "open_positions": 1}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			url, seen := fixtureVenue(t, tc.profile)
			for k, v := range profileEnv(t, tc.profile) {
				t.Setenv(k, v)
			}
			dir := t.TempDir()
			sum := filepath.Join(t.TempDir(), "summary.json")
			profile := filepath.Join("..", "..", "deploy", "venues", tc.profile+".yaml")
			res := optlake(t, "run", "--config", profile, "--api-url", url, "--data-dir", dir, "--summary-json", sum)
			if res.code != exitOK {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			got := readSummary(t, sum)
			for ep, n := range tc.rows {
				if e := got[ep]; e.Status != "ok" || e.Rows != n || e.Rejects != 0 {
					t.Errorf("%s: %+v, want ok with %d rows and no rejects", ep, e, n)
				}
			}
			if len(got) != len(tc.rows) {
				t.Errorf("endpoints %v, want %v", got, tc.rows)
			}
			requests := strings.Join(seen(), "\n")
			for _, p := range tc.pages {
				if !strings.Contains(requests, p) {
					t.Errorf("no request for %q among\n%s", p, requests)
				}
			}
			if tc.listing != nil {
				rows := tableRows(t, dir, "instruments")
				if len(rows) != tc.listing.n {
					t.Fatalf("%d instruments in the lake, want %d", len(rows), tc.listing.n)
				}
				for _, row := range rows {
					if row["source"] != tc.profile {
						t.Errorf("source %v", row["source"])
					}
					if tc.listing.futures {
						checkFuturesRow(t, row)
						tc.listing.check(t, row)
						continue
					}
					for _, c := range []string{"instrument_name", "strike", "expiration_timestamp", "expiration_time", "option_type", "kind", "is_active", "base_currency", "tick_size"} {
						if row[c] == nil {
							t.Errorf("%v: %s is null", row["instrument_name"], c)
						}
					}
					if ot := row["option_type"]; ot != "call" && ot != "put" {
						t.Errorf("option_type %v", ot)
					}
					if row["kind"] != "option" {
						t.Errorf("kind %v", row["kind"])
					}
					if s, _ := row["strike"].(float64); s < 2000 || s > 70000 {
						t.Errorf("%v: strike %v", row["instrument_name"], row["strike"])
					}
					tc.listing.check(t, row)
				}
			}
			// The archive replays to the same rows (replay has no config:
			// the records' shape and field mapping are in the archive).
			before := map[string]int{}
			for ep := range tc.rows {
				before[ep] = len(tableRows(t, dir, ep))
				os.RemoveAll(filepath.Join(dir, ep))
			}
			eps := make([]string, 0, len(tc.rows))
			for ep := range tc.rows {
				eps = append(eps, ep)
			}
			sort.Strings(eps)
			if res := optlake(t, "replay", "--data-dir", dir, "--endpoints", strings.Join(eps, ",")); res.code != 0 {
				t.Fatalf("replay: exit %d: %s", res.code, res.stderr)
			}
			for ep, n := range before {
				if got := len(tableRows(t, dir, ep)); got != n || n == 0 {
					t.Errorf("%s: replayed %d rows, the run %d", ep, got, n)
				}
			}
		})
	}
}

// checkFuturesRow checks a row of a venue listing futures and perpetuals:
// the listing's columns filled, no option columns, an expiry (in both
// columns) on a future and none on a perpetual.
func checkFuturesRow(t *testing.T, row map[string]any) {
	t.Helper()
	name := row["instrument_name"]
	for _, c := range []string{"instrument_name", "kind", "is_active", "base_currency", "quote_currency", "settlement_currency", "tick_size", "min_trade_amount"} {
		if row[c] == nil {
			t.Errorf("%v: %s is null", name, c)
		}
	}
	if row["strike"] != nil || row["option_type"] != nil {
		t.Errorf("%v: strike %v option_type %v on a future", name, row["strike"], row["option_type"])
	}
	switch row["kind"] {
	case "future":
		if row["expiration_timestamp"] == nil || row["expiration_time"] == nil {
			t.Errorf("%v: a future without expiry", name)
		}
	case "perpetual":
		if row["expiration_timestamp"] != nil || row["expiration_time"] != nil {
			t.Errorf("%v: a perpetual expiring at %v", name, row["expiration_timestamp"])
		}
	default:
		t.Errorf("%v: kind %v, want future or perpetual", name, row["kind"])
	}
}

// A venue error in a 200 body (OKX's code other than "0") fails the
// endpoint, named with the venue's code, and the run exits non-zero.
func TestVenueErrorCodeFailsTheEndpoint(t *testing.T) {
	url, _ := fixtureVenue(t, "okx-error")
	t.Setenv("OKX_API_KEY", "k")
	t.Setenv("OKX_API_SECRET", "s")
	t.Setenv("OKX_PASSPHRASE", "p")
	dir := t.TempDir()
	sum := filepath.Join(t.TempDir(), "summary.json")
	res := optlake(t, "run", "--config", filepath.Join("..", "..", "deploy", "venues", "okx.yaml"), "--api-url", url, "--data-dir", dir, "--summary-json", sum)
	if res.code == exitOK || !strings.Contains(res.stderr, "account_balance") {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	got := readSummary(t, sum)
	if e := got["account_balance"]; e.Status != "failed" || e.Rows != 0 || !strings.Contains(e.Error, "venue error 50113: Invalid Sign") {
		t.Errorf("account_balance %+v", e)
	}
	if e := got["instruments"]; e.Status != "ok" || e.Rows != 4 {
		t.Errorf("instruments %+v", e)
	}
}
