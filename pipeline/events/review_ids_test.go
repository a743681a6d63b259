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
