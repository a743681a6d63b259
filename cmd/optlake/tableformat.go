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
	"time"

	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/internal/secret"
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
	lk, err := iceberg.Open(ctx, st, j.icebergCatalog(), log)
	if err != nil {
		return nil, err
	}
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

// icebergLake is the Iceberg catalog of the data directory st when its
// lake is Iceberg, nil when it is Parquet (or has no format yet).
func icebergLake(ctx context.Context, st storage.Store, cat iceberg.CatalogConfig, log *slog.Logger) (*iceberg.Lake, error) {
	f, err := lake.Recorded(ctx, st)
	if err != nil || f != lake.Iceberg {
		return nil, err
	}
	return iceberg.Open(ctx, st, cat, log)
}

// icebergCatalog is an Iceberg lake's catalog as the --iceberg-catalog
// settings of a command that reads no job name it (the URI's reference,
// ${VAR} or @file, resolved). Its errors never show the URI's password.
func icebergCatalog(c *cli.Context) (iceberg.CatalogConfig, error) {
	uri, err := secret.Resolve(c.String("iceberg-catalog-uri"))
	if err != nil {
		return iceberg.CatalogConfig{}, usagef("--iceberg-catalog-uri: %v", redact.New(c.String("iceberg-catalog-uri")).Err(err))
	}
	cat := iceberg.CatalogConfig{Kind: c.String("iceberg-catalog"), URI: uri, Name: c.String("iceberg-catalog-name"),
		Namespace: c.String("iceberg-namespace"), Prefix: c.String("iceberg-table-prefix")}
	if _, err := iceberg.ParseCatalogKind(cat.Kind); err != nil {
		return cat, usageError{err}
	}
	return cat, nil
}

// catalogSecrets are the secrets of --iceberg-catalog-uri of a command
// that reads no job, for its log's redactor.
func catalogSecrets(c *cli.Context) []string {
	uri, err := secret.Resolve(c.String("iceberg-catalog-uri"))
	if err != nil {
		return nil
	}
	return redact.URISecrets(uri)
}

// icebergCatalog is the run's or replay's Iceberg catalog.
func (j *job) icebergCatalog() iceberg.CatalogConfig {
	return iceberg.CatalogConfig{Kind: j.IcebergCatalog, URI: j.IcebergCatalogURI, Name: j.IcebergCatalogAs,
		Namespace: j.IcebergNamespace, Prefix: j.IcebergPrefix}
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

// formatStatus is the lake's table format as `optlake status` shows it.
type formatStatus struct {
	Format lake.Format           // "" when none is recorded yet
	Tables []iceberg.TableStatus // an Iceberg lake's tables
}

// lakeFormatStatus reads the lake's format and, for an Iceberg lake, each
// table's current metadata version and snapshot. It writes nothing: a
// table the catalog lacks is shown as not registered.
func lakeFormatStatus(ctx context.Context, st storage.Store, cat iceberg.CatalogConfig) (formatStatus, error) {
	f, err := lake.Recorded(ctx, st)
	if err != nil || f != lake.Iceberg {
		return formatStatus{Format: f}, err
	}
	cat.ReadOnly = true
	ice, err := iceberg.Open(ctx, st, cat, nil)
	if err != nil {
		return formatStatus{Format: f}, err
	}
	defer ice.Close()
	tables, err := ice.Tables(ctx)
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
		if t.NotRegistered {
			fmt.Fprintf(w, "iceberg table %s: not registered in the catalog (metadata v%d in the lake)\n", t.Table, t.MetadataVersion)
			continue
		}
		fmt.Fprintf(w, "iceberg table %s: snapshot %d (metadata v%d, %d snapshots)\n", t.Table, t.SnapshotID, t.MetadataVersion, t.Snapshots)
	}
}

// lakeView is the data directory st as a reader of the lake's files
// (history) must see it: st itself for a Parquet lake; for an Iceberg
// lake, a view whose listing of a table's day folders holds only the
// files the table's current snapshot references, not those a compaction
// replaced (kept until they expire) nor those a crash left unregistered.
// It writes nothing: a table the catalog lacks is read at the lake's own
// newest metadata version.
func lakeView(ctx context.Context, st storage.Store, cat iceberg.CatalogConfig) (storage.Store, error) {
	cat.ReadOnly = true
	ice, err := icebergLake(ctx, st, cat, nil)
	if err != nil || ice == nil {
		return st, err
	}
	return icebergView{Store: st, ice: ice}, nil
}

type icebergView struct {
	storage.Store
	ice *iceberg.Lake
}

// List implements storage.Store: TABLE/date=… of an Iceberg table lists its
// current files; anything else lists as the store does.
func (v icebergView) List(ctx context.Context, prefix string) ([]storage.Info, error) {
	table, rest, _ := strings.Cut(prefix, "/")
	if !strings.HasPrefix(rest, "date=") {
		return v.Store.List(ctx, prefix)
	}
	names, ok, err := v.ice.Files(ctx, table)
	if err != nil || !ok {
		return nil, err
	}
	var out []storage.Info
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, storage.Info{Name: n})
		}
	}
	return out, nil
}

// formatErr makes a format mismatch a usage error (exit 2).
func formatErr(err error) error {
	var m *lake.MismatchError
	if errors.As(err, &m) {
		return usageError{err}
	}
	return err
}
