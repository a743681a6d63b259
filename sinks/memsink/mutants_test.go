package memsink

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/sinktest"
)

// The suite's checks can fail: each broken sink below breaks one rule of
// the contract, and the checks that guard that rule must fail on it.

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed bool
}

func (r *recorder) fail()                 { r.mu.Lock(); r.failed = true; r.mu.Unlock() }
func (r *recorder) Helper()               {}
func (r *recorder) Log(...any)            {}
func (r *recorder) Logf(string, ...any)   {}
func (r *recorder) Error(...any)          { r.fail() }
func (r *recorder) Errorf(string, ...any) { r.fail() }
func (r *recorder) Fail()                 { r.fail() }
func (r *recorder) Failed() bool          { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }
func (r *recorder) FailNow()              { r.fail(); runtime.Goexit() }
func (r *recorder) Fatal(...any)          { r.FailNow() }
func (r *recorder) Fatalf(string, ...any) { r.FailNow() }

// fails runs check on h and reports whether it failed.
func fails(t *testing.T, c sinktest.Check, h sinktest.Harness) bool {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(r, h)
	}()
	<-done
	return r.Failed()
}

// broken wraps a memsink; its hooks change one behaviour.
type broken struct {
	*Sink
	open func(s *Sink, ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error)
}

func (b broken) Open(ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
	return b.open(b.Sink, ctx, t, snap)
}

// dropLast never writes the last record it receives.
type dropLast struct {
	sinks.Writer
	held arrow.Record
}

func (w *dropLast) Write(ctx context.Context, rec arrow.Record) error {
	if w.held != nil {
		if err := w.Writer.Write(ctx, w.held); err != nil {
			return err
		}
		w.held.Release()
	}
	rec.Retain()
	w.held = rec
	return nil
}

// eager commits every record as it is written.
type eager struct {
	s    *Sink
	t    *schema.Table
	snap sinks.Snapshot
	n    int
	rows int64
	done bool
}

func (w *eager) Write(ctx context.Context, rec arrow.Record) error {
	w.n++
	snap := w.snap
	snap.Part = fmt.Sprint(w.n)
	iw, _ := w.s.Open(ctx, w.t, snap)
	if err := iw.Write(ctx, rec); err != nil {
		return err
	}
	w.rows += rec.NumRows()
	_, err := iw.Commit(ctx)
	return err
}

func (w *eager) Commit(context.Context) (sinks.Committed, error) {
	if w.done {
		return sinks.Committed{}, fmt.Errorf("done")
	}
	w.done = true
	return sinks.Committed{Rows: w.rows, Where: "eager"}, nil
}

func (w *eager) Abort() error { w.done = true; return nil }

// abortCommits commits on Abort.
type abortCommits struct{ sinks.Writer }

func (w abortCommits) Abort() error {
	_, err := w.Writer.Commit(context.Background())
	_ = err
	return nil
}

// lenient accepts writes and commits after a commit.
type lenient struct {
	sinks.Writer
	done bool
}

func (w *lenient) Write(ctx context.Context, rec arrow.Record) error {
	if w.done {
		return nil
	}
	return w.Writer.Write(ctx, rec)
}

func (w *lenient) Commit(ctx context.Context) (sinks.Committed, error) {
	if w.done {
		return sinks.Committed{}, nil
	}
	w.done = true
	return w.Writer.Commit(ctx)
}

// viewer keeps each record's strings as array.String's Value gives them
// (views of the record's buffers) without retaining the record, and builds
// the record again from them at Commit.
type viewer struct {
	sinks.Writer
	held []viewed
}

type viewed struct {
	sch     *arrow.Schema
	cols    []arrow.Array // retained; nil for the string columns
	strs    [][]string    // the string columns' views
	valid   [][]bool
	numRows int64
}

func (w *viewer) Write(_ context.Context, rec arrow.Record) error {
	v := viewed{sch: rec.Schema(), cols: make([]arrow.Array, rec.NumCols()), strs: make([][]string, rec.NumCols()), valid: make([][]bool, rec.NumCols()), numRows: rec.NumRows()}
	for c, col := range rec.Columns() {
		s, ok := col.(*array.String)
		if !ok {
			col.Retain()
			v.cols[c] = col
			continue
		}
		for i := 0; i < s.Len(); i++ {
			v.strs[c] = append(v.strs[c], s.Value(i))
			v.valid[c] = append(v.valid[c], s.IsValid(i))
		}
	}
	w.held = append(w.held, v)
	return nil
}

func (w *viewer) Commit(ctx context.Context) (sinks.Committed, error) {
	for _, v := range w.held {
		for c := range v.cols {
			if v.cols[c] == nil {
				b := array.NewStringBuilder(memory.DefaultAllocator)
				b.AppendValues(v.strs[c], v.valid[c])
				v.cols[c] = b.NewArray()
				b.Release()
			}
		}
		r := array.NewRecord(v.sch, v.cols, v.numRows)
		for _, c := range v.cols {
			c.Release()
		}
		err := w.Writer.Write(ctx, r)
		r.Release()
		if err != nil {
			return sinks.Committed{}, err
		}
	}
	return w.Writer.Commit(ctx)
}

func TestChecksCatchBrokenSinks(t *testing.T) {
	var mu sync.Mutex
	cases := []struct {
		name string
		open func(s *Sink, ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error)
		// checks that must fail
		catch []string
	}{
		{"drops the last record", func(s *Sink, ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
			w, err := s.Open(ctx, t, snap)
			return &dropLast{Writer: w}, err
		}, []string{"SameRowsOut", "IdempotentReload", "WritersOpenAtOnce", "WriterMisuse"}},
		{"a reload adds rows", func() func(s *Sink, ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
			n := 0
			return func(s *Sink, ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
				mu.Lock()
				n++
				snap.Part = fmt.Sprint(n)
				mu.Unlock()
				return s.Open(ctx, t, snap)
			}
		}(), []string{"IdempotentReload"}},
		{"rows visible before commit", func(s *Sink, ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
			return &eager{s: s, t: t, snap: snap}, nil
		}, []string{"Abort", "CommitAtomicity"}},
		{"abort commits", func(s *Sink, ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
			w, err := s.Open(ctx, t, snap)
			return abortCommits{w}, err
		}, []string{"Abort", "CommitAtomicity"}},
		{"one writer at a time", func() func(s *Sink, ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
			var last sinks.Writer
			return func(s *Sink, ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
				mu.Lock()
				defer mu.Unlock()
				if last != nil {
					last.Abort()
				}
				w, err := s.Open(ctx, t, snap)
				last = w
				return w, err
			}
		}(), []string{"CommitAtomicity", "WritersOpenAtOnce"}},
		{"write after commit accepted", func(s *Sink, ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
			w, err := s.Open(ctx, t, snap)
			return &lenient{Writer: w}, err
		}, []string{"WriterMisuse"}},
		{"keeps views of released records", func(s *Sink, ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
			w, err := s.Open(ctx, t, snap)
			return &viewer{Writer: w}, err
		}, []string{"PoisonedBuffers"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := sinktest.Harness{New: func(t testing.TB) (sinks.Sink, sinktest.Reader) {
				s := New("")
				return broken{Sink: s, open: c.open}, reader{s}
			}}
			for _, name := range c.catch {
				i := slices.IndexFunc(sinktest.Checks, func(k sinktest.Check) bool { return k.Name == name })
				if i < 0 {
					t.Fatalf("no check %s", name)
				}
				if !fails(t, sinktest.Checks[i], h) {
					t.Errorf("check %s passes on a sink that %s", name, c.name)
				}
			}
		})
	}
}
