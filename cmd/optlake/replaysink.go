package main

import (
	"context"
	"log/slog"
	"slices"

	"github.com/optlake/optlake/lake"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/storage"
)

// replayCompressionLevel is the zstd level of a replayed day's files.
const replayCompressionLevel = 3

// replayPageBytes is the data page size of a replayed day's files.
const replayPageBytes = 512 << 10

// replayDays gives a replay into a Parquet lake the compacted layout
// directly: the parquet sink becomes a compact.DaySink (one file per
// table and day, sorted, published through compaction's journal as each
// day is replayed). An Iceberg lake keeps its sink.
func replayDays(ctx context.Context, h host, st storage.Store, ss []sinks.Sink, log *slog.Logger) ([]sinks.Sink, error) {
	i := slices.IndexFunc(ss, func(s sinks.Sink) bool { return s.Name() == "parquet" })
	if i < 0 {
		return ss, nil
	}
	if f, err := lake.Recorded(ctx, st); err != nil || f == lake.Iceberg {
		return ss, err
	}
	ds, err := compact.NewDaySink(compact.DayOptions{Fallback: ss[i], Compact: compact.Options{
		Lake: compact.For(st, crashHook(), h.now), Logger: log.With("step", "replay"), Crash: crashHook(),
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
	h.lowerMemoryLimit(compactMemoryLimit)
	out := slices.Clone(ss)
	out[i] = ds
	return out, nil
}
