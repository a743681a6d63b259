package pipeline_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/sinks/memsink"
	"github.com/optlake/optlake/venuesim"
)

// daySink is a flaky sink that writes a replay's rows at FlushDay
// (sinks.DaySink), which can fail.
type daySink struct {
	*flaky
	flushFails atomic.Bool
	flushes    atomic.Int64
}

func (d *daySink) HoldsDays() bool { return true }

func (d *daySink) FlushDay(ctx context.Context, date string) error {
	d.flushes.Add(1)
	if d.flushFails.Load() {
		return errors.New("day: disk full")
	}
	return nil
}

// A replay records a DaySink's loads committed only once their day is
// written: when FlushDay fails the snapshots the sink missed stay pending
// in the ledger (catch-up or the next replay loads them), and the next
// replay that writes the day settles them.
func TestReplayDayNotWrittenStaysPending(t *testing.T) {
	mem := memsink.New("mem")
	ds := &daySink{flaky: &flaky{Sink: memsink.New("day")}}
	rig := newMemRig(t, venuesim.Config{Seed: 5, Instruments: 15}, mem, ds)
	ctx := context.Background()

	ds.down.Store(true)
	for i := 0; i < 2; i++ {
		if sum := rig.r.Run(ctx); sum.OK || !sum.OnlySinksFailed() {
			t.Fatalf("live run %d with the day sink down: ok=%v %q", i, sum.OK, sum.Error)
		}
		rig.sim.Advance(1)
	}
	if p := pendingOf(t, rig.r, "day"); p != 2 {
		t.Fatalf("day sink pending after the live runs: %d", p)
	}
	ds.down.Store(false)

	ds.flushFails.Store(true)
	res, err := rig.r.Replay(ctx, pipeline.ReplayOptions{})
	if err != nil || res.Failed != 2 || ds.flushes.Load() != 1 {
		t.Fatalf("replay with the day not written: failed %d, flushes %d, %v", res.Failed, ds.flushes.Load(), err)
	}
	if p := pendingOf(t, rig.r, "day"); p != 2 {
		t.Fatalf("day sink pending after a replay whose day was not written: %d, want 2", p)
	}
	if p := pendingOf(t, rig.r, "mem"); p != 0 {
		t.Fatalf("mem pending: %d", p)
	}
	st, err := rig.r.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range st {
		if x.Sink == "day" && !strings.Contains(x.LastError, "disk full") {
			t.Errorf("day sink's pending loads say %q, want the flush's error", x.LastError)
		}
	}

	ds.flushFails.Store(false)
	res, err = rig.r.Replay(ctx, pipeline.ReplayOptions{})
	if err != nil || !res.OK() || len(res.Snapshots) != 2 {
		t.Fatalf("replay: %+v %v", res, err)
	}
	if p := pendingOf(t, rig.r, "day"); p != 0 {
		t.Errorf("day sink pending after the day was written: %d", p)
	}
}
