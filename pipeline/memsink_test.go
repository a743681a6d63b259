package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/archive"
	"github.com/optlake/optlake/pipeline/extract"
	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/memsink"
	"github.com/optlake/optlake/venuesim"
)

// flaky is an in-memory sink that can be down: for every table (down) or
// for the runs table only (runsDown).
type flaky struct {
	*memsink.Sink
	down, runsDown atomic.Bool
}

func (f *flaky) Open(ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
	if f.down.Load() || (f.runsDown.Load() && t == schema.Runs) {
		return nil, fmt.Errorf("%s: %s: connection refused", f.Name(), t.Name)
	}
	return f.Sink.Open(ctx, t, snap)
}

// memRig is a runner over a venue simulator with a pinned clock and run
// ids, archiving into a temp dir, with a ledger, loading into the sinks.
type memRig struct {
	dir string
	r   *pipeline.Runner
}

func newMemRig(t *testing.T, cfg venuesim.Config, ss ...sinks.Sink) *memRig {
	t.Helper()
	srv := httptest.NewServer(venuesim.New(cfg).Handler())
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	client, err := extract.New(extract.Options{BaseURL: srv.URL, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	eps, err := pipeline.SelectEndpoints([]string{"instruments"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	n := 0
	r, err := pipeline.New(pipeline.Config{
		Client: client, Archive: archive.New(dir), Sinks: ss, Endpoints: eps, Source: "sim",
		StateDir: dir, Ledger: ledger.Open(dir),
		Now:      func() time.Time { now = now.Add(time.Minute); return now },
		NewRunID: func() string { n++; return fmt.Sprintf("run-%d", n) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return &memRig{dir: dir, r: r}
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
	st, err := r.Pending()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Sink == sink {
			return s.Pending
		}
	}
	return 0
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

			fl.runsDown.Store(false)
			switch how {
			case "catch-up":
				res, err := rig.r.CatchUp(ctx, pipeline.CatchUpOptions{DataDir: rig.dir})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Snapshots) != 1 || !res.Snapshots[0].OK || res.Loaded != 1 || !reflect.DeepEqual(res.Snapshots[0].Sinks, []string{"flaky"}) {
					t.Fatalf("catch-up: %+v", res)
				}
				// A second catch-up has nothing to do.
				res, err = rig.r.CatchUp(ctx, pipeline.CatchUpOptions{DataDir: rig.dir})
				if err != nil || len(res.Snapshots) != 0 || res.Loaded != 0 {
					t.Fatalf("second catch-up: %+v %v", res, err)
				}
			case "replay":
				res, err := rig.r.Replay(ctx, pipeline.ReplayOptions{DataDir: rig.dir})
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

var _ = errors.New
