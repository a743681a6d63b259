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

// AtomicSink is a sink whose Writer.Commit makes all of a table's rows
// visible at once and whose Abort leaves nothing (Parquet: one file
// renamed into place). Other sinks (ClickHouse, which inserts blocks as
// they stream) are staged for paginated requests, so that a page that
// fails after the first ones leaves nothing committed.
type AtomicSink interface {
	sinks.Sink
	CommitsAtomically() bool
}

// stagedSinks wraps every sink that is not atomic in a stage whose file
// is in dir ("": the system's temp folder).
func stagedSinks(ss []sinks.Sink, mem memory.Allocator, dir string) []sinks.Sink {
	out := make([]sinks.Sink, len(ss))
	for i, s := range ss {
		if a, ok := s.(AtomicSink); ok && a.CommitsAtomically() {
			out[i] = s
		} else {
			out[i] = &stage{Sink: s, mem: mem, dir: dir}
		}
	}
	return out
}

// stage holds a table's records in a local Arrow IPC file until Commit,
// which hands them to the sink's writer and commits it; Abort removes the
// file and the sink never sees a row.
type stage struct {
	sinks.Sink
	mem memory.Allocator
	dir string // Config.Scratch
}

func (s *stage) Open(ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
	f, err := os.CreateTemp(s.dir, "optlake-stage-*.arrow")
	if err != nil {
		return nil, fmt.Errorf("stage %s: %w", t.Name, err)
	}
	return &stageWriter{s: s, t: t, snap: snap, f: f, bw: bufio.NewWriterSize(f, 1<<20)}, nil
}

type stageWriter struct {
	s    *stage
	t    *schema.Table
	snap sinks.Snapshot
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
	out, err := w.s.Sink.Open(ctx, w.t, w.snap)
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
