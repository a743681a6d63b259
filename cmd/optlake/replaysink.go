package main

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"

	"github.com/optlake/optlake/lake"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/storage"
)

// replayDays gives a replay into a Parquet lake the compacted layout
// directly: the parquet sink becomes a compact.DaySink (one file per
// table and day, sorted, published through compaction's journal as each
// day is replayed). An Iceberg lake keeps its sink.
func replayDays(ctx context.Context, st storage.Store, ss []sinks.Sink, log *slog.Logger) ([]sinks.Sink, error) {
	i := slices.IndexFunc(ss, func(s sinks.Sink) bool { return s.Name() == "parquet" })
	if i < 0 {
		return ss, nil
	}
	if f, err := lake.Recorded(ctx, st); err != nil || f == lake.Iceberg {
		return ss, err
	}
	ds, err := compact.NewDaySink(compact.DayOptions{Fallback: ss[i], Compact: compact.Options{
		Lake: compact.For(st, crashHook(), snapshotClock), Logger: log.With("step", "replay"), Crash: crashHook(),
	}})
	if err != nil {
		return nil, err
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// The day's merge is compaction's: the same bounded working set,
		// and the same soft limit keeps garbage from growing past it.
		debug.SetMemoryLimit(compactMemoryLimit)
	}
	out := slices.Clone(ss)
	out[i] = ds
	return out, nil
}
