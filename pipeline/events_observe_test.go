package pipeline

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/pipeline/events"
	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// listingRecords decodes a listing of n instruments into records of at
// most 7 rows, as the run's decoder emits them for snap.
func listingRecords(t *testing.T, snap sinks.Snapshot, n int) []arrow.Record {
	t.Helper()
	var b strings.Builder
	b.WriteString(`[{"instruments":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"instrument_name":"BTC-27NOV26-%d-C","strike":%d,"is_active":true,"kind":"option"}`, 90000+i%13*500, 90000+i%13*500)
	}
	b.WriteString(`]}]`)
	dec := transform.NewInstrumentDecoder(transform.Options{BatchRows: 7})
	defer dec.Release()
	var recs []arrow.Record
	if _, err := dec.Decode(context.Background(), strings.NewReader(b.String()), snap, func(tb *schema.Table, rec arrow.Record) error {
		if tb == schema.Instruments {
			rec.Retain()
			recs = append(recs, rec)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return recs
}

// Rows observed on the events' own goroutine give the events and state that
// observing them in the caller's goroutine gives (duplicate names included:
// the last row wins, so the order must hold); an Observe error is the
// comparison's once wait returns, and the rows after it are not observed.
func TestObserveOnItsGoroutine(t *testing.T) {
	snap := sinks.Snapshot{Time: time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC), RunID: "run-1", Source: "venue-sim"}
	recs := listingRecords(t, snap, 40) // 13 names, each several times
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	finish := func(d *events.Differ) []string {
		var out []string
		stats, next, err := d.Finish(func(_ *schema.Table, rec arrow.Record) error {
			for i := range int(rec.NumRows()) {
				out = append(out, rec.Column(schema.InstrumentEvents.MustIndex("instrument_name")).ValueStr(i))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		next.Close()
		return append(out, fmt.Sprint(stats.Rows, stats.Instruments, stats.Duplicates))
	}
	opt := events.Options{TempDir: t.TempDir()}
	want, err := events.NewDiffer(nil, snap, opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := want.Observe(r); err != nil {
			t.Fatal(err)
		}
	}
	e := &eventsRun{meta: snap, opt: opt, prev: events.NewState(snap.Source)}
	e.beginAttempt()
	for _, r := range recs {
		e.observe(r)
	}
	e.wait()
	if !e.usable() {
		t.Fatalf("not usable: %v", e.err)
	}
	if got, w := finish(e.d), finish(want); fmt.Sprint(got) != fmt.Sprint(w) {
		t.Fatalf("events %v, want %v", got, w)
	}

	other := listingRecords(t, sinks.Snapshot{Time: snap.Time, RunID: snap.RunID, Source: "elsewhere"}, 3)
	defer other[0].Release()
	e = &eventsRun{meta: snap, opt: opt, prev: events.NewState(snap.Source)}
	e.beginAttempt()
	e.observe(recs[0])
	e.observe(other[0])
	e.observe(recs[1])
	e.wait()
	if e.usable() || e.err == nil || !strings.Contains(e.err.Error(), "elsewhere") {
		t.Fatalf("a row of another source: usable %v, err %v", e.usable(), e.err)
	}
	e.d.Close()
}
