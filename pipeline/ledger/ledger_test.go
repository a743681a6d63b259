package ledger

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/storage"
)

var ctx = context.Background()

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 250_000_000, time.UTC)

func clock() func() time.Time {
	now := t0
	return func() time.Time { now = now.Add(time.Second); return now }
}

// The life of a snapshot's record: pending at Begin, settled per endpoint,
// moved to done/ once every load is committed; failed loads keep it open.
func TestLifecycle(t *testing.T) {
	dir := t.TempDir()
	l := New(storage.NewLocal(dir), clock())
	a, b := Key{t0, "run-a"}, Key{t0.Add(time.Minute), "run-b"}
	for _, k := range []Key{b, a} { // written out of order: Open sorts
		if err := l.Begin(ctx, k.Time, k.RunID, "sim", []string{"instruments", "positions"}, []string{"parquet", "clickhouse"}); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.Settle(ctx, a, "instruments", map[string]Outcome{"parquet": {State: Committed}, "clickhouse": {State: Pending, Error: "connection refused"}}))
	must(l.Drop(ctx, a, "positions")) // nothing was fetched
	must(l.Settle(ctx, b, "instruments", map[string]Outcome{"parquet": {State: Committed}, "clickhouse": {State: Committed}}))
	must(l.Settle(ctx, b, "positions", map[string]Outcome{"parquet": {State: Failed, Error: "raw archive: corrupt"}, "clickhouse": {State: Committed}}))

	// A fresh reader (optlake status) sees the same.
	recs, err := New(storage.NewLocal(dir), nil).Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].RunID != "run-a" || recs[1].RunID != "run-b" {
		t.Fatalf("open records: %+v", recs)
	}
	if p := recs[0].Pending(""); len(p) != 1 || p[0].Sink != "clickhouse" || p[0].Attempts != 1 || p[0].Error != "connection refused" {
		t.Errorf("pending of a: %+v", p)
	}
	st := Summarize(recs, "parquet", "clickhouse")
	if len(st) != 2 || st[0].Sink != "clickhouse" || st[0].Pending != 1 || !st[0].Oldest.Equal(t0) || st[0].LastError != "connection refused" {
		t.Errorf("clickhouse status: %+v", st[0])
	}
	if st[1].Pending != 0 || len(st[1].Failed) != 1 || st[1].Failed[0].Reason != "raw archive: corrupt" || st[1].Failed[0].Endpoint != "positions" {
		t.Errorf("parquet status: %+v", st[1])
	}

	// Catch-up commits a: it moves to done/; a replay settles b's failure.
	must(l.Settle(ctx, a, "instruments", map[string]Outcome{"clickhouse": {State: Committed}}))
	must(l.Settle(ctx, b, "positions", map[string]Outcome{"parquet": {State: Committed}}))
	if recs, _ := l.Open(ctx); len(recs) != 0 {
		t.Errorf("still open: %+v", recs)
	}
	done, _ := filepath.Glob(filepath.Join(dir, Dir, "done", "date=2026-11-23", "*.json"))
	if len(done) != 2 || !strings.HasSuffix(done[0], "20261123T100000.250Z-run-a.json") {
		t.Fatalf("done: %v", done)
	}
	var rec Record
	b0, _ := os.ReadFile(done[0])
	if err := json.Unmarshal(b0, &rec); err != nil || len(rec.Loads) != 2 || rec.Loads[1].Attempts != 2 {
		t.Errorf("done record: %s (%v)", b0, err)
	}
	// Settling a snapshot that is no longer open changes nothing.
	must(l.Settle(ctx, a, "instruments", map[string]Outcome{"clickhouse": {State: Pending, Error: "x"}}))
	if recs, _ := New(storage.NewLocal(dir), nil).Open(ctx); len(recs) != 0 {
		t.Errorf("a settled record was reopened: %+v", recs)
	}
}

// A crash between writing the done object and removing the open one
// leaves both: the open record still counts (a reload is idempotent), and
// temporary files of an interrupted write are never read as records.
func TestCrashLeftovers(t *testing.T) {
	dir := t.TempDir()
	l := New(storage.NewLocal(dir), clock())
	k := Key{t0, "run-a"}
	if err := l.Begin(ctx, k.Time, k.RunID, "sim", []string{"instruments"}, []string{"parquet"}); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(dir, Dir, "open")
	if err := os.WriteFile(filepath.Join(open, ".20261123T100000.250Z-run-a.json.tmp-123"), []byte("{cut"), 0o644); err != nil {
		t.Fatal(err)
	}
	twin := filepath.Join(dir, Dir, "done", "date=2026-11-23", "20261123T100000.250Z-run-a.json")
	if err := os.MkdirAll(filepath.Dir(twin), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(open, "20261123T100000.250Z-run-a.json"))
	if err := os.WriteFile(twin, b, 0o644); err != nil {
		t.Fatal(err)
	}
	recs, err := New(storage.NewLocal(dir), nil).Open(ctx)
	if err != nil || len(recs) != 1 || len(recs[0].Pending("parquet")) != 1 {
		t.Fatalf("open after a crash: %+v %v", recs, err)
	}
	// A corrupt record is an error naming it, not a silent skip.
	if err := os.WriteFile(filepath.Join(open, "20261123T100001.000Z-run-b.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(storage.NewLocal(dir), nil).Open(ctx); err == nil || !strings.Contains(err.Error(), "run-b.json") {
		t.Errorf("corrupt record: %v", err)
	}
}

// A committed load keeps the Iceberg snapshot ids of its appends (an
// Iceberg lake), in the done record; a pending attempt records none.
func TestSettleKeepsIcebergSnapshots(t *testing.T) {
	dir := t.TempDir()
	l := New(storage.NewLocal(dir), clock())
	k := Key{t0, "run-a"}
	if err := l.Begin(ctx, k.Time, k.RunID, "sim", []string{"instruments"}, []string{"parquet"}); err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{"instruments": 7001, "instrument_events": 7002}
	if err := l.Settle(ctx, k, "instruments", map[string]Outcome{"parquet": {State: Pending, Error: "x", Snapshots: map[string]int64{"instruments": 1}}}); err != nil {
		t.Fatal(err)
	}
	if rec, _ := l.Get(ctx, k); rec == nil || rec.Loads[0].Snapshots != nil {
		t.Fatalf("a pending load's snapshots: %+v", rec)
	}
	if err := l.Settle(ctx, k, "instruments", map[string]Outcome{"parquet": {State: Committed, Snapshots: ids}}); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, Dir, "done", "*", "*.json"))
	if len(names) != 1 {
		t.Fatalf("done records: %v", names)
	}
	b, err := os.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if got := rec.Loads[0].Snapshots; len(got) != 2 || got["instruments"] != 7001 || got["instrument_events"] != 7002 {
		t.Errorf("done record's iceberg_snapshots = %v\n%s", got, b)
	}
}
