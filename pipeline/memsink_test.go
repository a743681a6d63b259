package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/extract"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/memsink"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// flaky is an in-memory sink that can be down: for every table (down) or
// for the runs table only (runsDown).
type flaky struct {
	*memsink.Sink
	down, runsDown atomic.Bool
	// writeFails: the second Write of a table fails (a sink that breaks
	// mid-load, after it took rows).
	writeFails atomic.Bool
	// onWrite, if set, is called before every Write.
	onWrite func()
}

func (f *flaky) Open(ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
	if f.down.Load() || (f.runsDown.Load() && t == schema.Runs) {
		return nil, fmt.Errorf("%s: %s: connection refused", f.Name(), t.Name)
	}
	w, err := f.Sink.Open(ctx, t, snap)
	if err != nil {
		return nil, err
	}
	return &flakyWriter{Writer: w, f: f}, nil
}

type flakyWriter struct {
	sinks.Writer
	f      *flaky
	writes int
}

func (w *flakyWriter) Write(ctx context.Context, rec arrow.Record) error {
	if w.f.onWrite != nil {
		w.f.onWrite()
	}
	w.writes++
	if w.f.writeFails.Load() && w.writes == 2 {
		return errors.New("flaky: disk full")
	}
	return w.Writer.Write(ctx, rec)
}

// memRig is a runner over a venue simulator with a pinned clock and run
// ids, archiving into a temp dir, with a ledger, loading into the sinks.
type memRig struct {
	dir string
	sim *venuesim.Sim
	cfg pipeline.Config
	r   *pipeline.Runner
	// requests counts the HTTP requests the venue got (attempts).
	requests atomic.Int64
}

// t0 + n minutes is the snapshot time of the rig's run n.
var memT0 = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

func newMemRig(t *testing.T, cfg venuesim.Config, ss ...sinks.Sink) *memRig {
	t.Helper()
	sim := venuesim.New(cfg)
	rig := &memRig{dir: t.TempDir(), sim: sim}
	h := sim.Handler()
	client, eps := simClient(t, http.HandlerFunc(func(w http.ResponseWriter, rq *http.Request) {
		rig.requests.Add(1)
		h.ServeHTTP(w, rq)
	}))
	dir := rig.dir
	now := memT0
	n := 0
	pc := pipeline.Config{
		Client: client, Store: storage.NewLocal(dir), Sinks: ss, Endpoints: eps, Source: "sim",
		Events: true, Ledger: true,
		Now:       func() time.Time { now = now.Add(time.Minute); return now },
		NewRunID:  func() string { n++; return fmt.Sprintf("run-%d", n) },
		BatchRows: 7, // several batches per snapshot
	}
	r, err := pipeline.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	rig.cfg, rig.r = pc, r
	return rig
}

// simClient serves h and returns a client of it (quick retries) and the
// instruments endpoint.
func simClient(t testing.TB, h http.Handler) (*extract.Client, []pipeline.Endpoint) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client, err := extract.New(extract.Options{BaseURL: srv.URL, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	eps, err := pipeline.SelectEndpoints([]string{"instruments"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return client, eps
}

// runsRows renders the committed runs rows of s, one string per row.
func runsRows(t *testing.T, s *memsink.Sink) []string {
	t.Helper()
	tb := schema.Runs
	var out []string
	for _, rec := range s.Records(tb.Name) {
		col := func(name string) arrow.Array { return rec.Column(tb.MustIndex(name)) }
		for i := 0; i < int(rec.NumRows()); i++ {
			errCol := col("error").(*array.String)
			e := "<null>"
			if errCol.IsValid(i) {
				e = errCol.Value(i)
			}
			out = append(out, fmt.Sprintf("%s|%s|%s|%s|%s|rows=%d|rejects=%d|bytes=%d|ms=%d|%s",
				col("snapshot_time").(*array.Timestamp).Value(i).ToTime(arrow.Millisecond).UTC().Format(time.RFC3339Nano),
				col("run_id").(*array.String).Value(i), col("source").(*array.String).Value(i),
				col("endpoint").(*array.String).Value(i), col("status").(*array.String).Value(i),
				col("rows").(*array.Int64).Value(i), col("rejects").(*array.Int64).Value(i),
				col("bytes").(*array.Int64).Value(i), col("duration_ms").(*array.Int64).Value(i), e))
		}
	}
	return out
}

func pendingOf(t *testing.T, r *pipeline.Runner, sink string) int {
	t.Helper()
	p, _ := ledgerOf(t, r, sink)
	return p
}

// A sink that fails only on the runs table during the live run gets
// exactly the live run's runs rows (same status, rows, bytes, durations)
// later, once: from catch-up, or from a replay by hand.
func TestRunsRowsCaughtUp(t *testing.T) {
	for _, how := range []string{"catch-up", "replay"} {
		t.Run(how, func(t *testing.T) {
			mem := memsink.New("mem")
			fl := &flaky{Sink: memsink.New("flaky")}
			rig := newMemRig(t, venuesim.Config{Seed: 3, Instruments: 20}, mem, fl)
			ctx := context.Background()

			fl.runsDown.Store(true)
			sum := rig.r.Run(ctx)
			if sum.OK || !strings.Contains(sum.Error, "runs table") || !sum.OnlySinksFailed() {
				t.Fatalf("live run with the runs table down: ok=%v %q", sum.OK, sum.Error)
			}
			live := runsRows(t, mem)
			if len(live) != 1 || !strings.Contains(live[0], "|run-1|sim|instruments|ok|rows=20|") {
				t.Fatalf("live runs rows: %q", live)
			}
			if got := runsRows(t, fl.Sink); len(got) != 0 {
				t.Fatalf("runs rows in the sink that was down: %q", got)
			}
			if fl.Rows(schema.Instruments.Name) != 20 {
				t.Fatalf("instruments in flaky: %d", fl.Rows(schema.Instruments.Name))
			}
			if p := pendingOf(t, rig.r, "flaky"); p != 1 {
				t.Fatalf("flaky pending after the live run: %d", p)
			}
			if p := pendingOf(t, rig.r, "mem"); p != 0 {
				t.Fatalf("mem pending after the live run: %d", p)
			}

			if how == "catch-up" {
				// Still down: tried once, left pending, the rows still kept.
				res, err := rig.r.CatchUp(ctx, pipeline.CatchUpOptions{})
				if err != nil || res.Loaded != 0 || res.Down["flaky"] == "" || len(res.Snapshots) != 1 || res.Snapshots[0].OK {
					t.Fatalf("catch-up with the runs table still down: %+v %v", res, err)
				}
				if p := pendingOf(t, rig.r, "flaky"); p != 1 || len(runsRows(t, fl.Sink)) != 0 {
					t.Fatalf("after a failed catch-up: pending %d, runs rows %q", p, runsRows(t, fl.Sink))
				}
			}
			fl.runsDown.Store(false)
			switch how {
			case "catch-up":
				res, err := rig.r.CatchUp(ctx, pipeline.CatchUpOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Snapshots) != 1 || !res.Snapshots[0].OK || res.Loaded != 1 || !reflect.DeepEqual(res.Snapshots[0].Sinks, []string{"flaky"}) {
					t.Fatalf("catch-up: %+v", res)
				}
				// A second catch-up has nothing to do.
				res, err = rig.r.CatchUp(ctx, pipeline.CatchUpOptions{})
				if err != nil || len(res.Snapshots) != 0 || res.Loaded != 0 {
					t.Fatalf("second catch-up: %+v %v", res, err)
				}
			case "replay":
				res, err := rig.r.Replay(ctx, pipeline.ReplayOptions{})
				if err != nil || !res.OK() || len(res.Snapshots) != 1 {
					t.Fatalf("replay: %+v %v", res, err)
				}
			}
			if got := runsRows(t, fl.Sink); !reflect.DeepEqual(got, live) {
				t.Errorf("runs rows caught up:\n got %q\nwant %q", got, live)
			}
			if got := runsRows(t, mem); !reflect.DeepEqual(got, live) {
				t.Errorf("runs rows of the sink that had them changed:\n got %q\nwant %q", got, live)
			}
			if p := pendingOf(t, rig.r, "flaky"); p != 0 {
				t.Errorf("flaky pending after %s: %d", how, p)
			}
			if fl.Rows(schema.Instruments.Name) != 20 || mem.Rows(schema.Instruments.Name) != 20 {
				t.Errorf("instruments after %s: flaky %d mem %d", how, fl.Rows(schema.Instruments.Name), mem.Rows(schema.Instruments.Name))
			}
		})
	}
}

// rowsOf renders the committed rows of table tb in s, one string per row
// (every column), in commit order.
func rowsOf(s *memsink.Sink, tb *schema.Table) []string {
	var out []string
	for _, rec := range s.Records(tb.Name) {
		for i := 0; i < int(rec.NumRows()); i++ {
			var b strings.Builder
			for c := 0; c < int(rec.NumCols()); c++ {
				b.WriteString(rec.Column(c).ValueStr(i))
				b.WriteByte('|')
			}
			out = append(out, b.String())
		}
	}
	return out
}

// identity checks that every row of tb in s carries run id and snapshot time.
func identity(t *testing.T, s *memsink.Sink, tb *schema.Table, runID string, at time.Time) {
	t.Helper()
	for _, rec := range s.Records(tb.Name) {
		ids := rec.Column(tb.MustIndex("run_id")).(*array.String)
		ts := rec.Column(tb.MustIndex("snapshot_time")).(*array.Timestamp)
		for i := 0; i < int(rec.NumRows()); i++ {
			if ids.Value(i) != runID || !ts.Value(i).ToTime(arrow.Millisecond).Equal(at) {
				t.Fatalf("%s row %d of %s: run_id %q snapshot_time %v, want %q %v", tb.Name, i, s.Name(), ids.Value(i), ts.Value(i).ToTime(arrow.Millisecond), runID, at)
			}
		}
	}
}

// A snapshot's rows reach every sink, each row with the run's id and the
// (pinned) snapshot time, and the runs table gets one row per endpoint.
func TestRunnerRowsReachEverySink(t *testing.T) {
	a, b := memsink.New("a"), memsink.New("b")
	rig := newMemRig(t, venuesim.Config{Seed: 1, Instruments: 30}, a, b)
	sum := rig.r.Run(context.Background())
	if !sum.OK {
		t.Fatalf("run: %s", sum.Error)
	}
	at := memT0.Add(time.Minute)
	if sum.RunID != "run-1" || !sum.SnapshotTime.Equal(at) || len(sum.Endpoints) != 1 {
		t.Fatalf("summary: %+v", sum)
	}
	ep := sum.Endpoints[0]
	if ep.Status != "ok" || ep.Rows != 30 || ep.Sinks["a"].Rows != 30 || ep.Sinks["b"].Rows != 30 {
		t.Fatalf("endpoint result: %+v", ep)
	}
	for _, s := range []*memsink.Sink{a, b} {
		if n := s.Rows(schema.Instruments.Name); n != 30 {
			t.Errorf("%s: %d instruments, want 30", s.Name(), n)
		}
		if n := len(s.Records(schema.Instruments.Name)); n < 2 {
			t.Errorf("%s: %d batches, want several (BatchRows 7)", s.Name(), n)
		}
		identity(t, s, schema.Instruments, "run-1", at)
		identity(t, s, schema.Runs, "run-1", at)
		if got := runsRows(t, s); len(got) != 1 || !strings.HasPrefix(got[0], "2026-11-23T09:01:00Z|run-1|sim|instruments|ok|rows=30|rejects=0|") || !strings.HasSuffix(got[0], "|<null>") {
			t.Errorf("%s runs rows: %q", s.Name(), got)
		}
	}
	if ra, rb := rowsOf(a, schema.Instruments), rowsOf(b, schema.Instruments); !reflect.DeepEqual(ra, rb) {
		t.Errorf("the sinks got different rows")
	}
	if p := pendingOf(t, rig.r, "a") + pendingOf(t, rig.r, "b"); p != 0 {
		t.Errorf("pending after a clean run: %d", p)
	}
}

// The fan-out: a sink that is down or breaks mid-load does not stop the
// others; the one that broke has nothing committed (no partial snapshot);
// its loads stay pending in the ledger, and catch-up later gives it exactly
// the rows the others got live.
func TestFanoutOneSinkFails(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(*flaky)
		fixed  func(*flaky)
	}{
		{"down", func(f *flaky) { f.down.Store(true) }, func(f *flaky) { f.down.Store(false) }},
		{"fails mid-load", func(f *flaky) { f.writeFails.Store(true) }, func(f *flaky) { f.writeFails.Store(false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memsink.New("mem")
			fl := &flaky{Sink: memsink.New("flaky")}
			rig := newMemRig(t, venuesim.Config{Seed: 5, Instruments: 30}, fl, mem) // the failing one first
			ctx := context.Background()
			tc.break_(fl)
			sum := rig.r.Run(ctx)
			if sum.OK || !sum.OnlySinksFailed() || sum.Endpoints[0].Sinks["flaky"].Error == "" || sum.Endpoints[0].Sinks["mem"].Error != "" {
				t.Fatalf("run with a failing sink: %+v", sum)
			}
			if n := mem.Rows(schema.Instruments.Name); n != 30 {
				t.Fatalf("the healthy sink got %d instruments, want 30", n)
			}
			identity(t, mem, schema.Instruments, "run-1", memT0.Add(time.Minute))
			if n := fl.Rows(schema.Instruments.Name); n != 0 {
				t.Fatalf("the failing sink has %d instruments committed", n)
			}
			if p := pendingOf(t, rig.r, "flaky"); p != 1 {
				t.Fatalf("flaky pending: %d", p)
			}
			// Still failing: catch-up tries once, leaves it pending.
			res, err := rig.r.CatchUp(ctx, pipeline.CatchUpOptions{})
			if err != nil || res.Loaded != 0 || pendingOf(t, rig.r, "flaky") != 1 || fl.Rows(schema.Instruments.Name) != 0 {
				t.Fatalf("catch-up while still failing: %+v %v", res, err)
			}
			tc.fixed(fl)
			res, err = rig.r.CatchUp(ctx, pipeline.CatchUpOptions{})
			if err != nil || len(res.Snapshots) != 1 || !res.Snapshots[0].OK {
				t.Fatalf("catch-up: %+v %v", res, err)
			}
			if got, want := rowsOf(fl.Sink, schema.Instruments), rowsOf(mem, schema.Instruments); len(got) != 30 || !reflect.DeepEqual(got, want) {
				t.Errorf("caught-up instruments differ from the live ones (%d rows, want 30)", len(got))
			}
			if got, want := runsRows(t, fl.Sink), runsRows(t, mem); !reflect.DeepEqual(got, want) {
				t.Errorf("caught-up runs rows %q, want %q", got, want)
			}
			if p := pendingOf(t, rig.r, "flaky"); p != 0 {
				t.Errorf("flaky pending after catch-up: %d", p)
			}
		})
	}
}

// Transient venue errors (5xx, 429) then success: the rows arrive once.
func TestRetryThenRowsOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults venuesim.Faults
	}{
		{"503 twice", venuesim.Faults{FailFirst: 2}},
		{"503 then 429", venuesim.Faults{FailFirst: 1, RateLimitFirst: 1, RetryAfter: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memsink.New("mem")
			rig := newMemRig(t, venuesim.Config{Seed: 7, Instruments: 25, Faults: tc.faults}, mem)
			sum := rig.r.Run(context.Background())
			if !sum.OK {
				t.Fatalf("run: %s", sum.Error)
			}
			if n := rig.requests.Load(); n != 3 {
				t.Errorf("venue requests: %d, want 3 (two refused, one served)", n)
			}
			if n := mem.Rows(schema.Instruments.Name); n != 25 {
				t.Errorf("instruments: %d, want 25", n)
			}
			if got := runsRows(t, mem); len(got) != 1 || !strings.Contains(got[0], "|instruments|ok|rows=25|") {
				t.Errorf("runs rows: %q", got)
			}
			if d := rowsOf(mem, schema.Instruments); len(d) != 25 || hasDup(d) {
				t.Errorf("duplicate rows after retries")
			}
		})
	}
}

func hasDup(rows []string) bool {
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r] {
			return true
		}
		seen[r] = true
	}
	return false
}

// A context cancelled mid-snapshot (rows already handed to the sink):
// nothing is committed, and the summary says why.
func TestAbortMidSnapshot(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fl := &flaky{Sink: memsink.New("mem")}
	fl.onWrite = cancel
	rig := newMemRig(t, venuesim.Config{Seed: 9, Instruments: 30}, fl)
	sum := rig.r.Run(ctx)
	if sum.OK || !strings.Contains(sum.Error, "context canceled") {
		t.Fatalf("cancelled run: ok=%v %q", sum.OK, sum.Error)
	}
	for _, tb := range []*schema.Table{schema.Instruments, schema.Runs, schema.InstrumentEvents, schema.Rejects} {
		if n := fl.Rows(tb.Name); n != 0 {
			t.Errorf("%s: %d rows committed by a cancelled run", tb.Name, n)
		}
	}
}

// A replay from the raw archive gives the live run's rows: the same
// instruments (snapshots are loaded several at once: in any order) and the
// same instrument events, committed in snapshot order, with the original
// run ids and times.
func TestReplayGivesLiveRows(t *testing.T) {
	live := memsink.New("live")
	rig := newMemRig(t, venuesim.Config{Seed: 11, Instruments: 40}, live)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if sum := rig.r.Run(ctx); !sum.OK {
			t.Fatalf("run %d: %s", i, sum.Error)
		}
		rig.sim.Advance(1)
	}
	if live.Rows(schema.InstrumentEvents.Name) == 0 {
		t.Fatalf("no instrument events in three snapshots: the test proves nothing")
	}
	again := memsink.New("replay")
	cfg := rig.cfg
	cfg.Sinks, cfg.Ledger = []sinks.Sink{again}, false
	cfg.Now = func() time.Time { t.Fatal("a replay asked for the time"); return time.Time{} }
	r, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Replay(ctx, pipeline.ReplayOptions{})
	if err != nil || !res.OK() || len(res.Snapshots) != 3 {
		t.Fatalf("replay: %+v %v", res, err)
	}
	for i, s := range res.Snapshots {
		if want := fmt.Sprintf("run-%d", i+1); s.RunID != want || !s.SnapshotTime.Equal(memT0.Add(time.Duration(i+1)*time.Minute)) {
			t.Errorf("replayed snapshot %d: %s %v", i, s.RunID, s.SnapshotTime)
		}
	}
	for _, tb := range []*schema.Table{schema.Instruments, schema.InstrumentEvents} {
		got, want := rowsOf(again, tb), rowsOf(live, tb)
		if tb == schema.Instruments {
			slices.Sort(got)
			slices.Sort(want)
		}
		if len(want) == 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: replay gave %d rows, live %d, or different ones", tb.Name, len(got), len(want))
		}
	}
	// events in snapshot order
	var last time.Time
	for _, rec := range again.Records(schema.InstrumentEvents.Name) {
		ts := rec.Column(schema.InstrumentEvents.MustIndex("snapshot_time")).(*array.Timestamp)
		for i := 0; i < int(rec.NumRows()); i++ {
			at := ts.Value(i).ToTime(arrow.Millisecond)
			if at.Before(last) {
				t.Fatalf("events out of snapshot order: %v after %v", at, last)
			}
			last = at
		}
	}
}

// The summary says where an endpoint's time went: the body, its decode,
// the sinks' commit, the archive and the events, each within the
// endpoint's duration; a replay reports its own (no archive write).
func TestStageTimings(t *testing.T) {
	live := memsink.New("mem")
	rig := newMemRig(t, venuesim.Config{Seed: 5, Instruments: 200}, live)
	ctx := context.Background()
	sum := rig.r.Run(ctx)
	if !sum.OK || len(sum.Endpoints) == 0 {
		t.Fatalf("run: %+v", sum)
	}
	check := func(e pipeline.EndpointResult, want []string, absent string) {
		t.Helper()
		for _, st := range want {
			v, ok := e.Stages[st]
			if !ok || v < 0 || v > float64(e.DurationMS)+1 {
				t.Errorf("%s: stage %s = %v (present %v), endpoint took %d ms", e.Endpoint, st, v, ok, e.DurationMS)
			}
		}
		if e.Stages[pipeline.StageBody] > e.Stages[pipeline.StageDecode] {
			t.Errorf("%s: waiting for the body (%v ms) longer than the decode that reads it (%v ms)", e.Endpoint, e.Stages[pipeline.StageBody], e.Stages[pipeline.StageDecode])
		}
		if _, ok := e.Stages[absent]; absent != "" && ok {
			t.Errorf("%s: stage %s reported", e.Endpoint, absent)
		}
	}
	all := []string{pipeline.StageBody, pipeline.StageDecode, pipeline.StageCommit, pipeline.StageArchive, pipeline.StageEvents}
	check(sum.Endpoints[0], all, "")
	cfg := rig.cfg
	cfg.Sinks, cfg.Ledger = []sinks.Sink{memsink.New("again")}, false
	r, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Replay(ctx, pipeline.ReplayOptions{})
	if err != nil || len(res.Snapshots) != 1 {
		t.Fatalf("replay: %+v %v", res, err)
	}
	check(res.Snapshots[0].Endpoints[0], all[:3], pipeline.StageArchive)
}

// A replay cancelled after its first snapshot stops starting snapshots: it
// returns the context's error, reports the snapshots that ran (in order),
// and leaves the rest unloaded.
func TestReplayCancelled(t *testing.T) {
	rig := newMemRig(t, venuesim.Config{Seed: 12, Instruments: 30}, memsink.New("live"))
	ctx := context.Background()
	const n = 8
	for i := 0; i < n; i++ {
		if sum := rig.r.Run(ctx); !sum.OK {
			t.Fatalf("run %d: %s", i, sum.Error)
		}
		rig.sim.Advance(1)
	}
	again := memsink.New("replay")
	cfg := rig.cfg
	cfg.Sinks, cfg.Ledger = []sinks.Sink{again}, false
	r, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res, err := r.Replay(cctx, pipeline.ReplayOptions{Progress: func(done, total int, _ *pipeline.Summary) {
		if done == 1 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("replay cancelled after its first snapshot: err %v", err)
	}
	if len(res.Snapshots) == 0 || len(res.Snapshots) >= n {
		t.Fatalf("%d of %d snapshots reported", len(res.Snapshots), n)
	}
	for i, s := range res.Snapshots {
		if want := fmt.Sprintf("run-%d", i+1); s.RunID != want {
			t.Errorf("snapshot %d reported is %s, want %s", i, s.RunID, want)
		}
	}
	runs := map[string]bool{}
	for _, rec := range again.Records(schema.Instruments.Name) {
		ids := rec.Column(schema.Instruments.MustIndex("run_id")).(*array.String)
		for i := 0; i < ids.Len(); i++ {
			runs[ids.Value(i)] = true
		}
	}
	if len(runs) == 0 || len(runs) >= n {
		t.Errorf("rows of %d snapshots loaded after the cancel, want some and not all %d", len(runs), n)
	}
}

// A replay of an archive that holds only the listing, with the account
// endpoints configured, says once per endpoint that the archive holds
// nothing of it, not "endpoint done … ok" with 0 requests per snapshot
// (61,320 lines over a year of 5-minute snapshots).
func TestReplayLogsAbsentEndpointsOnce(t *testing.T) {
	rig := newMemRig(t, venuesim.Config{Seed: 13, Instruments: 20}, memsink.New("live"))
	ctx := context.Background()
	const n = 4
	for i := range n {
		if sum := rig.r.Run(ctx); !sum.OK {
			t.Fatalf("run %d: %s", i, sum.Error)
		}
		rig.sim.Advance(1)
	}
	var logs bytes.Buffer
	var err error
	cfg := rig.cfg
	cfg.Sinks, cfg.Ledger = []sinks.Sink{memsink.New("replay")}, false
	if cfg.Endpoints, err = pipeline.SelectEndpoints(nil, nil); err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Replay(ctx, pipeline.ReplayOptions{})
	if err != nil || len(res.Snapshots) != n {
		t.Fatalf("replay: %+v %v", res, err)
	}
	// lines counts the log lines with msg and endpoint=name.
	lines := func(msg, name string) int {
		c := 0
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "msg=\""+msg+"\"") && strings.Contains(l, " endpoint="+name+" ") {
				c++
			}
		}
		return c
	}
	accounts := 0
	for _, ep := range cfg.Endpoints {
		if ep.Name == "instruments" {
			continue
		}
		accounts++
		if c := lines("endpoint done", ep.Name); c != 0 {
			t.Errorf("%s: %d \"endpoint done\" lines, want none", ep.Name, c)
		}
		if c := lines("endpoint not in the archive: nothing replayed", ep.Name); c != 1 || !strings.Contains(logs.String(), "endpoint="+ep.Name+" snapshots=4 ") {
			t.Errorf("%s: said %d times that the archive holds nothing of it, want once", ep.Name, c)
		}
	}
	if accounts < 6 {
		t.Fatalf("%d account endpoints configured: the test proves little", accounts)
	}
	if c := lines("endpoint done", "instruments"); c != n {
		t.Errorf("instruments: %d \"endpoint done\" lines, want one per snapshot (%d)", c, n)
	}
}
