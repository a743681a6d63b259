package ledger

import (
	"reflect"
	"testing"

	"github.com/optlake/optlake/storage"
)

// SettleRuns keeps the live run's runs rows in the record only when a sink
// missed them (pending or failed), so that catch-up can write exactly them;
// the rows survive a fresh reader (another process).
func TestSettleRunsKeepsRowsOnlyWhenMissed(t *testing.T) {
	rows := []RunRow{
		{Endpoint: "instruments", Status: "ok", Rows: 50, Bytes: 4096, DurationMS: 12},
		{Endpoint: "positions", Status: "failed", DurationMS: 3, Error: "venue: 503"},
	}
	for _, tc := range []struct {
		name     string
		outcomes map[string]Outcome
		keep     bool
	}{
		{"every sink committed", map[string]Outcome{"a": {State: Committed}, "b": {State: Committed}}, false},
		{"one sink pending", map[string]Outcome{"a": {State: Committed}, "b": {State: Pending, Error: "down"}}, true},
		{"one sink failed", map[string]Outcome{"a": {State: Failed, Error: "rejected"}, "b": {State: Committed}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := New(storage.NewLocal(dir), clock())
			k := Key{t0, "run-1"}
			// instruments stays pending so that the record stays open
			if err := l.Begin(ctx, k.Time, k.RunID, "sim", []string{"instruments", Runs}, []string{"a", "b"}); err != nil {
				t.Fatal(err)
			}
			in := append([]RunRow(nil), rows...)
			if err := l.SettleRuns(ctx, k, in, tc.outcomes); err != nil {
				t.Fatal(err)
			}
			in[0].Rows = -1 // the caller's slice is not the record's
			for _, rd := range []*Ledger{l, New(storage.NewLocal(dir), nil)} {
				rec, err := rd.Get(ctx, k)
				if err != nil || rec == nil {
					t.Fatalf("get: %v %v", rec, err)
				}
				if tc.keep && !reflect.DeepEqual(rec.Runs, rows) {
					t.Errorf("kept rows: %+v, want %+v", rec.Runs, rows)
				}
				if !tc.keep && len(rec.Runs) != 0 {
					t.Errorf("rows kept although every sink has them: %+v", rec.Runs)
				}
				for _, ld := range rec.Loads {
					if ld.Endpoint != Runs {
						continue
					}
					if want := tc.outcomes[ld.Sink]; ld.State != want.State || ld.Error != want.Error || ld.Attempts != 1 {
						t.Errorf("load %s: %+v, want %+v", ld.Sink, ld, want)
					}
				}
			}
		})
	}
}

// Get returns a copy: changing it changes neither the ledger's record nor
// what is written next.
func TestGetReturnsCopy(t *testing.T) {
	dir := t.TempDir()
	l := New(storage.NewLocal(dir), clock())
	k := Key{t0, "run-1"}
	if err := l.Begin(ctx, k.Time, k.RunID, "sim", []string{"instruments", Runs}, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if err := l.SettleRuns(ctx, k, []RunRow{{Endpoint: "instruments", Status: "ok", Rows: 7}}, map[string]Outcome{"a": {State: Pending, Error: "down"}}); err != nil {
		t.Fatal(err)
	}
	got, err := l.Get(ctx, k)
	if err != nil || got == nil {
		t.Fatalf("get: %v %v", got, err)
	}
	got.Loads[0].State = Committed
	got.Runs[0].Rows = 99
	got.RunID = "changed"
	again, err := l.Get(ctx, k)
	if err != nil || again == nil {
		t.Fatalf("get again: %v %v", again, err)
	}
	if again.Loads[0].State != Pending || again.Runs[0].Rows != 7 || again.RunID != "run-1" {
		t.Errorf("Get shares its record: %+v", again)
	}
	// A later write stores the ledger's record, not the caller's changes.
	if err := l.Settle(ctx, k, "instruments", map[string]Outcome{"a": {State: Committed}}); err != nil {
		t.Fatal(err)
	}
	fresh, err := New(storage.NewLocal(dir), nil).Get(ctx, k)
	if err != nil || fresh == nil {
		t.Fatalf("fresh get: %v %v", fresh, err)
	}
	if len(fresh.Runs) != 1 || fresh.Runs[0].Rows != 7 || len(fresh.Pending("a")) != 1 || fresh.Pending("a")[0].Endpoint != Runs {
		t.Errorf("written record: %+v", fresh)
	}
	if rec, err := l.Get(ctx, Key{t0, "unknown"}); rec != nil || err != nil {
		t.Errorf("get of an unknown snapshot: %+v %v", rec, err)
	}
}
