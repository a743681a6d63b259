package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/optlake/optlake/pipeline/archive"
	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// CatchUpOptions bound a catch-up.
type CatchUpOptions struct {
	// Budget bounds the time a catch-up takes (0: no bound). No snapshot
	// starts after it ran out, and one in flight is abandoned (its loads
	// stay pending), so the run's own snapshot is never later than that.
	Budget time.Duration
	// Max bounds the snapshots loaded by one catch-up (0: no bound).
	Max int
	// Now is the clock the budget is measured with (default time.Now);
	// tests pin it.
	Now func() time.Time
}

// CatchUpResult reports a catch-up.
type CatchUpResult struct {
	// Snapshots are the snapshots loaded (or tried), oldest first.
	Snapshots []CaughtUp `json:"snapshots,omitempty"`
	Loaded    int        `json:"loaded"` // snapshot × sink loads committed
	Failed    int        `json:"failed"` // loads marked failed (cannot be loaded)
	// Down names the sinks that failed and were not tried again in this
	// catch-up, with their error.
	Down map[string]string `json:"down,omitempty"`
	// Stopped says why loads were left for the next run: "budget" or
	// "max" ("" when nothing was left but what a down sink holds).
	Stopped    string `json:"stopped,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// CaughtUp is one snapshot loaded from the raw archive by a catch-up.
type CaughtUp struct {
	SnapshotTime time.Time `json:"snapshot_time"`
	RunID        string    `json:"run_id"`
	Sinks        []string  `json:"sinks"`
	Rows         int64     `json:"rows"`
	Events       int64     `json:"events"`
	OK           bool      `json:"ok"`
	Error        string    `json:"error,omitempty"`
}

// Line renders the catch-up as one human line ("" when there was nothing
// to do).
func (c *CatchUpResult) Line() string {
	if c == nil || len(c.Snapshots) == 0 && c.Stopped == "" {
		return ""
	}
	ok := 0
	var rows int64
	for _, s := range c.Snapshots {
		if s.OK {
			ok++
		}
		rows += s.Rows
	}
	line := fmt.Sprintf("caught up %d of %d snapshots (%d loads, %d rows, %d failed) in %s", ok, len(c.Snapshots), c.Loaded, rows, c.Failed,
		(time.Duration(c.DurationMS) * time.Millisecond).String())
	var down []string
	for s := range c.Down {
		down = append(down, s)
	}
	sort.Strings(down)
	for _, s := range down {
		line += fmt.Sprintf("; %s still down", s)
	}
	if c.Stopped != "" {
		line += "; stopped by --catch-up-" + c.Stopped + ", the rest next run"
	}
	return line
}

// CatchUp loads from the raw archive, oldest first, the snapshots that the
// ledger says a configured sink is missing, with the rows, run id, snapshot
// time and instrument events a live load would have given. Loads of sinks
// that are not configured are left alone. A sink that fails is not tried
// again in this catch-up (a server that is down costs one attempt); a
// snapshot that cannot be loaded (its raw body is missing, corrupt or cut
// off) is marked failed with the reason and skipped from then on.
func (r *Runner) CatchUp(ctx context.Context, opt CatchUpOptions) (*CatchUpResult, error) {
	res := &CatchUpResult{}
	if r.ledger == nil || len(r.cfg.Sinks) == 0 {
		return res, nil
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	start := opt.Now()
	wall := time.Now()
	defer func() { res.DurationMS = time.Since(wall).Milliseconds() }()
	recs, err := r.ledger.Open(ctx)
	if err != nil {
		return res, err
	}
	bctx := ctx
	if opt.Budget > 0 {
		var cancel context.CancelFunc
		bctx, cancel = context.WithTimeout(ctx, opt.Budget)
		defer cancel()
	}
	byName := map[string]sinks.Sink{}
	for _, s := range r.cfg.Sinks {
		byName[s.Name()] = s
	}
	res.Down = map[string]string{}
	states := r.memStates()
	arc := r.archive // one for every snapshot: its zstd decoders are reused
	defer states.Close()
	n := 0
	live := map[string]time.Time{} // the live events states' last snapshots
	for _, rec := range recs {
		// endpoint -> the sinks still to load it into; the runs rows apart
		// (from the record, after the endpoints)
		todo := map[string][]string{}
		var runs []string
		for _, ld := range rec.Pending("") {
			if _, ok := byName[ld.Sink]; !ok || res.Down[ld.Sink] != "" {
				continue
			}
			if ld.Endpoint == ledger.Runs {
				runs = append(runs, ld.Sink)
			} else {
				todo[ld.Endpoint] = append(todo[ld.Endpoint], ld.Sink)
			}
		}
		if len(todo) == 0 && len(runs) == 0 {
			continue
		}
		stop := ""
		switch {
		case opt.Max > 0 && n >= opt.Max:
			stop = "max"
		case opt.Budget > 0 && (opt.Now().Sub(start) >= opt.Budget || bctx.Err() != nil):
			stop = "budget"
		}
		if ctx.Err() != nil {
			break
		}
		lctx := bctx
		if stop != "" {
			// Past the bounds, only a listing whose live run was killed
			// before its events state was saved is still loaded: the run
			// that follows compares its listing with that state, which
			// must be the killed snapshot's, as in an uninterrupted run.
			if !r.killedListing(ctx, rec, todo, live) {
				if res.Stopped == "" {
					res.Stopped = stop
				}
				continue
			}
			lctx = ctx
		}
		delete(live, rec.Source) // its catch-up may move the live state on
		n++
		cu := CaughtUp{SnapshotTime: rec.SnapshotTime, RunID: rec.RunID, OK: true}
		if len(todo) > 0 {
			cu = r.catchUpSnapshot(lctx, arc, rec, todo, byName, states, res)
		}
		r.catchUpRunsOf(lctx, rec, runs, byName, res, &cu)
		res.Snapshots = append(res.Snapshots, cu)
		if lctx == bctx && bctx.Err() != nil && ctx.Err() == nil && res.Stopped == "" {
			res.Stopped = "budget" // abandoned in flight: its loads stay pending
		}
	}
	if len(res.Down) == 0 {
		res.Down = nil
	}
	return res, ctx.Err()
}

// catchUpSnapshot loads one snapshot's pending endpoints into their sinks.
func (r *Runner) catchUpSnapshot(ctx context.Context, arc *archive.Archive, rec ledger.Record, todo map[string][]string, byName map[string]sinks.Sink, states *memStates, res *CatchUpResult) CaughtUp {
	cu := CaughtUp{SnapshotTime: rec.SnapshotTime, RunID: rec.RunID, OK: true}
	log := r.log.With("run_id", rec.RunID, "catch_up", true)
	k := rec.Key()
	fail := func(msg string) {
		if cu.OK {
			cu.OK, cu.Error = false, r.cfg.Redactor.String(msg)
		}
	}
	var names []string
	for ep := range todo {
		names = append(names, ep)
	}
	sort.Strings(names)
	snaps, err := arc.List(ctx, names, rec.SnapshotTime, rec.SnapshotTime.Add(time.Millisecond))
	if err != nil {
		fail(err.Error())
		return cu
	}
	var snap archive.Snapshot
	for _, s := range snaps {
		if s.RunID == rec.RunID {
			snap = s
		}
	}
	// Endpoints with nothing to read back: failed when a body was cut off,
	// dropped when nothing was archived (the venue was not reached).
	groups := map[string][]Endpoint{} // sink set -> endpoints
	for _, name := range names {
		has := false
		for _, b := range snap.Bodies {
			has = has || b.Endpoint == name
		}
		if !has {
			var problems []string
			for _, p := range snap.Problems {
				if strings.HasPrefix(p, "raw/"+name+"/") {
					problems = append(problems, p)
				}
			}
			if len(problems) == 0 {
				err = r.ledger.Drop(ctx, k, name)
			} else {
				outs := map[string]ledger.Outcome{}
				for _, s := range todo[name] {
					outs[s] = ledger.Outcome{State: ledger.Failed, Error: r.cfg.Redactor.String(strings.Join(problems, "; "))}
					res.Failed++
				}
				err = r.ledger.Settle(ctx, k, name, outs)
				fail(name + ": " + strings.Join(problems, "; "))
			}
			if err != nil {
				log.Error("load ledger not updated", "endpoint", name, "err", err)
			}
			continue
		}
		eps, err := SelectEndpoints([]string{name}, nil)
		if err != nil {
			fail(err.Error())
			continue
		}
		ss := append([]string(nil), todo[name]...)
		sort.Strings(ss)
		key := strings.Join(ss, ",")
		groups[key] = append(groups[key], eps[0])
	}
	keys := make([]string, 0, len(groups))
	for key := range groups {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		sub := *r
		sub.cfg.Endpoints = groups[key]
		sub.cfg.Sinks = nil
		for _, s := range strings.Split(key, ",") {
			sub.cfg.Sinks = append(sub.cfg.Sinks, byName[s])
			cu.Sinks = append(cu.Sinks, s)
		}
		var st stateStore
		for _, ep := range groups[key] {
			switch {
			case ep.Kind != KindInstruments || !r.cfg.Events:
			case r.liveBehind(ctx, rec, snap, untouched(rec, ep.Name)):
				st = r.states
			case r.prepareEvents(ctx, arc, states, rec, snap):
				st = states
			}
		}
		log.Info("catching up", "snapshot_time", rec.SnapshotTime.Format(time.RFC3339Nano), "sinks", key, "endpoints", len(groups[key]))
		fetch := &archiveFetcher{arc: arc, bodies: snap.Bodies}
		sum := sub.snapshot(ctx, snapshotRun{mode: modeCatchUp, time: rec.SnapshotTime, runID: rec.RunID, source: rec.Source, fetch: fetch, states: st, requests: fetch.requests})
		for _, e := range sum.Endpoints {
			cu.Rows += e.Rows
			cu.Events += e.Events
			for _, s := range sub.cfg.Sinks {
				o, tried := e.Sinks[s.Name()]
				switch {
				case e.unloadable || o.rejected:
					res.Failed++
				case tried && o.Error != "":
					if ctx.Err() == nil {
						res.Down[s.Name()] = r.cfg.Redactor.String(o.Error)
					}
				case e.Status != "failed":
					res.Loaded++
				}
			}
		}
		if !sum.OK {
			fail(sum.Error)
		}
	}
	sort.Strings(cu.Sinks)
	return cu
}

// killedListing reports whether rec's instrument listing is still to be
// loaded into every sink while the live events state is older than rec: its
// live run was killed before it saved the state (liveBehind), and the next
// snapshot's events depend on catching it up first. live caches the live
// states' last snapshots by source (zero: no state yet).
func (r *Runner) killedListing(ctx context.Context, rec ledger.Record, todo map[string][]string, live map[string]time.Time) bool {
	if r.states == nil || len(todo["instruments"]) == 0 || !untouched(rec, "instruments") {
		return false
	}
	last, ok := live[rec.Source]
	if !ok {
		cur, err := r.states.Load(ctx, rec.Source)
		if err != nil {
			return true // unknown: loaded, and liveBehind decides on its events
		}
		last, _ = cur.LastSnapshot()
		r.states.Release(cur)
		live[rec.Source] = last
	}
	return last.Before(rec.SnapshotTime)
}

// untouched reports whether every load of rec's endpoint is still pending
// (none committed or failed): its live run never settled it. The sinks
// that are not configured now, or down since an earlier snapshot of this
// catch-up, count too: which sinks load it now does not change what the
// live run did.
func untouched(rec ledger.Record, endpoint string) bool {
	for _, l := range rec.Loads {
		if l.Endpoint == endpoint && l.State != ledger.Pending {
			return false
		}
	}
	return true
}

// liveBehind reports whether the live events state is older than rec's
// snapshot while every sink still has rec's listing to load (all: the live
// run of rec died before its state was saved, a kill -9). The catch-up of
// rec then compares with the live state and saves the next one, as the
// live run would have: the run that follows compares with rec, and
// reports none of rec's changes again.
func (r *Runner) liveBehind(ctx context.Context, rec ledger.Record, snap archive.Snapshot, all bool) bool {
	if r.states == nil || !all {
		return false
	}
	for _, b := range snap.Bodies {
		if b.Endpoint == "instruments" && len(b.Params) > 0 {
			return false // a filtered listing has no events (as live)
		}
	}
	cur, err := r.states.Load(ctx, rec.Source)
	if err != nil {
		return false
	}
	defer r.states.Release(cur)
	t, ok := cur.LastSnapshot()
	return !ok || t.Before(rec.SnapshotTime)
}

// prepareEvents puts into states the state that the live run of rec's
// snapshot compared its listing with: that of the last archived snapshot
// before it whose listing was read whole (rebuilt from the archive unless
// states holds it already; none before: the empty state, as live). It
// returns false when that state cannot be rebuilt: the snapshot is then
// loaded without events rather than with wrong ones.
func (r *Runner) prepareEvents(ctx context.Context, arc *archive.Archive, states *memStates, rec ledger.Record, snap archive.Snapshot) bool {
	for _, b := range snap.Bodies {
		if b.Endpoint == "instruments" && len(b.Params) > 0 {
			return false // a filtered listing has no events (as live)
		}
	}
	const tries = 5
	n := 0
	found := false
	err := r.predecessors(ctx, arc, rec.Source, rec.SnapshotTime, func(p archive.Snapshot) bool {
		found = true
		if cur, ok := states.m[rec.Source]; ok {
			if t, ok := cur.LastSnapshot(); ok && t.Equal(p.Time) {
				return false
			}
		}
		if s, ok := states.m[rec.Source]; ok {
			s.Close()
			delete(states.m, rec.Source)
		}
		sub := *r
		sub.cfg.Sinks = nil
		sub.ledger = nil
		sub.cfg.Endpoints, _ = SelectEndpoints([]string{"instruments"}, nil)
		fetch := &archiveFetcher{arc: arc, bodies: p.Bodies}
		sub.snapshot(ctx, snapshotRun{mode: modeCatchUp, time: p.Time, runID: p.RunID, source: rec.Source, fetch: fetch, states: states, requests: fetch.requests, eventsOnlyState: true})
		if cur, ok := states.m[rec.Source]; ok {
			if t, ok := cur.LastSnapshot(); ok && t.Equal(p.Time) {
				return false
			}
		}
		n++
		return n < tries && ctx.Err() == nil
	})
	if err != nil {
		r.log.Warn("catch-up: instrument events skipped", "snapshot_time", rec.SnapshotTime, "err", err)
		return false
	}
	if !found {
		// The first snapshot of the source: compared with nothing, as live.
		if s, ok := states.m[rec.Source]; ok {
			s.Close()
			delete(states.m, rec.Source)
		}
		return true
	}
	cur, ok := states.m[rec.Source]
	if !ok {
		r.log.Warn("catch-up: instrument events skipped: the previous listing cannot be read back", "snapshot_time", rec.SnapshotTime)
		return false
	}
	t, _ := cur.LastSnapshot()
	return t.Before(rec.SnapshotTime)
}

// predecessors calls yield with the archived snapshots of source's whole
// listing (no parameters) before t, newest first, until yield returns
// false. It reads one day folder of the archive at a time.
func (r *Runner) predecessors(ctx context.Context, arc *archive.Archive, source string, t time.Time, yield func(archive.Snapshot) bool) error {
	days, err := arc.Days(ctx, "instruments")
	if err != nil {
		return err
	}
	for i := len(days) - 1; i >= 0; i-- {
		day := days[i]
		if !day.Before(t) {
			continue
		}
		to := day.Add(24 * time.Hour)
		if to.After(t) {
			to = t
		}
		snaps, err := arc.List(ctx, []string{"instruments"}, day, to)
		if err != nil {
			return err
		}
		for j := len(snaps) - 1; j >= 0; j-- {
			s := snaps[j]
			if len(s.Bodies) == 0 || s.Bodies[0].Source != source || len(s.Bodies[0].Params) > 0 {
				continue
			}
			if !yield(s) {
				return nil
			}
		}
	}
	return nil
}

// Pending sums up the ledger's open loads per configured sink (nil without
// a ledger).
func (r *Runner) Pending(ctx context.Context) ([]ledger.SinkStatus, error) {
	if r.ledger == nil || len(r.cfg.Sinks) == 0 {
		return nil, nil
	}
	recs, err := r.ledger.Open(ctx)
	if err != nil {
		return nil, err
	}
	names := r.sinkNames()
	var out []ledger.SinkStatus
	for _, st := range ledger.Summarize(recs, names...) {
		for _, n := range names {
			if st.Sink == n {
				out = append(out, st)
			}
		}
	}
	return out, nil
}

// runRows are the runs table's rows of a snapshot: one per endpoint.
func runRows(sum *Summary) []ledger.RunRow {
	rows := make([]ledger.RunRow, 0, len(sum.Endpoints))
	for _, e := range sum.Endpoints {
		rows = append(rows, ledger.RunRow{Endpoint: e.Endpoint, Status: e.Status, Rows: e.Rows, Rejects: e.Rejects,
			Bytes: e.Bytes, DurationMS: e.DurationMS, Error: e.Error})
	}
	return rows
}

// writeRunRows writes rows as the runs table of the snapshot (time, run id,
// source) into each of ss, and returns the sinks that failed. The live run
// and the catch-up of its rows write them through here: the same rows.
func (r *Runner) writeRunRows(ctx context.Context, ss []sinks.Sink, at time.Time, runID, source string, rows []ledger.RunRow) map[string]error {
	t := schema.Runs
	b := array.NewRecordBuilder(r.cfg.Mem, t.ArrowSchema())
	defer b.Release()
	for _, e := range rows {
		b.Field(t.MustIndex("snapshot_time")).(*array.TimestampBuilder).Append(arrow.Timestamp(at.UnixMilli()))
		b.Field(t.MustIndex("run_id")).(*array.StringBuilder).Append(runID)
		b.Field(t.MustIndex("source")).(*array.StringBuilder).Append(source)
		b.Field(t.MustIndex("endpoint")).(*array.StringBuilder).Append(e.Endpoint)
		b.Field(t.MustIndex("status")).(*array.StringBuilder).Append(e.Status)
		b.Field(t.MustIndex("rows")).(*array.Int64Builder).Append(e.Rows)
		b.Field(t.MustIndex("rejects")).(*array.Int64Builder).Append(e.Rejects)
		b.Field(t.MustIndex("bytes")).(*array.Int64Builder).Append(e.Bytes)
		b.Field(t.MustIndex("duration_ms")).(*array.Int64Builder).Append(e.DurationMS)
		eb := b.Field(t.MustIndex("error")).(*array.StringBuilder)
		if e.Error == "" {
			eb.AppendNull()
		} else {
			eb.Append(e.Error)
		}
	}
	rec := b.NewRecord()
	defer rec.Release()
	snap := sinks.Snapshot{Time: at, RunID: runID, Source: source, Endpoint: ledger.Runs}
	return writeAll(ctx, ss, t, snap, rec)
}

// runsOutcome is the ledger outcome of writing the runs rows into a sink.
func (r *Runner) runsOutcome(err error) ledger.Outcome {
	var rej *sinks.RejectedError
	switch {
	case err == nil:
		return ledger.Outcome{State: ledger.Committed}
	case errors.As(err, &rej):
		return ledger.Outcome{State: ledger.Failed, Error: r.cfg.Redactor.String(oneLine(err))}
	default:
		return ledger.Outcome{State: ledger.Pending, Error: r.cfg.Redactor.String(oneLine(err))}
	}
}

// settleRuns records in the ledger which sinks got the live run's runs
// rows; the ledger keeps the rows for those that did not.
func (r *Runner) settleRuns(ctx context.Context, log *slog.Logger, sum *Summary, rows []ledger.RunRow, failed map[string]error) {
	if r.ledger == nil {
		return
	}
	outs := map[string]ledger.Outcome{}
	for _, s := range r.cfg.Sinks {
		outs[s.Name()] = r.runsOutcome(failed[s.Name()])
	}
	if err := r.ledger.SettleRuns(ctx, ledger.Key{Time: sum.SnapshotTime, RunID: sum.RunID}, rows, outs); err != nil {
		log.Error("load ledger not updated", "endpoint", ledger.Runs, "err", err)
	}
}

// catchUpRuns writes the runs rows the ledger kept for rec into the sinks
// named (those that missed them), and settles their loads. A record with
// no rows kept is a live run that died before writing its runs rows
// anywhere: there is nothing to load, and the loads leave the ledger. It
// returns the sinks that failed.
func (r *Runner) catchUpRuns(ctx context.Context, log *slog.Logger, rec ledger.Record, names []string, byName map[string]sinks.Sink, held *dayLoads) (committed int, failed map[string]error) {
	k := rec.Key()
	if len(rec.Runs) == 0 {
		if err := r.ledger.Drop(ctx, k, ledger.Runs); err != nil {
			log.Error("load ledger not updated", "endpoint", ledger.Runs, "err", err)
		}
		return 0, nil
	}
	var ss []sinks.Sink
	for _, n := range names {
		ss = append(ss, byName[n])
	}
	failed = r.writeRunRows(ctx, ss, rec.SnapshotTime, rec.RunID, rec.Source, rec.Runs)
	outs := map[string]ledger.Outcome{}
	for _, s := range ss {
		outs[s.Name()] = r.runsOutcome(failed[s.Name()])
		if failed[s.Name()] == nil {
			committed++
		}
	}
	held.hold(k, ledger.Runs, outs)
	if err := r.ledger.Settle(ctx, k, ledger.Runs, outs); err != nil {
		log.Error("load ledger not updated", "endpoint", ledger.Runs, "err", err)
	}
	return committed, failed
}

// replayRuns, after a replay of snapshot k into the configured sinks,
// writes the runs rows the ledger kept for k into those of them that
// missed them: a replay by hand settles the snapshot like a catch-up
// (a DaySink's loads once its day is written, held).
func (r *Runner) replayRuns(ctx context.Context, k ledger.Key, held *dayLoads) {
	if r.ledger == nil || len(r.cfg.Sinks) == 0 {
		return
	}
	rec, err := r.ledger.Get(ctx, k)
	if err != nil {
		r.log.Warn("load ledger not read", "err", err)
		return
	}
	if rec == nil {
		return
	}
	byName := map[string]sinks.Sink{}
	for _, s := range r.cfg.Sinks {
		byName[s.Name()] = s
	}
	var names []string
	for _, ld := range rec.Pending("") {
		if _, ok := byName[ld.Sink]; ok && ld.Endpoint == ledger.Runs {
			names = append(names, ld.Sink)
		}
	}
	if len(names) > 0 {
		r.catchUpRuns(ctx, r.log.With("run_id", rec.RunID), *rec, names, byName, held)
	}
}

// catchUpRunsOf loads the runs rows of rec into the sinks named that are
// still up after its endpoints' catch-up, and adds the outcome to res and
// cu.
func (r *Runner) catchUpRunsOf(ctx context.Context, rec ledger.Record, names []string, byName map[string]sinks.Sink, res *CatchUpResult, cu *CaughtUp) {
	var up []string
	for _, n := range names {
		if res.Down[n] == "" {
			up = append(up, n)
		}
	}
	if len(up) == 0 || ctx.Err() != nil {
		return
	}
	committed, failed := r.catchUpRuns(ctx, r.log.With("run_id", rec.RunID, "catch_up", true), rec, up, byName, nil)
	res.Loaded += committed
	for _, n := range up {
		err := failed[n]
		if err == nil {
			if len(rec.Runs) > 0 && !slices.Contains(cu.Sinks, n) {
				cu.Sinks = append(cu.Sinks, n)
			}
			continue
		}
		if r.runsOutcome(err).State == ledger.Failed {
			res.Failed++
		} else if ctx.Err() == nil {
			res.Down[n] = r.cfg.Redactor.String(oneLine(err))
		}
		if cu.OK {
			cu.OK, cu.Error = false, r.cfg.Redactor.String(n+": runs table: "+oneLine(err))
		}
	}
	sort.Strings(cu.Sinks)
}
