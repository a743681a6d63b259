package pipeline

import (
	"bufio"
	"context"
	"fmt"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// stagedSinks wraps every sink that is not atomic (sinks.Atomic) in a
// stage whose file is in dir ("": the system's temp folder): the rows of
// a paginated request reach it only once every page decoded.
func stagedSinks(ss []sinks.Sink, mem memory.Allocator, dir string) []sinks.Sink {
	out := make([]sinks.Sink, len(ss))
	for i, s := range ss {
		if sinks.CommitsAtomically(s) {
			out[i] = s
		} else {
			out[i] = &stage{Sink: s, mem: mem, dir: dir}
		}
	}
	return out
}

// stage holds a table's records in a local Arrow IPC file until Commit,
// which hands them to the sink's writer and commits it; Abort removes the
// file and the sink never sees a row. It forwards the sink's optional
// capabilities (sinks.Atomic and the others).
type stage struct {
	sinks.Sink
	mem memory.Allocator
	dir string // Config.Scratch
}

func (s *stage) Open(ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
	return s.open(t, snap, func(ctx context.Context) (sinks.Writer, error) { return s.Sink.Open(ctx, t, snap) })
}

// OpenVersion implements sinks.Versioned: the sink's OpenVersion, at
// Commit.
func (s *stage) OpenVersion(ctx context.Context, t *schema.Table, snap sinks.Snapshot, version string) (sinks.Writer, error) {
	if _, ok := s.Sink.(sinks.Versioned); !ok {
		return nil, sinks.NotVersioned(s)
	}
	return s.open(t, snap, func(ctx context.Context) (sinks.Writer, error) {
		return sinks.OpenVersion(ctx, s.Sink, t, snap, version)
	})
}

// open stages t's rows of snap for the writer that open returns at Commit.
func (s *stage) open(t *schema.Table, snap sinks.Snapshot, open func(context.Context) (sinks.Writer, error)) (sinks.Writer, error) {
	f, err := os.CreateTemp(s.dir, "optlake-stage-*.arrow")
	if err != nil {
		return nil, fmt.Errorf("stage %s: %w", t.Name, err)
	}
	return &stageWriter{s: s, t: t, snap: snap, open: open, f: f, bw: bufio.NewWriterSize(f, 1<<20)}, nil
}

// CommitsAtomically implements sinks.Atomic: the sink's answer (a stage
// hands the rows on at Commit, as they come).
func (s *stage) CommitsAtomically() bool { return sinks.CommitsAtomically(s.Sink) }

// HoldsDays implements sinks.DaySink: the sink's answer.
func (s *stage) HoldsDays() bool {
	_, ok := sinks.HoldsDays(s.Sink)
	return ok
}

// FlushDay implements sinks.DaySink: the sink's FlushDay.
func (s *stage) FlushDay(ctx context.Context, date string) error {
	return sinks.FlushDay(ctx, s.Sink, date)
}

type stageWriter struct {
	s    *stage
	t    *schema.Table
	snap sinks.Snapshot
	open func(context.Context) (sinks.Writer, error) // the sink's writer
	f    *os.File
	bw   *bufio.Writer
	w    *ipc.Writer
	sch  *arrow.Schema
	done bool
}

func (w *stageWriter) Write(_ context.Context, rec arrow.Record) error {
	if w.w == nil {
		w.sch = rec.Schema()
		w.w = ipc.NewWriter(w.bw, ipc.WithSchema(w.sch), ipc.WithAllocator(w.s.mem))
	}
	if err := w.w.Write(rec); err != nil {
		return fmt.Errorf("stage %s: %w", w.t.Name, err)
	}
	return nil
}

// Commit hands the staged records to the sink and commits them.
func (w *stageWriter) Commit(ctx context.Context) (sinks.Committed, error) {
	defer w.Abort()
	if w.w != nil {
		if err := w.w.Close(); err != nil {
			return sinks.Committed{}, fmt.Errorf("stage %s: %w", w.t.Name, err)
		}
	}
	if err := w.bw.Flush(); err != nil {
		return sinks.Committed{}, fmt.Errorf("stage %s: %w", w.t.Name, err)
	}
	out, err := w.open(ctx)
	if err != nil {
		return sinks.Committed{}, err
	}
	if w.w != nil {
		if _, err := w.f.Seek(0, 0); err != nil {
			out.Abort()
			return sinks.Committed{}, fmt.Errorf("stage %s: %w", w.t.Name, err)
		}
		rd, err := ipc.NewReader(bufio.NewReaderSize(w.f, 1<<20), ipc.WithAllocator(w.s.mem), ipc.WithSchema(w.sch))
		if err != nil {
			out.Abort()
			return sinks.Committed{}, fmt.Errorf("stage %s: %w", w.t.Name, err)
		}
		defer rd.Release()
		for rd.Next() {
			if err := out.Write(ctx, rd.Record()); err != nil {
				out.Abort()
				return sinks.Committed{}, err
			}
		}
		if err := rd.Err(); err != nil {
			out.Abort()
			return sinks.Committed{}, fmt.Errorf("stage %s: %w", w.t.Name, err)
		}
	}
	return out.Commit(ctx)
}

// Abort removes the staged records.
func (w *stageWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	w.f.Close()
	return os.Remove(w.f.Name())
}
