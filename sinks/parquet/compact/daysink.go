package compact

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"

	"github.com/optlake/optlake/internal/arrowpool"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	pq "github.com/optlake/optlake/sinks/parquet"
)

// DaySink is the Parquet sink of a replay: it writes the compacted layout
// directly, one file per table and day sorted by the table's key, instead
// of one file per snapshot that a compaction would rewrite later.
//
// A Writer holds its snapshot's rows (spilling sorted runs to the Target's
// TempDir past WriterBytes); Commit orders them into a run in memory (a
// permutation of its records: no row is copied) and hands it to the day,
// Abort drops them, so a snapshot that fails leaves nothing. The day keeps
// its snapshots' runs in memory up to half of Compact.ChunkBytes; past
// that, a goroutine of the day packs them into the day's pack file as
// they are (pack.go; runs it cannot pack are merged into one spilled run)
// while the next snapshots load (dayRows).
// FlushDay, called once every snapshot of the day is loaded, publishes the
// partition (PublishDay): a day of only its own packed and in-memory runs
// is written in its order a column at a time, without a merge
// (direct.go); otherwise its runs are merged with the partition's other
// files. Readers see the day's old files or its new one, never both. The file's encodings are the table's (pq.Encodings), not tried.
// Rows held for a day not flushed (a cancelled or crashed replay) are
// dropped by Close or the next Recover; the partition stays as it was.
//
// Tables without a sort key (schema.SortKey) go to Fallback, one file
// per snapshot as before.
type DaySink struct {
	opt   DayOptions
	mem   memory.Allocator
	pool  *arrowpool.Pool // the merges' gather and spill buffers, shared by the days
	mu    sync.Mutex
	days  map[Partition]*dayRows
	dicts map[Partition]*keyDict // each day's key dictionary (keydict.go)
	tmp   string                 // the Target's TempDir
}

// DayOptions configure a DaySink.
type DayOptions struct {
	// Fallback is the per-snapshot Parquet sink (required): tables
	// without a sort key, and the sink's name.
	Fallback sinks.Sink
	// Compact configures the day's merge and publish; Compact.Target is
	// required. Its ChunkBytes bound the runs each day holds in memory:
	// half of it is merged into a spilled run while the other half fills.
	Compact Options
	// WriterBytes is the Arrow bytes one snapshot's table holds in memory
	// before it spills a sorted run (default 8 MiB).
	WriterBytes int64
}

var _ sinks.Sink = (*DaySink)(nil)

// NewDaySink returns the replay sink of opt.Compact.Target.
func NewDaySink(opt DayOptions) (*DaySink, error) {
	if opt.Fallback == nil || opt.Compact.Target == nil {
		return nil, errors.New("day sink: no fallback sink or lake")
	}
	opt.Compact.defaults()
	if opt.WriterBytes == 0 {
		opt.WriterBytes = 8 << 20
	}
	return &DaySink{opt: opt, mem: memory.DefaultAllocator, pool: arrowpool.New(opt.Compact.ChunkBytes / 2), days: map[Partition]*dayRows{}, dicts: map[Partition]*keyDict{}}, nil
}

// Name implements sinks.Sink: the fallback's ("parquet").
func (s *DaySink) Name() string { return s.opt.Fallback.Name() }

// CommitsAtomically implements sinks.Atomic: a Writer's rows reach the
// lake only whole, at the day's publish, and Abort leaves nothing behind;
// the tables without a sort key are the Fallback's, as atomic as it is.
func (s *DaySink) CommitsAtomically() bool { return sinks.CommitsAtomically(s.opt.Fallback) }

// HoldsDays implements sinks.DaySink: the rows of the tables with a sort
// key wait for FlushDay.
func (s *DaySink) HoldsDays() bool { return true }

// Open implements sinks.Sink.
func (s *DaySink) Open(ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
	rel := filepath.ToSlash(pq.Path(t, snap))
	p, name, ok := partitionOf(rel)
	key := schema.SortKey(p.Table)
	if !ok || key == nil {
		return s.opt.Fallback.Open(ctx, t, snap)
	}
	tmp, err := s.tempDir()
	if err != nil {
		return nil, fmt.Errorf("parquet: %s: %w", rel, err)
	}
	u := t.ArrowSchema()
	dict := s.dict(p, u, key)
	return &dayWriter{s: s, p: p, rel: rel, u: u, key: key, seen: groupSet{}, enc: pq.DayEncodings(t, key),
		file: pq.ManifestFile{Name: name}, dict: dict,
		so: &sorter{mem: s.mem, pool: s.pool, u: u, key: key, tmp: tmp, budget: s.opt.WriterBytes, runBatch: 1024, dict: dict}}, nil
}

// dict returns the key dictionary of partition p (made on first use; nil
// when the key does not start with a string column).
func (s *DaySink) dict(p Partition, u *arrow.Schema, key []string) *keyDict {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.dicts[p]
	if !ok {
		d = newKeyDict(u, key)
		s.dicts[p] = d
	}
	return d
}

// tempDir is the Target's spill folder, asked once: Target methods are not
// safe for concurrent use, and writers open at once.
func (s *DaySink) tempDir() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tmp == "" {
		tmp, err := s.opt.Compact.Target.TempDir()
		if err != nil {
			return "", err
		}
		s.tmp = tmp
	}
	return s.tmp, nil
}

// FlushDay publishes the partitions of date (YYYY-MM-DD) the replay wrote:
// call it once every snapshot of the day has been loaded. A partition that
// fails is left as it was and reported; the others go on.
//
// The day's largest partition is written beside the others (which go one
// after the other): each publish has serial stretches (its plan, the
// day's order, the file's commit and journal) that the other's work fills
// on a second core, and at most two partitions' buffers are held at once.
// Each partition is published through its own journal, so a crash between
// them leaves each one old or new, as in any order.
func (s *DaySink) FlushDay(ctx context.Context, date string) error {
	s.mu.Lock()
	var parts []Partition
	rows := map[Partition]int64{}
	for p, d := range s.days {
		if p.Date == date {
			parts = append(parts, p)
			rows[p] = d.rows()
		}
	}
	s.mu.Unlock()
	sort.Slice(parts, func(a, b int) bool { return parts[a].Table < parts[b].Table })
	errs := make([]error, len(parts))
	if len(parts) < 2 {
		for i, p := range parts {
			errs[i] = s.flushPartition(ctx, p)
		}
		return errors.Join(errs...)
	}
	// The spill folder is made before the publishes start: Target methods
	// are not safe for concurrent use, and TempDir is then only read.
	if _, err := s.tempDir(); err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	big := 0
	for i, p := range parts {
		if rows[p] > rows[parts[big]] {
			big = i
		}
	}
	var rest []int
	for i := range parts {
		if i != big {
			rest = append(rest, i)
		}
	}
	// A panic of either lane (a test's crash hook) is raised again here,
	// once both have stopped.
	panics := make([]any, 2)
	lane := func(k int, idx []int) {
		defer func() { panics[k] = recover() }()
		for _, i := range idx {
			errs[i] = s.flushPartition(ctx, parts[i])
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { lane(0, []int{big}) })
	lane(1, rest)
	wg.Wait()
	for _, p := range panics {
		if p != nil {
			panic(p)
		}
	}
	return errors.Join(errs...)
}

// flushPartition publishes the replayed rows of partition p.
func (s *DaySink) flushPartition(ctx context.Context, p Partition) error {
	s.mu.Lock()
	d := s.days[p]
	delete(s.days, p)
	delete(s.dicts, p)
	s.mu.Unlock()
	r, err := d.replayed()
	if err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	s.opt.Compact.Logger.Debug("writing the replayed day", "partition", p.String(), "merged_runs", d.merges,
		"runs_spilled", spilled(r.Runs), "runs_in_memory", len(r.Runs)-spilled(r.Runs))
	pr, err := PublishDay(ctx, s.opt.Compact, p, r)
	if err != nil {
		return fmt.Errorf("parquet: %w", err)
	}
	s.opt.Compact.Logger.Info("replayed day written", "partition", p.String(), "snapshot_files", len(r.Files),
		"rows", pr.Rows, "bytes", pr.OutputBytes, "took", pr.Took.Round(time.Millisecond), "merged", !pr.direct)
	return nil
}

// Close implements sinks.Sink: rows of days not flushed are dropped (the
// lake keeps those days as they were); the fallback and the lake close.
func (s *DaySink) Close(ctx context.Context) error {
	s.mu.Lock()
	days := s.days
	s.days = map[Partition]*dayRows{}
	s.dicts = map[Partition]*keyDict{}
	s.mu.Unlock()
	for _, d := range days {
		d.drop()
	}
	return errors.Join(s.opt.Fallback.Close(ctx), s.opt.Compact.Target.Close())
}

// dayRows are the committed rows of one partition, awaiting its publish:
// sorted runs in the order their snapshots committed, in memory, packed
// or spilled. Once the runs in memory reach the budget (half of
// ChunkBytes), they are handed to a goroutine of the day, which packs
// them (pack.go: their records' columns to the day's pack file, their
// order and keys kept in memory) or, when they cannot be packed, merges
// them into one spilled run, in their place; a commit that fills the
// budget again while that is under way waits for it. So the day holds at
// most twice the budget (and the packed runs' order and keys, ~20 bytes
// a row), and what FlushDay has left is a packed or spilled run per
// budget and the last runs, in memory.
type dayRows struct {
	mem    memory.Allocator
	pool   *arrowpool.Pool
	key    []string
	tmp    string
	budget int64
	dict   *keyDict // the day's: its runs' ids

	mu      sync.Mutex
	runs    []*dayRun // in commit order
	held    int64     // Arrow bytes of the runs in memory not being merged
	from    int       // runs[from:] are not being merged
	merging chan struct{}
	files   []pq.ManifestFile
	u       *arrow.Schema // the last committed schema: the table's columns
	enc     []parquet.WriterProperty
	err     error     // a merge's, reported by later commits and FlushDay
	merges  int       // merges (or packs) started
	pack    *packFile // the day's packed runs (pack.go), made by the first pack
	noPack  bool      // merge, never pack (tests)

	ctx  context.Context // the merges'; cancelled by drop
	stop context.CancelFunc
}

// rows are the rows of the snapshot files the day took.
func (d *dayRows) rows() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var n int64
	for _, f := range d.files {
		n += f.Rows
	}
	return n
}

// dayRun is one run of the day; a merge under way has done set until it
// ends (then Run is its output, or err).
type dayRun struct {
	Run
	size int64
}

// day returns the partition's rows (made on first use).
func (s *DaySink) day(p Partition, w *dayWriter) *dayRows {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.days[p]
	if d == nil {
		ctx, stop := context.WithCancel(context.Background())
		d = &dayRows{mem: s.mem, pool: s.pool, key: w.key, tmp: w.so.tmp, budget: s.opt.Compact.ChunkBytes / 2, dict: w.dict, ctx: ctx, stop: stop, noPack: s.opt.Compact.noPack}
		s.days[p] = d
	}
	return d
}

// take adds a committed writer's sorted runs and starts a merge of the
// runs in memory when they fill the budget.
func (d *dayRows) take(runs []*dayRun, dict *keyDict, file pq.ManifestFile, u *arrow.Schema, enc []parquet.WriterProperty) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		dropDayRuns(runs)
		return d.err
	}
	for _, r := range runs {
		if dict != d.dict { // ids of another dictionary mean nothing here
			r.keyed, r.ids = false, nil
		}
		d.runs = append(d.runs, r)
		if r.Path == "" {
			d.held += r.size
		}
	}
	d.files = append(d.files, file)
	d.u, d.enc = u, enc
	for d.held >= d.budget {
		if d.merging != nil { // one merge at a time: wait for it
			done := d.merging
			d.mu.Unlock()
			<-done
			d.mu.Lock()
			continue
		}
		if d.err != nil {
			return d.err
		}
		d.startMerge()
	}
	return nil
}

// startMerge hands runs[from:] to a merge on a goroutine; its output takes
// their place. The caller holds d.mu.
func (d *dayRows) startMerge() {
	group := slices.Clone(d.runs[d.from:])
	out := &dayRun{}
	d.runs = append(d.runs[:d.from], out)
	d.from = len(d.runs)
	d.held = 0
	done := make(chan struct{})
	d.merging = done
	d.merges++
	pack := d.packable(group)
	go func() {
		defer close(done)
		err := recovered(func() error {
			if pack {
				return d.packGroup(group, out)
			}
			return d.mergeGroup(group, out)
		})
		d.mu.Lock()
		defer d.mu.Unlock()
		d.merging = nil
		if err != nil && d.err == nil {
			d.err = fmt.Errorf("merge the day's runs: %w", pq.DiskFull(err))
		}
	}()
}

// packable reports runs that packGroup takes: all in memory, keyed, of
// the same columns, packable ones, and a day the direct writer can write
// (flat columns, which ColumnWriter encodes: ColumnWorkers is 1 or more,
// also on one core).
func (d *dayRows) packable(group []*dayRun) bool {
	if d.noPack || len(group) == 0 || group[0].Schema == nil {
		return false
	}
	u := group[0].Schema
	for _, r := range group {
		if r.mem == nil || !r.keyed || r.mem.ids == nil || !sameColumns(r.Schema, u) {
			return false
		}
	}
	return pq.ColumnWorkers(u) > 0 && packable(u, d.key, d.dict)
}

// packGroup packs the runs into out (one packed run: pack.go), the day's
// pack file made on first use.
func (d *dayRows) packGroup(group []*dayRun, out *dayRun) error {
	mems := make([]*memRun, len(group))
	for i, r := range group {
		mems[i] = r.mem
	}
	d.mu.Lock()
	pf := d.pack
	d.mu.Unlock()
	if pf == nil {
		var err error
		if pf, err = newPackFile(d.pool, d.tmp); err != nil {
			dropDayRuns(group)
			return err
		}
		d.mu.Lock()
		d.pack = pf
		d.mu.Unlock()
	}
	g, err := packGroup(d.ctx, pf, group[0].Schema, d.key, d.dict.cols, mems)
	if err != nil {
		return err
	}
	d.mu.Lock()
	out.Run = Run{Schema: group[0].Schema, packed: g, keyed: true}
	d.mu.Unlock()
	return nil
}

// mergeGroup merges the runs into out (one spilled run with the union of
// their columns).
func (d *dayRows) mergeGroup(group []*dayRun, out *dayRun) error {
	runs := make([]Run, len(group))
	var schemas []*arrow.Schema
	for i, r := range group {
		runs[i] = r.Run
		if !slices.ContainsFunc(schemas, func(s *arrow.Schema) bool { return sameColumns(s, r.Schema) }) {
			schemas = append(schemas, r.Schema)
		}
	}
	u, err := unionSchema(schemas)
	if err != nil {
		dropRuns(runs)
		return err
	}
	if err := copyable(d.mem, u); err != nil {
		dropRuns(runs)
		return err
	}
	merged, err := mergeToRun(d.ctx, d.mem, d.pool, u, d.key, d.dict, d.tmp, runs, 4096)
	if err != nil {
		return err
	}
	d.mu.Lock()
	out.Run = merged
	d.mu.Unlock()
	return nil
}

// wait waits for the merge under way, if any. The caller holds d.mu.
func (d *dayRows) wait() {
	for d.merging != nil {
		done := d.merging
		d.mu.Unlock()
		<-done
		d.mu.Lock()
	}
}

// replayed ends the day's rows: its runs, handed to PublishDay.
func (d *dayRows) replayed() (*Replayed, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.wait()
	if d.err != nil {
		d.dropLocked()
		return nil, d.err
	}
	r := &Replayed{Schema: d.u, Files: d.files, Encodings: d.enc, dict: d.dict, pool: d.pool, pack: d.pack}
	d.pack = nil
	for _, run := range d.runs {
		r.Runs = append(r.Runs, run.Run)
	}
	d.runs = nil
	d.stop()
	return r, nil
}

// drop drops the day's rows (its merge cancelled).
func (d *dayRows) drop() {
	d.stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.wait()
	d.dropLocked()
}

func (d *dayRows) dropLocked() {
	dropDayRuns(d.runs)
	d.runs = nil
	d.pack.remove()
	d.pack = nil
	d.stop()
}

func dropDayRuns(runs []*dayRun) {
	for _, r := range runs {
		r.drop()
	}
}

// dayWriter holds one snapshot's rows of one table.
type dayWriter struct {
	s    *DaySink
	p    Partition
	rel  string
	u    *arrow.Schema
	key  []string
	enc  []parquet.WriterProperty
	so   *sorter
	dict *keyDict        // the day's (so's)
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
	w.seen.collect(&kv, int(rec.NumRows()), &w.file)
	if err := w.so.add(rec); err != nil {
		return fmt.Errorf("parquet: write %s: %w", w.rel, err)
	}
	w.file.Rows += rec.NumRows()
	return nil
}

// Commit sorts the rows into runs and hands them to the day: they reach
// the lake at its publish (FlushDay), all of the day's at once.
func (w *dayWriter) Commit(context.Context) (sinks.Committed, error) {
	if w.done {
		return sinks.Committed{}, errors.New("parquet: commit after commit or abort")
	}
	w.done = true
	defer w.so.release()
	runs, err := w.runs()
	if err == nil {
		err = w.s.day(w.p, w).take(runs, w.dict, w.file, w.u, w.enc)
	}
	if err != nil {
		return sinks.Committed{}, fmt.Errorf("parquet: commit %s: %w", w.rel, pq.DiskFull(err))
	}
	return sinks.Committed{Rows: w.file.Rows, Where: w.p.String() + " (one file per day, written when the day is replayed)"}, nil
}

// runs are the writer's rows as sorted runs: those it spilled, and the
// rest sorted in memory (or spilled too, after a spill: a large snapshot).
func (w *dayWriter) runs() ([]*dayRun, error) {
	var out []*dayRun
	if len(w.so.runs) > 0 {
		paths, err := w.so.finish()
		ids := w.so.runIDs
		w.so.runs, w.so.runIDs = nil, nil
		for i, p := range paths {
			r := &dayRun{Run: Run{Path: p, Schema: w.u}}
			if i < len(ids) && ids[i] != nil {
				r.keyed, r.ids = true, ids[i]
			}
			out = append(out, r)
		}
		if err != nil {
			dropDayRuns(out)
			return nil, err
		}
		return out, nil
	}
	m, size := w.so.sorted()
	if m == nil {
		return nil, nil
	}
	return []*dayRun{{Run: Run{Schema: w.u, mem: m, keyed: m.ids != nil}, size: size}}, nil
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
	s.chunk, s.views, s.ids, s.size = nil, nil, nil, 0
	for _, r := range s.runs {
		removeQuiet(r)
	}
	s.runs, s.runIDs = nil, nil
}
