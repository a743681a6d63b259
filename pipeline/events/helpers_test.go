package events

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// row is one instrument row: column name -> value (string, float64, int64,
// bool, time.Time for timestamps); a missing key or nil is null.
type row map[string]any

var t0 = time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)

func at(h int) time.Time { return t0.Add(time.Duration(h) * time.Hour) }

// inst returns a fully populated row for name, with overrides applied
// (a nil value makes the column null).
func inst(name string, over ...any) row {
	exp := t0.Add(7 * 24 * time.Hour)
	r := row{
		"base_currency": "BTC", "block_trade_commission": 0.0003, "block_trade_min_trade_amount": 25.0,
		"block_trade_tick_size": 0.0001, "contract_size": 1.0, "counter_currency": "USD",
		"creation_timestamp": t0.Add(-24 * time.Hour).UnixMilli(), "deployed": true,
		"expiration_timestamp": exp.UnixMilli(), "index_price": 95012.35, "instrument_id": "42",
		"instrument_name": name, "instrument_type": "reversed", "is_active": true, "kind": "option",
		"maker_commission": 0.0003, "min_trade_amount": 0.1, "option_type": "call", "quote_currency": "BTC",
		"rfq": false, "settlement_currency": "BTC", "settlement_period": "week", "strike": 100000.0,
		"taker_commission": 0.0003, "tick_size": 0.0005, "index_price_raw": "95012.35",
		"creation_time": t0.Add(-24 * time.Hour), "expiration_time": exp, "extra": nil,
	}
	if len(over)%2 != 0 {
		panic("inst: odd overrides")
	}
	for i := 0; i < len(over); i += 2 {
		k := over[i].(string)
		if schema.Instruments.Index(k) < 0 {
			panic("inst: no column " + k)
		}
		r[k] = over[i+1]
	}
	return r
}

// record builds a schema.Instruments record of rows for source at snap.
func record(t testing.TB, mem memory.Allocator, source string, snap time.Time, rows []row) arrow.Record {
	t.Helper()
	b := array.NewRecordBuilder(mem, schema.Instruments.ArrowSchema())
	defer b.Release()
	for _, r := range rows {
		full := maps.Clone(r)
		full["snapshot_time"], full["run_id"], full["source"] = snap, "run-"+snap.Format("150405"), source
		for _, k := range []string{"source", "snapshot_time"} { // a row's own (tests of bad rows)
			if v, ok := r[k]; ok {
				full[k] = v
			}
		}
		for i, c := range schema.Instruments.Columns {
			v := full[c.Name]
			fb := b.Field(i)
			if v == nil {
				fb.AppendNull()
				continue
			}
			switch c.Type {
			case schema.String:
				fb.(*array.StringBuilder).Append(v.(string))
			case schema.Float64:
				fb.(*array.Float64Builder).Append(v.(float64))
			case schema.Int64:
				fb.(*array.Int64Builder).Append(v.(int64))
			case schema.Bool:
				fb.(*array.BooleanBuilder).Append(v.(bool))
			case schema.TimestampMs:
				fb.(*array.TimestampBuilder).Append(arrow.Timestamp(v.(time.Time).UnixMilli()))
			}
		}
	}
	return b.NewRecord()
}

// ev is one emitted event as plain values.
type ev struct {
	Source, Name, Event, Field, RunID string
	Old, New                          *string
	Snap                              time.Time
	Prev                              *time.Time
	Initial                           bool
}

// short renders an event for table-driven expectations:
// "NAME event [field old→new] [initial]", null as ∅.
func (e ev) short() string {
	s := e.Name + " " + e.Event
	if e.Field != "" || e.Old != nil || e.New != nil {
		s += " " + e.Field + " " + strOr(e.Old) + "→" + strOr(e.New)
	}
	if e.Initial {
		s += " initial"
	}
	return s
}

func strOr(p *string) string {
	if p == nil {
		return "∅"
	}
	return *p
}

func shorts(evs []ev) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.short()
	}
	return out
}

// eventsOf converts an InstrumentEvents record to plain values.
func eventsOf(t testing.TB, rec arrow.Record) []ev {
	t.Helper()
	if !rec.Schema().Equal(schema.InstrumentEvents.ArrowSchema()) {
		t.Fatalf("record schema %v is not schema.InstrumentEvents", rec.Schema())
	}
	tb := schema.InstrumentEvents
	str := func(name string) *array.String { return rec.Column(tb.MustIndex(name)).(*array.String) }
	ts := func(name string) *array.Timestamp { return rec.Column(tb.MustIndex(name)).(*array.Timestamp) }
	opt := func(a *array.String, i int) *string {
		if a.IsNull(i) {
			return nil
		}
		s := a.Value(i)
		return &s
	}
	var out []ev
	for i := 0; i < int(rec.NumRows()); i++ {
		for c := range rec.Schema().Fields() {
			if !tb.Columns[c].Nullable && rec.Column(c).IsNull(i) {
				t.Fatalf("row %d: non-nullable column %s is null", i, tb.Columns[c].Name)
			}
		}
		e := ev{
			Source: str("source").Value(i), Name: str("instrument_name").Value(i), Event: str("event").Value(i),
			Field: str("field").Value(i), RunID: str("run_id").Value(i),
			Old: opt(str("old_value"), i), New: opt(str("new_value"), i),
			Snap:    time.UnixMilli(int64(ts("snapshot_time").Value(i))).UTC(),
			Initial: rec.Column(tb.MustIndex("initial")).(*array.Boolean).Value(i),
		}
		if p := ts("previous_snapshot_time"); !p.IsNull(i) {
			pt := time.UnixMilli(int64(p.Value(i))).UTC()
			e.Prev = &pt
		}
		out = append(out, e)
	}
	return out
}

// diff runs one comparison of rows (split in batches of batch rows when
// batch > 0) against prev and returns the events, stats and new state.
func diff(t testing.TB, prev *State, source string, snap time.Time, rows []row, batch int, opt Options) ([]ev, Stats, *State) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	opt.Mem = mem
	d, err := NewDiffer(prev, sinks.Snapshot{Time: snap, RunID: "run-" + snap.Format("150405"), Source: source}, opt)
	if err != nil {
		t.Fatalf("NewDiffer: %v", err)
	}
	if batch <= 0 {
		batch = max(1, len(rows))
	}
	for i := 0; i < len(rows); i += batch {
		rec := record(t, mem, source, snap, rows[i:min(len(rows), i+batch)])
		err := d.Observe(rec)
		rec.Release()
		if err != nil {
			t.Fatalf("Observe: %v", err)
		}
	}
	var evs []ev
	st, next, err := d.Finish(func(tb *schema.Table, rec arrow.Record) error {
		if tb != schema.InstrumentEvents {
			t.Errorf("emitted table %s", tb.Name)
		}
		if opt.BatchRows > 0 && rec.NumRows() > int64(opt.BatchRows) {
			t.Errorf("batch of %d rows, limit %d", rec.NumRows(), opt.BatchRows)
		}
		evs = append(evs, eventsOf(t, rec)...)
		return nil
	})
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	return evs, st, next
}

func diffStrings(got, want []string) string {
	if strings.Join(got, "\n") == strings.Join(want, "\n") {
		return ""
	}
	return fmt.Sprintf("got:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
}

// finish runs d.Finish and returns the events it emitted.
func finish(t testing.TB, d *Differ) ([]ev, Stats, *State) {
	t.Helper()
	var evs []ev
	stats, next, err := d.Finish(func(_ *schema.Table, rec arrow.Record) error {
		evs = append(evs, eventsOf(t, rec)...)
		return nil
	})
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	return evs, stats, next
}
