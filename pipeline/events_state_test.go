package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks/memsink"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// failingCommits is a data directory whose commits of the events state
// (_state/) fail while fail is set (a full disk under the events state).
type failingCommits struct {
	storage.Store
	fail *atomic.Bool
}

func (s failingCommits) Create(ctx context.Context, name string) (storage.Writer, error) {
	w, err := s.Store.Create(ctx, name)
	if err != nil || !strings.HasPrefix(name, "_state/") {
		return w, err
	}
	return failingWriter{Writer: w, fail: s.fail}, nil
}

type failingWriter struct {
	storage.Writer
	fail *atomic.Bool
}

func (w failingWriter) Commit() error {
	if w.fail.Load() {
		w.Writer.Abort()
		return errors.New("no space left on device")
	}
	return w.Writer.Commit()
}

// changes renders the instrument events of s without their snapshot:
// instrument|event|field|old|new, sorted.
func changes(s *memsink.Sink) []string {
	tb := schema.InstrumentEvents
	var cols []int
	for _, name := range []string{"instrument_name", "event", "field", "old_value", "new_value"} {
		cols = append(cols, slices.IndexFunc(tb.Columns, func(c schema.Column) bool { return c.Name == name }))
	}
	var out []string
	for _, rec := range s.Records(tb.Name) {
		for i := range int(rec.NumRows()) {
			var b strings.Builder
			for _, c := range cols {
				b.WriteString(rec.Column(c).ValueStr(i) + "|")
			}
			out = append(out, b.String())
		}
	}
	slices.Sort(out)
	return out
}

// The events state cannot be saved after a snapshot (its store's commit
// fails): the run is not "ok" (it says the events were not written), no
// events of that snapshot are written, and the next snapshot reports the
// changes since the last saved state once — the events equal those of a
// run that skipped the failed snapshot. (The events used to be written
// and the run "ok"; the next one then reported them a second time.)
func TestEventsStateNotSaved(t *testing.T) {
	cfg := venuesim.Config{Seed: 3, Instruments: 300}
	rig := func(t *testing.T, fail *atomic.Bool) (*memRig, *memsink.Sink, *pipeline.Runner) {
		mem := memsink.New("mem")
		rg := newMemRig(t, cfg, mem)
		pc := rg.cfg
		pc.Store = failingCommits{Store: storage.NewLocal(rg.dir), fail: fail} // not a LocalFolder: the state goes through Create
		r, err := pipeline.New(pc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() }) // its scratch folder
		return rg, mem, r
	}
	ctx := context.Background()
	var fail atomic.Bool
	rg, mem, r := rig(t, &fail)
	if sum := r.Run(ctx); !sum.OK {
		t.Fatal(sum.Error)
	}
	rg.sim.Advance(1)
	fail.Store(true)
	sum := r.Run(ctx)
	if sum.OK || !strings.Contains(sum.Error, "state not saved") || sum.Endpoints[0].EventsSkipped == "" {
		t.Fatalf("run whose state was not saved: ok=%v %q", sum.OK, sum.Error)
	}
	wantNote(t, rg.dir, sum, "state not saved")
	fail.Store(false)
	rg.sim.Advance(1)
	if sum := r.Run(ctx); !sum.OK {
		t.Fatal(sum.Error)
	}
	wantNote(t, rg.dir, nil, "")

	var never atomic.Bool
	ref, refMem, refR := rig(t, &never)
	if sum := refR.Run(ctx); !sum.OK {
		t.Fatal(sum.Error)
	}
	ref.sim.Advance(2)
	if sum := refR.Run(ctx); !sum.OK {
		t.Fatal(sum.Error)
	}
	got, want := changes(mem), changes(refMem)
	if len(want) <= 300 || !slices.Equal(got, want) {
		t.Errorf("events: %d, want %d (those of a run without the failed snapshot)", len(got), len(want))
	}
}

// A snapshot older than the events state (a clock gone backwards, a late
// load into a past day) is refused, never silent: the run is partial and
// says why; its rows load; the state is unchanged, so the next snapshot
// in order gets its events.
func TestEventsClockBackwards(t *testing.T) {
	mem := memsink.New("mem")
	rg := newMemRig(t, venuesim.Config{Seed: 3, Instruments: 50}, mem)
	pc := rg.cfg
	at := memT0
	pc.Now = func() time.Time { return at }
	r, err := pipeline.New(pc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if sum := r.Run(ctx); !sum.OK {
		t.Fatal(sum.Error)
	}
	at = memT0.Add(-time.Hour)
	rg.sim.Advance(1)
	sum := r.Run(ctx)
	if sum.OK || !strings.Contains(sum.Error, "instrument events not written") || !strings.Contains(sum.Endpoints[0].EventsSkipped, "older than the state") || sum.Endpoints[0].Rows != 50 {
		t.Fatalf("snapshot before the state: ok=%v %q %+v", sum.OK, sum.Error, sum.Endpoints[0])
	}
	wantNote(t, rg.dir, sum, "older than the state")
	at = memT0.Add(time.Minute)
	if sum := r.Run(ctx); !sum.OK || sum.Endpoints[0].Events == 0 {
		t.Fatalf("the next snapshot: ok=%v %q events %d", sum.OK, sum.Error, sum.Endpoints[0].Events)
	}
	wantNote(t, rg.dir, nil, "")
}

// wantNote checks the data directory's note of skipped instrument events
// (what `status` shows): the snapshot of sum with a reason containing
// reason, or none when sum is nil.
func wantNote(t *testing.T, dir string, sum *pipeline.Summary, reason string) {
	t.Helper()
	notes, err := pipeline.EventsNotes(context.Background(), storage.NewLocal(dir))
	if err != nil {
		t.Fatal(err)
	}
	if sum == nil {
		if len(notes) != 0 {
			t.Fatalf("notes after a snapshot whose events were written: %+v", notes)
		}
		return
	}
	if len(notes) != 1 || notes[0].Source != sum.Source || notes[0].RunID != sum.RunID ||
		!notes[0].SnapshotTime.Equal(sum.SnapshotTime) || !strings.Contains(notes[0].Reason, reason) {
		t.Fatalf("notes: %+v, want the snapshot %s (%s)", notes, sum.RunID, reason)
	}
}
