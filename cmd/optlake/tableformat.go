package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/optlake/optlake/lake"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/storage"
)

// icebergCrashPrefix marks the steps of loadCrashEnv inside an Iceberg
// commit: iceberg-file, iceberg-manifest, iceberg-manifest-list,
// iceberg-metadata (see iceberg.Lake.SetCrash).
const icebergCrashPrefix = "iceberg-"

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
	if j.Compact {
		return nil, usagef("--compact: compaction of an Iceberg lake (one replace commit) is not built yet")
	}
	lk := iceberg.New(st, log)
	if at := os.Getenv(loadCrashEnv); strings.HasPrefix(at, icebergCrashPrefix) {
		// The test-only crash hook at a step of the instruments table's
		// Iceberg commit (iceberg.Lake.SetCrash), e.g. iceberg-manifest.
		cs := crashSink{at: at}
		lk.SetCrash(func(table, step string) {
			if table == schema.Instruments.Name {
				cs.crash(icebergCrashPrefix + step)
			}
		})
	}
	out := slices.Clone(ss)
	out[i] = iceberg.NewSink(ss[i], lk)
	return out, nil
}

// refuseIceberg stops a command that does not know Iceberg tables yet
// (compact: rewriting files under an Iceberg table would break it).
func refuseIceberg(ctx context.Context, st storage.Store, command string) error {
	f, err := lake.Recorded(ctx, st)
	if err != nil {
		return err
	}
	if f == lake.Iceberg {
		return usagef("%s: the lake in %s is Iceberg; %s of an Iceberg lake is not built yet", command, st, command)
	}
	return nil
}

// formatStatus is the lake's table format as `optlake status` shows it.
type formatStatus struct {
	Format lake.Format           // "" when none is recorded yet
	Tables []iceberg.TableStatus // an Iceberg lake's tables
}

// lakeFormatStatus reads the lake's format and, for an Iceberg lake, each
// table's current metadata version and snapshot.
func lakeFormatStatus(ctx context.Context, st storage.Store) (formatStatus, error) {
	f, err := lake.Recorded(ctx, st)
	if err != nil || f != lake.Iceberg {
		return formatStatus{Format: f}, err
	}
	tables, err := iceberg.New(st, nil).Tables(ctx)
	return formatStatus{Format: f, Tables: tables}, err
}

// addJSON adds the format to status's JSON document: table_format
// ("parquet", "iceberg", or "" for a lake no run wrote yet) and, for an
// Iceberg lake, iceberg_tables.
func (s formatStatus) addJSON(doc map[string]any) {
	doc["table_format"] = s.Format
	if s.Format == lake.Iceberg {
		tables := s.Tables
		if tables == nil {
			tables = []iceberg.TableStatus{}
		}
		doc["iceberg_tables"] = tables
	}
}

// writeText writes the format's lines of status's text.
func (s formatStatus) writeText(w io.Writer) {
	if s.Format == "" {
		return
	}
	fmt.Fprintf(w, "table format: %s\n", s.Format)
	for _, t := range s.Tables {
		fmt.Fprintf(w, "iceberg table %s: snapshot %d (metadata v%d, %d snapshots)\n", t.Table, t.SnapshotID, t.MetadataVersion, t.Snapshots)
	}
}

// formatErr makes a format mismatch a usage error (exit 2).
func formatErr(err error) error {
	var m *lake.MismatchError
	if errors.As(err, &m) {
		return usageError{err}
	}
	return err
}
