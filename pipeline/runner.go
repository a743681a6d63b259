// Package pipeline drives one snapshot of the venue: for each endpoint it
// fetches (package extract), archives the raw body as it streams in (package
// archive), decodes it into Arrow record batches (package transform) and
// hands them to every sink at once.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"

	"github.com/optlake/optlake/internal/jsontok"
	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/pipeline/archive"
	"github.com/optlake/optlake/pipeline/extract"
	"github.com/optlake/optlake/pipeline/extract/auth"
	"github.com/optlake/optlake/pipeline/infer"
	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/pipeline/values"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/storage"
)

// Fetcher gets response bodies: the venue's HTTP API (*extract.Client), or
// the raw archive when replaying.
type Fetcher interface {
	Do(ctx context.Context, r extract.Request, hooks extract.Hooks, handle func(context.Context, *extract.Response) error) error
}

// Config is everything one snapshot needs. Client, Store, Endpoints and
// Source are required.
type Config struct {
	Client Fetcher
	// Store is the data directory: the raw archive, the instrument events'
	// state and the load ledger live there.
	Store storage.Store
	// Scratch is a local folder for the runner's temporary files: pages
	// being judged, staged records, and the events state when Store is
	// not local ("": the system's temp folder; with a bucket, a folder made
	// there and removed by Close).
	Scratch string
	// Events derives instrument_events, comparing each listing with the
	// state the previous one left in Store.
	Events bool
	// Ledger records in Store which loads of each snapshot every sink
	// committed (off: a sink that was down misses its snapshots until a
	// replay). A snapshot is recorded before it is loaded, each endpoint's
	// outcome per sink after, and CatchUp loads what is pending.
	Ledger        bool
	Sinks         []sinks.Sink
	Endpoints     []Endpoint
	Params        map[string]url.Values // per endpoint name
	Source        string
	TimestampUnit transform.TimeUnit
	// Accounts are snapshotted by every account endpoint, each with its
	// label and headers (default: one account, "default", with the
	// client's headers).
	Accounts []Account
	// Schemas holds the inferred tables of account endpoints (persisted in
	// the data directory); nil keeps account bodies in the archive only.
	Schemas    *infer.Registry
	SchemaMode infer.Mode
	BatchRows  int
	Mem        memory.Allocator
	// ColumnMem allocates the column buffers of the listings a run or a
	// replay decodes, and gets them back when the records' last holder
	// releases them (tests give a checked or a poisoned one). nil: a
	// replay recycles them (an arrowpool.Pool per Replay), a live run
	// decodes into Go memory, as catch-up always does.
	ColumnMem memory.Allocator
	Redactor  *redact.Redactor
	Logger    *slog.Logger
	// Now gives the snapshot time (default time.Now); tests pin it.
	Now func() time.Time
	// NewRunID gives the run id (default a UUIDv7).
	NewRunID func() string
	// Auth authenticates every request (nil: only the client's headers);
	// an account's or an endpoint's Auth replaces it.
	Auth auth.Authenticator
	// MaxRejectShare fails a listing or an account endpoint's body whose
	// rejects are more than this share of its rows (0:
	// DefaultMaxRejectShare); one whose every row is rejected always
	// fails.
	MaxRejectShare float64
	// MaxWalks bounds the walks of a paginated request whose listing
	// shifted or came out short of the venue's total (0: DefaultMaxWalks).
	MaxWalks int
	// Step, when set, is called at each step of a snapshot's load, in
	// order (Step*): tests kill the process there (a kill -9 at a moment a
	// seed reproduces).
	Step func(step string)
}

// CheckParams fails with a *MissingParamError for the first endpoint
// without the parameter it requires, among the fanned-out params and the
// endpoint's own (unsplit) Params (New checks it too; a command checks it
// before it touches the data directory).
func CheckParams(eps []Endpoint, params map[string]url.Values) error {
	for _, ep := range eps {
		if ep.Requires != "" && params[ep.Name].Get(ep.Requires) == "" && ep.Params.Get(ep.Requires) == "" {
			return &MissingParamError{Endpoint: ep.Name, Key: ep.Requires}
		}
	}
	return nil
}

// Account is one account snapshotted by the account endpoints.
type Account struct {
	Label   string
	Headers http.Header        // values are secrets
	Auth    auth.Authenticator // nil: the run's (Config.Auth)
}

// Runner takes snapshots.
type Runner struct {
	cfg     Config
	log     *slog.Logger
	archive *archive.Archive
	ledger  *ledger.Ledger // nil: off
	states  *states        // the live events state; nil: events off
	made    string         // the scratch folder New made ("": none)
	// decoders are idle listing decoders, reused by the next listing: a
	// decoder sizes its first batch from the last listing it decoded and
	// keeps its read buffer, which spares replay's many snapshots of
	// about the same size their batches' growth.
	decoders *sync.Pool
}

// New returns a Runner after checking the config. An endpoint without the
// parameter it requires fails with a *MissingParamError.
func New(cfg Config) (*Runner, error) {
	if err := CheckParams(cfg.Endpoints, cfg.Params); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewRunID == nil {
		cfg.NewRunID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	if cfg.Mem == nil {
		cfg.Mem = memory.DefaultAllocator
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Runner{cfg: cfg, log: cfg.Logger, decoders: new(sync.Pool)}
	if cfg.Store == nil {
		return r, nil // checked by Run; Replay and CatchUp need it too
	}
	if r.cfg.Scratch == "" && storage.LocalDir(cfg.Store) == "" {
		// A bucket: the events state is compared in a local folder.
		dir, err := os.MkdirTemp("", "optlake-scratch-*")
		if err != nil {
			return nil, fmt.Errorf("scratch folder: %w", err)
		}
		r.cfg.Scratch, r.made = dir, dir
	}
	r.archive = archive.OnStore(cfg.Store)
	if cfg.Ledger {
		r.ledger = ledger.New(cfg.Store, nil)
	}
	if cfg.Events {
		r.states = newStates(cfg.Store, r.cfg.Scratch)
	}
	return r, nil
}

// Close removes the scratch folder New made (never one it was given).
func (r *Runner) Close() error {
	if r.made == "" {
		return nil
	}
	return os.RemoveAll(r.made)
}

// liveStates is where live runs keep the events state; nil when events
// are off.
func (r *Runner) liveStates() stateStore {
	if r.states == nil {
		return nil
	}
	return r.states
}

// Summary reports one snapshot.
type Summary struct {
	RunID        string           `json:"run_id"`
	SnapshotTime time.Time        `json:"snapshot_time"`
	Source       string           `json:"source"`
	DurationMS   int64            `json:"duration_ms"`
	OK           bool             `json:"ok"`
	Error        string           `json:"error,omitempty"` // first failure, one line
	Endpoints    []EndpointResult `json:"endpoints"`
	// CatchUp reports the loads of earlier snapshots done before this one
	// (nil when the run has no ledger).
	CatchUp *CatchUpResult `json:"catch_up,omitempty"`
	// Pending is, per sink, what the ledger still holds after the run.
	Pending []ledger.SinkStatus `json:"pending,omitempty"`
}

// OnlySinksFailed reports whether every endpoint that failed was fetched
// and read whole and failed only in sinks (with a ledger, its loads are
// pending, to be caught up) or was incomplete (its bodies archived, none of
// its rows loaded: a total missed, a shifted listing, too many rejects).
func (s *Summary) OnlySinksFailed() bool {
	for _, e := range s.Endpoints {
		if e.Status == "failed" && (e.unloadable || e.fetchFailed) {
			return false
		}
	}
	return true
}

// EndpointResult reports one endpoint of a snapshot.
type EndpointResult struct {
	Endpoint string `json:"endpoint"`
	Status   string `json:"status"` // ok | failed | archived
	Requests int    `json:"requests"`
	Rows     int64  `json:"rows"`
	Rejects  int64  `json:"rejects"`
	// Duplicates are the rejects whose instrument_name came earlier in the
	// snapshot (reason transform.ReasonDuplicate).
	Duplicates int64  `json:"duplicates,omitempty"`
	Events     int64  `json:"events"`
	Overflow   int64  `json:"overflow_fields,omitempty"` // account fields past the column budget (in extra)
	Bytes      int64  `json:"bytes"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`
	// EventsSkipped says why this listing's instrument events were not
	// written ("" when they were, or the endpoint has none): a snapshot
	// older than the events state (a clock gone backwards, a late load),
	// or a state that could not be saved. The snapshot is then partial
	// (exit 3), never silently without its events.
	EventsSkipped string                `json:"events_skipped,omitempty"`
	Raw           []string              `json:"raw,omitempty"` // archived body files
	Sinks         map[string]SinkResult `json:"sinks,omitempty"`
	// Stages is where the endpoint's time went, in ms (see Stage*); the
	// stages overlap (the body is decoded as it arrives), so they do not
	// add up to DurationMS.
	Stages map[string]float64 `json:"stages_ms,omitempty"`
	// unloadable: the body cannot be decoded (or read back from the
	// archive), so no sink will ever load it.
	unloadable bool
	// fetchFailed: a request of the endpoint failed before its body was
	// read whole.
	fetchFailed bool
	// neverLoaded: every failed request of the endpoint is one its live
	// run never loaded either (replay and catch-up): never archived whole
	// (errNeverLoaded), or incomplete (a shifted walk, too many rejects).
	neverLoaded bool
	// eventsWritten: the instrument events were compared and handed to
	// the sinks (or their loads left pending in the ledger).
	eventsWritten bool
}

// The stages of an endpoint's time (EndpointResult.Stages).
const (
	// StageBody is the time spent waiting for the body: reading the
	// response from the network (a replay: reading and decompressing the
	// archived file).
	StageBody = "body"
	// StageDecode is the decode of the body into rows handed to the sinks,
	// from the first byte to the last row (it includes StageBody).
	StageDecode = "decode"
	// StageCommit is the sinks' commit of the rows (Parquet: the last row
	// group, fsync and rename; ClickHouse: the last INSERT).
	StageCommit = "commit"
	// StageArchive is the end of the raw archive's write: hashing and
	// compressing what was left, fsync and rename.
	StageArchive = "archive"
	// StageEvents is the comparison with the previous listing, the
	// instrument_events rows written and the state saved.
	StageEvents = "events"
)

// stage adds the time since start to the stage name of res.
func (res *EndpointResult) stage(name string, start time.Time) {
	if res.Stages == nil {
		res.Stages = map[string]float64{}
	}
	res.Stages[name] += float64(time.Since(start).Microseconds()) / 1000
}

// bodyReader is a response body as request reads it: the time spent in its
// reads goes to StageBody, and what is read on to the archive entry (as
// io.TeeReader does).
type bodyReader struct {
	r     io.Reader
	res   *EndpointResult
	entry archiveEntry
}

func (b *bodyReader) Read(p []byte) (int, error) {
	start := time.Now()
	n, err := b.r.Read(p)
	b.res.stage(StageBody, start)
	if n > 0 {
		if n, err := b.entry.Write(p[:n]); err != nil {
			return n, err
		}
	}
	return n, err
}

// InMemory hands the decoder a replayed body that the archive holds whole
// in memory (jsontok.InMemory: it is scanned in place), timed and counted
// as its reads would be. A body being archived (a live run's) is read.
func (b *bodyReader) InMemory() ([]byte, bool) {
	m, ok := b.r.(jsontok.InMemory)
	c, counting := b.entry.(*countingEntry)
	if !ok || !counting {
		return nil, false
	}
	start := time.Now()
	p, ok := m.InMemory()
	b.res.stage(StageBody, start)
	if ok {
		c.n += int64(len(p))
	}
	return p, ok
}

// SinkResult reports what one sink made of one endpoint.
type SinkResult struct {
	Rows    int64    `json:"rows"`
	Rejects int64    `json:"rejects"`
	Bytes   int64    `json:"bytes"`
	Files   []string `json:"files,omitempty"`
	Error   string   `json:"error,omitempty"`
	// Snapshots are the Iceberg snapshot ids of the tables the sink
	// committed (an Iceberg lake), by table.
	Snapshots map[string]int64 `json:"iceberg_snapshots,omitempty"`
	// rejected: the sink refused the rows themselves (sinks.RejectedError).
	rejected bool
}

// addSnapshot records table's snapshot id (0: none).
func (sr *SinkResult) addSnapshot(table string, id int64) {
	if id == 0 {
		return
	}
	if sr.Snapshots == nil {
		sr.Snapshots = map[string]int64{}
	}
	sr.Snapshots[table] = id
}

// Run takes one snapshot of every configured endpoint. It always returns a
// summary; Summary.OK is false when any endpoint or sink failed.
func (r *Runner) Run(ctx context.Context) *Summary {
	snapTime := r.cfg.Now().UTC().Truncate(time.Millisecond)
	if r.cfg.Client == nil || r.cfg.Store == nil || r.cfg.Source == "" {
		return &Summary{SnapshotTime: snapTime, Error: "pipeline: Run needs Config.Client, Store and Source"}
	}
	states := r.liveStates()
	sr := snapshotRun{mode: modeLive, time: snapTime, runID: r.cfg.NewRunID(), source: r.cfg.Source, fetch: r.cfg.Client, archive: r.archive, writeRuns: true, states: states, auth: r.cfg.Auth, cols: r.cfg.ColumnMem}
	var ledgerErr error
	if r.ledger != nil && len(r.cfg.Sinks) > 0 {
		var eps []string
		for _, ep := range r.cfg.Endpoints {
			eps = append(eps, ep.Name)
		}
		eps = append(eps, ledger.Runs) // the runs table's rows, written last
		ledgerErr = r.ledger.Begin(ctx, sr.time, sr.runID, sr.source, eps, r.sinkNames())
		if ledgerErr != nil {
			r.log.Error("load ledger not written: a sink that fails now will not be caught up automatically", "err", ledgerErr)
		}
	}
	sum := r.snapshot(ctx, sr)
	r.countDuplicates(ctx, r.log, sum)
	if ledgerErr != nil && sum.OK {
		sum.OK = false
		sum.Error = r.cfg.Redactor.String(oneLine(ledgerErr))
	}
	return sum
}

func (r *Runner) sinkNames() []string {
	var out []string
	for _, s := range r.cfg.Sinks {
		out = append(out, s.Name())
	}
	return out
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// requestSpec is one request of an endpoint's fan-out.
type requestSpec struct {
	index, of int
	params    url.Values
	account   string             // account endpoints
	headers   http.Header        // the account's
	auth      auth.Authenticator // the account's
	// archived are the request's bodies in the raw archive, pages in
	// order (replay and catch-up); nil for a live request.
	archived []archive.Meta
}

// requests are the requests of an endpoint in a snapshot: what the archive
// holds (replay, catch-up), or one per fanned-out parameter set and
// account.
func (r *Runner) requests(ep Endpoint, sr *snapshotRun) []requestSpec {
	if sr.requests != nil {
		return sr.requests(ep)
	}
	var reqs []requestSpec
	sets := ParamSets(r.cfg.Params[ep.Name])
	for _, p := range sets {
		for k, v := range ep.Params {
			if _, given := p[k]; !given { // a --param of the same key wins
				p[k] = append([]string(nil), v...)
			}
		}
	}
	accounts := []Account{{}}
	if ep.Kind == KindAccount && !ep.Public {
		accounts = r.accounts()
	}
	for _, acc := range accounts {
		for _, p := range sets {
			reqs = append(reqs, requestSpec{index: len(reqs), params: p, account: acc.Label, headers: acc.Headers, auth: acc.Auth})
		}
	}
	for i := range reqs {
		reqs[i].of = len(reqs)
	}
	return reqs
}

// accounts returns the configured accounts, or the default one.
func (r *Runner) accounts() []Account {
	if len(r.cfg.Accounts) > 0 {
		return r.cfg.Accounts
	}
	return []Account{{Label: "default"}}
}

// call is one request of an endpoint within a snapshot.
type call struct {
	log  *slog.Logger
	ep   Endpoint
	rq   requestSpec
	part string // the sinks' part name of the request ("" when alone)
	sum  *Summary
	res  *EndpointResult
	ev   *eventsRun
	sr   *snapshotRun
	// staged: the sinks that are not atomic receive the rows only at the
	// commit (a paginated request: all of its pages or nothing).
	staged bool
	// durable, when set, makes the body just decoded durable in the raw
	// archive (the body file, then its meta.json); load calls it after
	// the decode and before any sink commits a row of it, and loads
	// nothing when it fails. Pages need none: their request's stream ends
	// only after the last page is archived.
	durable func() error
	// names are the instrument names of the endpoint's earlier requests
	// (nil: one request).
	names *transform.NameSet
	// walk numbers the walks of a paginated request (from 1; 0: not
	// paginated), and attempts is what the earlier walks' attempts took:
	// a walk's bodies are archived with attempts after them.
	walk, attempts int
}

// meta is the archive metadata every body of the call starts from.
func (c call) meta() archive.Meta {
	return archive.Meta{
		Endpoint: c.ep.Name, Account: c.rq.account, Request: c.rq.index, Requests: c.rq.of, Params: flat(c.rq.params),
		SnapshotTime: c.sum.SnapshotTime, RunID: c.sum.RunID, Source: c.sum.Source,
	}
}

// snapshot is what the sinks are told of the call's rows.
func (c call) snapshot() sinks.Snapshot {
	return sinks.Snapshot{Time: c.sum.SnapshotTime, RunID: c.sum.RunID, Source: c.sum.Source, Endpoint: c.ep.Name, Part: c.part}
}

// extractRequest is the venue request of the call (params: its query).
func (c call) extractRequest(params url.Values) extract.Request {
	a := c.ep.Auth
	if a == nil {
		a = c.rq.auth
	}
	if a == nil && c.sr.auth != nil {
		a = c.sr.auth
	}
	return extract.Request{
		Endpoint: c.ep.Name, Method: c.ep.Method, Path: c.ep.Path, Params: params, Body: c.ep.Body, Errors: c.ep.Errors,
		Headers: c.rq.headers, Account: c.rq.account, Auth: a, NoAuth: c.ep.NoAuth, Index: c.rq.index,
	}
}

// onFailed archives a non-2xx answer of the call.
func (r *Runner) onFailed(ctx context.Context, c call, page int) extract.Hooks {
	return extract.Hooks{OnFailed: func(f extract.Failed) {
		if !c.sr.live() {
			return
		}
		m := c.meta()
		m.Attempt, m.URL, m.FetchTime, m.Page, m.Walk = c.attempts+f.Attempt, f.URL, time.Now().UTC(), page, c.walk
		e, err := c.sr.archive.Create(ctx, m)
		if err != nil {
			c.log.Error("archive failed", "endpoint", c.ep.Name, "err", err)
			return
		}
		e.Write(f.Body)
		msg := fmt.Sprintf("HTTP %d", f.Status)
		if meta, err := e.Finish(f.Status, f.ContentType, f.Complete, msg); err == nil {
			c.res.Raw = append(c.res.Raw, meta.File)
		}
	}}
}

// request fetches one parameter set of an endpoint, retrying as the client
// decides; each attempt is archived on its own. Enveloped endpoints (records,
// pages, error bodies) go through pagedRequest.
func (r *Runner) request(ctx context.Context, c call) error {
	if c.enveloped() {
		return r.pagedRequest(ctx, c)
	}
	res, sr := c.res, c.sr
	return sr.fetch.Do(ctx, c.extractRequest(c.rq.params), r.onFailed(ctx, c, 0), func(ctx context.Context, resp *extract.Response) error {
		m := c.meta()
		m.Attempt, m.URL, m.FetchTime = resp.Attempt, resp.URL, time.Now().UTC()
		var entry archiveEntry = &countingEntry{}
		if sr.live() {
			e, err := sr.archive.Create(ctx, m)
			if err != nil {
				return err
			}
			entry = e
		}
		body := &bodyReader{r: resp.Body, res: res, entry: entry}
		finished, aerr := false, error(nil)
		finish := func(complete bool, msg string) error {
			if finished {
				return aerr
			}
			finished = true
			finishing := time.Now()
			var meta archive.Meta
			meta, aerr = entry.Finish(resp.Status, resp.ContentType, complete, msg)
			if sr.live() {
				res.stage(StageArchive, finishing)
			}
			if aerr == nil && meta.File != "" {
				res.Raw = append(res.Raw, meta.File)
				r.step(StepArchived)
			}
			res.Bytes += entry.Bytes()
			return aerr
		}
		// The body is read whole once it decoded: archived (durable)
		// before a sink commits a row of it.
		c.durable = func() error { return finish(true, "") }
		outs, derr := r.load(ctx, c, body)
		complete := derr == nil
		if derr != nil && errors.Is(derr, values.ErrBadInput) {
			// Keep the whole body for replay even though it cannot be parsed.
			_, cerr := io.Copy(io.Discard, body)
			complete = cerr == nil
		}
		msg := ""
		if derr != nil {
			msg = r.cfg.Redactor.String(oneLine(derr))
		}
		if err := finish(complete, msg); derr == nil && err != nil {
			return err
		}
		if derr != nil {
			return derr
		}
		res.merge(outs)
		return nil
	})
}

// enveloped reports whether the call's bodies go through package
// envelope: as the archive says in a replay, as the endpoint says live.
func (c call) enveloped() bool {
	if c.rq.archived != nil {
		return c.rq.archived[0].Envelope
	}
	return c.ep.enveloped()
}

// merge adds what the sinks made of one request to the endpoint's result.
func (res *EndpointResult) merge(outs map[string]SinkResult) {
	for name, o := range outs {
		acc := res.Sinks[name]
		acc.Rows += o.Rows
		acc.Rejects += o.Rejects
		acc.Bytes += o.Bytes
		acc.Files = append(acc.Files, o.Files...)
		for t, id := range o.Snapshots {
			acc.addSnapshot(t, id)
		}
		if acc.Error == "" {
			acc.Error = o.Error
		}
		acc.rejected = acc.rejected || o.rejected
		res.Sinks[name] = acc
	}
}

// archiveEntry is what request needs of an archive entry.
type archiveEntry interface {
	io.Writer
	Finish(status int, contentType string, complete bool, errMsg string) (archive.Meta, error)
	Bytes() int64
	// MarkPage records, before Finish, whether the body is the last page
	// of its request and whether it is a venue error.
	MarkPage(last, venueError bool)
}

// countingEntry counts bytes and archives nothing (replay reads the
// archive).
type countingEntry struct{ n int64 }

func (c *countingEntry) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }
func (c *countingEntry) Bytes() int64                { return c.n }
func (c *countingEntry) MarkPage(bool, bool)         {}
func (c *countingEntry) Finish(int, string, bool, string) (archive.Meta, error) {
	return archive.Meta{}, nil
}

func flat(v url.Values) map[string]string {
	if len(v) == 0 {
		return nil
	}
	out := map[string]string{}
	for k := range v {
		out[k] = v.Get(k)
	}
	return out
}

// decodeInstruments decodes one listing body into every sink's writers
// (load commits them). The call's snapshot's cols allocates the records'
// column buffers (nil: Go memory). On a decode failure every writer is
// aborted. A listing that fails its check (listingCheck: a shifted walk,
// too many rejects) is not accepted: it loads nothing, though its body is
// durable all the same.
func (r *Runner) decodeInstruments(ctx context.Context, ss []sinks.Sink, c call, body io.Reader) (decoded, error) {
	snap := c.snapshot()
	fan := NewFanout(ctx, ss, snap, schema.Instruments)
	dec, _ := r.decoders.Get().(*transform.InstrumentDecoder)
	if dec == nil {
		dec = transform.NewInstrumentDecoder(transform.Options{BatchRows: r.cfg.BatchRows, TimestampUnit: r.cfg.TimestampUnit, Mem: r.cfg.Mem, UniqueNames: true})
	}
	dec.UseColumns(c.sr.cols)
	dec.UseNames(c.names)
	d := decoded{fan: fan, done: func() {
		dec.UseNames(nil)
		dec.UseColumns(nil) // nor a replay's pool once it has ended
		r.decoders.Put(dec) // holds no Arrow memory between listings
	}}
	c.ev.beginAttempt()
	emit := func(t *schema.Table, rec arrow.Record) error {
		if t == schema.Instruments {
			c.ev.observe(rec)
		}
		return fan.Emit(t, rec)
	}
	start := time.Now()
	stats, err := dec.Decode(ctx, body, snap, emit)
	c.res.stage(StageDecode, start)
	if err != nil {
		fan.Abort()
		return d, fmt.Errorf("decode listing: %w", err)
	}
	d.accept = func() error {
		if err := r.listingCheck(c)(stats); err != nil {
			return err
		}
		if c.names != nil {
			c.names.Keep() // the next request's rows are checked against these
		}
		c.res.Rows += stats.Rows
		c.res.Rejects += stats.Rejects
		c.res.Duplicates += stats.Duplicates
		return nil
	}
	return d, nil
}

// writeRuns records the snapshot's per-endpoint results (rows, from
// runRows) in the runs table of every sink, and returns the sinks that
// failed.
func (r *Runner) writeRuns(ctx context.Context, sum *Summary, rows []ledger.RunRow) map[string]error {
	return r.writeRunRows(ctx, r.cfg.Sinks, sum.SnapshotTime, sum.RunID, sum.Source, rows)
}

// writeAll writes one small record as table t to every sink and returns
// the sinks that failed.
func writeAll(ctx context.Context, ss []sinks.Sink, t *schema.Table, snap sinks.Snapshot, rec arrow.Record) map[string]error {
	failed := map[string]error{}
	for _, s := range ss {
		w, err := s.Open(ctx, t, snap)
		if err == nil {
			if err = w.Write(ctx, rec); err == nil {
				_, err = w.Commit(ctx)
			}
			if err != nil {
				w.Abort()
			}
		}
		if err != nil {
			failed[s.Name()] = err
		}
	}
	return failed
}

// Line renders the summary as one human line.
func (s *Summary) Line() string {
	var parts []string
	loaded := false
	for _, e := range s.Endpoints {
		p := fmt.Sprintf("%s %s: %d rows, %d rejects", e.Endpoint, e.Status, e.Rows, e.Rejects)
		if e.Duplicates > 0 {
			p += fmt.Sprintf(" (%d duplicates)", e.Duplicates)
		}
		if e.Events > 0 {
			p += fmt.Sprintf(", %d events", e.Events)
		}
		p += ", " + byteSize(e.Bytes)
		var names []string
		for n := range e.Sinks {
			names = append(names, n)
		}
		sort.Strings(names)
		var ok []string
		for _, n := range names {
			if sr := e.Sinks[n]; sr.Error != "" {
				p += fmt.Sprintf(" [%s failed]", n)
			} else {
				ok = append(ok, n)
			}
		}
		if len(ok) < len(names) && len(ok) > 0 {
			p += fmt.Sprintf(" [%s ok]", strings.Join(ok, ", "))
		}
		loaded = loaded || len(ok) > 0
		parts = append(parts, p)
	}
	// partial: what loaded is in the sinks, what did not is named above
	// (and waits in the load ledger).
	status := "ok"
	if !s.OK {
		status = "FAILED"
		if loaded {
			status = "partial"
		}
	}
	return fmt.Sprintf("run %s %s in %s — %s", s.RunID, status, (time.Duration(s.DurationMS) * time.Millisecond).String(), strings.Join(parts, "; "))
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
