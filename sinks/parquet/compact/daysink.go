package compact

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	pq "github.com/optlake/optlake/sinks/parquet"
)

// DaySink is the Parquet sink of a replay: it writes the compacted layout
// directly, one file per table and day sorted by the table's key, instead
// of one file per snapshot that a compaction would rewrite later.
//
// A Writer sorts its snapshot's rows (spilling runs to the Lake's TempDir
// past WriterBytes); Commit hands them to the day's sorter, Abort drops
// them, so a snapshot that fails leaves nothing. FlushDay, called once
// every snapshot of the day is loaded, merges the day's rows with the
// partition's other files and publishes the partition (PublishDay):
// readers see the day's old files or its new one, never both. Rows held
// for a day not flushed (a cancelled or crashed replay) are dropped by
// Close or the next Recover; the partition stays as it was.
//
// Tables without a sort key (schema.SortKey) go to Fallback, one file
// per snapshot as before.
type DaySink struct {
	opt  DayOptions
	mem  memory.Allocator
	mu   sync.Mutex
	days map[Partition]*dayRows
}

// DayOptions configure a DaySink.
type DayOptions struct {
	// Fallback is the per-snapshot Parquet sink (required): tables
	// without a sort key, and the sink's name.
	Fallback sinks.Sink
	// Compact configures the day's merge and publish; Compact.Lake is
	// required. Its ChunkBytes bound each day's sorter in memory.
	Compact Options
	// WriterBytes is the Arrow bytes one snapshot's table holds in memory
	// before it spills a sorted run (default 8 MiB).
	WriterBytes int64
}

var _ sinks.Sink = (*DaySink)(nil)

// NewDaySink returns the replay sink of opt.Compact.Lake.
func NewDaySink(opt DayOptions) (*DaySink, error) {
	if opt.Fallback == nil || opt.Compact.Lake == nil {
		return nil, errors.New("day sink: no fallback sink or lake")
	}
	opt.Compact.defaults()
	if opt.WriterBytes == 0 {
		opt.WriterBytes = 8 << 20
	}
	return &DaySink{opt: opt, mem: memory.DefaultAllocator, days: map[Partition]*dayRows{}}, nil
}

// Name implements sinks.Sink: the fallback's ("parquet").
func (s *DaySink) Name() string { return s.opt.Fallback.Name() }

// CommitsAtomically reports that Abort leaves nothing behind
// (pipeline.AtomicSink): a Writer's rows reach the lake only whole, at
// the day's publish.
func (s *DaySink) CommitsAtomically() bool { return true }

// Open implements sinks.Sink.
func (s *DaySink) Open(ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
	rel := filepath.ToSlash(pq.Path(t, snap))
	p, name, ok := partitionOf(rel)
	key := schema.SortKey(p.Table)
	if !ok || key == nil {
		return s.opt.Fallback.Open(ctx, t, snap)
	}
	tmp, err := s.opt.Compact.Lake.TempDir()
	if err != nil {
		return nil, fmt.Errorf("parquet: %s: %w", rel, err)
	}
	u := t.ArrowSchema()
	return &dayWriter{s: s, p: p, rel: rel, u: u, key: key, seen: groupSet{},
		file: pq.ManifestFile{Name: name},
		so:   &sorter{mem: s.mem, u: u, key: key, tmp: tmp, budget: s.opt.WriterBytes, runBatch: 1024}}, nil
}

// FlushDay publishes the partitions of date (YYYY-MM-DD) the replay wrote:
// call it once every snapshot of the day has been loaded. A partition that
// fails is left as it was and reported; the others go on.
func (s *DaySink) FlushDay(ctx context.Context, date string) error {
	s.mu.Lock()
	var parts []Partition
	for p := range s.days {
		if p.Date == date {
			parts = append(parts, p)
		}
	}
	s.mu.Unlock()
	sort.Slice(parts, func(a, b int) bool { return parts[a].Table < parts[b].Table })
	var errs []error
	for _, p := range parts {
		s.mu.Lock()
		d := s.days[p]
		delete(s.days, p)
		s.mu.Unlock()
		r, err := d.replayed()
		if err == nil {
			var pr PartitionReport
			pr, err = PublishDay(ctx, s.opt.Compact, p, r)
			if err == nil {
				s.opt.Compact.Logger.Info("replayed day written", "partition", p.String(), "snapshot_files", len(r.Files),
					"rows", pr.Rows, "bytes", pr.OutputBytes, "took", pr.Took.Round(time.Millisecond))
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("parquet: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Close implements sinks.Sink: rows of days not flushed are dropped (the
// lake keeps those days as they were); the fallback and the lake close.
func (s *DaySink) Close(ctx context.Context) error {
	s.mu.Lock()
	for p, d := range s.days {
		d.drop()
		delete(s.days, p)
	}
	s.mu.Unlock()
	return errors.Join(s.opt.Fallback.Close(ctx), s.opt.Compact.Lake.Close())
}

// dayRows are the committed rows of one partition, awaiting its publish.
type dayRows struct {
	mu    sync.Mutex
	so    *sorter // the current schema's; nil before the first commit
	runs  []Run
	files []pq.ManifestFile
}

// day returns the partition's rows (made on first use).
func (s *DaySink) day(p Partition) *dayRows {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.days[p]
	if d == nil {
		d = &dayRows{}
		s.days[p] = d
	}
	return d
}

// take adds a committed writer's rows: its chunk into the day's sorter
// (one per schema: a schema change spills the chunk so far), its runs as
// they are.
func (d *dayRows) take(w *dayWriter, budget int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.so != nil && !sameColumns(d.so.u, w.u) {
		if err := d.spill(); err != nil {
			return err
		}
	}
	if d.so == nil {
		d.so = &sorter{mem: w.so.mem, u: w.u, key: w.key, tmp: w.so.tmp, budget: budget, runBatch: 1024}
	}
	for _, rec := range w.so.chunk {
		if err := d.so.add(rec); err != nil {
			return err
		}
	}
	for _, path := range w.so.runs {
		d.runs = append(d.runs, Run{Path: path, Schema: w.u})
	}
	w.so.runs = nil
	d.files = append(d.files, w.file)
	return nil
}

// spill writes the sorter's chunk as a run and ends the sorter.
func (d *dayRows) spill() error {
	runs, err := d.so.finish()
	for _, path := range runs {
		d.runs = append(d.runs, Run{Path: path, Schema: d.so.u})
	}
	d.so.runs = nil
	d.so = nil
	return err
}

// replayed ends the day's rows: everything spilled, handed to PublishDay.
func (d *dayRows) replayed() (*Replayed, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var u *arrow.Schema
	if d.so != nil {
		u = d.so.u
		if err := d.spill(); err != nil {
			d.dropLocked()
			return nil, err
		}
	}
	r := &Replayed{Schema: u, Runs: d.runs, Files: d.files}
	d.runs = nil
	return r, nil
}

func (d *dayRows) drop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dropLocked()
}

func (d *dayRows) dropLocked() {
	if d.so != nil {
		d.so.release()
		d.so = nil
	}
	for _, r := range d.runs {
		removeQuiet(r.Path)
	}
	d.runs = nil
}

// dayWriter sorts one snapshot's rows of one table.
type dayWriter struct {
	s    *DaySink
	p    Partition
	rel  string
	u    *arrow.Schema
	key  []string
	so   *sorter
	file pq.ManifestFile // the name the snapshot's own file would have; its rows and groups
	seen groupSet
	done bool
}

func (w *dayWriter) Write(_ context.Context, rec arrow.Record) error {
	if w.done {
		return errors.New("parquet: write after commit or abort")
	}
	if !sameColumns(rec.Schema(), w.u) {
		return fmt.Errorf("parquet: write %s: the rows' columns are not the table's", w.rel)
	}
	kv, err := newKeyView(rec, w.key)
	if err != nil {
		return fmt.Errorf("parquet: write %s: %w", w.rel, err)
	}
	for i := range int(rec.NumRows()) {
		g := kv.group(i)
		if _, ok := w.seen[g]; !ok {
			w.seen[g] = struct{}{}
			w.file.Groups = append(w.file.Groups, g)
		}
	}
	if err := w.so.add(rec); err != nil {
		return fmt.Errorf("parquet: write %s: %w", w.rel, err)
	}
	w.file.Rows += rec.NumRows()
	return nil
}

// Commit hands the rows to the day: they reach the lake at its publish
// (FlushDay), all of the day's at once.
func (w *dayWriter) Commit(context.Context) (sinks.Committed, error) {
	if w.done {
		return sinks.Committed{}, errors.New("parquet: commit after commit or abort")
	}
	w.done = true
	defer w.so.release()
	if err := w.s.day(w.p).take(w, w.s.opt.Compact.ChunkBytes); err != nil {
		return sinks.Committed{}, fmt.Errorf("parquet: commit %s: %w", w.rel, pq.DiskFull(err))
	}
	return sinks.Committed{Rows: w.file.Rows, Where: w.p.String() + " (one file per day, written when the day is replayed)"}, nil
}

func (w *dayWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	w.so.release()
	return nil
}

// release drops the sorter's chunk and deletes its runs.
func (s *sorter) release() {
	for _, r := range s.chunk {
		r.Release()
	}
	s.chunk, s.views, s.size = nil, nil, 0
	for _, r := range s.runs {
		removeQuiet(r)
	}
	s.runs = nil
}
