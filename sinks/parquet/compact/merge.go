package compact

import (
	"bufio"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"

	pq "github.com/optlake/optlake/sinks/parquet"
)

// A day is compacted by an external merge sort with bounded memory:
//
//  1. The per-snapshot files are read in batches into a chunk of at most
//     Options.ChunkBytes of Arrow data; the chunk is sorted in memory by
//     the key and spilled to a sorted run (an Arrow IPC stream, LZ4, under
//     .compact/tmp, never in a table folder). Small files share a chunk.
//  2. The runs, and the day's earlier compacted files (already sorted),
//     are merged by a heap that holds one small batch of each: at most
//     mergeFanIn inputs at a time; more runs are first merged into longer
//     runs, a level at a time.
//  3. The merged rows go to the output in batches (output.go).
//
// Memory is the chunk, plus fan-in × batch rows, plus the output's
// buffered row group (compressed pages): independent of the day's size.

// cursor yields the rows of one sorted input, a batch at a time, with the
// union schema.
type cursor interface {
	// next returns the next batch (nil at the end); the cursor keeps
	// ownership, the batch is valid until the following call.
	next() (arrow.Record, error)
	close() error
}

// sorter turns unsorted record batches into sorted runs.
type sorter struct {
	mem      memory.Allocator
	u        *arrow.Schema
	key      []string
	tmp      string
	budget   int64
	runBatch int

	chunk []arrow.Record
	views []keyView
	size  int64
	runs  []string // spilled run files
}

// add takes a batch (with schema u; the sorter retains it).
func (s *sorter) add(rec arrow.Record) error {
	kv, err := newKeyView(rec, s.key)
	if err != nil {
		return err
	}
	rec.Retain()
	s.chunk = append(s.chunk, rec)
	s.views = append(s.views, kv)
	s.size += util.TotalRecordSize(rec)
	if s.size >= s.budget {
		return s.spill()
	}
	return nil
}

type rowRef struct{ rec, row int32 }

// spill sorts the chunk and writes it as a run.
func (s *sorter) spill() error {
	defer func() {
		for _, r := range s.chunk {
			r.Release()
		}
		s.chunk, s.views, s.size = s.chunk[:0], s.views[:0], 0
	}()
	var refs []rowRef
	for k, r := range s.chunk {
		for i := range int(r.NumRows()) {
			refs = append(refs, rowRef{int32(k), int32(i)})
		}
	}
	if len(refs) == 0 {
		return nil
	}
	slices.SortStableFunc(refs, func(a, b rowRef) int {
		return compareRows(&s.views[a.rec], int(a.row), &s.views[b.rec], int(b.row))
	})
	if err := copyable(s.mem, s.u); err != nil {
		return err
	}
	w, err := newRunWriter(s.mem, s.u, s.tmp)
	if err != nil {
		return err
	}
	for start := 0; start < len(refs); start += s.runBatch {
		rec := gather(s.mem, s.u, s.chunk, refs[start:min(start+s.runBatch, len(refs))])
		if err := w.write(rec); err != nil {
			w.abort()
			return err
		}
	}
	path, err := w.finish()
	if err != nil {
		return err
	}
	s.runs = append(s.runs, path)
	return nil
}

// finish spills what is left and returns the runs.
func (s *sorter) finish() ([]string, error) {
	if len(s.chunk) > 0 {
		if err := s.spill(); err != nil {
			return s.runs, err
		}
	}
	return s.runs, nil
}

// runWriter writes one sorted run.
type runWriter struct {
	f  *os.File
	bw *bufio.Writer
	w  *ipc.Writer
}

func newRunWriter(mem memory.Allocator, u *arrow.Schema, dir string) (*runWriter, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("spill: %w", err)
	}
	f, err := os.CreateTemp(dir, "run-*.arrows")
	if err != nil {
		return nil, fmt.Errorf("spill: %w", err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	return &runWriter{f: f, bw: bw, w: ipc.NewWriter(bw, ipc.WithSchema(u), ipc.WithAllocator(mem), ipc.WithLZ4())}, nil
}

func (w *runWriter) write(rec arrow.Record) error {
	defer rec.Release()
	if err := w.w.Write(rec); err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	return nil
}

func (w *runWriter) finish() (string, error) {
	err := w.w.Close()
	if err == nil {
		err = w.bw.Flush()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(w.f.Name())
		return "", fmt.Errorf("spill: %w", err)
	}
	return w.f.Name(), nil
}

func (w *runWriter) abort() {
	w.w.Close()
	w.f.Close()
	os.Remove(w.f.Name())
}

// runCursor reads a spilled run; it deletes the file when closed.
type runCursor struct {
	f *os.File
	r *ipc.Reader
}

func openRun(mem memory.Allocator, path string) (*runCursor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open run: %w", err)
	}
	r, err := ipc.NewReader(bufio.NewReaderSize(f, 256<<10), ipc.WithAllocator(mem))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open run: %w", err)
	}
	return &runCursor{f: f, r: r}, nil
}

func (c *runCursor) next() (arrow.Record, error) {
	if c.r.Next() {
		return c.r.Record(), nil
	}
	if err := c.r.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read run: %w", err)
	}
	return nil, nil
}

func (c *runCursor) close() error {
	c.r.Release()
	err := c.f.Close()
	os.Remove(c.f.Name())
	return err
}

// heapItem is one cursor's current position.
type heapItem struct {
	c   cursor
	ord int // input order: ties go to the earlier input
	rec arrow.Record
	kv  keyView
	row int
}

type mergeHeap []*heapItem

func (h mergeHeap) Len() int { return len(h) }
func (h mergeHeap) Less(i, j int) bool {
	c := compareRows(&h[i].kv, h[i].row, &h[j].kv, h[j].row)
	if c != 0 {
		return c < 0
	}
	return h[i].ord < h[j].ord
}
func (h mergeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)   { *h = append(*h, x.(*heapItem)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// advance moves the item to its next row, loading the next batch when the
// current one is done; false at the end of its input.
func (it *heapItem) advance(key []string) (bool, error) {
	it.row++
	for it.rec == nil || it.row >= int(it.rec.NumRows()) {
		rec, err := it.c.next()
		if err != nil {
			return false, err
		}
		if rec == nil {
			it.rec = nil
			return false, nil
		}
		kv, err := newKeyView(rec, key)
		if err != nil {
			return false, err
		}
		it.rec, it.kv, it.row = rec, kv, 0
	}
	return true, nil
}

// merge merges the cursors (each sorted by key) into emit, in key order,
// ties in cursor order. It closes the cursors.
func merge(ctx context.Context, cursors []cursor, key []string, emit func(rec arrow.Record, row int) error) (err error) {
	defer func() {
		for _, c := range cursors {
			if cerr := c.close(); err == nil {
				err = cerr
			}
		}
	}()
	h := make(mergeHeap, 0, len(cursors))
	for k, c := range cursors {
		it := &heapItem{c: c, ord: k, row: -1}
		ok, err := it.advance(key)
		if err != nil {
			return err
		}
		if ok {
			h = append(h, it)
		}
	}
	heap.Init(&h)
	n := 0
	for len(h) > 0 {
		if n++; n%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		it := h[0]
		if err := emit(it.rec, it.row); err != nil {
			return err
		}
		ok, err := it.advance(key)
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	return nil
}

// mergeRuns merges spilled runs down to at most fanIn runs, a level at a
// time: each group of fanIn runs becomes one longer run.
func mergeRuns(ctx context.Context, mem memory.Allocator, u *arrow.Schema, key []string, tmp string, runs []string, fanIn, batch int) ([]string, error) {
	for len(runs) > fanIn {
		var next []string
		for start := 0; start < len(runs); start += fanIn {
			group := runs[start:min(start+fanIn, len(runs))]
			if len(group) == 1 {
				next = append(next, group[0])
				continue
			}
			out, err := mergeToRun(ctx, mem, u, key, tmp, group, batch)
			if err != nil {
				return nil, err
			}
			next = append(next, out)
		}
		runs = next
	}
	return runs, nil
}

func mergeToRun(ctx context.Context, mem memory.Allocator, u *arrow.Schema, key []string, tmp string, group []string, batch int) (string, error) {
	var cursors []cursor
	for _, p := range group {
		c, err := openRun(mem, p)
		if err != nil {
			for _, c := range cursors {
				c.close()
			}
			return "", err
		}
		cursors = append(cursors, c)
	}
	w, err := newRunWriter(mem, u, tmp)
	if err != nil {
		for _, c := range cursors {
			c.close()
		}
		return "", err
	}
	g := newGatherer(mem, u)
	defer g.release()
	err = merge(ctx, cursors, key, func(rec arrow.Record, row int) error {
		g.add(rec, row)
		if g.rows() >= batch {
			return w.write(g.flush())
		}
		return nil
	})
	if err == nil {
		if rec := g.flush(); rec != nil {
			err = w.write(rec)
		}
	}
	if err != nil {
		w.abort()
		return "", err
	}
	return w.finish()
}

// groupSet is a set of snapshot groups.
type groupSet map[pq.Group]struct{}
