package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/pipeline/archive"
	"github.com/optlake/optlake/pipeline/extract/auth"
	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/pipeline/values"
)

// This file is the one home of a snapshot's order of steps. The live run
// (Run), catch-up (CatchUp) and replay (Replay) take a snapshot through
// the same functions below; they differ only in where the bodies come from
// (snapshotRun.fetch: the venue, or the raw archive read back), whether
// the bodies are archived (a live run) and what they record (snapshotMode,
// the events state, the ledger's held loads). For each endpoint, in order:
//
//  1. body: each request's body (or its pages, as one stream) is decoded
//     as it arrives into every sink's writers (request, pagedRequest →
//     load → decodeInstruments, decodeAccount); nothing is committed.
//  2. raw durable: live, the body's file and its meta.json are durable in
//     the raw archive (call.durable; a page is archived whole before its
//     rows reach the decoder) — StepArchived.
//  3. accepted: the listing's checks (a shifted walk, too many rejects)
//     and the row counts (decoded.accept); a failure loads nothing.
//  4. each sink commits (Fanout.Commit); an account's inferred schema is
//     saved after (decoded.committed).
//  5. events: an instrument listing's events are compared with the
//     previous listing, the state saved and the events committed — with a
//     ledger the state first (finishEvents) — StepEvents.
//  6. ledger: the endpoint's outcome per sink is recorded (settle) —
//     StepSettle.
//
// After every endpoint: the runs table's rows, and their ledger outcome.

// The steps of a snapshot's load that Config.Step is called at, in their
// order: a body (or page) archived and durable; the instrument events
// about to be compared and their state saved; an endpoint's outcome about
// to be recorded in the ledger. (The sinks' own steps come between the
// first two.)
const (
	StepArchived = "archived"
	StepEvents   = "events"
	StepSettle   = "settle"
)

// step calls Config.Step.
func (r *Runner) step(name string) {
	if r.cfg.Step != nil {
		r.cfg.Step(name)
	}
}

// snapshot takes every endpoint of one snapshot: its bodies loaded and
// its events (endpoint), then its ledger outcome (settle); then the runs
// table.
func (r *Runner) snapshot(ctx context.Context, sr snapshotRun) *Summary {
	start := time.Now()
	sum := &Summary{RunID: sr.runID, SnapshotTime: sr.time, Source: sr.source, OK: true}
	log := r.log.With("run_id", sum.RunID)
	log.Info("snapshot started", "snapshot_time", sr.time.Format(time.RFC3339Nano), "endpoints", len(r.cfg.Endpoints))
	for _, ep := range r.cfg.Endpoints {
		res := r.endpoint(ctx, log, ep, sum, &sr)
		r.step(StepSettle)
		r.settle(ctx, log, &sr, sum, res)
		sum.Endpoints = append(sum.Endpoints, res)
		if res.Status == "failed" && sum.OK {
			sum.OK = false
			sum.Error = res.Endpoint + ": " + res.Error
		}
		if res.EventsSkipped != "" && sum.OK {
			sum.OK = false
			sum.Error = res.Endpoint + ": instrument events not written: " + res.EventsSkipped
		}
		if ctx.Err() != nil {
			break
		}
	}
	if len(r.cfg.Sinks) > 0 && sr.writeRuns {
		rows := runRows(sum)
		failed := r.writeRuns(ctx, sum, rows)
		for name, err := range failed {
			if sum.OK {
				sum.OK = false
				sum.Error = name + ": runs table: " + err.Error()
			}
		}
		r.settleRuns(ctx, log, sum, rows, failed)
	}
	sum.DurationMS = time.Since(start).Milliseconds()
	sum.Error = r.cfg.Redactor.String(sum.Error)
	return sum
}

// endpoint takes the steps of one endpoint before its ledger outcome: each
// request's bodies loaded (request, load), then the listing's instrument
// events (events).
func (r *Runner) endpoint(ctx context.Context, log *slog.Logger, ep Endpoint, sum *Summary, sr *snapshotRun) EndpointResult {
	start := time.Now()
	res := EndpointResult{Endpoint: ep.Name, Status: "ok", Sinks: map[string]SinkResult{}}
	if ep.Kind == KindAccount && r.cfg.Schemas == nil {
		res.Status = "archived"
	}
	reqs := r.requests(ep, sr)
	ev := r.listingEvents(ctx, log, ep, reqs, sum, sr)
	// The names of a listing fanned out over several requests: a name
	// that came in an earlier request is a duplicate, as within one body.
	var names *transform.NameSet
	if ep.Kind == KindInstruments && len(reqs) > 1 {
		names = transform.NewNameSet()
	}
	for _, rq := range reqs {
		res.Requests++
		part := ""
		if rq.of > 1 {
			part = fmt.Sprintf("r%03d", rq.index)
			if rq.account != "" {
				part = rq.account + "-" + part
			}
		}
		err := r.request(ctx, call{log: log, ep: ep, rq: rq, part: part, sum: sum, res: &res, ev: ev, sr: sr, names: names})
		if err != nil {
			ev.taint(err)
			first := res.Status != "failed"
			res.Status = "failed"
			res.unloadable = res.unloadable || errors.Is(err, values.ErrBadInput) || errors.Is(err, errArchive)
			res.fetchFailed = res.fetchFailed || !res.unloadable && !incomplete(err)
			res.neverLoaded = (first || res.neverLoaded) && (errors.Is(err, errNeverLoaded) || incomplete(err))
			if res.Error == "" {
				res.Error = r.cfg.Redactor.String(oneLine(err))
			}
			log.Error("endpoint failed", "endpoint", ep.Name, "request", rq.index, "err", err)
		}
	}
	r.events(ctx, log, ev, sr, &res)
	for name, sr := range res.Sinks {
		if sr.Error != "" && res.Status != "failed" {
			res.Status = "failed"
			res.Error = name + ": " + sr.Error
		}
	}
	res.DurationMS = time.Since(start).Milliseconds()
	if sr.requests != nil && res.Requests == 0 {
		// A replay or catch-up of a snapshot whose archive holds nothing of
		// the endpoint: Replay says so once for the whole replay.
		log.Debug("endpoint not in the snapshot's archive", "endpoint", ep.Name)
		return res
	}
	log.Info("endpoint done", "endpoint", ep.Name, "status", res.Status, "rows", res.Rows, "rejects", res.Rejects, "bytes", res.Bytes, "took", time.Since(start).Round(time.Millisecond))
	return res
}

// decoded is one body (or one request's pages) decoded into the sinks'
// writers, nothing committed yet.
type decoded struct {
	fan *Fanout
	// accept runs once the body is durable and before any sink commits a
	// row of it (a listing's checks, the row counts): an error loads
	// nothing.
	accept func() error
	// committed, when set, runs once the sinks committed (an account's
	// inferred schema saved) and may add to what they made of it.
	committed func(outs map[string]SinkResult) (map[string]SinkResult, error)
	// done, when set, runs at the end of the load (the decoder goes back
	// to its pool).
	done func()
}

// load takes one body (or the stream of a call's pages) through steps 1–4:
// decoded into every sink's writers, durable in the raw archive, accepted,
// committed by each sink. On any failure before the commit every sink's
// writers are aborted: nothing of the body is loaded, and a retry starts
// clean.
func (r *Runner) load(ctx context.Context, c call, body io.Reader) (map[string]SinkResult, error) {
	ss := r.cfg.Sinks
	if c.staged {
		ss = stagedSinks(ss, r.cfg.Mem, r.cfg.Scratch)
	}
	var d decoded
	var err error
	switch {
	case c.ep.Kind == KindInstruments:
		d, err = r.decodeInstruments(ctx, ss, c, body)
	case r.cfg.Schemas == nil:
		_, err := io.Copy(io.Discard, body) // kept in the raw archive only
		return nil, err
	default:
		d, err = r.decodeAccount(ctx, ss, c, body)
	}
	if d.done != nil {
		defer d.done()
	}
	if err != nil {
		return nil, err // the decoder aborted its writers
	}
	if err := durable(c); err != nil {
		d.fan.Abort()
		return nil, err
	}
	if err := d.accept(); err != nil {
		d.fan.Abort()
		return nil, err
	}
	start := time.Now()
	outs := d.fan.Commit(ctx)
	c.res.stage(StageCommit, start)
	if d.committed == nil {
		return outs, nil
	}
	return d.committed(outs)
}

// durable makes the call's body durable in the raw archive (call.durable)
// before its rows are committed.
func durable(c call) error {
	if c.durable == nil {
		return nil
	}
	return c.durable()
}

// events is an instrument listing's step once its rows are committed:
// compared with the previous listing, the state saved and the events
// committed (finishEvents); a skip's note kept or cleared (noteEvents).
func (r *Runner) events(ctx context.Context, log *slog.Logger, ev *eventsRun, sr *snapshotRun, res *EndpointResult) {
	if res.Status == "ok" && ev.usable() {
		r.step(StepEvents)
		start := time.Now()
		r.finishEvents(ctx, log, ev, sr.states, res)
		res.stage(StageEvents, start)
	} else if res.Status == "ok" {
		res.EventsSkipped = ev.refused(log)
	}
	if ev != nil && res.Status == "ok" {
		r.noteEvents(ctx, log, sr, res)
	}
	ev.close(sr.states)
}

// settle records in the ledger what the sinks made of one endpoint of a
// snapshot: committed, pending (with the error) or failed (a body that no
// sink can load). A live endpoint whose venue request failed has nothing to
// load and leaves the ledger.
func (r *Runner) settle(ctx context.Context, log *slog.Logger, sr *snapshotRun, sum *Summary, res EndpointResult) {
	if r.ledger == nil || len(r.cfg.Sinks) == 0 {
		return
	}
	k := ledger.Key{Time: sum.SnapshotTime, RunID: sum.RunID}
	sinkFailed := false
	for _, o := range res.Sinks {
		sinkFailed = sinkFailed || o.Error != ""
	}
	var err error
	if sr.live() && res.Status == "failed" && !res.unloadable && !sinkFailed {
		err = r.ledger.Drop(ctx, k, res.Endpoint)
	} else {
		outs := map[string]ledger.Outcome{}
		for _, name := range r.sinkNames() {
			o := ledger.Outcome{State: ledger.Committed, Snapshots: res.Sinks[name].Snapshots}
			switch {
			case res.unloadable:
				o = ledger.Outcome{State: ledger.Failed, Error: r.cfg.Redactor.String(res.Error)}
			case res.Sinks[name].rejected:
				o = ledger.Outcome{State: ledger.Failed, Error: r.cfg.Redactor.String(res.Sinks[name].Error)}
			case res.Sinks[name].Error != "":
				o = ledger.Outcome{State: ledger.Pending, Error: r.cfg.Redactor.String(res.Sinks[name].Error)}
			case !sr.live() && res.Status == "failed":
				// Read back from the archive (catch-up, replay) and cut
				// short by something else than the body (a cancel, the
				// budget): no sink committed the rows, so the load stays
				// pending. Never "committed" without a commit.
				o = ledger.Outcome{State: ledger.Pending, Error: r.cfg.Redactor.String(res.Error)}
			}
			outs[name] = o
		}
		sr.held.hold(k, res.Endpoint, outs)
		err = r.ledger.Settle(ctx, k, res.Endpoint, outs)
	}
	if err != nil {
		log.Error("load ledger not updated", "endpoint", res.Endpoint, "err", err)
	}
}

// snapshotMode is where a snapshot's bodies come from, and so which of
// its steps it takes: a live run fetches and archives them; a catch-up and
// a replay read them back from the archive (no archive write).
type snapshotMode uint8

const (
	modeLive snapshotMode = iota
	modeCatchUp
	modeReplay
)

// live reports whether the snapshot is fetched from the venue (and its
// bodies archived).
func (sr *snapshotRun) live() bool { return sr.mode == modeLive }

// snapshotRun is the identity of one snapshot and where its bodies come
// from: a live run fetches and archives; a replay reads the archive back
// with the original time and run id.
type snapshotRun struct {
	mode      snapshotMode
	time      time.Time
	runID     string
	source    string
	fetch     Fetcher
	archive   *archive.Archive // where a live run archives its bodies
	writeRuns bool
	states    stateStore // nil: no instrument events
	// requests lists an endpoint's requests (replay: what was archived);
	// nil fans out the configured parameters.
	requests func(Endpoint) []requestSpec
	// eventsOnlyState derives the events state without writing events
	// (the first snapshot of a partial replay has no previous state).
	eventsOnlyState bool
	// turn orders the instrument events after the previous snapshot's
	// when snapshots are loaded at once (nil: one at a time).
	turn *eventsTurn
	// rowOffsets numbers account rows on across the bodies of one
	// endpoint and account (per table).
	rowOffsets map[string]map[string]int64
	// auth authenticates requests that have no account or endpoint auth
	// (live runs: Config.Auth).
	auth auth.Authenticator
	// held keeps the loads a DaySink took until its day is written
	// (replay; nil: settle at once).
	held *dayLoads
	// cols allocates the listings' column buffers (nil: Go memory).
	cols memory.Allocator
}
