package compact

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"

	"github.com/optlake/optlake/internal/arrowpool"
	"github.com/optlake/optlake/schema"
	pq "github.com/optlake/optlake/sinks/parquet"
)

// Replayed is a replay's rows of one partition, already sorted into runs
// (DaySink): what the per-snapshot files named in Files would have held.
// PublishDay merges them with the partition's other rows into its one
// compacted file; the partition's files of those names (in place or
// parked) are replaced unread, and the rows of an earlier compaction that
// came from them are dropped.
type Replayed struct {
	Schema *arrow.Schema // the table's columns (also when no run has rows)
	Runs   []Run
	Files  []pq.ManifestFile // one per replayed snapshot file: its name, rows and groups
	// Encodings, when set, are the day file's column encodings (the
	// table's, pq.Encodings) instead of the ones compaction tries on the
	// day's first rows.
	Encodings []parquet.WriterProperty

	dict *keyDict        // the day's key dictionary: the runs' ids (nil: none)
	pack *packFile       // the day's packed runs' file (nil: none); deleted by remove
	pool *arrowpool.Pool // the day's merges' buffers (nil: a pool of its own)
}

// Run is a sorted run of a replay and its schema: spilled (a run file,
// runfile.go, under the Target's TempDir, at Path) or held in memory.
type Run struct {
	Path   string
	Schema *arrow.Schema
	mem    *memRun // in memory (Path "")
	// keyed: the run carries the day's key dictionary ids of its rows
	// (keydict.go): ids in file order when spilled, mem.ids in memory.
	keyed bool
	ids   []uint32
	// packed: runs in memory packed to the day's pack file (pack.go);
	// keyed, Path "" and mem nil.
	packed *packedGroup
}

// PublishDay writes partition p as compaction does — one file sorted by
// the table's key, holding the partition's rows with r's in place of the
// files r replaces — and publishes it through opt.Target (Stage, Publish:
// the journal makes it atomic, or recoverable after a crash). It takes
// ownership of r's runs (deleted whatever happens). The caller holds the
// data directory's lock.
func PublishDay(ctx context.Context, opt Options, p Partition, r *Replayed) (PartitionReport, error) {
	opt.defaults()
	if opt.Target == nil {
		r.remove()
		return PartitionReport{}, errors.New("publish day: no store")
	}
	key := schema.SortKey(p.Table)
	if key == nil {
		r.remove()
		return PartitionReport{}, fmt.Errorf("publish %s: the table has no sort key", p)
	}
	j := &partitionJob{st: opt.Target, opt: &opt, mem: memory.DefaultAllocator, pool: r.mergePool(opt.ChunkBytes / 2), key: key, replayed: r}
	j.pr.Partition = p
	pr, _, err := j.run(ctx, time.Now())
	r.remove() // runs not yet handed to the merge (an early error)
	if err != nil {
		return pr, fmt.Errorf("publish %s: %w", p, err)
	}
	opt.Logger.Debug("replayed day published", slog.String("partition", p.String()), "rows", pr.Rows, "bytes", pr.OutputBytes)
	return pr, nil
}

// mergePool is the day's pool of merge buffers, or a new one of max bytes.
func (r *Replayed) mergePool(max int64) *arrowpool.Pool {
	if r.pool != nil {
		return r.pool
	}
	return arrowpool.New(max)
}

// remove deletes (or releases) the runs not yet taken by a merge.
func (r *Replayed) remove() {
	if r == nil {
		return
	}
	dropRuns(r.Runs)
	r.Runs = nil
	r.pack.remove()
	r.pack = nil
}

// has reports whether the replay replaces the file name.
func (r *Replayed) has(name string) bool {
	return r != nil && slices.ContainsFunc(r.Files, func(f pq.ManifestFile) bool { return f.Name == name })
}

func (r *Replayed) names() []string {
	if r == nil {
		return nil
	}
	out := make([]string, len(r.Files))
	for i, f := range r.Files {
		out[i] = f.Name
	}
	return out
}

func (r *Replayed) rows() int64 {
	if r == nil {
		return 0
	}
	var n int64
	for _, f := range r.Files {
		n += f.Rows
	}
	return n
}

// conflict refuses a replay whose snapshots share rows of an earlier
// compaction with files it does not replace: dropping them would lose
// those files' rows, and keeping them would show the snapshot twice.
func (r *Replayed) conflict(discard map[string]bool) error {
	for _, name := range r.names() {
		if discard[name] {
			return fmt.Errorf("replayed %s shares its snapshot with compacted files it does not replace: left as it was", name)
		}
	}
	return nil
}

// encodings are the day file's given encodings (nil: compaction's trials).
func (r *Replayed) encodings() []parquet.WriterProperty {
	if r == nil {
		return nil
	}
	return r.Encodings
}

// keys is the day's key dictionary (nil: none).
func (r *Replayed) keys() *keyDict {
	if r == nil {
		return nil
	}
	return r.dict
}

// unpack turns the packed runs into spilled runs, a group at a time
// (packedGroup.unpack): for a day not written by direct.go.
func (r *Replayed) unpack(ctx context.Context, pool *arrowpool.Pool, key []string, tmp string) error {
	if r == nil {
		return nil
	}
	for i, run := range r.Runs {
		if run.packed == nil {
			continue
		}
		r.Runs[i] = Run{}
		out, err := run.packed.unpack(ctx, pool, key, r.dict, tmp)
		if err != nil {
			return fmt.Errorf("merge the day's packed runs: %w", err)
		}
		r.Runs[i] = out
	}
	r.pack.remove()
	r.pack = nil
	return nil
}

// take hands over the runs; the caller owns them.
func (r *Replayed) take() []Run {
	if r == nil {
		return nil
	}
	out := r.Runs
	r.Runs = nil
	return out
}

// sameColumns reports the same column names and types in the same order.
func sameColumns(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || !arrow.TypeEqual(fa.Type, fb.Type) {
			return false
		}
	}
	return true
}

// freshNames are the names of the fresh files.
func (j *partitionJob) freshNames() []string {
	out := make([]string, len(j.fresh))
	for i, f := range j.fresh {
		out[i] = f.Name
	}
	return out
}

// schemas are the runs' distinct schemas, in order.
func (r *Replayed) schemas() []*arrow.Schema {
	var out []*arrow.Schema
	if r != nil && r.Schema != nil {
		out = append(out, r.Schema)
	}
	for _, run := range r.runs() {
		if !slices.ContainsFunc(out, func(s *arrow.Schema) bool { return sameColumns(s, run.Schema) }) {
			out = append(out, run.Schema)
		}
	}
	return out
}

func (r *Replayed) runs() []Run {
	if r == nil {
		return nil
	}
	return r.Runs
}
