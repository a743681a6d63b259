package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/pipeline/events"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/storage"
)

// eventsRun derives instrument_events for one snapshot of the listing. A nil
// *eventsRun does nothing, so callers need no checks.
type eventsRun struct {
	prev     *events.State
	meta     sinks.Snapshot
	opt      events.Options
	d        *events.Differ
	observed bool // the current attempt fed rows to d
	tainted  bool // a failed attempt fed rows that cannot be taken back
	// stateOnly: derive the next state but write no events.
	stateOnly bool
	// turn, when set, orders this comparison after the previous
	// snapshot's (a pipelined replay): the rows are observed at once, the
	// previous state is loaded when the turn comes (finishEvents).
	turn *eventsTurn
	err  error
	log  *slog.Logger
}

// listingEvents starts the instrument events of an endpoint's snapshot
// (nil: none): only a whole listing has them, since a filter would look
// like delistings.
func (r *Runner) listingEvents(ctx context.Context, log *slog.Logger, ep Endpoint, reqs []requestSpec, sum *Summary, sr *snapshotRun) *eventsRun {
	switch {
	case ep.Kind != KindInstruments:
		return nil
	case len(reqs) > 0 && len(reqs[0].params) > 0:
		log.Info("instrument events skipped: the listing is filtered by parameters", "endpoint", ep.Name)
		return nil
	}
	ev := r.startEvents(ctx, log, sr.states, sum, sr.turn)
	if ev != nil {
		ev.stateOnly = sr.eventsOnlyState
	}
	return ev
}

// startEvents loads the last known state of the source (nil: no events);
// with a turn, the state is loaded later, in finishEvents.
func (r *Runner) startEvents(ctx context.Context, log *slog.Logger, states stateStore, sum *Summary, turn *eventsTurn) *eventsRun {
	if states == nil {
		return nil
	}
	e := &eventsRun{
		log: log, turn: turn,
		meta: sinks.Snapshot{Time: sum.SnapshotTime, RunID: sum.RunID, Source: sum.Source},
		opt:  events.Options{BatchRows: r.cfg.BatchRows, Mem: r.cfg.Mem, TempDir: states.TempDir(), Background: true, Reuse: states.Reuse()},
	}
	if turn == nil {
		prev, err := states.Load(ctx, sum.Source)
		if err != nil {
			// Never silent: the snapshot is partial (refused).
			e.err = fmt.Errorf("cannot load the state: %w", err)
			return e
		}
		e.prev = prev
	}
	return e
}

// close releases the comparison's temporary files and the previous state
// (as the store decides), and passes the turn on.
func (e *eventsRun) close(states stateStore) {
	if e == nil {
		return
	}
	if e.d != nil {
		e.d.Close()
	}
	if e.prev != nil {
		states.Release(e.prev)
	}
	e.turn.finish()
}

// eventsTurn orders the comparisons of snapshots loaded at once (a
// pipelined replay): each compares with the state the snapshot before it
// left, so it waits until that one is done with the state.
//
// A snapshot whose comparison did not run because it never loaded (no
// complete body: a run killed or failed before its last page, a body cut
// off or undecodable) leaves the state as it was, and the next one is
// compared with the last snapshot that loaded, as the live runs did. One
// whose archived body cannot be read back any more (corrupt, missing:
// stale) may have loaded live: compared with the snapshot before it, the
// next one would report its changes again beside the events the original
// run wrote for it (a replay over an existing lake), so the next one only
// seeds the state and writes no events (seedOnly); its events of that run
// stay as they were.
type eventsTurn struct {
	after    <-chan struct{} // closed when the previous snapshot is done (nil: first)
	prev     *eventsTurn
	done     chan struct{}
	once     sync.Once
	compared bool // this snapshot's comparison ran (set before done is closed)
	// stale: the state this snapshot leaves is not the one the live run
	// of the next snapshot compared with (set before done is closed):
	// its archived listing cannot be read back, or it did not compare
	// after a stale one, or it is a replay's unseeded first snapshot.
	stale bool
}

// newEventsTurn returns the turn that comes after prev (nil: the first);
// unseeded: the first snapshot of a replay that starts after the
// source's first (its state is only seeded).
func newEventsTurn(prev *eventsTurn, unseeded bool) *eventsTurn {
	t := &eventsTurn{done: make(chan struct{}), prev: prev, stale: unseeded}
	if prev != nil {
		t.after = prev.done
	}
	return t
}

// seedOnly reports, once wait has returned, that the state the previous
// snapshot left is stale: this one seeds the state and writes no events.
func (t *eventsTurn) seedOnly() bool {
	return t != nil && t.prev != nil && t.prev.stale && !t.prev.compared
}

// unreadable marks the snapshot's archived listing as one that cannot be
// read back (stale).
func (t *eventsTurn) unreadable() {
	if t != nil {
		t.stale = true
	}
}

// wait returns when the previous snapshot is done with the state.
func (t *eventsTurn) wait(ctx context.Context) error {
	if t == nil || t.after == nil {
		return nil
	}
	select {
	case <-t.after:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finish passes the turn on (once; later calls do nothing), but never
// before the previous snapshot has passed it on: a snapshot that never
// took its turn (no usable body, a failed comparison, a cancel) must not
// let the next one load a state the one before is still writing. It does
// not block: the hand-over waits in its own goroutine when it must.
func (t *eventsTurn) finish() {
	if t == nil {
		return
	}
	t.once.Do(func() {
		if t.after == nil {
			close(t.done)
			return
		}
		pass := func() {
			// A snapshot that did not compare after a stale state
			// leaves it stale.
			t.stale = t.stale || t.seedOnly()
			close(t.done)
		}
		select {
		case <-t.after:
			pass()
		default:
			go func() {
				<-t.after
				pass()
			}()
		}
	})
}

// beginAttempt starts (again) with a fresh comparison: a retried request
// must not count the rows of its failed attempt.
func (e *eventsRun) beginAttempt() {
	if e == nil || e.tainted || e.err != nil {
		return
	}
	if e.observed && e.d != nil {
		// Rows of a failed attempt of an earlier request are mixed in.
		e.tainted = true
		return
	}
	var d *events.Differ
	if e.turn != nil {
		d = events.NewDifferFor(e.meta, e.opt) // compared with the state when the turn comes
	} else {
		var err error
		if d, err = events.NewDiffer(e.prev, e.meta, e.opt); err != nil {
			e.err = err
			return
		}
	}
	if e.d != nil {
		e.d.Close()
	}
	e.d = d
}

func (e *eventsRun) observe(rec arrow.Record) {
	if e == nil || e.d == nil || e.tainted || e.err != nil {
		return
	}
	e.observed = true
	if err := e.d.Observe(rec); err != nil {
		e.err = err
	}
}

// restart forgets the rows the current attempt observed, for a listing of
// one request walked again from its first page: the next beginAttempt
// starts a fresh comparison instead of giving up.
func (e *eventsRun) restart() {
	if e != nil {
		e.observed = false
	}
}

// taint marks the comparison unusable after a failed request (err);
// a listing read back from the archive that cannot be read any more (not
// one that was never archived whole) leaves a stale state (eventsTurn).
func (e *eventsRun) taint(err error) {
	if e == nil {
		return
	}
	e.tainted = true
	if errors.Is(err, errArchive) && !errors.Is(err, errNeverLoaded) {
		e.turn.unreadable()
	}
}

// refused is why a comparison that never ran was refused ("" when it was
// not): a snapshot older than the state, a state that cannot be loaded, a
// listing the comparison could not take.
func (e *eventsRun) refused(log *slog.Logger) string {
	if e == nil || e.err == nil {
		return ""
	}
	log.Warn("instrument events skipped", "err", e.err)
	return oneLine(e.err)
}

func (e *eventsRun) usable() bool { return e != nil && !e.tainted && e.err == nil && e.d != nil }

// finishEvents writes the events to every sink and, when all of them took
// them, saves the new state: a sink that failed gets the same events again
// at the next snapshot's comparison window, never a gap.
func (r *Runner) finishEvents(ctx context.Context, log *slog.Logger, e *eventsRun, states stateStore, res *EndpointResult) {
	if e.turn != nil && e.err == nil {
		if err := e.turn.wait(ctx); err != nil {
			log.Warn("instrument events skipped", "err", err)
			return
		}
		prev, err := states.Load(ctx, e.meta.Source)
		if err != nil {
			log.Warn("instrument events skipped: cannot load the state", "err", err)
			res.EventsSkipped = "cannot load the state: " + oneLine(err)
			return
		}
		e.prev = prev
		e.err = e.d.Against(prev)
		if e.turn.seedOnly() && !e.stateOnly {
			log.Warn("instrument events not rewritten: the snapshot before this one could not be read; this one seeds the comparison")
			e.stateOnly = true
		}
	}
	if e.err != nil {
		if errors.Is(e.err, events.ErrOutOfOrder) {
			// Refused, never silent: the events state is past this
			// snapshot (a clock gone backwards, a late load into a past
			// day); comparing with it would report changes backwards.
			log.Warn("instrument events skipped", "err", e.err)
		} else {
			log.Error("instrument events failed", "err", e.err)
		}
		res.EventsSkipped = oneLine(e.err)
		return
	}
	snap := e.meta
	snap.Endpoint = "instrument_events"
	targets := r.cfg.Sinks
	if e.stateOnly {
		targets = nil
	}
	fan := NewFanout(ctx, targets, snap, schema.InstrumentEvents)
	stats, next, err := e.d.Finish(fan.Emit)
	if err != nil {
		fan.Abort()
		log.Error("instrument events failed", "err", err)
		res.EventsSkipped = oneLine(err)
		return
	}
	saved := false
	defer func() {
		if !saved {
			next.Close() // not saved: its temporary file goes
		}
	}()
	if r.ledger != nil {
		// The state first, then the events: a snapshot's events and the
		// state after them are one unit. A state that cannot be saved
		// leaves no events (the next snapshot, compared with the state
		// before, reports these changes once); a crash after the save
		// leaves the events' load pending in the ledger, and catch-up
		// writes exactly this snapshot's events from the archive.
		saved = true
		if err := states.Save(ctx, next); err != nil {
			fan.Abort()
			log.Error("instrument events: state not saved: the events are not written; the next snapshot reports these changes", "err", err)
			res.EventsSkipped = "state not saved (" + oneLine(err) + "); the next snapshot reports these changes"
			return
		}
	}
	outs := fan.Commit(ctx)
	if e.turn != nil {
		e.turn.compared = true
	}
	ok := true
	for name, o := range outs {
		acc := res.Sinks[name]
		acc.Files = append(acc.Files, o.Files...)
		if o.Error != "" {
			ok = false
			if acc.Error == "" {
				acc.Error = "instrument_events: " + o.Error
			}
			acc.rejected = acc.rejected || o.rejected
		}
		res.Sinks[name] = acc
	}
	if !e.stateOnly {
		res.Events = stats.Events
	}
	if r.ledger == nil {
		if !ok {
			// Without a ledger the failed sink gets these changes with
			// the next snapshot's events. With one, the state moved on:
			// the sink's pending load is caught up with exactly this
			// snapshot's events.
			return
		}
		saved = true
		if err := states.Save(ctx, next); err != nil {
			log.Error("instrument events: state not saved", "err", err)
			res.EventsSkipped = "state not saved (" + oneLine(err) + "); the next snapshot reports these changes again"
			return
		}
	}
	res.eventsWritten = true
	log.Info("instrument events", "events", stats.Events, "instruments", stats.Instruments)
}

// stateStore keeps the last known listing per source between snapshots.
type stateStore interface {
	// Load returns the state of source; hand it back with Release.
	Load(ctx context.Context, source string) (*events.State, error)
	// Save stores the next state of its source and takes it over (also on
	// error).
	Save(ctx context.Context, s *events.State) error
	// Release is done with a state returned by Load.
	Release(*events.State)
	// TempDir is where comparisons spill rows and write the next state.
	TempDir() string
	// Reuse is the memory the store's comparisons share (a replay's, one
	// after the other), nil for none.
	Reuse() *events.Reuse
}

// states keeps the events state in the data directory's store, under the
// name a local data directory has it (events.StatePath). The comparison
// reads the state at random and writes the next one beside it, so it works
// in a local folder: the data directory itself when the store is one
// (storage.LocalDir), else the scratch folder, which Load fills from the
// state object and Save uploads from as one object (visible whole or not
// at all), the moment a local run renames its file.
type states struct {
	st    storage.Store
	dir   string // the local folder the states are compared in
	local bool   // dir is the store's own folder: nothing to copy
}

func newStates(st storage.Store, scratch string) *states {
	if dir := storage.LocalDir(st); dir != "" {
		return &states{st: st, dir: dir, local: true}
	}
	return &states{st: st, dir: scratch}
}

// object is the state's name in the store.
func (s *states) object(source string) string {
	return filepath.ToSlash(events.StatePath("", source))
}

func (s *states) Load(ctx context.Context, source string) (*events.State, error) {
	if !s.local {
		if err := s.download(ctx, source); err != nil {
			if errors.Is(err, storage.ErrNotExist) {
				return events.NewState(source), nil
			}
			return nil, fmt.Errorf("instrument events: load state %s/%s: %w", s.st, s.object(source), err)
		}
	}
	return events.Load(s.dir, source)
}

// download copies the state object of source into the scratch folder.
func (s *states) download(ctx context.Context, source string) error {
	r, err := s.st.Open(ctx, s.object(source))
	if err != nil {
		return err
	}
	defer r.Close()
	local := events.StatePath(s.dir, source)
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		return err
	}
	f, err := os.Create(local)
	if err == nil {
		_, err = io.Copy(f, r)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		os.Remove(local)
	}
	return err
}

func (s *states) Save(ctx context.Context, st *events.State) error {
	err := st.Save(s.dir)
	st.Close()
	if err != nil || s.local {
		return err
	}
	name := s.object(st.Source())
	f, err := os.Open(events.StatePath(s.dir, st.Source()))
	if err != nil {
		return fmt.Errorf("instrument events: save state: %w", err)
	}
	defer f.Close()
	w, err := s.st.Create(ctx, name)
	if err != nil {
		return fmt.Errorf("instrument events: save state: %w", err)
	}
	if _, err := io.Copy(w, f); err != nil {
		w.Abort()
		return fmt.Errorf("instrument events: save state %s/%s: %w", s.st, name, err)
	}
	if err := w.Commit(); err != nil {
		return fmt.Errorf("instrument events: save state: %w", err)
	}
	return nil
}

func (s *states) Release(st *events.State) { st.Close() }

func (s *states) TempDir() string { return events.StateDir(s.dir) }

// Reuse is nil: a live run compares one snapshot of a source; kept
// memory would only add to its peak.
func (s *states) Reuse() *events.Reuse { return nil }

// memStates keeps states between the snapshots of a replay, starting from an
// empty state per source. A large state is a temporary file in dir (the
// events' state folder, in the data directory when it is local, where
// datadir.CleanTemp finds it after a crash); Close removes them.
type memStates struct {
	dir   string
	m     map[string]*events.State
	reuse *events.Reuse
}

// memStates returns the states of a replay or catch-up.
func (r *Runner) memStates() *memStates {
	return &memStates{dir: newStates(r.cfg.Store, r.cfg.Scratch).TempDir(), m: map[string]*events.State{}, reuse: events.NewReuse()}
}

func (m *memStates) Load(_ context.Context, source string) (*events.State, error) {
	if s, ok := m.m[source]; ok {
		return s, nil
	}
	return events.NewState(source), nil
}

func (m *memStates) Save(_ context.Context, s *events.State) error {
	if old, ok := m.m[s.Source()]; ok && old != s {
		old.Close()
	}
	m.m[s.Source()] = s
	return nil
}

// Release keeps the state: the store owns it.
func (m *memStates) Release(*events.State) {}

func (m *memStates) TempDir() string { return m.dir }

func (m *memStates) Reuse() *events.Reuse { return m.reuse }

// Close releases every state (removing their temporary files) and the
// records the comparisons' Reuse remembers.
func (m *memStates) Close() {
	for _, s := range m.m {
		s.Close()
	}
	clear(m.m)
	m.reuse.Close()
}
