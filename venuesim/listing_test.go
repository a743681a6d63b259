package venuesim

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var fieldNames = []string{
	"base_currency", "block_trade_commission", "block_trade_min_trade_amount", "block_trade_tick_size",
	"contract_size", "counter_currency", "creation_timestamp", "deployed", "expiration_timestamp",
	"index_price", "instrument_id", "instrument_name", "instrument_type", "is_active", "kind",
	"maker_commission", "min_trade_amount", "option_type", "quote_currency", "rfq",
	"settlement_currency", "settlement_period", "strike", "taker_commission", "tick_size",
}

func TestDeterminism(t *testing.T) {
	tests := []struct {
		name  string
		a, b  Config
		ticks int
		same  bool
	}{
		{"same seed", Config{Seed: 7}, Config{Seed: 7}, 0, true},
		{"same seed after ticks", Config{Seed: 7}, Config{Seed: 7}, 37, true},
		{"same seed with data faults", Config{Seed: 7, Faults: Faults{IndexPriceVariants: true, WrongTypes: true, ExtraFields: true}},
			Config{Seed: 7, Faults: Faults{IndexPriceVariants: true, WrongTypes: true, ExtraFields: true}}, 5, true},
		{"different seed", Config{Seed: 7}, Config{Seed: 8}, 0, false},
		{"different seed after ticks", Config{Seed: 7}, Config{Seed: 8}, 10, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := New(tc.a), New(tc.b)
			a.Advance(tc.ticks)
			// b gets there in single steps: the path must not matter.
			for i := 0; i < tc.ticks; i++ {
				b.Advance(1)
			}
			if got := bytes.Equal(body(t, a), body(t, b)); got != tc.same {
				t.Fatalf("bodies equal = %v, want %v", got, tc.same)
			}
		})
	}
}

func TestShape(t *testing.T) {
	s := New(Config{Seed: 3})
	groups := listing(t, body(t, s))
	if len(groups) != 3 {
		t.Fatalf("got %d groups, want 3 (one per currency)", len(groups))
	}
	names := map[string]bool{}
	ids := map[string]bool{}
	for gi, g := range groups {
		base := ""
		for _, raw := range g {
			if got := objectKeys(t, raw); !slices.Equal(got, fieldNames) {
				t.Fatalf("keys %v, want %v", got, fieldNames)
			}
			if bytes.ContainsAny(raw, " \n\t") {
				t.Fatalf("not compact: %s", raw)
			}
			m := decodeMap(t, raw)
			if base == "" {
				base = m["base_currency"].(string)
			} else if base != m["base_currency"] {
				t.Fatalf("group %d mixes %s and %v", gi, base, m["base_currency"])
			}
			name := m["instrument_name"].(string)
			if names[name] {
				t.Fatalf("duplicate instrument_name %s", name)
			}
			names[name] = true
			id := m["instrument_id"].(string)
			if ids[id] {
				t.Fatalf("duplicate instrument_id %s", id)
			}
			ids[id] = true
			checkTypes(t, m)
		}
	}
	if len(names) != DefaultInstruments {
		t.Fatalf("%d instruments, want %d", len(names), DefaultInstruments)
	}
	for _, want := range []string{"BTC-PERPETUAL", "ETH-PERPETUAL", "SOL_USDC-PERPETUAL", "BTC-27NOV26", "BTC-25DEC26"} {
		if !names[want] {
			t.Errorf("listing lacks %s", want)
		}
	}
}

// checkTypes checks the JSON types and value domains of a fault-free instrument.
func checkTypes(t *testing.T, m map[string]any) {
	t.Helper()
	str := func(k string) string {
		v, ok := m[k].(string)
		if !ok {
			t.Fatalf("%s: %T, want string in %v", k, m[k], m)
		}
		return v
	}
	numb := func(k string) float64 {
		v, ok := m[k].(float64)
		if !ok {
			t.Fatalf("%s: %T, want number in %v", k, m[k], m)
		}
		return v
	}
	boolean := func(k string) {
		if _, ok := m[k].(bool); !ok {
			t.Fatalf("%s: %T, want bool", k, m[k])
		}
	}
	for _, k := range []string{"base_currency", "counter_currency", "instrument_id", "instrument_name", "quote_currency", "settlement_currency"} {
		str(k)
	}
	for _, k := range []string{"block_trade_commission", "block_trade_min_trade_amount", "block_trade_tick_size",
		"contract_size", "maker_commission", "min_trade_amount", "taker_commission", "tick_size"} {
		numb(k)
	}
	boolean("deployed")
	boolean("is_active")
	boolean("rfq")
	if ip, err := strconv.ParseFloat(str("index_price"), 64); err != nil || ip <= 0 {
		t.Fatalf("index_price %q not a positive decimal", m["index_price"])
	}
	created, expires := numb("creation_timestamp"), numb("expiration_timestamp")
	if created < 1.5e12 || expires <= created {
		t.Fatalf("timestamps %v %v", created, expires)
	}
	if it := str("instrument_type"); it != "reversed" && it != "linear" {
		t.Fatalf("instrument_type %q", it)
	}
	name := str("instrument_name")
	switch str("kind") {
	case "option":
		ot := str("option_type")
		if k := numb("strike"); k <= 0 {
			t.Fatalf("strike %v", k)
		}
		if (ot == "call") != strings.HasSuffix(name, "-C") || (ot == "put") != strings.HasSuffix(name, "-P") {
			t.Fatalf("option_type %s for %s", ot, name)
		}
		if p := str("settlement_period"); p == "perpetual" {
			t.Fatalf("option %s with period %s", name, p)
		}
		if time.UnixMilli(int64(expires)).UTC().Hour() != 8 {
			t.Fatalf("%s expires at %v", name, time.UnixMilli(int64(expires)).UTC())
		}
	case "future":
		if m["option_type"] != nil || m["strike"] != nil {
			t.Fatalf("future %s with option_type/strike", name)
		}
		if strings.HasSuffix(name, "PERPETUAL") != (str("settlement_period") == "perpetual") {
			t.Fatalf("%s period %v", name, m["settlement_period"])
		}
		if strings.HasSuffix(name, "PERPETUAL") && expires != 32503708800000 {
			t.Fatalf("perpetual expires %v", expires)
		}
	default:
		t.Fatalf("kind %v", m["kind"])
	}
}

func TestInstrumentsMatchBody(t *testing.T) {
	allData := Faults{IndexPriceVariants: true, WrongTypes: true, ExtraFields: true, TimestampsInSeconds: true}
	tests := []struct {
		name  string
		cfg   Config
		ticks int
	}{
		{"default", Config{Seed: 1}, 0},
		{"after ticks", Config{Seed: 1}, 30},
		{"small grouped", Config{Seed: 2, Instruments: 57, GroupSize: 10}, 3},
		{"data faults", Config{Seed: 5, Instruments: 8000, Faults: allData}, 11},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := New(tc.cfg)
			s.Advance(tc.ticks)
			want := s.Instruments()
			// Through HTTP, as a client sees it.
			resp := get(t, serve(t, s).URL+PathInstruments)
			if resp.status != 200 || resp.readErr != nil {
				t.Fatalf("status %d, read error %v", resp.status, resp.readErr)
			}
			if !bytes.Equal(resp.body, body(t, s)) {
				t.Fatal("served body differs from WriteInstruments")
			}
			got := flat(listing(t, resp.body))
			if len(got) != len(want) || len(got) != s.NumInstruments() {
				t.Fatalf("served %d instruments, Instruments() %d, NumInstruments %d", len(got), len(want), s.NumInstruments())
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i].Raw) {
					t.Fatalf("instrument %d:\n got %s\nwant %s", i, got[i], want[i].Raw)
				}
				faulty := want[i].WrongType != nil || want[i].Missing != nil || want[i].Extra != nil || want[i].IndexPrice == nil
				if i%7 != 0 && !faulty {
					continue // raw bytes are equal; typed values on a sample
				}
				if exp, dec := expected(t, want[i]), decodeMap(t, got[i]); !reflect.DeepEqual(exp, dec) {
					t.Fatalf("instrument %d typed values:\n got %v\nwant %v", i, dec, exp)
				}
			}
		})
	}
}

func TestExactCount(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 17, 100, 999, 3000, 25_000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			t.Parallel()
			s := New(Config{Seed: int64(n), Instruments: n})
			for _, step := range []int{0, 1, 7, 16, 24 * 9} {
				s.Advance(step)
				b := body(t, s)
				if n <= 3000 && !json.Valid(b) {
					t.Fatalf("tick %d: invalid JSON", s.Tick())
				}
				if got := bytes.Count(b, []byte(`{"base_currency":`)); got != n || s.NumInstruments() != n {
					t.Fatalf("tick %d: body %d, NumInstruments %d, want %d", s.Tick(), got, s.NumInstruments(), n)
				}
			}
			if n <= 3000 {
				if got := len(s.Instruments()); got != n {
					t.Fatalf("Instruments() has %d, want %d", got, n)
				}
			}
		})
	}
}

func TestGroupSize(t *testing.T) {
	tests := []struct {
		n, size    int
		wantGroups []int
	}{
		{1050, 100, append(slices.Repeat([]int{100}, 10), 50)},
		{10, 3, []int{3, 3, 3, 1}},
		{10, 10, []int{10}},
		{10, 50, []int{10}},
	}
	for _, tc := range tests {
		t.Run(strconv.Itoa(tc.n)+"/"+strconv.Itoa(tc.size), func(t *testing.T) {
			s := New(Config{Seed: 1, Instruments: tc.n, GroupSize: tc.size})
			var sizes []int
			for _, g := range listing(t, body(t, s)) {
				sizes = append(sizes, len(g))
			}
			if !slices.Equal(sizes, tc.wantGroups) {
				t.Fatalf("group sizes %v, want %v", sizes, tc.wantGroups)
			}
		})
	}
}

// braceCounter counts '{' bytes of a stream without keeping it.
type braceCounter struct{ braces, bytes int64 }

func (c *braceCounter) Write(p []byte) (int, error) {
	c.braces += int64(bytes.Count(p, []byte{'{'}))
	c.bytes += int64(len(p))
	return len(p), nil
}

func TestScaleToMillion(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000,000 instruments: skipped with -short")
	}
	const n = 1_000_000
	s := New(Config{Seed: 42, Instruments: n})
	for _, step := range []int{30} { // past 08:00: an expiry removed, one listed
		s.Advance(step)
		var c braceCounter
		if err := s.WriteInstruments(&c); err != nil {
			t.Fatal(err)
		}
		// One '{' per instrument plus one per group (3 currencies).
		if c.braces != n+3 || s.NumInstruments() != n {
			t.Fatalf("tick %d: %d objects, want %d", s.Tick(), c.braces-3, n)
		}
		t.Logf("tick %d: %d instruments, %.0f MB", s.Tick(), n, float64(c.bytes)/1e6)
	}
}

// names returns the instrument names of a listing.
func names(list []Instrument) map[string]Instrument {
	out := make(map[string]Instrument, len(list))
	for _, in := range list {
		out[in.InstrumentName] = in
	}
	return out
}

func TestTickMovesState(t *testing.T) {
	s := New(Config{Seed: 11})
	if got := s.Now(); !got.Equal(time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("Now() = %v", got)
	}
	btc0, _ := s.IndexPrice("BTC")
	before := names(s.Instruments())
	if _, ok := before["BTC-20NOV26"]; !ok {
		t.Fatal("BTC-20NOV26 (expires 08:00 today) not listed at 00:00")
	}

	s.Advance(9) // 09:00: the 20NOV26 expiry has passed
	if s.Tick() != 9 || !s.Now().Equal(time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("tick %d now %v", s.Tick(), s.Now())
	}
	btc1, _ := s.IndexPrice("BTC")
	if btc0 == btc1 {
		t.Fatal("index did not move")
	}
	after := names(s.Instruments())
	nowMs := s.Now().UnixMilli()
	var removed, added int
	for name, in := range before {
		if _, ok := after[name]; !ok {
			removed++
			if strings.Contains(name, "20NOV26") && in.ExpirationTimestamp > nowMs {
				t.Fatalf("%s removed before expiry", name)
			}
		}
	}
	for name, in := range after {
		if in.ExpirationTimestamp <= nowMs {
			t.Fatalf("expired %s still listed", name)
		}
		if strings.Contains(name, "20NOV26") {
			t.Fatalf("%s listed after expiry", name)
		}
		if _, ok := before[name]; !ok {
			added++
		}
	}
	if removed == 0 || added == 0 {
		t.Fatalf("removed %d, added %d", removed, added)
	}
	// A new daily expiry (four days out) appeared at 08:00.
	if _, ok := after["BTC-PERPETUAL"]; !ok {
		t.Fatal("perpetual missing")
	}
	foundNew := false
	for name := range after {
		if strings.HasPrefix(name, "BTC-24NOV26-") {
			foundNew = true
		}
	}
	if !foundNew {
		t.Fatal("no BTC-24NOV26 options listed after 08:00")
	}

	// Flips and parameter changes between consecutive ticks.
	var activeFlips, deployedFlips, changes int
	prev := after
	for i := 0; i < 8; i++ {
		s.Advance(1)
		cur := names(s.Instruments())
		for name, a := range cur {
			b, ok := prev[name]
			if !ok {
				continue
			}
			if a.IsActive != b.IsActive {
				activeFlips++
			}
			if a.Deployed != b.Deployed {
				deployedFlips++
			}
			if a.MakerCommission != b.MakerCommission || a.TakerCommission != b.TakerCommission || a.TickSize != b.TickSize {
				changes++
			}
		}
		prev = cur
	}
	if activeFlips == 0 || deployedFlips == 0 || changes == 0 {
		t.Fatalf("over 8 ticks: %d is_active flips, %d deployed flips, %d commission/tick changes", activeFlips, deployedFlips, changes)
	}
	t.Logf("over 8 ticks: %d is_active flips, %d deployed flips, %d commission/tick changes", activeFlips, deployedFlips, changes)
}

func TestDataFaultVariants(t *testing.T) {
	type probe func(t *testing.T, ins []Instrument, raws []json.RawMessage)
	tests := []struct {
		name   string
		faults Faults
		check  probe
	}{
		{"index price variants", Faults{IndexPriceVariants: true}, func(t *testing.T, ins []Instrument, _ []json.RawMessage) {
			seen := map[string]int{}
			for _, in := range ins {
				tok := string(in.IndexPriceJSON)
				switch {
				case tok == `""`, tok == `"abc"`, tok == `"1e3"`, tok == "null":
					seen[tok]++
				case tok[0] != '"':
					seen["number"]++
				default:
					if _, err := strconv.ParseFloat(*in.IndexPrice, 64); err != nil {
						t.Fatalf("unexpected index_price %s", tok)
					}
					seen["normal"]++
				}
			}
			for _, k := range []string{`""`, `"abc"`, `"1e3"`, "null", "number"} {
				if seen[k] == 0 {
					t.Errorf("variant %s never sent (%v)", k, seen)
				}
			}
			if frac := 1 - float64(seen["normal"])/float64(len(ins)); frac < 0.003 || frac > 0.03 {
				t.Errorf("%.2f%% variants, want about 1%%", 100*frac)
			}
		}},
		{"wrong types", Faults{WrongTypes: true}, func(t *testing.T, ins []Instrument, raws []json.RawMessage) {
			seen := map[string]int{}
			missing := 0
			for i, in := range ins {
				for k := range in.WrongType {
					seen[k]++
				}
				if len(in.Missing) > 0 {
					missing++
					if bytes.Contains(raws[i], []byte(`"instrument_name"`)) {
						t.Fatalf("Missing says no name but body has one: %s", raws[i])
					}
				}
			}
			for _, k := range []string{"strike", "is_active", "creation_timestamp", "deployed"} {
				if seen[k] == 0 {
					t.Errorf("no wrong-typed %s (%v)", k, seen)
				}
			}
			if missing == 0 {
				t.Error("no instrument lacks instrument_name")
			}
			oops := slices.ContainsFunc(raws, func(r json.RawMessage) bool {
				return bytes.Contains(r, []byte(`"strike":"oops"`))
			})
			if !oops {
				t.Error(`no "strike":"oops" in the body`)
			}
		}},
		{"timestamps in seconds", Faults{TimestampsInSeconds: true}, func(t *testing.T, ins []Instrument, _ []json.RawMessage) {
			for _, in := range ins {
				if in.ExpirationTimestamp > 1e11 || in.CreationTimestamp > 1e11 || in.CreationTimestamp < 1e9 {
					t.Fatalf("%s: timestamps %d %d not in seconds", in.InstrumentName, in.CreationTimestamp, in.ExpirationTimestamp)
				}
			}
		}},
		{"extra fields", Faults{ExtraFields: true}, func(t *testing.T, ins []Instrument, raws []json.RawMessage) {
			hints := 0
			for i, in := range ins {
				if in.Extra["venue_tag"] == nil {
					t.Fatalf("no venue_tag: %s", raws[i])
				}
				if in.Extra["greeks_hint"] != nil {
					hints++
				}
			}
			if hints == 0 {
				t.Error("no greeks_hint")
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := New(Config{Seed: 9, Instruments: 10_000, Faults: tc.faults})
			ins := s.Instruments()
			raws := flat(listing(t, body(t, s)))
			if len(raws) != len(ins) {
				t.Fatalf("%d served, %d Instruments()", len(raws), len(ins))
			}
			tc.check(t, ins, raws)
		})
	}
}

func TestLadder(t *testing.T) {
	tests := []struct {
		name   string
		l      ladder
		spot   int64
		k      int
		lowest int64
	}{
		{"btc", ladder{95000 * strikeScale, 1000 * strikeScale, 2500 * strikeScale, 5000 * strikeScale}, 95123 * strikeScale, 60, 1},
		{"sol fractional", ladder{210 * strikeScale, 2.5 * strikeScale, 5 * strikeScale, 10 * strikeScale}, 207 * strikeScale, 80, 1},
		{"runs out below", ladder{100 * strikeScale, 10 * strikeScale, 25 * strikeScale, 50 * strikeScale}, 100 * strikeScale, 40, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			strikes, last := tc.l.window(tc.spot, tc.k)
			if len(strikes) != tc.k || last < 0 || last >= len(strikes) {
				t.Fatalf("got %d strikes (last %d), want %d", len(strikes), last, tc.k)
			}
			for i, st := range strikes {
				if st < tc.lowest || !tc.l.valid(st) {
					t.Fatalf("invalid strike %d", st)
				}
				if i > 0 && st <= strikes[i-1] {
					t.Fatalf("not strictly ascending at %d: %v", i, strikes)
				}
				// No ladder point is skipped inside the window.
				if i > 0 && tc.l.next(strikes[i-1]) != st {
					t.Fatalf("gap between %d and %d", strikes[i-1], st)
				}
			}
		})
	}
	if got := string(appendStrike(nil, 2125000, 'd')); got != "212d5" {
		t.Fatalf("appendStrike = %s", got)
	}
}

func TestCalendar(t *testing.T) {
	now := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC).UnixMilli()
	defs := activeExpiries(now, calParams{4, 3, 3, 4})
	var got []string
	for _, d := range defs {
		got = append(got, string(appendDate(nil, d.day))+":"+periodNames[d.cat])
		if d.listMs > now {
			t.Fatalf("listed in the future: %v", d)
		}
	}
	want := []string{"20NOV26:week", "21NOV26:day", "22NOV26:day", "23NOV26:day", "27NOV26:month", "4DEC26:week",
		"25DEC26:quarter", "29JAN27:month", "26MAR27:quarter", "25JUN27:quarter", "24SEP27:quarter"}
	if !slices.Equal(got, want) {
		t.Fatalf("expiries\n got %v\nwant %v", got, want)
	}
}
