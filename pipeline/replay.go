package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/url"
	"path"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/optlake/optlake/internal/arrowpool"
	"github.com/optlake/optlake/internal/jsontok"
	"github.com/optlake/optlake/pipeline/archive"
	"github.com/optlake/optlake/pipeline/extract"
	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/sinks"
)

// ReplayOptions select what to rebuild from the raw archive.
type ReplayOptions struct {
	From, To time.Time // [From, To); zero bounds are open
	// Progress is called after each snapshot (for a progress bar).
	Progress func(done, total int, s *Summary)
}

// ReplayResult reports a replay.
type ReplayResult struct {
	Snapshots []*Summary `json:"snapshots"`
	Rows      int64      `json:"rows"`
	Rejects   int64      `json:"rejects"`
	Events    int64      `json:"events"`
	Failed    int        `json:"failed"`   // snapshots that did not load
	Problems  []string   `json:"problems"` // archived files skipped, one line each
	// NeverLoaded are the requests that no sink loaded live, one line
	// each: their run stopped before their archive was whole (a body
	// without its metadata or cut off, a paginated request without its
	// last pages; the raw body is durable before any sink commits), or
	// they were incomplete (a listing that shifted, too many rejects) and
	// are again. The replay rebuilds the lake as the live runs left it:
	// not a problem, unless the load ledger says a sink committed them
	// (then they are Problems, or failed snapshots).
	NeverLoaded []string `json:"never_loaded,omitempty"`
}

// OK reports whether everything replayed.
func (r *ReplayResult) OK() bool { return r.Failed == 0 && len(r.Problems) == 0 }

// Replay rebuilds the configured endpoints' tables from the raw archive, in
// snapshot order, with each snapshot's original time and run id, into the
// configured sinks. The same archive always gives the same rows, and a
// replay replaces what an earlier load or replay of the same snapshot wrote
// (Parquet files by name, ClickHouse rows by key), so replaying twice never
// duplicates rows. A corrupt or cut-off raw file is reported and skipped.
//
// Instrument events are recomputed in snapshot order. When the replay
// starts at the first archived snapshot of the source they are exactly the
// live run's; otherwise the first replayed snapshot only seeds the
// comparison (it has no predecessor in the replay) and gets no events.
func (r *Runner) Replay(ctx context.Context, opt ReplayOptions) (*ReplayResult, error) {
	var names []string
	for _, ep := range r.cfg.Endpoints {
		names = append(names, ep.Name)
	}
	arc := r.archive
	snaps, err := arc.List(ctx, names, opt.From, opt.To)
	if err != nil {
		return nil, err
	}
	res := &ReplayResult{}
	states := r.memStates()
	defer states.Close()
	seeded := false
	if len(snaps) > 0 {
		all := snaps // the same listing: not read again
		if !opt.From.IsZero() || len(names) != 1 || names[0] != "instruments" {
			if all, err = arc.List(ctx, []string{"instruments"}, time.Time{}, opt.To); err != nil {
				return nil, err
			}
		}
		// Starting from the very first snapshot, the live run's initial
		// events are reproduced; later starts seed the state first.
		seeded = len(all) > 0 && all[0].Time.Equal(snaps[0].Time) && all[0].RunID == snaps[0].RunID
	}
	held := r.dayLoads()
	cols := r.cfg.ColumnMem
	if cols == nil {
		cols = arrowpool.New(replayPoolBytes)
	}
	dayStart := 0 // the first of res.Snapshots on the current day
	for i, out := range r.replaySnapshots(ctx, arc, snaps, snapshotRun{mode: modeReplay, states: states, held: held, cols: cols}, seeded) {
		if out == nil {
			return res, ctx.Err()
		}
		for _, p := range snaps[i].Problems {
			if r.neverLoaded(ctx, snaps[i], p) {
				res.NeverLoaded = append(res.NeverLoaded, p)
			} else {
				res.Problems = append(res.Problems, p)
			}
		}
		if out.sum != nil {
			r.sortNeverLoaded(ctx, out.sum, res)
			res.add(out, i, len(snaps), opt.Progress)
		}
		if day := snapDay(snaps[i]); i+1 == len(snaps) || snapDay(snaps[i+1]) != day {
			r.flushDay(ctx, res, day, dayStart, held)
			dayStart = len(res.Snapshots)
		}
	}
	r.logAbsent(res)
	// Carry the comparison on from where the replay ended when the live
	// state is older (or gone): the next run's events continue from there.
	if live := r.liveStates(); live != nil {
		for src, st := range states.m {
			last, ok := st.LastSnapshot()
			if !ok {
				continue
			}
			cur, err := live.Load(ctx, src)
			if err == nil {
				t, ok := cur.LastSnapshot()
				live.Release(cur)
				if ok && !t.Before(last) {
					continue
				}
			}
			if err := live.Save(ctx, st); err != nil {
				res.Problems = append(res.Problems, fmt.Sprintf("events state of %s not saved: %v", src, err))
			}
		}
	}
	return res, nil
}

// neverLoaded reports whether problem, an archived file of snapshot s that
// cannot be replayed, is what a run leaves that stopped while fetching
// (a body without its metadata, or cut off): no sink loaded it, unless the
// ledger says otherwise.
func (r *Runner) neverLoaded(ctx context.Context, s archive.Snapshot, problem string) bool {
	if !strings.Contains(problem, ": no metadata") && !strings.Contains(problem, ": body cut off") {
		return false
	}
	ep, _, _ := strings.Cut(strings.TrimPrefix(problem, "raw/"), "/")
	return !r.committed(ctx, ledger.Key{Time: s.Time, RunID: s.RunID}, ep)
}

// committed reports whether the ledger says a sink committed endpoint of
// snapshot k (false without a ledger; true when it cannot be read: never
// hide a loss).
func (r *Runner) committed(ctx context.Context, k ledger.Key, endpoint string) bool {
	if r.ledger == nil {
		return false
	}
	loaded, err := r.ledger.Committed(ctx, k, endpoint)
	return err != nil || loaded
}

// sortNeverLoaded makes a replayed snapshot whose only failures are
// requests its live run never loaded either (EndpointResult.neverLoaded) a
// snapshot listed in res.NeverLoaded instead of a failed one; the ledger
// may say otherwise.
func (r *Runner) sortNeverLoaded(ctx context.Context, sum *Summary, res *ReplayResult) {
	if sum.OK {
		return
	}
	var lines []string
	for _, e := range sum.Endpoints {
		if e.EventsSkipped != "" {
			return
		}
		if e.Status != "failed" {
			continue
		}
		if !e.neverLoaded || r.committed(ctx, ledger.Key{Time: sum.SnapshotTime, RunID: sum.RunID}, e.Endpoint) {
			return
		}
		lines = append(lines, fmt.Sprintf("%s %s: %s", sum.SnapshotTime.Format(time.RFC3339Nano), e.Endpoint, e.Error))
	}
	sum.OK, sum.Error = true, ""
	res.NeverLoaded = append(res.NeverLoaded, lines...)
}

// logAbsent says once which endpoints the replayed archive held nothing
// of (an instruments-only archive: the account endpoints), not once per
// snapshot.
func (r *Runner) logAbsent(res *ReplayResult) {
	absent := map[string]int{}
	for _, s := range res.Snapshots {
		for _, e := range s.Endpoints {
			if e.Requests == 0 {
				absent[e.Endpoint]++
			}
		}
	}
	for _, ep := range r.cfg.Endpoints {
		if n := absent[ep.Name]; n > 0 {
			r.log.Info("endpoint not in the archive: nothing replayed", "endpoint", ep.Name, "snapshots", n, "of", len(res.Snapshots))
		}
	}
}

// add counts one snapshot's replay (i of total).
func (res *ReplayResult) add(out *replayed, i, total int, progress func(int, int, *Summary)) {
	res.Problems = append(res.Problems, out.problems...)
	res.Snapshots = append(res.Snapshots, out.sum)
	if !out.sum.OK {
		res.Failed++
	}
	for _, e := range out.sum.Endpoints {
		res.Rows += e.Rows
		res.Rejects += e.Rejects
		res.Events += e.Events
	}
	if progress != nil {
		progress(i+1, total, out.sum)
	}
}

// snapDay is the day (UTC) of a snapshot: its tables' partition.
func snapDay(s archive.Snapshot) string { return s.Time.UTC().Format(time.DateOnly) }

// flushDay has each sinks.DaySink write the day just replayed, then
// settles in the ledger the loads it held of the day: committed once
// written. When
// one fails, the day's snapshots (res.Snapshots[from:]) did not reach it:
// they are marked failed, their loads stay pending in the ledger (catch-up
// or the next replay loads them), and the lake keeps the day as it was.
func (r *Runner) flushDay(ctx context.Context, res *ReplayResult, day string, from int, held *dayLoads) {
	loads := held.take(day)
	for _, s := range r.cfg.Sinks {
		ds, ok := sinks.HoldsDays(s)
		if !ok {
			continue
		}
		err := ds.FlushDay(ctx, day)
		r.settleDay(ctx, s.Name(), day, loads, err)
		if err == nil {
			continue
		}
		msg := r.cfg.Redactor.String(fmt.Sprintf("%s: day %s not written: %s", s.Name(), day, oneLine(err)))
		r.log.Error("replayed day not written", "sink", s.Name(), "day", day, "err", r.cfg.Redactor.String(oneLine(err)))
		res.Problems = append(res.Problems, msg)
		for _, sum := range res.Snapshots[from:] {
			if sum.OK {
				sum.OK = false
				sum.Error = msg
				res.Failed++
			}
		}
	}
}

// settleDay records in the ledger what became of the loads of sink held
// for a day: committed when its FlushDay did (err nil), else pending with
// the error.
func (r *Runner) settleDay(ctx context.Context, sink, day string, loads []heldLoad, err error) {
	for _, l := range loads {
		if l.sink != sink {
			continue
		}
		o := l.outcome
		if err != nil {
			o = ledger.Outcome{State: ledger.Pending, Error: r.cfg.Redactor.String(fmt.Sprintf("day %s not written: %s", day, oneLine(err)))}
		}
		if err := r.ledger.Settle(ctx, l.key, l.endpoint, map[string]ledger.Outcome{sink: o}); err != nil {
			r.log.Error("load ledger not updated", "run_id", l.key.RunID, "endpoint", l.endpoint, "err", err)
		}
	}
}

// dayLoads holds, during a replay, the loads that DaySinks took but have
// not written yet: the ledger records them committed only once their day
// is (flushDay), so that a day that fails, or a replay that stops before
// its day's end, leaves them pending. Safe for concurrent use.
type dayLoads struct {
	sinks map[string]bool // the DaySinks, by name
	mu    sync.Mutex
	held  map[string][]heldLoad // by day
}

// heldLoad is one load a DaySink took (outcome: committed).
type heldLoad struct {
	key            ledger.Key
	endpoint, sink string
	outcome        ledger.Outcome
}

// dayLoads returns the replay's holder of DaySink loads (nil without a
// ledger or a DaySink: loads settle at once).
func (r *Runner) dayLoads() *dayLoads {
	if r.ledger == nil {
		return nil
	}
	d := &dayLoads{sinks: map[string]bool{}, held: map[string][]heldLoad{}}
	for _, s := range r.cfg.Sinks {
		if _, ok := sinks.HoldsDays(s); ok {
			d.sinks[s.Name()] = true
		}
	}
	if len(d.sinks) == 0 {
		return nil
	}
	return d
}

// hold takes out of outs (endpoint of snapshot k) the committed loads of
// DaySinks, to be settled once their day is written.
func (d *dayLoads) hold(k ledger.Key, endpoint string, outs map[string]ledger.Outcome) {
	if d == nil {
		return
	}
	day := snapDay(archive.Snapshot{Time: k.Time})
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, o := range outs {
		if d.sinks[name] && o.State == ledger.Committed {
			delete(outs, name)
			d.held[day] = append(d.held[day], heldLoad{key: k, endpoint: endpoint, sink: name, outcome: o})
		}
	}
}

// take returns and forgets the loads held for day.
func (d *dayLoads) take(day string) []heldLoad {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.held[day]
	delete(d.held, day)
	return out
}

// replayed is one snapshot's replay: nil sum when it had no usable body.
type replayed struct {
	sum      *Summary
	problems []string
}

// Snapshots replayed at once: up to replayParallel, holding at most
// replayBodyBudget of archived body bytes together (a larger snapshot is
// replayed alone). Replay's snapshots are small and each is processed on
// one core (decode, then Parquet); two at a time use both of a 2-core
// machine. The instrument events stay in snapshot order (eventsTurn).
const (
	replayParallel   = 4
	replayBodyBudget = 64 << 20
)

// replayPoolBytes bounds the freed column buffers a replay keeps for its
// next snapshots' (arrowpool): a day's writer holds half of its chunk
// (16 MiB of records) before it packs them and they come back at once.
const replayPoolBytes = 32 << 20

// replayWeight is a snapshot's share of the replay's budget of
// replayBodyBudget: its bodies' bytes, at least 1/workers of the budget
// (so that at most workers run at once) and at most all of it.
func replayWeight(bodies int64, workers int) int64 {
	return min(max(bodies, replayBodyBudget/int64(workers)), replayBodyBudget)
}

// replaySnapshots loads snaps into the sinks, several at once, and yields
// each one's outcome in snapshot order; a nil outcome means the context was
// cancelled before that snapshot started (nothing after it is yielded).
// Each snapshot is taken as base says (its events state, held loads and
// column buffers); seeded: the first one has the state of the snapshot
// before it.
func (r *Runner) replaySnapshots(ctx context.Context, arc *archive.Archive, snaps []archive.Snapshot, base snapshotRun, seeded bool) iter.Seq2[int, *replayed] {
	return func(yield func(int, *replayed) bool) {
		outs := make([]chan *replayed, len(snaps))
		for i := range outs {
			outs[i] = make(chan *replayed, 1)
		}
		// dispatch ends when ctx does or the caller stops reading;
		// snapshots already started finish under ctx.
		dispatch, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer stop()
		wg.Add(1)
		go func() {
			defer wg.Done()
			workers := max(1, min(runtime.GOMAXPROCS(0), replayParallel))
			sem := semaphore.NewWeighted(replayBodyBudget)
			var prev *eventsTurn
			for i, s := range snaps {
				var bodies int64
				for _, b := range s.Bodies {
					bodies += b.Bytes
				}
				weight := replayWeight(bodies, workers)
				acquired := sem.Acquire(dispatch, weight) == nil
				if acquired && ctx.Err() != nil { // room came, but so did the cancel
					sem.Release(weight)
					acquired = false
				}
				if !acquired {
					for ; i < len(snaps); i++ {
						outs[i] <- nil
					}
					return
				}
				sr := base
				sr.eventsOnlyState = i == 0 && !seeded
				sr.turn = newEventsTurn(prev, sr.eventsOnlyState)
				prev = sr.turn
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer sem.Release(weight)
					defer sr.turn.finish()
					outs[i] <- r.replayOne(ctx, arc, s, sr)
				}()
			}
		}()
		for i := range snaps {
			if !yield(i, <-outs[i]) {
				return
			}
		}
	}
}

// replayOne loads one archived snapshot into the sinks, taken as sr says
// (replaySnapshots); its identity and bodies come from s.
func (r *Runner) replayOne(ctx context.Context, arc *archive.Archive, s archive.Snapshot, sr snapshotRun) *replayed {
	if r.listingLost(ctx, s) {
		sr.turn.unreadable()
	}
	if len(s.Bodies) == 0 {
		return &replayed{}
	}
	fetch := &archiveFetcher{arc: arc, bodies: s.Bodies}
	sr.time, sr.runID, sr.source = s.Time, s.RunID, s.Bodies[0].Source
	sr.fetch, sr.requests = fetch, fetch.requests
	sum := r.snapshot(ctx, sr)
	r.replayRuns(ctx, ledger.Key{Time: s.Time, RunID: s.RunID}, sr.held)
	return &replayed{sum: sum, problems: fetch.problems}
}

// listingLost reports whether snapshot s's instrument listing may have
// loaded live but can no longer be read back from the archive, so that the
// next snapshot only seeds the events state (eventsTurn). A body whose
// metadata is there lost it afterwards (the metadata is written after the
// body); a body without metadata is what a run killed between the two
// leaves, which never loaded (the body is durable before any sink
// commits), unless the ledger says a sink committed it (its metadata was
// lost later); a body cut off never loaded.
func (r *Runner) listingLost(ctx context.Context, s archive.Snapshot) bool {
	prefix := path.Join("raw", "instruments") + "/"
	for _, p := range s.Problems {
		if !strings.HasPrefix(p, prefix) {
			continue
		}
		switch {
		case strings.Contains(p, ": body cut off"):
		case strings.Contains(p, ": no metadata"):
			if r.ledger == nil {
				continue
			}
			loaded, err := r.ledger.Committed(ctx, ledger.Key{Time: s.Time, RunID: s.RunID}, "instruments")
			if err != nil || loaded {
				return true // unknown counts as lost: never an event twice
			}
		default: // body missing, metadata unreadable
			return true
		}
	}
	return false
}

// archiveFetcher serves archived bodies as responses.
type archiveFetcher struct {
	arc      *archive.Archive
	bodies   []archive.Meta
	problems []string
}

// requests lists the archived requests of an endpoint, as they were made;
// a paginated request's pages are its archived bodies, in order.
func (f *archiveFetcher) requests(ep Endpoint) []requestSpec {
	var out []requestSpec
	at := map[string]int{} // account|request -> index in out
	for _, m := range f.bodies {
		if m.Endpoint != ep.Name {
			continue
		}
		key := fmt.Sprintf("%s|%d", m.Account, m.Request)
		if i, ok := at[key]; ok && m.Page > 0 {
			out[i].archived = append(out[i].archived, m)
			continue
		}
		p := url.Values{}
		for k, v := range m.Params {
			p.Set(k, v)
		}
		of := m.Requests
		if of == 0 {
			of = 1
		}
		at[key] = len(out)
		out = append(out, requestSpec{index: m.Request, of: of, params: p, account: m.Account, archived: []archive.Meta{m}})
	}
	return out
}

// Do serves the archived body of r (its page, for a paginated request).
func (f *archiveFetcher) Do(ctx context.Context, r extract.Request, _ extract.Hooks, handle func(context.Context, *extract.Response) error) error {
	for _, m := range f.bodies {
		if m.Endpoint != r.Endpoint || m.Account != r.Account || m.Page != r.Page {
			continue
		}
		if m.Page > 0 && m.Request != r.Index || m.Page == 0 && !sameParams(m.Params, r.Params) {
			continue
		}
		rc, err := f.arc.OpenVerified(ctx, m) // the object checked before anything of it is decoded
		if err != nil {
			f.problems = append(f.problems, m.File+": "+err.Error())
			return fmt.Errorf("%w: open %s: %v", errArchive, m.File, err)
		}
		defer rc.Close()
		err = handle(ctx, &extract.Response{Attempt: m.Attempt, Status: m.Status, ContentType: m.ContentType, URL: m.URL, Body: archivedBody{rc}})
		if err != nil && !incomplete(err) {
			// (An incomplete body, too many rejects, is read whole and
			// never loaded live either: not a problem of the file.)
			f.problems = append(f.problems, m.File+": "+oneLine(err))
		}
		return err
	}
	return fmt.Errorf("%w: no archived body for %s %v page %d", errArchive, r.Endpoint, r.Params, r.Page)
}

// errArchive marks a body that cannot be read back from the raw archive
// (missing, or its compressed file is corrupt or cut off): loading it again
// cannot help.
var errArchive = errors.New("raw archive")

// errNeverLoaded marks, beside errArchive, a request the archive holds
// only part of because its run failed or was killed before the whole
// answer arrived: no sink ever loaded it.
var errNeverLoaded = errors.New("never loaded")

// archivedBody marks its read errors (other than the end) as errArchive.
type archivedBody struct{ io.ReadCloser }

func (b archivedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %w", errArchive, err)
	}
	return n, err
}

// InMemory passes on a body the archive holds whole (jsontok.InMemory).
func (b archivedBody) InMemory() ([]byte, bool) {
	if m, ok := b.ReadCloser.(jsontok.InMemory); ok {
		return m.InMemory()
	}
	return nil, false
}

func sameParams(m map[string]string, p url.Values) bool {
	if len(m) != len(p) {
		return false
	}
	for k, v := range m {
		if p.Get(k) != v {
			return false
		}
	}
	return true
}
