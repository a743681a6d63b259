package pipeline_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/events"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks/memsink"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// A catch-up bounded by its time budget (measured on a pinned clock, not by
// sleeping) loads what fits, leaves the rest pending, and the run's own
// snapshot is then taken as usual.
func TestCatchUpTimeBudget(t *testing.T) {
	dir := t.TempDir()
	snap := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	r := instrumentsRunner(t, venuesim.Config{Seed: 2, Instruments: 50}, dir, storage.NewLocal(dir), func() time.Time { snap = snap.Add(time.Minute); return snap })
	ctx := context.Background()
	block := filepath.Join(dir, "instruments")
	if err := os.WriteFile(block, []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if sum := r.Run(ctx); sum.OK {
			t.Fatalf("run %d loaded into an unwritable lake", i)
		}
	}
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	// Each look at the clock finds 40 minutes gone: the first snapshot
	// starts within the 1h budget, the second would not.
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { now = now.Add(40 * time.Minute); return now }
	res, err := r.CatchUp(ctx, pipeline.CatchUpOptions{Budget: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped != "budget" || len(res.Snapshots) != 1 || !res.Snapshots[0].OK || res.Loaded != 1 {
		t.Fatalf("bounded catch-up: %+v", res)
	}
	if sum := r.Run(ctx); !sum.OK {
		t.Fatalf("the run's own snapshot: %s", sum.Error)
	}
	st, err := r.Pending(context.Background())
	if err != nil || len(st) != 1 || st[0].Pending != 2 || !st[0].Oldest.Equal(time.Date(2026, 11, 23, 9, 2, 0, 0, time.UTC)) {
		t.Fatalf("pending after: %+v %v", st, err)
	}
	// Without a bound the rest goes through.
	if res, err := r.CatchUp(ctx, pipeline.CatchUpOptions{}); err != nil || len(res.Snapshots) != 2 || res.Stopped != "" {
		t.Fatalf("unbounded catch-up: %+v %v", res, err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "instruments", "*", "*.parquet"))
	if len(files) != 4 {
		t.Errorf("parquet files: %v", files)
	}
}

// A snapshot none of whose sinks got its listing while the events state
// stayed before it (the live run died before saving the state, a kill -9)
// is caught up while another sink is down from an earlier snapshot: the
// catch-up compares it with the live state and moves the state on, as it
// does when every sink is there, so the next snapshot reports none of its
// changes again. The instrument events of the sink that is up equal those
// of uninterrupted runs.
func TestCatchUpMovesEventsStateWithASinkDown(t *testing.T) {
	sim := venuesim.Config{Seed: 7, Instruments: 300}
	ctx := context.Background()

	// Uninterrupted runs of the same three snapshots.
	ref := memsink.New("a")
	refRig := newMemRig(t, sim, ref)
	for i := range 3 {
		if i > 0 {
			refRig.sim.Advance(1)
		}
		if sum := refRig.r.Run(ctx); !sum.OK {
			t.Fatalf("reference run %d: %s", i+1, sum.Error)
		}
	}
	want := rowsOf(ref, schema.InstrumentEvents)
	if len(want) == 0 {
		t.Fatal("the reference runs have no instrument events")
	}

	a := &flaky{Sink: memsink.New("a")}
	b := &flaky{Sink: memsink.New("b")}
	rig := newMemRig(t, sim, a, b)
	// Snapshot 1: b is down (pending for b); the state moves on.
	b.down.Store(true)
	if sum := rig.r.Run(ctx); sum.OK {
		t.Fatal("run 1 with b down: ok")
	}
	// Snapshot 2: no sink takes the listing and the state stays at
	// snapshot 1, as after a kill before the state was saved.
	rig.sim.Advance(1)
	a.down.Store(true)
	unblock := testenv.BlockFolder(t, events.StateDir(rig.dir))
	if sum := rig.r.Run(ctx); sum.OK {
		t.Fatal("run 2 with every sink down: ok")
	}
	unblock()
	if p := pendingOf(t, rig.r, "a"); p != 1 {
		t.Fatalf("a pending after run 2: %d", p)
	}
	// a is back, b still down: snapshot 1 fails for b (down from then
	// on), snapshot 2 is caught up into a.
	a.down.Store(false)
	res, err := rig.r.CatchUp(ctx, pipeline.CatchUpOptions{})
	if err != nil || res.Down["b"] == "" || pendingOf(t, rig.r, "a") != 0 {
		t.Fatalf("catch-up with b down: %+v %v", res, err)
	}
	// Snapshot 3, b still down.
	rig.sim.Advance(1)
	rig.r.Run(ctx)
	got := rowsOf(a.Sink, schema.InstrumentEvents)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		var missing, extra []string
		for _, w := range want {
			if !slices.Contains(got, w) {
				missing = append(missing, w)
			}
		}
		for _, g := range got {
			if !slices.Contains(want, g) {
				extra = append(extra, g)
			}
		}
		t.Errorf("a has %d instrument events, uninterrupted runs %d: %d missing (first %q), %d extra (first %q)",
			len(got), len(want), len(missing), append(missing, "")[0], len(extra), append(extra, "")[0])
	}
}

// The note of a snapshot whose instrument events were not written stays
// until a later snapshot writes its events: the catch-up of an older
// snapshot (a sink that was down before it) writing that one's events
// does not clear it, so `status` still shows it.
func TestCatchUpKeepsALaterEventsNote(t *testing.T) {
	ctx := context.Background()
	a := &flaky{Sink: memsink.New("a")}
	b := &flaky{Sink: memsink.New("b")}
	rig := newMemRig(t, venuesim.Config{Seed: 8, Instruments: 60}, a, b)
	// Snapshot 1: b is down, its load stays pending.
	b.down.Store(true)
	if sum := rig.r.Run(ctx); sum.OK {
		t.Fatal("run 1 with b down: ok")
	}
	b.down.Store(false)
	// Snapshot 2: the events state's folder is in the way: no events,
	// the note goes to _state/events_notes.
	rig.sim.Advance(1)
	unblock := testenv.BlockFolder(t, events.StateDir(rig.dir))
	if sum := rig.r.Run(ctx); sum.OK || !strings.Contains(sum.Error, "instrument events not written") {
		t.Fatalf("run 2 with the state folder in the way: ok=%v %q", sum.OK, sum.Error)
	}
	unblock()
	notes, err := pipeline.EventsNotes(ctx, rig.cfg.Store)
	if err != nil || len(notes) != 1 || !notes[0].SnapshotTime.Equal(memT0.Add(2*time.Minute)) {
		t.Fatalf("notes after run 2: %+v %v", notes, err)
	}
	// b catches up snapshot 1, events included.
	res, err := rig.r.CatchUp(ctx, pipeline.CatchUpOptions{})
	if err != nil || len(res.Snapshots) != 1 || !res.Snapshots[0].OK || res.Snapshots[0].Events == 0 {
		t.Fatalf("catch-up of snapshot 1 into b: %+v %v", res, err)
	}
	notes, err = pipeline.EventsNotes(ctx, rig.cfg.Store)
	if err != nil || len(notes) != 1 || !notes[0].SnapshotTime.Equal(memT0.Add(2*time.Minute)) {
		t.Errorf("notes after the catch-up of snapshot 1: %+v %v", notes, err)
	}
}
