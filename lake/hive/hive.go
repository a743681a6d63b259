// Package hive is the parquet table format: each table a folder of
// hive-partitioned Parquet files (TABLE/date=YYYY-MM-DD/NAME.parquet, see
// lake/layout) that readers list; compaction replaces a closed day's
// per-snapshot files with sorted ones through its journal, and a replay
// writes each day compacted (compact.DaySink).
package hive

import (
	"context"

	"github.com/optlake/optlake/lake/tableformat"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/storage"
)

// Name is the format's name.
const Name = "parquet"

// Format is the parquet table format of one data directory.
type Format struct {
	st  storage.Store
	opt tableformat.Options
}

var _ tableformat.Format = (*Format)(nil)

// Open returns the parquet format of the data directory st.
func Open(st storage.Store, opt tableformat.Options) *Format { return &Format{st: st, opt: opt} }

// Name implements tableformat.Format.
func (f *Format) Name() string { return Name }

// Files implements tableformat.Format: the sink's own files, a snapshot of
// a compacted day parked for the day's next compaction (compact.Parking).
func (f *Format) Files(opt parquet.Options) parquet.Options {
	opt.Park = compact.Parking(f.st)
	return opt
}

// Sink implements tableformat.Format: the files are the lake.
func (f *Format) Sink(files sinks.Sink) sinks.Sink { return files }

// replayCompressionLevel is the zstd level of a replayed day's files.
const replayCompressionLevel = 3

// replayPageBytes is the data page size of a replayed day's files.
const replayPageBytes = 512 << 10

// ReplaySink implements tableformat.Format: a replay gets the compacted
// layout directly; files becomes a compact.DaySink (one file per table and
// day, sorted, published through compaction's journal as each day is
// replayed).
func (f *Format) ReplaySink(files, _ sinks.Sink) (sinks.Sink, error) {
	ds, err := compact.NewDaySink(compact.DayOptions{Fallback: files, Compact: compact.Options{
		Target: f.target(), Logger: f.opt.Logger().With("step", "replay"), Crash: f.opt.Crash,
		// zstd level 3, the run sink's, not compaction's 9: the day's
		// output runs on one core after its last snapshot; level 9 saves
		// ~6% of the bytes for ~15% more wall (docs/PERFORMANCE.md).
		CompressionLevel: replayCompressionLevel,
		// Pages of 512 KiB, not 1 MiB: a row group under way holds about
		// three pages of buffers for each of its 31 columns at once
		// (~95 MB at 1 MiB, the replay's peak; docs/PERFORMANCE.md).
		PageBytes: replayPageBytes,
	}})
	if err != nil {
		return nil, err
	}
	// The day's merge is compaction's: the same bounded working set, and
	// the same soft limit keeps garbage from growing past it. Not raised
	// for replay: on the bench's 150-snapshot archive the replay collects
	// 9–11 times (~3% of its CPU), the last 3–4 held to this limit by the
	// day's write (~100 MB live); 192 MiB, or GOGC 400, saved no CPU in
	// 10 and 8 alternating pairs, and 192 MiB costs ~20 MiB of peak RSS
	// (docs/PERFORMANCE.md, 2026-11-27).
	if f.opt.LowerMemoryLimit != nil {
		f.opt.LowerMemoryLimit(compact.MemoryLimit)
	}
	return ds, nil
}

func (f *Format) target() compact.Target { return compact.For(f.st, f.opt.Crash, f.opt.Clock()) }

// Compaction implements tableformat.Format: the day folders, from the
// compacted days' mark on (ClosedFrom).
func (f *Format) Compaction() tableformat.Compaction {
	return compaction{Target: f.target(), Mark: tableformat.Mark{St: f.st}}
}

// compaction is the parquet format's compaction: the day folders
// (compact.Folders), from the compacted days' mark on.
type compaction struct {
	compact.Target
	tableformat.Mark
}

// View implements tableformat.Format: readers list the folders.
func (f *Format) View() storage.Store { return f.st }

// Upkeep implements tableformat.Format: a compaction's trash is emptied
// by its Recover; nothing else is kept.
func (f *Format) Upkeep(context.Context, tableformat.Upkeep) (string, error) { return "", nil }

// Close implements tableformat.Format: nothing is held open.
func (f *Format) Close() error { return nil }

// Status implements tableformat.Format: nothing beyond the format's name.
func (f *Format) Status(context.Context) (tableformat.Status, error) {
	return tableformat.Status{}, nil
}
