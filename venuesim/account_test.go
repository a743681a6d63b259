package venuesim

import (
	"encoding/json"
	"net/url"
	"reflect"
	"strconv"
	"testing"
)

func decodeJSON[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, b)
	}
	return v
}

// mustDecimal checks that v is a string holding a decimal number.
func mustDecimal(t *testing.T, what string, v any) {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("%s: %T %v, want a decimal string", what, v, v)
	}
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		t.Fatalf("%s: %q not a decimal", what, s)
	}
}

func checkPosition(t *testing.T, p map[string]any) {
	t.Helper()
	for _, k := range []string{"average_price", "floating_profit_loss", "index_price", "mark_price", "size", "total_profit_loss"} {
		mustDecimal(t, k, p[k])
	}
	if _, ok := p["instrument_name"].(string); !ok {
		t.Fatalf("position without instrument_name: %v", p)
	}
	g, ok := p["greeks"].(map[string]any)
	if !ok || len(g) != 5 {
		t.Fatalf("greeks %v", p["greeks"])
	}
	for _, k := range []string{"delta", "gamma", "vega", "theta", "rho"} {
		if _, ok := g[k].(float64); !ok {
			t.Fatalf("greeks.%s = %v, want a number", k, g[k])
		}
	}
	m, ok := p["margin"].(map[string]any)
	if !ok {
		t.Fatalf("margin %v", p["margin"])
	}
	mustDecimal(t, "margin.initial", m["initial"])
	mustDecimal(t, "margin.maintenance", m["maintenance"])
	if legs, ok := p["legs"]; ok {
		l, ok := legs.([]any)
		if !ok || len(l) != 2 {
			t.Fatalf("legs %v", legs)
		}
	}
}

func TestAccountEndpoints(t *testing.T) {
	s := New(Config{Seed: 21})
	srv := serve(t, s)
	fetch := func(path string, headers ...string) []byte {
		t.Helper()
		resp := get(t, srv.URL+path, headers...)
		if resp.status != 200 || resp.readErr != nil {
			t.Fatalf("%s: status %d, %v: %s", path, resp.status, resp.readErr, resp.body)
		}
		if resp.header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: Content-Type %q", path, resp.header.Get("Content-Type"))
		}
		return resp.body
	}

	t.Run("balance", func(t *testing.T) {
		for _, cur := range []string{"", "?currency=ETH", "?currency=usdc"} {
			b := decodeJSON[map[string]any](t, fetch(PathAccountBalance+cur))
			for _, k := range []string{"balance", "equity", "available_funds", "initial_margin", "maintenance_margin"} {
				mustDecimal(t, k, b[k])
			}
			if _, ok := b["updated_at"].(float64); !ok {
				t.Fatalf("updated_at %v", b["updated_at"])
			}
		}
	})
	t.Run("all balances", func(t *testing.T) {
		all := decodeJSON[[]map[string]any](t, fetch(PathAllAccountBalances))
		if len(all) != 4 {
			t.Fatalf("%d balances, want 4", len(all))
		}
		for i, cur := range []string{"BTC", "ETH", "SOL", "USDC"} {
			if all[i]["currency"] != cur {
				t.Fatalf("balance %d currency %v", i, all[i]["currency"])
			}
		}
	})
	t.Run("collateral", func(t *testing.T) {
		c := decodeJSON[map[string]any](t, fetch(PathAccountCollateral))
		cols, ok := c["collaterals"].([]any)
		if !ok || len(cols) != 4 {
			t.Fatalf("collaterals %v", c["collaterals"])
		}
		if _, ok := c["margin"].(map[string]any); !ok {
			t.Fatalf("margin %v", c["margin"])
		}
		mustDecimal(t, "total_collateral_value", c["total_collateral_value"])
	})
	t.Run("summary", func(t *testing.T) {
		sum := decodeJSON[map[string]any](t, fetch(PathAccountSummary))
		for _, k := range []string{"greeks", "margin", "pnl", "fee_tier"} {
			if _, ok := sum[k].(map[string]any); !ok {
				t.Fatalf("%s: %v, want an object", k, sum[k])
			}
		}
		if _, ok := sum["open_orders"].(float64); !ok {
			t.Fatalf("open_orders %v", sum["open_orders"])
		}
		if _, ok := sum["portfolio_margin"]; ok {
			t.Fatal("portfolio_margin without SchemaDrift")
		}
	})
	var held []map[string]any
	t.Run("positions", func(t *testing.T) {
		wrapped := decodeJSON[map[string][]map[string]any](t, fetch(PathPositions))
		if len(wrapped) != 1 || len(wrapped["positions"]) < 3 {
			t.Fatalf("positions payload %v", wrapped)
		}
		held = wrapped["positions"]
		for _, p := range held {
			checkPosition(t, p)
		}
		opts := decodeJSON[map[string][]map[string]any](t, fetch(PathPositions+"?kind=option&currency=BTC"))
		for _, p := range opts["positions"] {
			if p["kind"] != "option" {
				t.Fatalf("kind filter let %v through", p["kind"])
			}
		}
	})
	t.Run("position", func(t *testing.T) {
		name := held[0]["instrument_name"].(string)
		p := decodeJSON[map[string]any](t, fetch(PathPosition+"?instrument_name="+url.QueryEscape(name)))
		if !reflect.DeepEqual(p, held[0]) {
			t.Fatalf("get_position %v\n!= get_positions entry %v", p, held[0])
		}
		flat := decodeJSON[map[string]any](t, fetch(PathPosition+"?instrument_name=BTC-PERPETUAL", AccountHeader, "empty-1"))
		if flat["direction"] != "zero" || flat["size"] != "0.0" {
			t.Fatalf("position of an empty account: %v", flat)
		}
	})
	t.Run("positions with mints", func(t *testing.T) {
		ps := decodeJSON[[]map[string]any](t, fetch(PathPositionsWithMints))
		if len(ps) != len(held) {
			t.Fatalf("%d positions with mints, %d positions", len(ps), len(held))
		}
		for _, p := range ps {
			checkPosition(t, p)
			mints, ok := p["mints"].([]any)
			if !ok {
				t.Fatalf("mints %v", p["mints"])
			}
			for _, m := range mints {
				mm := m.(map[string]any)
				mustDecimal(t, "mint amount", mm["amount"])
				if _, ok := mm["mint_id"].(string); !ok {
					t.Fatalf("mint %v", mm)
				}
			}
		}
	})
	t.Run("exercisable", func(t *testing.T) {
		ex := decodeJSON[map[string][]map[string]any](t, fetch(PathExercisableOptions))
		if _, ok := ex["exercisable"]; !ok || len(ex) != 1 {
			t.Fatalf("exercisable payload %v", ex)
		}
	})
	t.Run("accounts differ", func(t *testing.T) {
		a := string(fetch(PathPositions))
		b := string(fetch(PathPositions, AccountHeader, "hedge"))
		empty := decodeJSON[map[string][]any](t, fetch(PathPositions, AccountHeader, "empty"))
		if a == b {
			t.Fatal("accounts main and hedge hold the same positions")
		}
		if ps, ok := empty["positions"]; !ok || ps == nil || len(ps) != 0 {
			t.Fatalf("empty account positions %v, want []", empty)
		}
		if string(fetch(PathPositions)) != a {
			t.Fatal("same account, same tick: payload changed")
		}
	})
	t.Run("legs appear", func(t *testing.T) {
		found := false
		for i := 0; i < 40 && !found; i++ {
			ps := decodeJSON[map[string][]map[string]any](t, fetch(PathPositions, AccountHeader, "acct-"+strconv.Itoa(i)))
			for _, p := range ps["positions"] {
				if _, ok := p["legs"]; ok {
					found = true
				}
			}
		}
		if !found {
			t.Fatal("no position with legs in 40 accounts")
		}
	})
}

func TestSchemaDrift(t *testing.T) {
	s := New(Config{Seed: 2, Instruments: 500, Faults: Faults{SchemaDrift: true}})
	srv := serve(t, s)
	tests := []struct {
		tick             int
		portfolioMargin  bool
		openOrdersString bool
	}{
		{0, false, false}, {3, false, false}, {4, true, false}, {5, true, false}, {6, true, true}, {9, true, true},
	}
	for _, tc := range tests {
		s.Advance(tc.tick - s.Tick())
		sum := decodeJSON[map[string]any](t, get(t, srv.URL+PathAccountSummary).body)
		if _, ok := sum["portfolio_margin"]; ok != tc.portfolioMargin {
			t.Errorf("tick %d: portfolio_margin present = %v", tc.tick, ok)
		}
		bal := decodeJSON[map[string]any](t, get(t, srv.URL+PathAccountBalance).body)
		if _, ok := bal["portfolio_margin"]; ok != tc.portfolioMargin {
			t.Errorf("tick %d: balance portfolio_margin present = %v", tc.tick, ok)
		}
		_, isString := sum["open_orders"].(string)
		if isString != tc.openOrdersString {
			t.Errorf("tick %d: open_orders %T", tc.tick, sum["open_orders"])
		}
		ps := decodeJSON[map[string][]map[string]any](t, get(t, srv.URL+PathPositions).body)
		for _, p := range ps["positions"] {
			if _, isString := p["leverage"].(string); isString != tc.openOrdersString {
				t.Errorf("tick %d: leverage %T", tc.tick, p["leverage"])
			}
		}
	}
}
