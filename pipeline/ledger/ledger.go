// Package ledger records, per snapshot × endpoint × sink, whether a
// snapshot's rows were committed to a sink. It is the source of truth for
// what is still pending: catch-up (package pipeline) loads from the raw
// archive what the ledger says a sink is missing.
//
// The ledger is made of small immutable-looking JSON objects, each written
// whole and atomically through a Store (no appends, no in-place edits), so
// it maps one to one onto object storage:
//
//	_ledger/open/<snapshot>-<run_id>.json              a snapshot with loads pending or failed
//	_ledger/done/date=YYYY-MM-DD/<snapshot>-<run_id>.json  a snapshot committed everywhere
//	_ledger/done/date=YYYY-MM-DD/folded.json               a closed day's done records, folded (Fold)
//
// A run writes its snapshot's record in open/ before loading anything (every
// load pending, including the runs table's rows, endpoint Runs), rewrites it
// after each endpoint with the sinks' outcomes, and moves it to done/ (write the new object, then delete the old) once
// every load is committed. A process killed at any point leaves a whole
// record whose in-flight loads are still pending; a crash between the write
// to done/ and the delete leaves both, and the open one is taken as current
// (a reload is idempotent). Reading what is pending lists open/ only, so it
// stays cheap however long the history grows; done/ is the history (readable
// with jq or DuckDB's read_json), one object a day once folded (Fold).
package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/optlake/optlake/storage"
)

// Dir is the ledger's folder inside the data directory.
const Dir = "_ledger"

// State is where one load (snapshot × endpoint × sink) stands.
type State string

const (
	// Pending: not committed yet (never tried, in flight when the process
	// died, or failed for a reason that may pass, such as a server down).
	Pending State = "pending"
	// Committed: every row of the endpoint's snapshot is in the sink.
	Committed State = "committed"
	// Failed: cannot be loaded (its raw body is corrupt or cut off, or the
	// sink rejected it for good); catch-up skips it, `replay` may retry it.
	Failed State = "failed"
)

// Load is one snapshot × endpoint × sink.
type Load struct {
	Endpoint string    `json:"endpoint"`
	Sink     string    `json:"sink"`
	State    State     `json:"state"`
	Attempts int       `json:"attempts"`        // loads tried (live and catch-up)
	Error    string    `json:"error,omitempty"` // the last error (pending) or the reason (failed)
	Updated  time.Time `json:"updated"`
	// Snapshots are the Iceberg snapshot ids of the committed load's
	// appends (an Iceberg lake), by table.
	Snapshots map[string]int64 `json:"iceberg_snapshots,omitempty"`
}

// Record is one snapshot's loads.
type Record struct {
	SnapshotTime time.Time `json:"snapshot_time"`
	RunID        string    `json:"run_id"`
	Source       string    `json:"source"`
	Loads        []Load    `json:"loads"`
	// Runs are the rows of the runs table the live run wrote, kept once a
	// sink missed them (SettleRuns), so that catch-up loads exactly them.
	Runs []RunRow `json:"runs,omitempty"`
}

// Runs is the endpoint name of a snapshot's rows of the runs table in the
// ledger: the live run writes them after its endpoints, and a sink that
// missed them gets them from the record (Record.Runs), not from the raw
// archive (they describe the live run: its statuses, durations, errors).
const Runs = "runs"

// RunRow is one row of the runs table (schema.Runs) without the
// snapshot's identity: one endpoint of the live run.
type RunRow struct {
	Endpoint   string `json:"endpoint"`
	Status     string `json:"status"`
	Rows       int64  `json:"rows"`
	Rejects    int64  `json:"rejects"`
	Bytes      int64  `json:"bytes"`
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`
}

// Key identifies a snapshot.
type Key struct {
	Time  time.Time
	RunID string
}

// Key returns the record's snapshot.
func (r *Record) Key() Key { return Key{r.SnapshotTime, r.RunID} }

// Settled reports whether no load of the record is pending or failed.
func (r *Record) Settled() bool {
	for _, l := range r.Loads {
		if l.State != Committed {
			return false
		}
	}
	return true
}

// Pending returns the record's pending loads of sink ("" any sink).
func (r *Record) Pending(sink string) []Load {
	var out []Load
	for _, l := range r.Loads {
		if l.State == Pending && (sink == "" || l.Sink == sink) {
			out = append(out, l)
		}
	}
	return out
}

// Outcome is what one attempt of a load ended with.
type Outcome struct {
	State State  // Committed, Pending (a transient error) or Failed
	Error string // one line, already redacted
	// Snapshots (Committed) are the Iceberg snapshot ids of its appends.
	Snapshots map[string]int64
}

// Ledger reads and writes the records of one data directory. Its methods
// are safe for concurrent use; only one process writes a data directory at
// a time (the data directory's lock), while readers (optlake status) may
// read at any time.
type Ledger struct {
	st  objects
	now func() time.Time

	mu   sync.Mutex
	open map[Key]*Record // records in open/ that this process wrote or read
}

// New returns the ledger of the data directory st (its objects under
// Dir/); now (default time.Now) stamps updates. Its calls outlive their
// ctx's cancellation, each bounded by CallTimeout.
func New(st storage.Store, now func() time.Time) *Ledger {
	if now == nil {
		now = time.Now
	}
	return &Ledger{st: objects{st}, now: now, open: map[Key]*Record{}}
}

func baseName(k Key) string {
	return k.Time.UTC().Format(storage.TimeLayout) + "-" + storage.SafeName(k.RunID) + ".json"
}

func openName(k Key) string { return path.Join("open", baseName(k)) }

func doneName(k Key) string {
	return path.Join("done", "date="+k.Time.UTC().Format("2006-01-02"), baseName(k))
}

// Begin records a snapshot about to be loaded: every endpoint × sink is
// pending until Settle says otherwise.
func (l *Ledger) Begin(ctx context.Context, snapshotTime time.Time, runID, source string, endpoints, sinks []string) error {
	now := l.now().UTC()
	rec := &Record{SnapshotTime: snapshotTime.UTC(), RunID: runID, Source: source}
	for _, ep := range endpoints {
		for _, s := range sinks {
			rec.Loads = append(rec.Loads, Load{Endpoint: ep, Sink: s, State: Pending, Updated: now})
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.write(ctx, rec)
}

// Settle records the outcome of an attempt to load endpoint into each sink
// named in outcomes, for the snapshot k. Sinks and endpoints the record
// does not list are ignored (a replay into a new sink), as is a snapshot
// the ledger does not hold open (already settled). Once nothing is pending
// or failed the record moves to done/.
func (l *Ledger) Settle(ctx context.Context, k Key, endpoint string, outcomes map[string]Outcome) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec, err := l.get(ctx, k)
	if err != nil || rec == nil {
		return err
	}
	return l.settle(ctx, rec, endpoint, outcomes)
}

// settle is Settle on the open record rec. Call with mu held.
func (l *Ledger) settle(ctx context.Context, rec *Record, endpoint string, outcomes map[string]Outcome) error {
	now := l.now().UTC()
	changed := false
	for i := range rec.Loads {
		ld := &rec.Loads[i]
		o, ok := outcomes[ld.Sink]
		if !ok || ld.Endpoint != endpoint || ld.State == Committed {
			continue
		}
		ld.State, ld.Error, ld.Updated = o.State, o.Error, now
		if o.State == Committed && len(o.Snapshots) > 0 {
			ld.Snapshots = maps.Clone(o.Snapshots)
		}
		ld.Attempts++
		changed = true
	}
	if !changed {
		return nil
	}
	return l.write(ctx, rec)
}

// SettleRuns is Settle for the snapshot's runs rows (endpoint Runs): when
// an outcome is not Committed the rows are kept in the record for the
// catch-up that loads them into the sinks that missed them.
func (l *Ledger) SettleRuns(ctx context.Context, k Key, rows []RunRow, outcomes map[string]Outcome) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec, err := l.get(ctx, k)
	if err != nil || rec == nil {
		return err
	}
	for _, o := range outcomes {
		if o.State != Committed {
			rec.Runs = append([]RunRow(nil), rows...) // not the caller's slice
		}
	}
	return l.settle(ctx, rec, Runs, outcomes)
}

// Drop removes endpoint's loads from the snapshot's record: there is nothing
// to load (the venue was not reached, so nothing was archived).
func (l *Ledger) Drop(ctx context.Context, k Key, endpoint string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec, err := l.get(ctx, k)
	if err != nil || rec == nil {
		return err
	}
	kept := rec.Loads[:0]
	for _, ld := range rec.Loads {
		if ld.Endpoint != endpoint {
			kept = append(kept, ld)
		}
	}
	if len(kept) == len(rec.Loads) {
		return nil
	}
	rec.Loads = kept
	return l.write(ctx, rec)
}

// Get returns a copy of the open record of snapshot k (nil when the
// ledger holds none open: settled, or never recorded).
func (l *Ledger) Get(ctx context.Context, k Key) (*Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec, err := l.get(ctx, k)
	if err != nil || rec == nil {
		return nil, err
	}
	cp := *rec
	cp.Loads = append([]Load(nil), rec.Loads...)
	cp.Runs = append([]RunRow(nil), rec.Runs...)
	return &cp, nil
}

// Committed reports whether any sink committed endpoint's rows of
// snapshot k, by its open record or, once settled, its done record
// (single or folded; false when the ledger holds neither: never
// recorded, or pruned).
func (l *Ledger) Committed(ctx context.Context, k Key, endpoint string) (bool, error) {
	l.mu.Lock()
	rec, err := l.get(ctx, k)
	var loads []Load
	if rec != nil {
		loads = append(loads, rec.Loads...)
	}
	l.mu.Unlock()
	if err != nil {
		return false, err
	}
	if rec == nil {
		done, err := l.doneRecord(ctx, k)
		if err != nil || done == nil {
			return false, err
		}
		loads = done.Loads
	}
	for _, ld := range loads {
		if ld.Endpoint == endpoint && ld.State == Committed {
			return true, nil
		}
	}
	return false, nil
}

// get returns the open record of k (nil when there is none). Call with mu
// held.
func (l *Ledger) get(ctx context.Context, k Key) (*Record, error) {
	k.Time = k.Time.UTC()
	if rec, ok := l.open[k]; ok {
		return rec, nil
	}
	b, err := l.st.get(ctx, openName(k))
	if err != nil || b == nil {
		return nil, wrap(err)
	}
	rec := &Record{}
	if err := json.Unmarshal(b, rec); err != nil {
		return nil, fmt.Errorf("ledger: %s: %w", openName(k), err)
	}
	l.open[k] = rec
	return rec, nil
}

// wrap prefixes a store's error (nil stays nil).
func wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("ledger: %w", err)
}

// write stores rec: in open/ while anything is pending or failed, else in
// done/ (and removed from open/). Call with mu held.
func (l *Ledger) write(ctx context.Context, rec *Record) error {
	k := rec.Key()
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	b = append(b, '\n')
	if !rec.Settled() {
		if err := l.st.put(ctx, openName(k), b); err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
		l.open[k] = rec
		return nil
	}
	// The done object first: a crash before the delete leaves the open one,
	// whose pending loads are loaded again, harmlessly.
	if err := l.st.put(ctx, doneName(k), b); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	delete(l.open, k)
	if err := l.st.delete(ctx, openName(k)); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	if day := k.Time.UTC().Format(time.DateOnly); day < l.now().UTC().Format(time.DateOnly) {
		return l.lowerFoldMark(ctx, day) // a closed day, maybe folded already
	}
	return nil
}

// Open returns the records in open/ (snapshots with a load pending or
// failed), oldest first.
func (l *Ledger) Open(ctx context.Context) ([]Record, error) {
	names, err := l.st.list(ctx, "open/")
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Record
	for _, n := range names {
		if !strings.HasSuffix(n, ".json") {
			continue
		}
		b, err := l.st.get(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("ledger: %w", err)
		}
		if b == nil {
			continue // settled meanwhile (a reader racing a run)
		}
		rec := Record{}
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("ledger: %s: %w", n, err)
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].SnapshotTime.Equal(out[j].SnapshotTime) {
			return out[i].SnapshotTime.Before(out[j].SnapshotTime)
		}
		return out[i].RunID < out[j].RunID
	})
	return out, nil
}

// SinkStatus sums up one sink's open loads.
type SinkStatus struct {
	Sink string `json:"sink"`
	// Pending counts snapshots with at least one pending load.
	Pending int `json:"pending"`
	// Oldest is the oldest pending snapshot (nil when none).
	Oldest *time.Time `json:"oldest,omitempty"`
	// LastError is the most recent error of a pending load.
	LastError string `json:"last_error,omitempty"`
	// Failed lists the loads that cannot be done, oldest first.
	Failed []Failure `json:"failed,omitempty"`
}

// Failure is one failed load.
type Failure struct {
	SnapshotTime time.Time `json:"snapshot_time"`
	RunID        string    `json:"run_id"`
	Endpoint     string    `json:"endpoint"`
	Reason       string    `json:"reason"`
}

// Summarize returns, per sink (sorted by name), what recs (as Open returns
// them) leave pending or failed. Sinks in sinks appear even when they have
// nothing open.
func Summarize(recs []Record, sinks ...string) []SinkStatus {
	by := map[string]*SinkStatus{}
	get := func(s string) *SinkStatus {
		if st, ok := by[s]; ok {
			return st
		}
		st := &SinkStatus{Sink: s}
		by[s] = st
		return st
	}
	for _, s := range sinks {
		get(s)
	}
	lastAt := map[string]time.Time{}
	for _, rec := range recs {
		counted := map[string]bool{}
		for _, ld := range rec.Loads {
			st := get(ld.Sink)
			switch ld.State {
			case Pending:
				if !counted[ld.Sink] {
					counted[ld.Sink] = true
					st.Pending++
					if st.Oldest == nil {
						t := rec.SnapshotTime
						st.Oldest = &t
					}
				}
				if ld.Error != "" && !ld.Updated.Before(lastAt[ld.Sink]) {
					lastAt[ld.Sink] = ld.Updated
					st.LastError = ld.Error
				}
			case Failed:
				st.Failed = append(st.Failed, Failure{SnapshotTime: rec.SnapshotTime, RunID: rec.RunID, Endpoint: ld.Endpoint, Reason: ld.Error})
			}
		}
	}
	out := make([]SinkStatus, 0, len(by))
	for _, st := range by {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Sink < out[j].Sink })
	return out
}
