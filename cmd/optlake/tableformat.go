package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/optlake/optlake/lake"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/storage"
)

// withTableFormat settles the lake's table format for run and replay
// (--table-format; recorded at the lake's first run, kept after) and, for
// an Iceberg lake, wraps the Parquet sink so that each committed file is
// appended to its Iceberg table. Asking for the other format than the
// lake's exits 2. Without the Parquet sink there is no lake to settle.
func withTableFormat(ctx context.Context, j *job, st storage.Store, ss []sinks.Sink, log *slog.Logger) ([]sinks.Sink, error) {
	asked, err := lake.ParseFormat(j.TableFormat)
	if err != nil {
		return nil, usageError{err}
	}
	i := slices.IndexFunc(ss, func(s sinks.Sink) bool { return s.Name() == "parquet" })
	if i < 0 {
		return ss, nil
	}
	f, err := lake.Resolve(ctx, st, asked)
	if err != nil {
		return nil, formatErr(err)
	}
	if f != lake.Iceberg {
		return ss, nil
	}
	out := slices.Clone(ss)
	out[i] = iceberg.NewSink(ss[i], iceberg.New(st, log))
	return out, nil
}

// icebergLake is the Iceberg catalog of the data directory st when its
// lake is Iceberg, nil when it is Parquet (or has no format yet).
func icebergLake(ctx context.Context, st storage.Store, log *slog.Logger) (*iceberg.Lake, error) {
	f, err := lake.Recorded(ctx, st)
	if err != nil || f != lake.Iceberg {
		return nil, err
	}
	return iceberg.New(st, log), nil
}

// expireIceberg is an Iceberg lake's upkeep after a compaction: snapshots
// older than keep leave the tables' metadata, and files no snapshot
// references are deleted once older than grace (iceberg.Lake.Expire).
func expireIceberg(ctx context.Context, ice *iceberg.Lake, tables []string, keep, grace time.Duration, w io.Writer) error {
	reps, err := ice.Expire(ctx, tables, keep, grace)
	var snaps, files int
	var bytes int64
	for _, r := range reps {
		snaps, files, bytes = snaps+r.Expired, files+r.Deleted, bytes+r.DeletedBytes
	}
	fmt.Fprintf(w, "iceberg: expired %d snapshot(s) older than %s; deleted %d unreferenced file(s), %d bytes, older than %s\n", snaps, keep, files, bytes, grace)
	return err
}

// formatErr makes a format mismatch a usage error (exit 2).
func formatErr(err error) error {
	var m *lake.MismatchError
	if errors.As(err, &m) {
		return usageError{err}
	}
	return err
}
