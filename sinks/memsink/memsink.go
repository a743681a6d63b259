// Package memsink is a sink that keeps committed records in memory, for
// unit tests of the pipeline. It keeps the sinks.Sink contract as the
// Parquet sink does: a snapshot's rows become visible at Commit, all at
// once, and a snapshot loaded again replaces its earlier rows.
package memsink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// Sink is an in-memory store. The zero value is not usable: call New.
type Sink struct {
	name string

	mu     sync.Mutex
	tables map[string]*table
}

type table struct {
	t     *schema.Table
	snaps map[key][]arrow.Record
	order []key // first commit order
}

type key struct {
	snapTime int64
	runID    string
	endpoint string
	part     string
}

var _ sinks.Sink = (*Sink)(nil)

// New returns an empty store named name ("memory" when empty).
func New(name string) *Sink {
	if name == "" {
		name = "memory"
	}
	return &Sink{name: name, tables: map[string]*table{}}
}

// Name implements sinks.Sink.
func (s *Sink) Name() string { return s.name }

// Close implements sinks.Sink. Committed records stay readable.
func (s *Sink) Close(context.Context) error { return nil }

// Open implements sinks.Sink.
func (s *Sink) Open(ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memsink: open %s: %w", t.Name, err)
	}
	k := key{snap.Time.UnixMilli(), snap.RunID, snap.Endpoint, snap.Part}
	if t == schema.Instruments || t == schema.Runs {
		k.endpoint = "" // as in the Parquet layout: one file per run for these
	}
	return &writer{s: s, t: t, k: k}, nil
}

// Records returns the committed records of the named table, in commit order
// of their snapshots. The caller must not release them.
func (s *Sink) Records(name string) []arrow.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	tb := s.tables[name]
	if tb == nil {
		return nil
	}
	var out []arrow.Record
	for _, k := range tb.order {
		out = append(out, tb.snaps[k]...)
	}
	return out
}

// Rows is the number of committed rows of the named table.
func (s *Sink) Rows(name string) int64 {
	var n int64
	for _, r := range s.Records(name) {
		n += r.NumRows()
	}
	return n
}

func (s *Sink) commit(t *schema.Table, k key, recs []arrow.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tb := s.tables[t.Name]
	if tb == nil {
		tb = &table{t: t, snaps: map[key][]arrow.Record{}}
		s.tables[t.Name] = tb
	}
	old, ok := tb.snaps[k]
	for _, r := range old {
		r.Release()
	}
	if !ok {
		tb.order = append(tb.order, k)
	}
	tb.snaps[k] = recs
}

type writer struct {
	s    *Sink
	t    *schema.Table
	k    key
	recs []arrow.Record
	done bool
}

func (w *writer) Write(ctx context.Context, rec arrow.Record) error {
	if w.done {
		return errors.New("memsink: write after commit or abort")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memsink: write %s: %w", w.t.Name, err)
	}
	if !rec.Schema().Equal(w.t.ArrowSchema()) {
		return fmt.Errorf("memsink: write %s: record schema differs from the table's", w.t.Name)
	}
	rec.Retain()
	w.recs = append(w.recs, rec)
	return nil
}

func (w *writer) Commit(ctx context.Context) (sinks.Committed, error) {
	if w.done {
		return sinks.Committed{}, errors.New("memsink: commit after commit or abort")
	}
	if err := ctx.Err(); err != nil {
		w.Abort()
		return sinks.Committed{}, fmt.Errorf("memsink: commit %s: %w", w.t.Name, err)
	}
	w.done = true
	var rows int64
	for _, r := range w.recs {
		rows += r.NumRows()
	}
	w.s.commit(w.t, w.k, slices.Clip(w.recs))
	w.recs = nil
	return sinks.Committed{Rows: rows, Where: "memory:" + w.t.Name}, nil
}

func (w *writer) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	for _, r := range w.recs {
		r.Release()
	}
	w.recs = nil
	return nil
}
