// Package compact rewrites the day partitions of the Parquet lake — one
// file per table per snapshot — into one file per table and day (split
// only past ~1 GB), sorted by the table's key (schema.SortKey), with row
// groups of 128Ki rows, zstd, and encodings chosen per column by
// measurement.
//
// Nothing is lost, added or changed: the day's rows are the same multiset
// (every column, every value); files whose columns evolved during the day
// are unioned by column name, nulls where a file lacked a column.
//
// Idempotency: each compacted file records in its key-value metadata
// (parquet.Manifest) the per-snapshot files it holds, with their snapshot
// groups. The Parquet sink parks a later file for one of those (a replay,
// a late catch-up load) outside the table folder; the next compaction
// replaces that snapshot's rows with the parked file's. A file for a new
// snapshot lands in the partition as usual and the next compaction merges
// it in. A compaction with nothing new does nothing.
//
// Crash and reader safety are the Target's: Folders stages the new
// partition outside the table folder and exchanges the two folders in one
// step on a local folder, or holds the uploads until a journal names them
// on a bucket; a crash at any point is finished or undone by the next
// Compact (Target.Recover), which callers run under the data directory's
// lock.
package compact

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/internal/arrowpool"
	"github.com/optlake/optlake/schema"
	pq "github.com/optlake/optlake/sinks/parquet"
)

// MemoryLimit is the Go heap's soft limit compaction's work is tuned for
// (a compaction, a replay's day merge): the merge's working set is
// bounded, this keeps garbage from growing the process past it.
const MemoryLimit = 160 << 20

// Options configure a compaction. Zero values take the defaults.
type Options struct {
	// Target is the lake (required; For makes it from the data directory).
	Target Target
	// From and To bound the days compacted, To exclusive ("YYYY-MM-DD";
	// From "" = the first day, To "" = today UTC: every closed day).
	From, To string
	// Tables limits the tables (nil = every table).
	Tables []string
	// Now is the clock (for the default To and the trash's grace).
	Now func() time.Time
	// Deadline, when set, stops starting new partitions after it (wall
	// clock; run --compact bounds its time); a partition under way
	// finishes.
	Deadline time.Time
	Logger   *slog.Logger
	// Crash is the crash-injection hook of tests, called after each of
	// MergeSteps (the Target's own hook covers its publish).
	Crash func(step string)

	ChunkBytes      int64 // Arrow bytes sorted in memory at once (default 32 MiB)
	MergeBatchBytes int64 // memory for the merge's input batches together (default 32 MiB)
	FanIn           int   // most runs merged at once (default 32)
	RowGroupRows    int   // default 131072
	// PageBytes is the data page size (default 1 MiB). A row group being
	// written holds about three pages' worth of buffers per column.
	PageBytes        int64
	MaxFileBytes     int64 // a partition's file is split past this size (default 1 GiB)
	CompressionLevel int   // zstd level (default 9)
	SampleRows       int   // rows the encodings are chosen on (default 32768)
	// noPack (tests): a replayed day merges its runs in memory past the
	// budget instead of packing them (pack.go).
	noPack bool
	// noDirect (tests): a replayed day is always merged, never written
	// by direct.go.
	noDirect bool
	// directBytes (tests): the most memory the direct writer may need
	// (directOK); 0: directMemory.
	directBytes int64

	// DecodeWeight weighs a column chunk's decompressed bytes against its
	// stored bytes when encodings are compared: cost = stored +
	// decompressed/DecodeWeight. zstd makes plain pages of a sorted day
	// tiny on disk, yet a reader still inflates and decodes every value;
	// dictionary pages of the same column decode a small index per value.
	// Default 4: on the bench's 300-snapshot day, 16 picked plain and
	// delta pages for snapshot_time and index_price and DuckDB scanned
	// the day 40% slower than its own sorted file; 4 picks dictionaries
	// and scans as fast, still 0.84× its bytes.
	DecodeWeight int64
}

// MergeSteps are the steps of a compaction before its publish (Steps,
// BucketSteps): the sorted runs spilled, the new files written but not
// published. Options.Crash is called after each.
var MergeSteps = []string{"sorted", "written"}

func (o *Options) crash(step string) {
	if o.Crash != nil {
		o.Crash(step)
	}
}

func (o *Options) defaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ChunkBytes == 0 {
		o.ChunkBytes = 32 << 20
	}
	if o.MergeBatchBytes == 0 {
		o.MergeBatchBytes = 32 << 20
	}
	if o.FanIn == 0 {
		o.FanIn = 32
	}
	if o.RowGroupRows == 0 {
		o.RowGroupRows = 128 << 10
	}
	if o.PageBytes == 0 {
		o.PageBytes = 1 << 20
	}
	if o.MaxFileBytes == 0 {
		o.MaxFileBytes = 1 << 30
	}
	if o.CompressionLevel == 0 {
		o.CompressionLevel = 9
	}
	if o.DecodeWeight == 0 {
		o.DecodeWeight = 4
	}
	if o.SampleRows == 0 {
		o.SampleRows = 32 << 10
	}
}

// Report says what a compaction did.
type Report struct {
	Partitions []PartitionReport
	Skipped    int // partitions with nothing new
	// To is the first day not compacted (Options.To, default today UTC),
	// and Later the days from To on that hold partitions (of the tables
	// asked for): today's is still being written.
	To    string
	Later []string
}

// PartitionReport is one partition's compaction.
type PartitionReport struct {
	Partition
	InputFiles  int
	InputBytes  int64
	InputRows   int64 // rows read (parked files' and earlier compacted files' included)
	Replaced    int64 // rows of earlier compacted files replaced by parked files
	Rows        int64 // rows written
	OutputFiles int
	OutputBytes int64
	Took        time.Duration
	Encodings   map[string]string // column -> encoding chosen

	direct bool // a replayed day written without a merge (direct.go)
}

// Compact compacts the partitions of opt's range. It recovers an
// interrupted earlier compaction first. The caller holds the data
// directory's lock (internal/datadir.Acquire). A partition that fails is
// left as it was, logged and reported in the error; the others go on.
func Compact(ctx context.Context, opt Options) (Report, error) {
	opt.defaults()
	st := opt.Target
	if st == nil {
		return Report{}, errors.New("compact: no store")
	}
	var rep Report
	if err := st.Recover(ctx); err != nil {
		return rep, fmt.Errorf("compact: %w", err)
	}
	to := opt.To
	if to == "" {
		to = opt.Now().UTC().Format(time.DateOnly)
	}
	want := map[string]bool{}
	for _, t := range opt.Tables {
		want[t] = true
	}
	parts, err := st.Partitions(ctx)
	if err != nil {
		return rep, fmt.Errorf("compact: %w", err)
	}
	var errs []error
	rep.To = to
	for _, p := range parts {
		if p.Date >= to && (len(want) == 0 || want[p.Table]) && !slices.Contains(rep.Later, p.Date) {
			rep.Later = append(rep.Later, p.Date)
		}
		if len(want) > 0 && !want[p.Table] || p.Date < opt.From || p.Date >= to || schema.SortKey(p.Table) == nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if !opt.Deadline.IsZero() && time.Now().After(opt.Deadline) {
			opt.Logger.Info("compaction time is up; the rest waits for the next run", "next", p.String())
			break
		}
		pr, did, err := compactPartition(ctx, st, p, &opt)
		if err != nil {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			opt.Logger.Error("partition not compacted", "partition", p.String(), "error", err)
			errs = append(errs, fmt.Errorf("compact %s: %w", p, err))
			continue
		}
		if !did {
			rep.Skipped++
			continue
		}
		opt.Logger.Info("partition compacted", "partition", p.String(), "files", pr.InputFiles, "rows", pr.Rows,
			"bytes_before", pr.InputBytes, "bytes_after", pr.OutputBytes, "took", pr.Took.Round(time.Millisecond))
		rep.Partitions = append(rep.Partitions, pr)
	}
	return rep, errors.Join(errs...)
}

// compactPartition compacts one partition; did is false when it had
// nothing new. Its steps: plan (the files and what replaces what), sort
// the fresh files into runs ("sorted"), write the merged partition into
// the store's stage ("written"), and the store's publish (Steps,
// BucketSteps).
func compactPartition(ctx context.Context, st Target, p Partition, opt *Options) (pr PartitionReport, did bool, err error) {
	start := time.Now()
	j := &partitionJob{st: st, opt: opt, mem: memory.DefaultAllocator, pool: arrowpool.New(opt.ChunkBytes / 2), key: schema.SortKey(p.Table)}
	j.pr.Partition = p
	return j.run(ctx, start)
}

// run is the partition's compaction once the job is set up.
func (j *partitionJob) run(ctx context.Context, start time.Time) (pr PartitionReport, did bool, err error) {
	opt := j.opt
	defer j.close()
	if did, err = j.plan(ctx); err != nil || !did {
		return j.pr, false, err
	}
	if err := j.sort(ctx); err != nil {
		return j.pr, false, err
	}
	opt.crash("sorted")
	staged, out, err := j.write(ctx)
	if err != nil {
		return j.pr, false, err
	}
	opt.crash("written")
	if err := staged.Publish(ctx, out.manifest.ID, j.files); err != nil {
		staged.Abort()
		return j.pr, false, err
	}
	j.pr.Rows, j.pr.OutputFiles, j.pr.OutputBytes, j.pr.Encodings = out.total, out.parts, out.bytes, out.chose
	j.pr.Took = time.Since(start)
	return j.pr, true, nil
}

// partitionJob is one partition's compaction under way.
type partitionJob struct {
	st   Target
	opt  *Options
	mem  memory.Allocator
	pool *arrowpool.Pool // the merges' gather and spill buffers
	key  []string
	pr   PartitionReport

	files   []File           // every input (List), the publish's consumed
	fresh   []File           // per-snapshot and parked files, by name
	sources []*parquetSource // every input opened (compacted ones first)
	old     []*parquetSource // the earlier compacted files

	held      map[string]pq.ManifestFile // what the earlier compaction holds
	heldOrder []string
	drop      groupSet        // snapshot groups the fresh files replace
	replacing map[string]bool // fresh files that replace held ones
	discard   map[string]bool // replacements not applied
	u         *arrow.Schema   // the union of the inputs' columns

	so       *sorter
	newFiles map[string]pq.ManifestFile // what each fresh file holds
	runs     []Run                      // sorted runs of the fresh files and the replay, owned until merged

	// replayed, when set, are rows a replay sorted (PublishDay): they
	// replace the files of the same names, which are consumed unread.
	replayed *Replayed
	direct   bool    // the replayed day is written by writeDirect
	dayCols  []int64 // per column, the replayed day's Arrow bytes (directOK)
}

func (j *partitionJob) close() {
	for _, s := range j.sources {
		s.close()
	}
	if j.so != nil {
		for _, r := range j.so.runs {
			removeQuiet(r)
		}
	}
	dropRuns(j.runs)
	j.runs = nil
}

// plan lists the partition, opens its inputs, works out which earlier
// rows the fresh files replace and the union schema; false when nothing
// is new.
func (j *partitionJob) plan(ctx context.Context) (bool, error) {
	p := j.pr.Partition
	files, err := j.st.List(ctx, p)
	if err != nil {
		return false, err
	}
	j.files = files
	var compacted []File
	parked := map[string]bool{}
	for _, f := range files {
		switch {
		case j.replayed.has(f.Name) && !pq.IsCompacted(f.Name):
			// replaced by the replay's rows: consumed, not read
		case f.Parked:
			j.fresh = append(j.fresh, f)
			parked[f.Name] = true
		case pq.IsCompacted(f.Name):
			compacted = append(compacted, f)
		}
	}
	for _, f := range files {
		if !f.Parked && !pq.IsCompacted(f.Name) && !parked[f.Name] && !j.replayed.has(f.Name) {
			j.fresh = append(j.fresh, f) // a parked copy of the same name is newer
		}
	}
	if len(j.fresh) == 0 && j.replayed == nil {
		return false, nil
	}
	sort.Slice(j.fresh, func(a, b int) bool { return j.fresh[a].Name < j.fresh[b].Name })

	// Open every input: compacted files first (their columns come first).
	for _, f := range append(append([]File{}, compacted...), j.fresh...) {
		s, err := openSource(ctx, j.st, p, f, j.mem, 1024)
		if err != nil {
			return false, err
		}
		j.sources = append(j.sources, s)
		if s.man != nil {
			j.old = append(j.old, s)
		} else {
			s.close() // one open input at a time: a day has hundreds (their footers alone weigh tens of MB)
		}
		j.pr.InputFiles++
		j.pr.InputBytes += f.Size
	}
	if err := j.replacements(); err != nil {
		return false, err
	}

	schemas := make([]*arrow.Schema, 0, len(j.sources)+1)
	schemas = append(schemas, j.replayed.schemas()...) // the table's columns first, in its order
	for _, s := range j.sources {
		if !j.discard[s.f.Name] || s.man != nil {
			schemas = append(schemas, s.schema)
		}
	}
	if j.u, err = unionSchema(schemas); err != nil {
		return false, err
	}
	for _, k := range j.key {
		if len(j.u.FieldIndices(k)) == 0 {
			return false, fmt.Errorf("no key column %s: not an optlake table", k)
		}
	}
	return true, nil
}

// replacements works out what the earlier compaction holds and which of
// it the fresh files replace.
func (j *partitionJob) replacements() error {
	j.held = map[string]pq.ManifestFile{}
	var oldID string
	for _, s := range j.old {
		if oldID != "" && s.man.ID != oldID {
			return fmt.Errorf("compacted files of two compactions (%s, %s) in one partition", oldID, s.man.ID)
		}
		oldID = s.man.ID
		for _, mf := range s.man.Files {
			if _, ok := j.held[mf.Name]; !ok {
				j.heldOrder = append(j.heldOrder, mf.Name)
			}
			j.held[mf.Name] = mf
		}
	}
	j.drop = groupSet{}
	j.replacing = map[string]bool{}
	for _, name := range append(j.freshNames(), j.replayed.names()...) {
		if mf, ok := j.held[name]; ok {
			j.replacing[name] = true
			for _, g := range mf.Groups {
				j.drop[g] = struct{}{}
			}
		}
	}
	// A dropped group must belong only to replaced files; otherwise the
	// rows of a file not replaced would go too. Then the replacement is
	// not applied: the earlier rows stay, the fresh file is discarded.
	j.discard = map[string]bool{}
	for name, mf := range j.held {
		if j.replacing[name] {
			continue
		}
		for _, g := range mf.Groups {
			if _, ok := j.drop[g]; ok {
				for _, name := range append(j.freshNames(), j.replayed.names()...) {
					if j.replacing[name] && hasGroup(j.held[name], g) {
						j.discard[name] = true
					}
				}
			}
		}
	}
	if len(j.discard) > 0 {
		if err := j.replayed.conflict(j.discard); err != nil {
			return err
		}
		j.drop = groupSet{}
		for name := range j.replacing {
			if j.discard[name] {
				j.opt.Logger.Warn("replacement shares its snapshot with files it does not replace; the compacted rows stay", "partition", j.pr.String(), "file", name)
				continue
			}
			for _, g := range j.held[name].Groups {
				j.drop[g] = struct{}{}
			}
		}
	}
	return nil
}

// sort sorts the fresh files into runs spilled to the store's TempDir,
// merged down to what the output merge takes at once.
func (j *partitionJob) sort(ctx context.Context) error {
	tmp, err := j.st.TempDir()
	if err != nil {
		return err
	}
	j.so = &sorter{mem: j.mem, pool: j.pool, u: j.u, key: j.key, tmp: tmp, budget: j.opt.ChunkBytes, runBatch: 1024}
	j.newFiles = map[string]pq.ManifestFile{}
	for _, s := range j.sources {
		if s.man != nil || j.discard[s.f.Name] {
			continue
		}
		mf := pq.ManifestFile{Name: s.f.Name}
		seen := groupSet{}
		err := s.batches(ctx, j.mem, j.u, func(rec arrow.Record) error {
			kv, err := newKeyView(rec, j.key)
			if err != nil {
				return err
			}
			seen.collect(&kv, int(rec.NumRows()), &mf)
			mf.Rows += rec.NumRows()
			return j.so.add(rec)
		})
		if err != nil {
			return err
		}
		j.pr.InputRows += mf.Rows
		j.newFiles[s.f.Name] = mf
		s.close() // done with it: one input open at a time
	}
	paths, err := j.so.finish()
	if err != nil {
		return err
	}
	j.so.runs = nil
	if j.directOK(len(paths)) {
		j.direct = true
		j.runs = j.replayed.take()
		j.pr.InputRows += j.replayed.rows()
		return nil
	}
	for _, p := range paths {
		j.runs = append(j.runs, Run{Path: p, Schema: j.u})
	}
	j.pr.InputRows += j.replayed.rows()
	return j.mergeReplayed(ctx, tmp)
}

// mergeReplayed adds the replay's runs (unpacked) to j.runs and merges
// them down to what the output merge takes at once.
func (j *partitionJob) mergeReplayed(ctx context.Context, tmp string) error {
	if err := j.replayed.unpack(ctx, j.pool, j.key, tmp); err != nil {
		return err
	}
	runs := append(j.runs, j.replayed.take()...)
	j.runs = nil
	fanIn := max(2, j.opt.FanIn-len(j.old))
	var err error
	j.runs, err = mergeRuns(ctx, j.mem, j.pool, j.u, j.key, j.replayed.keys(), tmp, runs, fanIn, batchRows(j.opt, j.u, fanIn))
	return err
}

// manifest is what the new compacted files hold: the earlier files kept
// and the fresh ones.
func (j *partitionJob) manifest() pq.Manifest {
	p := j.pr.Partition
	man := pq.Manifest{Version: 1, ID: newID(), Table: p.Table, Date: p.Date}
	for _, name := range j.heldOrder {
		if j.replacing[name] && !j.discard[name] {
			continue
		}
		man.Files = append(man.Files, j.held[name])
	}
	for _, f := range j.fresh {
		if mf, ok := j.newFiles[f.Name]; ok {
			man.Files = append(man.Files, mf)
		}
	}
	if j.replayed != nil {
		man.Files = append(man.Files, j.replayed.Files...)
	}
	sort.Slice(man.Files, func(a, b int) bool { return man.Files[a].Name < man.Files[b].Name })
	return man
}

// write merges the earlier compacted files (less the replaced groups) and
// the runs into the staged partition, and checks every row read is
// written, less the replaced ones. On error the stage is dropped.
func (j *partitionJob) write(ctx context.Context) (Staged, *output, error) {
	if j.direct {
		staged, out, err := j.writeDirect(ctx)
		if !errors.Is(err, errSplit) {
			return staged, out, err
		}
		// merged after all: the runs go back to the replay
		j.direct = false
		j.replayed.Runs, j.runs = j.runs, nil
		tmp, err := j.st.TempDir()
		if err != nil {
			return nil, nil, err
		}
		if err := j.mergeReplayed(ctx, tmp); err != nil {
			return nil, nil, err
		}
	}
	var cursors []cursor
	var olds []*sourceCursor
	for _, s := range j.old {
		c, err := newSourceCursor(ctx, s, j.mem, j.u, j.key, j.drop)
		if err != nil {
			closeAll(cursors)
			return nil, nil, err
		}
		j.pr.InputRows += s.rows()
		cursors = append(cursors, c)
		olds = append(olds, c)
	}
	runs := j.runs
	j.runs = nil
	// Integer keys when every input is a run of the replay's (an earlier
	// compaction's rows have no ids).
	var mk *mergeKeys
	var ids [][]uint32
	if len(olds) == 0 {
		mk, ids = keysFor(j.replayed.keys(), runs, false), runIDs(runs)
	}
	more, err := openRuns(j.mem, j.pool, j.u, runs) // the cursors own the runs
	if err != nil {
		closeAll(cursors)
		return nil, nil, err
	}
	cursors = append(cursors, more...)

	staged, err := j.st.Stage(ctx, j.pr.Partition)
	if err != nil {
		closeAll(cursors)
		return nil, nil, err
	}
	out := &output{opt: j.opt, mem: j.mem, u: j.u, st: staged, manifest: j.manifest(), fixed: j.replayed.encodings()}
	if err := copyable(j.mem, j.u); err != nil {
		closeAll(cursors)
		staged.Abort()
		return nil, nil, err
	}
	// The merge finds and gathers the rows of the next batch while the
	// output encodes the last one (its columns at once, pq.ColumnWriter):
	// the encoding is the slower stage, so the merge's goroutine gathers
	// (on 2 cores it waited for the encoders half of the time when they
	// gathered their columns themselves).
	g := newGatherer(j.pool, j.u)
	p := startPipe(out.write)
	outBatch := min(8<<10, j.opt.RowGroupRows) // a file is split between batches
	err = mergeKeyed(ctx, cursors, ids, j.key, mk, func(src int, rec arrow.Record, row int) error {
		g.add(src, rec, row)
		if g.rows() >= outBatch {
			b, err := g.flush()
			if err != nil {
				return err
			}
			return p.send(b)
		}
		return nil
	})
	if err == nil {
		var b arrow.Record
		if b, err = g.flush(); b != nil {
			err = p.send(b)
		}
	}
	g.release()
	if perr := p.close(); err == nil {
		err = perr
	}
	if err == nil {
		err = out.finish()
	}
	if err != nil {
		out.abort()
		staged.Abort()
		return nil, nil, err
	}
	var want int64
	for _, c := range olds {
		want += c.kept
		j.pr.Replaced += c.s.rows() - c.kept
	}
	for _, mf := range j.newFiles {
		want += mf.Rows
	}
	want += j.replayed.rows()
	if out.total != want {
		staged.Abort()
		return nil, nil, fmt.Errorf("wrote %d rows, expected %d: left as it was", out.total, want)
	}
	return staged, out, nil
}

func hasGroup(mf pq.ManifestFile, g pq.Group) bool {
	for _, x := range mf.Groups {
		if x == g {
			return true
		}
	}
	return false
}

// batchRows is how many rows each merge input reads at a time: the merge
// budget shared by the inputs, at an estimated row width.
func batchRows(opt *Options, u *arrow.Schema, inputs int) int {
	width := int64(0)
	for _, f := range u.Fields() {
		switch f.Type.ID() {
		case arrow.STRING, arrow.LIST:
			width += 32
		default:
			width += 9
		}
	}
	n := opt.MergeBatchBytes / int64(max(inputs, 1)) / max(width, 1)
	return int(min(max(n, 64), 8192))
}

func removeQuiet(path string) { os.Remove(path) }

func closeAll(cs []cursor) {
	for _, c := range cs {
		c.close()
	}
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
