package events

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// TestCompare runs sequences of snapshots of one source and checks the
// events of each step.
func TestCompare(t *testing.T) {
	type step struct {
		rows []row
		want []string
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"initial listing is flagged, sorted by name", []step{
			{[]row{inst("B"), inst("A")}, []string{"A listed initial", "B listed initial"}},
		}},
		{"nothing changed", []step{
			{[]row{inst("A"), inst("B")}, []string{"A listed initial", "B listed initial"}},
			{[]row{inst("B"), inst("A")}, nil},
			{[]row{inst("A"), inst("B")}, nil},
		}},
		{"index price and derived columns are not events", []step{
			{[]row{inst("A")}, []string{"A listed initial"}},
			{[]row{inst("A", "index_price", 96000.1, "index_price_raw", "96000.1", "extra", `{"x":1}`,
				"creation_time", t0, "expiration_time", t0.Add(time.Hour))}, nil},
			{[]row{inst("A", "index_price", nil, "index_price_raw", "abc")}, nil},
		}},
		{"every kind", []step{
			{[]row{inst("act", "is_active", false), inst("deact"), inst("dep", "deployed", false), inst("undep"),
				inst("chg"), inst("gone"), inst("exp", "expiration_time", at(1))}, []string{
				"act listed initial", "chg listed initial", "deact listed initial", "dep listed initial",
				"exp listed initial", "gone listed initial", "undep listed initial"}},
			{[]row{inst("act"), inst("deact", "is_active", false), inst("dep"), inst("undep", "deployed", false),
				inst("chg", "maker_commission", 0.0002), inst("new")}, []string{
				"act activated is_active false→true",
				"chg changed maker_commission 0.0003→0.0002",
				"deact deactivated is_active true→false",
				"dep deployed deployed false→true",
				"exp expired",
				"gone delisted",
				"new listed",
				"undep undeployed deployed true→false"}},
		}},
		{"several fields at once, one event per field in field order", []step{
			{[]row{inst("A")}, []string{"A listed initial"}},
			{[]row{inst("A", "tick_size", 0.001, "maker_commission", 0.0002, "taker_commission", 0.0004,
				"strike", 100000.5, "option_type", "put", "is_active", false, "deployed", false,
				"creation_timestamp", int64(1700000000000), "rfq", true, "instrument_id", "43")}, []string{
				"A deactivated is_active true→false",
				"A undeployed deployed true→false",
				"A changed creation_timestamp " + itoa(t0.Add(-24*time.Hour).UnixMilli()) + "→1700000000000",
				"A changed instrument_id 42→43",
				"A changed maker_commission 0.0003→0.0002",
				"A changed option_type call→put",
				"A changed rfq false→true",
				"A changed strike 100000→100000.5",
				"A changed taker_commission 0.0003→0.0004",
				"A changed tick_size 0.0005→0.001"}},
		}},
		{"disappears and reappears", []step{
			{[]row{inst("A"), inst("B")}, []string{"A listed initial", "B listed initial"}},
			{[]row{inst("A")}, []string{"B delisted"}},
			{[]row{inst("A")}, nil},
			{[]row{inst("B", "tick_size", 0.01), inst("A")}, []string{"B listed"}},
			{[]row{inst("B", "tick_size", 0.01), inst("A")}, nil},
		}},
		{"nulls", []step{
			{[]row{inst("A", "strike", nil, "option_type", nil, "rfq", nil, "creation_timestamp", nil, "is_active", nil, "deployed", true)},
				[]string{"A listed initial"}},
			{[]row{inst("A", "strike", 5.0, "option_type", "put", "rfq", false, "creation_timestamp", int64(7), "is_active", true, "deployed", nil)}, []string{
				"A changed creation_timestamp ∅→7",
				"A changed deployed true→∅",
				"A changed is_active ∅→true",
				"A changed option_type ∅→put",
				"A changed rfq ∅→false",
				"A changed strike ∅→5"}},
			{[]row{inst("A", "strike", nil, "option_type", "", "rfq", false, "creation_timestamp", int64(7), "is_active", nil, "deployed", false)}, []string{
				"A changed deployed ∅→false",
				"A changed is_active true→∅",
				"A changed option_type put→",
				"A changed strike 5→∅"}},
		}},
		{"expired versus delisted", []step{
			{[]row{inst("past", "expiration_time", at(1)), inst("now", "expiration_time", at(3)),
				inst("later", "expiration_time", at(3).Add(time.Millisecond)), inst("never", "expiration_time", nil)}, []string{
				"later listed initial", "never listed initial", "now listed initial", "past listed initial"}},
			{nil, []string{"later delisted", "never delisted", "now expired", "past expired"}}, // step 1 is at(3)
		}},
		{"expiry uses the state's expiration time", []step{
			{[]row{inst("A", "expiration_time", at(10))}, []string{"A listed initial"}},
			{[]row{inst("A", "expiration_time", at(1))}, nil}, // derived column: no event, but kept
			{nil, []string{"A expired"}},
		}},
		{"duplicate names: the last row wins", []step{
			{[]row{inst("A", "tick_size", 1.0), inst("B"), inst("A", "tick_size", 2.0)}, []string{"A listed initial", "B listed initial"}},
			{[]row{inst("A", "tick_size", 2.0), inst("B")}, nil},
			{[]row{inst("A", "tick_size", 3.0), inst("A", "tick_size", 2.0)}, []string{"B delisted"}},
		}},
		{"empty first snapshot: later listings are real", []step{
			{nil, nil},
			{[]row{inst("A")}, []string{"A listed"}},
		}},
		{"value encodings", []step{
			{[]row{inst("A", "strike", 0.0, "contract_size", 1e21, "min_trade_amount", -3.0, "creation_timestamp", int64(-5))}, []string{"A listed initial"}},
			{[]row{inst("A", "strike", negZero, "contract_size", 1e21, "min_trade_amount", -3.0, "creation_timestamp", int64(-5))}, []string{
				"A changed strike 0→-0"}},
			{[]row{inst("A", "strike", negZero, "contract_size", 1.5e21, "min_trade_amount", -2.5, "creation_timestamp", int64(-6))}, []string{
				"A changed contract_size 1e+21→1.5e+21",
				"A changed creation_timestamp -5→-6",
				"A changed min_trade_amount -3→-2.5"}},
			{[]row{inst("A", "strike", negZero, "contract_size", 1.5e21, "min_trade_amount", -2.5, "creation_timestamp", int64(-6), "base_currency", "ÉTH ✓")}, []string{
				"A changed base_currency BTC→ÉTH ✓"}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, batch := range []int{0, 1, 2} {
				st := NewState("venue.test")
				for i, s := range tc.steps {
					evs, stats, next := diff(t, st, "venue.test", at(i+2), s.rows, batch, Options{BatchRows: 3})
					if d := diffStrings(shorts(evs), s.want); d != "" {
						t.Fatalf("batch %d, step %d: %s", batch, i, d)
					}
					for _, e := range evs {
						if e.Source != "venue.test" || !e.Snap.Equal(at(i+2)) || e.RunID != "run-"+at(i+2).Format("150405") {
							t.Fatalf("step %d: event meta %+v", i, e)
						}
						switch {
						case i == 0 && e.Prev != nil:
							t.Fatalf("first snapshot has previous_snapshot_time %v", e.Prev)
						case i > 0 && (e.Prev == nil || !e.Prev.Equal(at(i+1))):
							t.Fatalf("step %d: previous_snapshot_time %v, want %v", i, e.Prev, at(i+1))
						}
					}
					if stats.Events != int64(len(evs)) || stats.Rows != int64(len(s.rows)) || stats.Instruments != next.Len() {
						t.Fatalf("step %d: stats %+v for %d events, %d rows", i, stats, len(evs), len(s.rows))
					}
					var byKind int64
					for _, n := range stats.ByKind {
						byKind += n
					}
					if byKind != stats.Events {
						t.Fatalf("ByKind %v does not add up to %d", stats.ByKind, stats.Events)
					}
					if last, ok := next.LastSnapshot(); !ok || !last.Equal(at(i+2)) {
						t.Fatalf("new state's last snapshot %v %v", last, ok)
					}
					if prevLast, ok := st.LastSnapshot(); i > 0 && (!ok || !prevLast.Equal(at(i+1))) {
						t.Fatalf("previous state was modified: %v", prevLast)
					}
					st = next
				}
			}
		})
	}
}

var negZero = math.Copysign(0, -1)

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestDeterministicOrder feeds the same snapshot in different row orders and
// batchings: the events must be identical.
func TestDeterministicOrder(t *testing.T) {
	var first, second []row
	for i := 0; i < 200; i++ {
		name := "I-" + itoa(int64(i*7919%1000))
		first = append(first, inst(name))
		switch i % 5 {
		case 0:
			second = append(second, inst(name, "tick_size", 0.01, "maker_commission", 0.0001))
		case 1:
			second = append(second, inst(name, "is_active", false))
		case 2: // delisted
		default:
			second = append(second, inst(name))
		}
	}
	for i := 0; i < 20; i++ {
		second = append(second, inst("N-"+itoa(int64(i))))
	}
	var want []ev
	for round, batch := range []int{0, 1, 7, 64} {
		rows := slices.Clone(second)
		if round%2 == 1 {
			slices.Reverse(rows)
		}
		_, _, st := diff(t, NewState("s"), "s", at(1), first, batch, Options{})
		got, _, _ := diff(t, st, "s", at(2), rows, batch, Options{BatchRows: 16})
		if round == 0 {
			want = got
			if len(want) != 2*40+40+40+20 {
				t.Fatalf("%d events", len(want))
			}
			if !slices.IsSortedFunc(got, func(a, b ev) int { return strings.Compare(a.Name, b.Name) }) {
				t.Fatal("events not sorted by name")
			}
			continue
		}
		if d := diffStrings(shorts(got), shorts(want)); d != "" {
			t.Fatalf("round %d: %s", round, d)
		}
	}
}

// TestTwoSources keeps separate states for two sources listing the same
// instrument names.
func TestTwoSources(t *testing.T) {
	dir := t.TempDir()
	for i, src := range []string{"a.example", "b.example"} {
		evs, _, st := diff(t, NewState(src), src, at(1), []row{inst("X"), inst("Y", "tick_size", float64(i))}, 0, Options{})
		if d := diffStrings(shorts(evs), []string{"X listed initial", "Y listed initial"}); d != "" {
			t.Fatal(d)
		}
		if err := st.Save(dir); err != nil {
			t.Fatal(err)
		}
	}
	// Source a changes X; source b delists it, at different times.
	a, err := Load(dir, "a.example")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(dir, "b.example")
	if err != nil {
		t.Fatal(err)
	}
	evA, _, a2 := diff(t, a, "a.example", at(2), []row{inst("X", "maker_commission", 0.0001), inst("Y", "tick_size", 0.0)}, 0, Options{})
	evB, _, _ := diff(t, b, "b.example", at(3), []row{inst("Y", "tick_size", 1.0)}, 0, Options{})
	if d := diffStrings(shorts(evA), []string{"X changed maker_commission 0.0003→0.0001"}); d != "" {
		t.Fatal("a:", d)
	}
	if d := diffStrings(shorts(evB), []string{"X delisted"}); d != "" {
		t.Fatal("b:", d)
	}
	if evA[0].Source != "a.example" || evB[0].Source != "b.example" || !evB[0].Prev.Equal(at(1)) {
		t.Fatalf("meta: %+v %+v", evA[0], evB[0])
	}
	if _, err := NewDiffer(a2, sinks.Snapshot{Source: "b.example", Time: at(9)}, Options{}); err == nil {
		t.Fatal("state of a used for b: no error")
	}
	if StatePath(dir, "a.example") == StatePath(dir, "b.example") {
		t.Fatal("same state file")
	}
}

func TestOutOfOrder(t *testing.T) {
	_, _, st := diff(t, NewState("s"), "s", at(5), []row{inst("A")}, 0, Options{})
	for _, tc := range []struct {
		snap time.Time
		ok   bool
	}{
		{at(4), false},
		{at(5), false},
		{at(5).Add(999 * time.Microsecond), false}, // same millisecond
		{at(5).Add(time.Millisecond), true},
		{at(6), true},
	} {
		_, err := NewDiffer(st, sinks.Snapshot{Source: "s", Time: tc.snap}, Options{})
		if tc.ok != (err == nil) || !tc.ok && !errors.Is(err, ErrOutOfOrder) {
			t.Errorf("snapshot %v: err = %v", tc.snap, err)
		}
		if err != nil {
			t.Log(err)
		}
	}
	// A nil state is the empty state.
	if _, err := NewDiffer(nil, sinks.Snapshot{Source: "s", Time: at(1)}, Options{}); err != nil {
		t.Fatal(err)
	}
}

// TestBadRecords checks the record validation.
func TestBadRecords(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	good := record(t, mem, "s", at(1), []row{inst("A")})
	defer good.Release()
	cases := []struct {
		name string
		rec  func() arrow.Record
		want string
	}{
		{"other source", func() arrow.Record { return record(t, mem, "other", at(1), []row{inst("A")}) }, `belongs to source "other"`},
		{"other snapshot", func() arrow.Record { return record(t, mem, "s", at(2), []row{inst("A")}) }, "has snapshot_time"},
		{"null name", func() arrow.Record { return record(t, mem, "s", at(1), []row{inst("A", "instrument_name", nil)}) }, "instrument_name is null"},
		{"missing column", func() arrow.Record {
			i := schema.Instruments.MustIndex("tick_size")
			cols := append(slices.Clone(good.Columns()[:i]), good.Columns()[i+1:]...)
			fields := append(slices.Clone(good.Schema().Fields()[:i]), good.Schema().Fields()[i+1:]...)
			return arrowRecord(fields, cols, good.NumRows())
		}, "lacks column tick_size"},
		{"wrong type", func() arrow.Record {
			i := schema.Instruments.MustIndex("tick_size")
			j := schema.Instruments.MustIndex("base_currency")
			cols := slices.Clone(good.Columns())
			fields := slices.Clone(good.Schema().Fields())
			cols[i], fields[i].Type = good.Column(j), good.Column(j).DataType()
			return arrowRecord(fields, cols, good.NumRows())
		}, "column tick_size is utf8, want float64"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDiffer(nil, sinks.Snapshot{Source: "s", Time: at(1)}, Options{Mem: mem})
			if err != nil {
				t.Fatal(err)
			}
			rec := tc.rec()
			defer rec.Release()
			err = d.Observe(rec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			// The Differ stays failed: no events from incomplete rows.
			if err := d.Observe(good); err == nil {
				t.Fatal("Observe after a failed Observe: no error")
			}
			if _, st, err := d.Finish(func(*schema.Table, arrow.Record) error { t.Fatal("emitted"); return nil }); err == nil || st != nil {
				t.Fatalf("Finish after a failed Observe: %v, %v", st, err)
			}
		})
	}
	// Columns in another order, extra columns: accepted.
	fields := slices.Clone(good.Schema().Fields())
	cols := slices.Clone(good.Columns())
	slices.Reverse(fields)
	slices.Reverse(cols)
	fields = append(fields, arrow.Field{Name: "unrelated", Type: arrow.BinaryTypes.String})
	cols = append(cols, good.Column(schema.Instruments.MustIndex("run_id")))
	rec := arrowRecord(fields, cols, good.NumRows())
	defer rec.Release()
	st, err := Rebuild("s", at(1), []arrow.Record{rec})
	if err != nil || st.Len() != 1 {
		t.Fatalf("reordered columns: %v, %d instruments", err, st.Len())
	}
}

func arrowRecord(fields []arrow.Field, cols []arrow.Array, n int64) arrow.Record {
	return array.NewRecord(arrow.NewSchema(fields, nil), cols, n)
}

// TestEmitError: an emit failure is returned and yields no state.
func TestEmitError(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	d, err := NewDiffer(NewState("s"), sinks.Snapshot{Source: "s", Time: at(1)}, Options{Mem: mem, BatchRows: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec := record(t, mem, "s", at(1), []row{inst("A"), inst("B")})
	defer rec.Release()
	if err := d.Observe(rec); err != nil {
		t.Fatal(err)
	}
	finishFailing(t, d)
	if _, _, err := d.Finish(func(*schema.Table, arrow.Record) error { return nil }); err == nil {
		t.Fatal("second Finish: no error")
	}
}

// finishFailing finishes d with an emit that fails: Finish must return
// its error and no state after one emit.
func finishFailing(t *testing.T, d *Differ) {
	t.Helper()
	boom := errors.New("boom")
	n := 0
	_, st, err := d.Finish(func(*schema.Table, arrow.Record) error {
		n++
		return boom
	})
	if !errors.Is(err, boom) || st != nil || n != 1 {
		t.Fatalf("err %v, state %v, %d emits", err, st, n)
	}
}

// TestEmitErrorMidMerge: an emit that fails while the merge still has
// batches to hand over (more events than eventBatch) stops the merge,
// whether it runs on the emitter's goroutine (a small comparison in
// memory) or on its own (a spilled one): Finish returns the emit's error
// and no state after one emit, and both event batches go back to the
// Reuse.
func TestEmitErrorMidMerge(t *testing.T) {
	rows := make([]row, 3*eventBatch)
	for i := range rows {
		rows[i] = inst(fmt.Sprintf("I-%06d", i))
	}
	for _, tc := range []struct {
		name  string
		opt   Options
		small bool
	}{
		{"same goroutine", Options{}, true},
		{"spilled", Options{MemBytes: 256 << 10}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			opt := tc.opt
			opt.Mem, opt.BatchRows, opt.TempDir, opt.Reuse = mem, 100, t.TempDir(), NewReuse()
			opt.noMemo = true
			d, err := NewDiffer(NewState("s"), sinks.Snapshot{Source: "s", Time: at(1)}, opt)
			if err != nil {
				t.Fatal(err)
			}
			rec := record(t, mem, "s", at(1), rows)
			defer rec.Release()
			if err := d.Observe(rec); err != nil {
				t.Fatal(err)
			}
			if got := !d.b.srt.spilled(); got != tc.small {
				t.Fatalf("in memory: %v, want %v", got, tc.small)
			}
			finishFailing(t, d)
			if got := len(opt.Reuse.batches); got != 2 {
				t.Fatalf("%d event batches back in the Reuse, want 2", got)
			}
		})
	}
}

// TestRebuild: a state rebuilt from the last snapshot's rows compares like
// the state the Differ produced.
func TestRebuild(t *testing.T) {
	rows := []row{inst("A"), inst("B", "is_active", false), inst("C", "strike", nil)}
	_, _, st := diff(t, NewState("s"), "s", at(1), rows, 0, Options{})
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	r1 := record(t, mem, "s", at(1), rows[:1])
	r2 := record(t, mem, "s", at(1), rows[1:])
	defer r1.Release()
	defer r2.Release()
	rb, err := Rebuild("s", at(1), []arrow.Record{r1, r2})
	if err != nil {
		t.Fatal(err)
	}
	assertSameState(t, rb, st)
	next := []row{inst("A", "tick_size", 9.0), inst("B")}
	e1, _, _ := diff(t, st, "s", at(2), next, 0, Options{})
	e2, _, _ := diff(t, rb, "s", at(2), next, 0, Options{})
	if d := diffStrings(shorts(e2), shorts(e1)); d != "" || len(e1) != 3 {
		t.Fatalf("%d events; %s", len(e1), d)
	}
	if _, err := Rebuild("s", at(2), []arrow.Record{r1}); err == nil {
		t.Fatal("rows of another snapshot: no error")
	}
}

// assertSameState compares two states entry by entry.
func assertSameState(t testing.TB, got, want *State) {
	t.Helper()
	if got.Source() != want.Source() || got.Len() != want.Len() {
		t.Fatalf("source/len %q %d, want %q %d", got.Source(), got.Len(), want.Source(), want.Len())
	}
	gs, gok := got.LastSnapshot()
	ws, wok := want.LastSnapshot()
	if gok != wok || !gs.Equal(ws) {
		t.Fatalf("last snapshot %v %v, want %v %v", gs, gok, ws, wok)
	}
	ge, we := entriesOf(t, got), entriesOf(t, want)
	if len(ge) != len(we) {
		t.Fatalf("%d entries, want %d", len(ge), len(we))
	}
	for i := range we {
		if ge[i] != we[i] {
			t.Fatalf("entry %d: %q, want %q", i, ge[i], we[i])
		}
	}
}

// entriesOf returns the state's entries as name + "\x00" + payload, in the
// order the state yields them, checking that it is strictly by name.
func entriesOf(t testing.TB, st *State) []string {
	t.Helper()
	c, err := st.cursor()
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	var out []string
	var last string
	for c.next() {
		if len(out) > 0 && string(c.name()) <= last {
			t.Fatalf("entries out of order: %q after %q", c.name(), last)
		}
		last = string(c.name())
		out = append(out, last+"\x00"+string(c.payload()))
	}
	if err := c.error(); err != nil {
		t.Fatal(err)
	}
	if len(out) != st.Len() {
		t.Fatalf("%d entries, Len %d", len(out), st.Len())
	}
	return out
}

// TestDuplicates: the last row of an instrument wins, at the position of
// its first row.
func TestDuplicates(t *testing.T) {
	rows := []row{inst("A", "tick_size", 1.0), inst("B"), inst("A", "tick_size", 2.0), inst("C"), inst("A", "tick_size", 3.0)}
	evs, stats, st := diff(t, NewState("s"), "s", at(1), rows, 2, Options{})
	if stats.Rows != 5 || stats.Duplicates != 2 || stats.Instruments != 3 || len(evs) != 3 {
		t.Fatalf("stats %+v, %d events", stats, len(evs))
	}
	var names []string
	for _, e := range entriesOf(t, st) {
		names = append(names, strings.Split(e, "\x00")[0])
	}
	if strings.Join(names, ",") != "A,B,C" {
		t.Fatalf("entries %v", names)
	}
	evs, _, _ = diff(t, st, "s", at(2), []row{inst("A", "tick_size", 3.0), inst("B"), inst("C")}, 0, Options{})
	if len(evs) != 0 {
		t.Fatalf("the last row did not win: %v", shorts(evs))
	}
	// Duplicates of instruments known to prev.
	evs, stats, _ = diff(t, st, "s", at(2), []row{inst("B", "tick_size", 7.0), inst("A", "tick_size", 3.0), inst("B"), inst("C")}, 0, Options{})
	if len(evs) != 0 || stats.Duplicates != 1 {
		t.Fatalf("%d duplicates, events %v", stats.Duplicates, shorts(evs))
	}
}

// TestConcurrentDiffers: a State is only read, so several Differs may use
// it at once (run with -race).
func TestConcurrentDiffers(t *testing.T) {
	var rows []row
	for i := 0; i < 300; i++ {
		rows = append(rows, inst("I-"+itoa(int64(i))))
	}
	_, _, st := diff(t, NewState("s"), "s", at(1), rows, 0, Options{})
	want, _, _ := diff(t, st, "s", at(2), rows[:200], 0, Options{})
	rec := record(t, memory.DefaultAllocator, "s", at(2), rows[:200])
	defer rec.Release()
	type result struct {
		n   int64
		err error
	}
	done := make(chan result)
	for g := 0; g < 4; g++ {
		go func() {
			d, err := NewDiffer(st, sinks.Snapshot{Source: "s", Time: at(2)}, Options{BatchRows: 7})
			if err == nil {
				err = d.Observe(rec)
			}
			var stats Stats
			if err == nil {
				stats, _, err = d.Finish(func(*schema.Table, arrow.Record) error { return nil })
			}
			done <- result{stats.Events, err}
		}()
	}
	for g := 0; g < 4; g++ {
		if r := <-done; r.err != nil || r.n != int64(len(want)) {
			t.Errorf("%d events (want %d), err %v", r.n, len(want), r.err)
		}
	}
}

// A Differ whose previous state comes later (NewDifferFor, then Against)
// observes first and gives exactly NewDiffer's events and state; Against
// checks the order and the source as NewDiffer does, and leaves the Differ
// usable after a refusal; Finish before Against is an error.
func TestDifferAgainstLater(t *testing.T) {
	_, _, st1 := diff(t, NewState("s"), "s", at(1), []row{inst("A"), inst("B"), inst("C", "tick_size", 0.5)}, 0, Options{})
	rows2 := []row{inst("A", "maker_commission", 0.0001), inst("C", "tick_size", 0.25), inst("D")}
	want, wantStats, wantNext := diff(t, st1, "s", at(2), rows2, 2, Options{})
	defer wantNext.Close()

	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	d := NewDifferFor(sinks.Snapshot{Time: at(2), RunID: "run-" + at(2).Format("150405"), Source: "s"}, Options{Mem: mem})
	for i := 0; i < len(rows2); i += 2 {
		rec := record(t, mem, "s", at(2), rows2[i:min(len(rows2), i+2)])
		if err := d.Observe(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := d.Against(wantNext); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("Against a state of the same snapshot: %v, want ErrOutOfOrder", err)
	}
	if err := d.Against(NewState("other")); err == nil {
		t.Fatal("Against another source's state: no error")
	}
	if err := d.Against(st1); err != nil {
		t.Fatal(err)
	}
	got, stats, next := finish(t, d)
	defer next.Close()
	if dd := diffStrings(shorts(got), shorts(want)); dd != "" || len(got) == 0 {
		t.Fatalf("events (%d): %s", len(got), dd)
	}
	if stats != wantStats {
		t.Errorf("stats %+v, want %+v", stats, wantStats)
	}
	if a, b := next.Len(), wantNext.Len(); a != b {
		t.Errorf("next state holds %d instruments, want %d", a, b)
	}

	lone := NewDifferFor(sinks.Snapshot{Time: at(3), Source: "s"}, Options{})
	if _, _, err := lone.Finish(func(*schema.Table, arrow.Record) error { return nil }); err == nil {
		t.Error("Finish before Against: no error")
	}
}
