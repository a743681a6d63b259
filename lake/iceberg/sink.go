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
	wh    *Warehouse
	log   *slog.Logger
}

var _ sinks.Sink = (*Sink)(nil)

// NewSink wraps the Parquet sink inner, which writes into wh's store the
// files an Iceberg table wants (parquet.Options.Iceberg, set by
// Format.Files).
func NewSink(inner sinks.Sink, wh *Warehouse) *Sink {
	return &Sink{inner: inner, wh: wh, log: wh.log}
}

// CommitsAtomically implements sinks.Atomic: the wrapped sink's answer.
// A file committed whole and then appended is seen by the table's readers
// whole, from the append on; an append that fails fails the Commit.
func (s *Sink) CommitsAtomically() bool { return sinks.CommitsAtomically(s.inner) }

// Name is the wrapped sink's ("parquet"): the ledger and --sink know the
// lake by that name whatever its table format.
func (s *Sink) Name() string { return s.inner.Name() }

// Close implements sinks.Sink.
func (s *Sink) Close(ctx context.Context) error { return s.inner.Close(ctx) }

// Open implements sinks.Sink. A committed data file never changes (readers
// of an older snapshot, time travel, a reader midway through a file rely
// on it): a snapshot whose file exists already (a replay, a catch-up after
// a failed append, a table written twice in one run) is written under a
// new version of its name (parquet.VersionedName), which the append
// swaps for the version the table references.
//
// The Sink is no sinks.DaySink, nor sinks.Versioned (it picks the versions
// itself): a sink that holds days is refused, as a file it held would not
// exist yet when Commit appends it.
func (s *Sink) Open(ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
	return s.open(ctx, t, snap)
}

// open is Open, its writer as it is.
func (s *Sink) open(ctx context.Context, t *schema.Table, snap sinks.Snapshot) (*writer, error) {
	return s.openWith(ctx, t, snap, s.written)
}

// written reports whether the store holds a file (any version) of the
// snapshot whose file is rel: a listing of the names that start with its
// name.
func (s *Sink) written(ctx context.Context, rel string) (bool, error) {
	have, err := s.wh.cat.st.List(ctx, strings.TrimSuffix(rel, ".parquet"))
	if err != nil && !errors.Is(err, storage.ErrNotExist) {
		return false, err
	}
	for _, in := range have {
		if path.Dir(in.Name) == path.Dir(rel) && parquet.SnapshotName(path.Base(in.Name)) == path.Base(rel) {
			return true, nil
		}
	}
	return false, nil
}

// openWith is open, written telling whether a file of the snapshot's
// exists already.
func (s *Sink) openWith(ctx context.Context, t *schema.Table, snap sinks.Snapshot, written func(ctx context.Context, rel string) (bool, error)) (*writer, error) {
	if _, ok := s.inner.(sinks.Versioned); !ok {
		return nil, fmt.Errorf("iceberg: %w", sinks.NotVersioned(s.inner))
	}
	if _, ok := sinks.HoldsDays(s.inner); ok {
		return nil, fmt.Errorf("iceberg: the %s sink holds rows until their day is written: no file to append at Commit", s.inner.Name())
	}
	rel := filepath.ToSlash(parquet.Path(t, snap))
	// A snapshot with no file yet cannot be in the table; one with a file
	// (any version) may be.
	exists, err := written(ctx, rel)
	if err != nil {
		return nil, fmt.Errorf("iceberg: %s: %w", rel, err)
	}
	fresh, name, version := !exists, rel, ""
	if !fresh {
		version = fmt.Sprintf("%x", time.Now().UnixNano())
		name = parquet.VersionedName(rel, version)
	}
	w, err := sinks.OpenVersion(ctx, s.inner, t, snap, version)
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
	if c.Parked {
		// Parked beside a compacted day (compact.Parking): the
		// compaction of that day registers its rows.
		w.s.log.Warn("iceberg: snapshot parked for compaction, not appended", "table", w.t.Name, "file", rel)
		return c, nil
	}
	if crash := w.s.wh.cat.crash; crash != nil {
		crash(w.t.Name, "file")
	}
	start := time.Now()
	var opts []AppendOption
	if w.fresh {
		opts = append(opts, Fresh())
	}
	id, err := w.s.wh.Append(ctx, w.t, []string{rel}, map[string]string{
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
