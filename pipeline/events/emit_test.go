package events

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// TestEmitterRecordShapes: records of different lengths (full batches and
// the last, shorter one; lifecycle events and changes mixed) have every
// column of the record's length, with the snapshot's constant values, and
// release all their memory.
func TestEmitterRecordShapes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var rows []row
	for i := range 7 {
		rows = append(rows, inst(fmt.Sprintf("I-%d", i)))
	}
	_, _, st := diff(t, NewState("s"), "s", at(1), rows, 0, Options{})
	defer st.Close()
	rows[2] = inst("I-2", "tick_size", 0.001, "is_active", false)
	rows = append(rows[:5], inst("J-1"), inst("J-2"), inst("J-3"))
	d, err := NewDiffer(st, sinks.Snapshot{Time: at(2), RunID: "run-2", Source: "s"}, Options{Mem: mem, BatchRows: 3})
	if err != nil {
		t.Fatal(err)
	}
	rec := record(t, mem, "s", at(2), rows)
	if err := d.Observe(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	var lens []int64
	var kept []arrow.Record
	stats, next, err := d.Finish(func(_ *schema.Table, rec arrow.Record) error {
		lens = append(lens, rec.NumRows())
		for i, c := range rec.Columns() {
			if int64(c.Len()) != rec.NumRows() {
				t.Errorf("record of %d rows: column %s has %d", rec.NumRows(), rec.ColumnName(i), c.Len())
			}
		}
		rec.Retain() // kept past emit: the next records must not disturb it
		kept = append(kept, rec)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	next.Close()
	// I-2: deactivated + changed; I-5, I-6: delisted; J-1..3: listed.
	if stats.Events != 7 || fmt.Sprint(lens) != "[3 3 1]" {
		t.Fatalf("%d events in records of %v rows, want 7 in [3 3 1]", stats.Events, lens)
	}
	var got []string
	for _, r := range kept {
		for _, e := range eventsOf(t, r) {
			got = append(got, fmt.Sprintf("%s %s %s prev=%v", e.short(), e.Source, e.RunID, e.Prev != nil && e.Prev.Equal(at(1)) && e.Snap.Equal(at(2))))
		}
		r.Release()
	}
	want := []string{
		"I-2 deactivated is_active true→false s run-2 prev=true",
		"I-2 changed tick_size 0.0005→0.001 s run-2 prev=true",
		"I-5 delisted s run-2 prev=true",
		"I-6 delisted s run-2 prev=true",
		"J-1 listed s run-2 prev=true",
		"J-2 listed s run-2 prev=true",
		"J-3 listed s run-2 prev=true",
	}
	if d := diffStrings(got, want); d != "" {
		t.Error(d)
	}
}

// Records of listed events only take shared columns, and listed events
// that start a record are completed when an event of another kind joins
// them: whatever the record size, the rows are the same, initial only on
// a first snapshot.
func TestListedRecords(t *testing.T) {
	first := []row{inst("B"), inst("D"), inst("F")}
	second := []row{inst("H"), inst("A"), inst("B", "tick_size", 0.001), inst("C"), inst("E"),
		inst("F", "is_active", false), inst("G")}
	wantFirst := []string{"B listed initial", "D listed initial", "F listed initial"}
	wantSecond := []string{"A listed", "B changed tick_size 0.0005→0.001", "C listed", "D delisted",
		"E listed", "F deactivated is_active true→false", "G listed", "H listed"}
	for batch := 1; batch <= len(wantSecond)+1; batch++ {
		t.Run(fmt.Sprint(batch), func(t *testing.T) {
			opt := Options{BatchRows: batch}
			got, _, st := diff(t, NewState("s"), "s", at(1), first, 0, opt)
			defer st.Close()
			if d := diffStrings(shorts(got), wantFirst); d != "" {
				t.Fatalf("first snapshot: %s", d)
			}
			got, _, next := diff(t, st, "s", at(2), second, 0, opt)
			defer next.Close()
			if d := diffStrings(shorts(got), wantSecond); d != "" {
				t.Fatalf("second snapshot: %s", d)
			}
			for _, e := range got {
				if e.Event == "listed" && (e.Old != nil || e.New != nil || e.Field != "") {
					t.Fatalf("listed event with field or values: %+v", e)
				}
			}
		})
	}
}

// BenchmarkEmitListed renders the listed events of a first snapshot of
// 100,000 instruments into records (emitted to nothing): the emitter's
// share of a first snapshot's Finish.
func BenchmarkEmitListed(b *testing.B) {
	d, err := NewDiffer(NewState("s"), sinks.Snapshot{Time: at(1), RunID: "bench", Source: "s"}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	names := make([][]byte, 100_000)
	for i := range names {
		names[i] = fmt.Appendf(nil, "BTC-27NOV26-%06d-C", i)
	}
	var stats Stats
	b.ReportAllocs()
	for b.Loop() {
		em, err := d.newEmitter(func(*schema.Table, arrow.Record) error { return nil }, &stats)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range names {
			em.add(Listed, n, 0, nil, nil)
		}
		if err := em.flush(); err != nil {
			b.Fatal(err)
		}
		em.release()
	}
}
