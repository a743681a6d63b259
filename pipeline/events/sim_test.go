package events

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/venuesim"
)

// simValues renders the compared fields of a simulator instrument as the
// events should (nil = null), straight from its typed values.
func simValues(in *venuesim.Instrument) map[string]*string {
	s := func(v string) *string { return &v }
	f := func(v float64) *string { return s(strconv.FormatFloat(v, 'g', -1, 64)) }
	i := func(v int64) *string { return s(strconv.FormatInt(v, 10)) }
	b := func(v bool) *string { return s(strconv.FormatBool(v)) }
	m := map[string]*string{
		"base_currency": s(in.BaseCurrency), "block_trade_commission": f(in.BlockTradeCommission),
		"block_trade_min_trade_amount": f(in.BlockTradeMinTradeAmount), "block_trade_tick_size": f(in.BlockTradeTickSize),
		"contract_size": f(in.ContractSize), "counter_currency": s(in.CounterCurrency),
		"creation_timestamp": i(in.CreationTimestamp), "deployed": b(in.Deployed),
		"expiration_timestamp": i(in.ExpirationTimestamp), "instrument_id": s(in.InstrumentID),
		"instrument_type": s(in.InstrumentType), "is_active": b(in.IsActive), "kind": s(in.Kind),
		"maker_commission": f(in.MakerCommission), "min_trade_amount": f(in.MinTradeAmount),
		"option_type": nil, "quote_currency": s(in.QuoteCurrency), "rfq": b(in.RFQ),
		"settlement_currency": s(in.SettlementCurrency), "settlement_period": s(in.SettlementPeriod),
		"strike": nil, "taker_commission": f(in.TakerCommission), "tick_size": f(in.TickSize),
	}
	if in.OptionType != nil {
		m["option_type"] = s(*in.OptionType)
	}
	if in.Strike != nil {
		m["strike"] = f(*in.Strike)
	}
	return m
}

// expectedSimEvents is a plain map-based diff of two simulator listings.
func expectedSimEvents(prev, cur []venuesim.Instrument, first bool, src, runID string, snap time.Time, prevSnap *time.Time) []ev {
	order := map[string]int{"listed": 0, "delisted": 1, "expired": 2, "activated": 3, "deactivated": 4, "deployed": 5, "undeployed": 6, "changed": 7}
	byName := func(l []venuesim.Instrument) map[string]*venuesim.Instrument {
		m := map[string]*venuesim.Instrument{}
		for i := range l {
			m[l[i].InstrumentName] = &l[i]
		}
		return m
	}
	pm, cm := byName(prev), byName(cur)
	var out []ev
	add := func(name, event, field string, old, new *string) {
		out = append(out, ev{Source: src, Name: name, Event: event, Field: field, RunID: runID, Old: old, New: new,
			Snap: snap, Prev: prevSnap, Initial: event == "listed" && first})
	}
	for name, c := range cm {
		p, ok := pm[name]
		if !ok {
			add(name, "listed", "", nil, nil)
			continue
		}
		pv, cv := simValues(p), simValues(c)
		for field := range cv {
			o, n := pv[field], cv[field]
			if o == nil && n == nil || o != nil && n != nil && *o == *n {
				continue
			}
			event := "changed"
			if o != nil && n != nil {
				switch field {
				case "is_active":
					event = map[string]string{"true": "activated", "false": "deactivated"}[*n]
				case "deployed":
					event = map[string]string{"true": "deployed", "false": "undeployed"}[*n]
				}
			}
			add(name, event, field, o, n)
		}
	}
	for name, p := range pm {
		if _, ok := cm[name]; !ok {
			if p.ExpirationTimestamp <= snap.UnixMilli() {
				add(name, "expired", "", nil, nil)
			} else {
				add(name, "delisted", "", nil, nil)
			}
		}
	}
	slices.SortFunc(out, func(a, b ev) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(order[a.Event], order[b.Event]), cmp.Compare(a.Field, b.Field))
	})
	return out
}

// TestSimulator compares the events derived from simulator snapshots
// (JSON body → transform → Differ, the state saved and loaded between
// snapshots) with a plain diff of the simulator's own typed listings, and
// checks that a replay (fresh state, same snapshots) gives identical events.
func TestSimulator(t *testing.T) {
	const ticks = 10
	first, kinds, firstState := runSim(t, ticks, t.TempDir(), Options{})
	for _, k := range kindNames {
		if k == "delisted" || k == "expired" {
			continue
		}
		if kinds[k] == 0 {
			t.Errorf("no %s event in %d ticks", k, ticks)
		}
	}
	if kinds["delisted"]+kinds["expired"] == 0 {
		t.Errorf("no delisted or expired event in %d ticks", ticks)
	}
	t.Logf("events over ticks 1..%d: %v", ticks, kinds)

	// Replay: the same snapshots from an empty state, kept in memory.
	replay, _, _ := runSim(t, ticks, "", Options{})
	if d := diffStrings(replay, first); d != "" {
		t.Fatalf("replay differs: %s", d)
	}

	// Spilling the rows to disk (a buffer smaller than the listing) gives
	// the same events and the same states, saved and loaded or not.
	for _, c := range []struct {
		memBytes int
		saved    bool
	}{{512, false}, {4 << 10, true}, {64 << 10, false}, {256 << 10, true}} {
		memBytes, saved := c.memBytes, c.saved
		t.Run(fmt.Sprintf("buffer %d saved %v", memBytes, saved), func(t *testing.T) {
			dir, tmp := "", t.TempDir()
			if saved {
				dir = t.TempDir()
				tmp = StateDir(dir)
			}
			got, _, st := runSim(t, ticks, dir, Options{MemBytes: memBytes, TempDir: tmp})
			if d := diffStrings(got, first); d != "" {
				t.Fatal(d)
			}
			if d := diffStrings(st, firstState); d != "" {
				t.Fatalf("final state: %s", d)
			}
			assertNoTemp(t, tmp)
		})
	}
}

// runSim takes ticks+1 snapshots of a fresh simulator and returns every
// event (as evLines) and the count per kind after the first snapshot. With
// a dir the state is saved and loaded between snapshots. It also returns the
// final state's entries (entriesOf) and closes every state.
func runSim(t *testing.T, ticks int, dir string, opt Options) ([]string, map[string]int, []string) {
	const src = "venue-sim"
	sim := venuesim.New(venuesim.Config{Seed: 1})
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dec := transform.NewInstrumentDecoder(transform.Options{Mem: mem, BatchRows: 1000})
	defer dec.Release()

	var prev []venuesim.Instrument
	var prevSnap *time.Time
	var all []string
	kinds := map[string]int{}
	st := NewState(src)
	defer func() { st.Close() }()
	opt.Mem, opt.BatchRows = mem, 500
	for tick := 0; tick <= ticks; tick++ {
		if tick > 0 {
			sim.Advance(1)
		}
		snap := sim.Now()
		runID := "run-" + strconv.Itoa(tick)
		cur := sim.Instruments()
		var body bytes.Buffer
		if err := sim.WriteInstruments(&body); err != nil {
			t.Fatal(err)
		}
		if dir != "" {
			st.Close()
			var err error
			if st, err = Load(dir, src); err != nil {
				t.Fatal(err)
			}
		}
		d, err := NewDiffer(st, sinks.Snapshot{Time: snap, RunID: runID, Source: src}, opt)
		if err != nil {
			t.Fatal(err)
		}
		_, err = dec.Decode(context.Background(), &body, sinks.Snapshot{Time: snap, RunID: runID, Source: src, Endpoint: "instruments"},
			func(tb *schema.Table, rec arrow.Record) error {
				if tb != schema.Instruments {
					t.Fatalf("unexpected %s rows", tb.Name)
				}
				return d.Observe(rec)
			})
		if err != nil {
			t.Fatal(err)
		}
		got, stats, next := finish(t, d)
		want := expectedSimEvents(prev, cur, tick == 0, src, runID, snap, prevSnap)
		if d := diffStrings(evLines(got), evLines(want)); d != "" {
			t.Fatalf("tick %d: %s", tick, d)
		}
		if stats.Instruments != len(cur) || stats.Duplicates != 0 {
			t.Fatalf("tick %d: stats %+v, %d instruments", tick, stats, len(cur))
		}
		if dir != "" {
			if err := next.Save(dir); err != nil {
				t.Fatal(err)
			}
		}
		if tick > 0 {
			for _, e := range got {
				kinds[e.Event]++
			}
		}
		t.Logf("tick %d (%s): %d instruments, events by kind %v", tick, snap.Format(time.RFC3339), len(cur), stats.ByKind)
		all = append(all, evLines(got)...)
		st.Close()
		st, prev, prevSnap = next, cur, &snap
	}
	return all, kinds, entriesOf(t, st)
}

// evLines renders events with every column for exact comparison.
func evLines(evs []ev) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		p := "∅"
		if e.Prev != nil {
			p = e.Prev.Format(time.RFC3339Nano)
		}
		out[i] = e.short() + " | " + e.Source + " " + e.RunID + " " + e.Snap.Format(time.RFC3339Nano) + " prev=" + p
	}
	return out
}
