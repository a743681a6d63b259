package iceberg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/storage"
)

// Sink is the Parquet sink of an Iceberg lake: each Writer's Commit first
// commits the snapshot's Parquet file (the Parquet sink's atomic file),
// then registers it as one Iceberg append of its table. Readers of the
// Iceberg table see the snapshot's rows only from that commit on, whole.
//
// A failed append fails the Commit, so the load ledger keeps the snapshot
// pending and catch-up loads it again: the file is written under a new
// version of its name and the append replaces any version of it the table
// references (no row counted twice).
type Sink struct {
	inner sinks.Sink // the Parquet sink writing into the same store
	lake  *Lake
	log   *slog.Logger
}

var _ sinks.Sink = (*Sink)(nil)

// IcebergFiles is a sink that can write its files as an Iceberg table
// wants them (parquet.Sink: statistics on every column); NewSink asks the
// sink it wraps for that sink.
type IcebergFiles interface {
	IcebergFiles() sinks.Sink
}

// NewSink wraps the Parquet sink inner, which writes into lake's store;
// when inner is IcebergFiles, its Iceberg files' sink.
func NewSink(inner sinks.Sink, lake *Lake) *Sink {
	if f, ok := inner.(IcebergFiles); ok {
		inner = f.IcebergFiles()
	}
	return &Sink{inner: inner, lake: lake, log: lake.log}
}

// Name is the wrapped sink's ("parquet"): the ledger and --sink know the
// lake by that name whatever its table format.
func (s *Sink) Name() string { return s.inner.Name() }

// Close implements sinks.Sink.
func (s *Sink) Close(ctx context.Context) error { return s.inner.Close(ctx) }

// versionOpener is the Parquet sink's OpenVersion (parquet.Sink).
type versionOpener interface {
	OpenVersion(ctx context.Context, t *schema.Table, snap sinks.Snapshot, version string) (sinks.Writer, error)
}

// Open implements sinks.Sink. A committed data file never changes (readers
// of an older snapshot, time travel, a reader midway through a file rely
// on it): a snapshot whose file exists already (a replay, a catch-up after
// a failed append, a table written twice in one run) is written under a
// new version of its name (parquet.VersionedName), which the append
// swaps for the version the table references.
func (s *Sink) Open(ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
	vo, ok := s.inner.(versionOpener)
	if !ok {
		return nil, fmt.Errorf("iceberg: the %s sink cannot write a new version of a file", s.inner.Name())
	}
	rel := filepath.ToSlash(parquet.Path(t, snap))
	// A snapshot with no file yet cannot be in the table; one with a file
	// (any version) may be.
	have, err := s.lake.cat.st.List(ctx, strings.TrimSuffix(rel, ".parquet"))
	if err != nil && !errors.Is(err, storage.ErrNotExist) {
		return nil, fmt.Errorf("iceberg: %s: %w", rel, err)
	}
	fresh, name, version := true, rel, ""
	for _, in := range have {
		if path.Dir(in.Name) == path.Dir(rel) && parquet.SnapshotName(path.Base(in.Name)) == path.Base(rel) {
			fresh = false
		}
	}
	if !fresh {
		version = fmt.Sprintf("%x", time.Now().UnixNano())
		name = parquet.VersionedName(rel, version)
	}
	w, err := vo.OpenVersion(ctx, t, snap, version)
	if err != nil {
		return nil, err
	}
	return &writer{Writer: w, s: s, t: t, snap: snap, fresh: fresh, name: name}, nil
}

type writer struct {
	sinks.Writer
	s     *Sink
	t     *schema.Table
	snap  sinks.Snapshot
	fresh bool
	name  string // the file's store name (unless parked)
}

func (w *writer) Write(ctx context.Context, rec arrow.Record) error { return w.Writer.Write(ctx, rec) }

// Commit commits the Parquet file, then appends it to the Iceberg table.
func (w *writer) Commit(ctx context.Context) (sinks.Committed, error) {
	c, err := w.Writer.Commit(ctx)
	if err != nil {
		return c, err
	}
	rel := w.name
	if strings.Contains(filepath.ToSlash(c.Where), "/.compact/") {
		// Parked beside a compacted day (sinks/parquet parkName): the
		// compaction of that day registers its rows.
		w.s.log.Warn("iceberg: snapshot parked for compaction, not appended", "table", w.t.Name, "file", rel)
		return c, nil
	}
	if crash := w.s.lake.cat.crash; crash != nil {
		crash(w.t.Name, "file")
	}
	start := time.Now()
	var opts []AppendOption
	if w.fresh {
		opts = append(opts, Fresh())
	}
	id, err := w.s.lake.Append(ctx, w.t, []string{rel}, map[string]string{
		"optlake.run-id":        w.snap.RunID,
		"optlake.snapshot-time": w.snap.Time.UTC().Format(time.RFC3339Nano),
		"optlake.endpoint":      w.snap.Endpoint,
	}, opts...)
	if err != nil {
		return sinks.Committed{}, fmt.Errorf("iceberg: %w", err)
	}
	w.s.log.Debug("iceberg append", "table", w.t.Name, "snapshot-id", id, "rows", c.Rows, "took", time.Since(start))
	c.TableSnapshot = id
	return c, nil
}
