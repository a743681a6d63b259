package events

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/sinks"
)

// compareRows compares rows (one record) of source "src" at snapshot hour
// h with prev and returns the events and the next state.
func compareRows(t *testing.T, prev *State, h int, rows []row, opt Options) ([]string, *State) {
	t.Helper()
	d, err := NewDiffer(prev, sinks.Snapshot{Time: at(h), RunID: "run", Source: "src"}, opt)
	if err != nil {
		t.Fatal(err)
	}
	rec := record(t, memory.DefaultAllocator, "src", at(h), rows)
	err = d.Observe(rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	evs, _, next := finish(t, d)
	return shorts(evs), next
}

// TestRowIDsOfAnotherReuse: a previous state built with one Reuse and
// compared by a Differ with another gives the events of comparing every
// row. Each Reuse numbers its memos' rows from the same start (rowID), so
// the rows of the two carry equal ids for different values (and names):
// were those trusted, the changes, and the listed / delisted instruments
// behind them, would be lost.
func TestRowIDsOfAnotherReuse(t *testing.T) {
	var before, after []row
	for i := range 20 {
		before = append(before, inst(fmt.Sprintf("A-%02d", i)))
		after = append(after, inst(fmt.Sprintf("A-%02d", i), "strike", float64(i)))
	}
	after[5] = inst("A-05b") // A-05 delisted, A-05b listed (in its place)
	_, prev := compareRows(t, nil, 1, before, Options{})
	want, next := compareRows(t, prev, 2, after, Options{})
	prev.Close()
	next.Close()
	if len(want) != 21 {
		t.Fatalf("%d events without a Reuse, want 21:\n%v", len(want), want)
	}
	for _, bg := range []bool{false, true} {
		a := Options{Reuse: NewReuse(), Background: bg}
		b := Options{Reuse: NewReuse(), Background: bg}
		_, prev := compareRows(t, nil, 1, before, a)
		got, next := compareRows(t, prev, 2, after, b)
		if d := diffStrings(got, want); d != "" {
			t.Errorf("background %v: previous state of another Reuse:\n%s", bg, d)
		}
		prev.Close()
		next.Close()
		a.Reuse.Close()
		b.Reuse.Close()
	}
}

// TestRowIDsPastMemoRows: the rows of a snapshot past the memos' bound
// (memoRows) have no id (0) on either side of the merge; they are
// compared by their bytes, not passed over as equal ids, so a change
// there is reported. The rows within the bound are passed over.
func TestRowIDsPastMemoRows(t *testing.T) {
	const n = memoRows + 200
	snap := func(h int, change bool) []row {
		rows := make([]row, n)
		for i := range rows {
			rows[i] = inst(fmt.Sprintf("I-%06d", i))
			if change && (i == 7 || i == n-3) {
				rows[i]["strike"] = 5.0
			}
		}
		return rows
	}
	opt := Options{Reuse: NewReuse(), MemBytes: 256 << 20}
	defer opt.Reuse.Close()
	chain := func(prev *State, h int, rows []row) ([]string, *State) {
		t.Helper()
		d, err := NewDiffer(prev, sinks.Snapshot{Time: at(h), RunID: "run", Source: "src"}, opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range [][]row{rows[:memoRows], rows[memoRows:]} { // memoized, then not
			rec := record(t, memory.DefaultAllocator, "src", at(h), part)
			err = d.Observe(rec)
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
		}
		evs, _, next := finish(t, d)
		return shorts(evs), next
	}
	_, s1 := chain(nil, 1, snap(1, false))
	_, s2 := chain(s1, 2, snap(2, false))
	s1.Close()
	got, s3 := chain(s2, 3, snap(3, true))
	s2.Close()
	s3.Close()
	want := []string{"I-000007 changed strike 100000→5", fmt.Sprintf("I-%06d changed strike 100000→5", n-3)}
	if d := diffStrings(got, want); d != "" {
		t.Errorf("events:\n%s", d)
	}
	if p := opt.Reuse.passed.Load(); p < 2*memoRows-2 {
		t.Errorf("%d instruments passed over by their ids, want at least %d", p, 2*memoRows-2)
	}
}
