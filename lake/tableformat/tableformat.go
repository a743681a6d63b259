// Package tableformat says what a lake's table format gives: the value
// package lake opens once per command (lake.Open) and the commands ask
// instead of branching on the format. Each format is a package
// (lake/hive, lake/iceberg) that satisfies Format and is registered in
// package lake; this package imports no format, so a format's package
// needs nothing of package lake.
package tableformat

import (
	"context"
	"log/slog"
	"time"

	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/storage"
)

// Format is one lake's table format on its data directory. Every method
// but View and Status runs under the data directory's lock.
type Format interface {
	// Name is the format's name as recorded and as --table-format takes
	// it.
	Name() string
	// Files sets how the lake's Parquet sink writes the files of this
	// format (statistics, time unit, where a compacted day's snapshot
	// goes): opt with the format's choices.
	Files(opt parquet.Options) parquet.Options
	// Sink is the live sink over files, the Parquet sink made with
	// Files: files itself, or a wrapper that commits each file into the
	// format's tables and forwards every optional capability of files.
	Sink(files sinks.Sink) sinks.Sink
	// ReplaySink is the sink a replay loads the lake through (a day's
	// files written compacted, or the live sink); live is Sink's.
	ReplaySink(files, live sinks.Sink) (sinks.Sink, error)
	// Compaction is the lake as compaction sees it.
	Compaction() Compaction
	// View is the data directory as a reader of the lake's files
	// (history) sees it: a listing of a table's day folder holds exactly
	// the files of the table's current state.
	View() storage.Store
	// Upkeep is the format's housekeeping after a compaction (an Iceberg
	// lake's snapshot expiry and orphan files); the line it returns, if
	// any, tells the user what it did.
	Upkeep(ctx context.Context, u Upkeep) (line string, err error)
	// Status is the format's section of `optlake status`.
	Status(ctx context.Context) (Status, error)
	// Close releases what the format holds open (a catalog's
	// connection); the command calls it once, last.
	Close() error
}

// Compaction is a format's lake as compaction works on it, and where run
// --compact starts.
type Compaction interface {
	compact.Target
	// ClosedFrom is the first day (YYYY-MM-DD) run --compact looks at:
	// "" for every day.
	ClosedFrom(ctx context.Context) string
	// Closed records that every day before to is compacted (ClosedFrom
	// starts there next).
	Closed(ctx context.Context, to string) error
	// Reopen tells that a load of an older snapshot (catch-up) wrote
	// per-snapshot files into day (YYYY-MM-DD): ClosedFrom goes back to
	// it. An error means the day may stay hidden from run --compact.
	Reopen(ctx context.Context, day string) error
}

// Options are what every format is built with.
type Options struct {
	Log *slog.Logger     // nil: discarded
	Now func() time.Time // nil: time.Now
	// Crash is the tests' hook at each step of a compaction's publish
	// (nil: none).
	Crash func(step string)
	// CommitCrash is the tests' hook at each step of a table format's
	// commit of a table's file, named after the format
	// ("iceberg-manifest"); nil: none.
	CommitCrash func(table, step string)
	// LowerMemoryLimit lowers the process's heap soft limit to a bound
	// the format's work is tuned for (a replay's day merge); nil: left
	// alone.
	LowerMemoryLimit func(limit int64)
}

// Logger is o.Log, or a logger that discards.
func (o Options) Logger() *slog.Logger {
	if o.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Log
}

// Clock is o.Now, or time.Now.
func (o Options) Clock() func() time.Time {
	if o.Now == nil {
		return time.Now
	}
	return o.Now
}

// Upkeep is what a format's housekeeping keeps.
type Upkeep struct {
	Tables []string      // the tables looked after; nil: all
	Keep   time.Duration // snapshots younger than this stay
	Grace  time.Duration // unreferenced files younger than this stay
}

// Status is a format's section of `optlake status`.
type Status struct {
	// JSON holds the keys the format adds to status's JSON document.
	JSON map[string]any
	// Lines are the lines it adds to status's text.
	Lines []string
}
