package iceberg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/optlake/optlake/lake/tableformat"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/storage"
)

// ReplaySink is the sink of a replay into an Iceberg lake: each snapshot's
// file is written as a run writes it (a new version where one exists), and
// the files of a table's day are appended in one commit once the replay
// has loaded the day (FlushDay), not one commit a snapshot. A month of
// 5-minute snapshots is 30 commits a table, not 8,640: every commit
// rewrites the table's metadata, which lists its snapshots, so per-snapshot
// commits made a replay's cost grow with the square of its length.
//
// Until its day is flushed a file is in no snapshot of the table (readers
// do not see it); a replay that stops before leaves such files
// unreferenced, and expiry deletes them after its grace period
// (Warehouse.Expire), as it does a crashed run's.
type ReplaySink struct {
	s    *Sink
	mu   sync.Mutex
	days map[string]map[*schema.Table]*heldFiles // day -> table -> files
	// folders are the snapshot files (parquet.SnapshotName) of each
	// table's day folder the replay has opened, listed once at its first
	// snapshot and kept up to date with the files the replay opens (a
	// replay holds the data directory: no one else writes there), until
	// the day is flushed. Listing the folder for every snapshot made a
	// day's opens cost the square of its snapshots.
	listMu  sync.Mutex
	folders map[string]map[string]bool // day folder -> snapshot file names
}

// heldFiles are a table's committed files of a day, not appended yet.
type heldFiles struct {
	names []string
	stale bool // some file is a new version of one the table may hold
}

var _ sinks.DaySink = (*ReplaySink)(nil)

// NewReplaySink returns the replay sink of the lake whose run sink is s.
func NewReplaySink(s *Sink) *ReplaySink {
	return &ReplaySink{s: s, days: map[string]map[*schema.Table]*heldFiles{}, folders: map[string]map[string]bool{}}
}

// written reports whether the day folder of rel holds a file of its
// snapshot (any version), listing the folder at its first snapshot; rel
// counts as written from now on (its writer may still abort: a later
// open of the same snapshot then takes a new version, which is safe).
func (r *ReplaySink) written(ctx context.Context, rel string) (bool, error) {
	dir, base := path.Split(rel)
	r.listMu.Lock()
	defer r.listMu.Unlock()
	names, ok := r.folders[dir]
	if !ok {
		have, err := r.s.wh.cat.st.List(ctx, dir)
		if err != nil && !errors.Is(err, storage.ErrNotExist) {
			return false, err
		}
		names = map[string]bool{}
		for _, in := range have {
			if d, b := path.Split(in.Name); d == dir {
				names[parquet.SnapshotName(b)] = true
			}
		}
		r.folders[dir] = names
	}
	exists := names[base]
	names[base] = true
	return exists, nil
}

// Name implements sinks.Sink.
func (r *ReplaySink) Name() string { return r.s.Name() }

// CommitsAtomically implements sinks.Atomic: the run sink's answer (a
// day's files reach the table in one commit).
func (r *ReplaySink) CommitsAtomically() bool { return r.s.CommitsAtomically() }

// HoldsDays implements sinks.DaySink.
func (r *ReplaySink) HoldsDays() bool { return true }

// Close implements sinks.Sink: the files of days not flushed stay
// unreferenced.
func (r *ReplaySink) Close(ctx context.Context) error {
	r.mu.Lock()
	r.days = map[string]map[*schema.Table]*heldFiles{}
	r.mu.Unlock()
	r.listMu.Lock()
	r.folders = map[string]map[string]bool{}
	r.listMu.Unlock()
	return r.s.Close(ctx)
}

// Open implements sinks.Sink.
func (r *ReplaySink) Open(ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
	w, err := r.s.openWith(ctx, t, snap, r.written)
	if err != nil {
		return nil, err
	}
	return &heldWriter{writer: w, r: r}, nil
}

// heldWriter commits its file and hands it to its day.
type heldWriter struct {
	*writer
	r *ReplaySink
}

// Commit commits the Parquet file; the day's FlushDay appends it.
func (w *heldWriter) Commit(ctx context.Context) (sinks.Committed, error) {
	c, err := w.writer.Writer.Commit(ctx)
	if err != nil || c.Parked {
		return c, err // parked: the day's next compaction registers it
	}
	day := w.snap.Time.UTC().Format(time.DateOnly)
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	tables := w.r.days[day]
	if tables == nil {
		tables = map[*schema.Table]*heldFiles{}
		w.r.days[day] = tables
	}
	h := tables[w.t]
	if h == nil {
		h = &heldFiles{}
		tables[w.t] = h
	}
	h.names = append(h.names, w.name)
	h.stale = h.stale || !w.fresh
	return c, nil
}

// FlushDay implements sinks.DaySink: each table's files of date in one
// append (a file that is a new version of one the table references
// replaces it in the same commit). A table that fails is reported; the
// others are committed.
func (r *ReplaySink) FlushDay(ctx context.Context, date string) error {
	r.mu.Lock()
	tables := r.days[date]
	delete(r.days, date)
	r.mu.Unlock()
	r.listMu.Lock()
	for dir := range r.folders {
		if path.Base(dir) == "date="+date {
			delete(r.folders, dir)
		}
	}
	r.listMu.Unlock()
	ts := make([]*schema.Table, 0, len(tables))
	for t := range tables {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	var errs []error
	for _, t := range ts {
		h := tables[t]
		var opts []AppendOption
		if !h.stale {
			opts = append(opts, Fresh())
		}
		start := time.Now()
		id, err := r.s.wh.Append(ctx, t, h.names, map[string]string{"optlake.replay-day": date}, opts...)
		if err != nil {
			errs = append(errs, fmt.Errorf("iceberg: %s, day %s: %w", t.Name, date, err))
			continue
		}
		r.s.log.Debug("iceberg append of a replayed day", "table", t.Name, "day", date, "files", len(h.names), "snapshot-id", id, "took", time.Since(start))
	}
	if len(ts) > 0 {
		// The day's per-snapshot files wait for run --compact, which
		// starts at the compacted days' mark.
		if err := (tableformat.Mark{St: r.s.wh.cat.st}).Reopen(ctx, date); err != nil {
			errs = append(errs, fmt.Errorf("iceberg: day %s: the compacted days' mark: %w", date, err))
		}
	}
	return errors.Join(errs...)
}

// NewestMetadataFile returns the newest metadata file in a local table's
// metadata folder (dir) and its version: the table as a reader of the
// lake's files sees it without a catalog.
func NewestMetadataFile(dir string) (string, int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", 0, err
	}
	best, newest := -1, ""
	for _, e := range ents {
		if v := metadataVersion(e.Name()); v > best {
			best, newest = v, filepath.Join(dir, e.Name())
		}
	}
	if newest == "" {
		return "", 0, fmt.Errorf("no metadata file in %s", dir)
	}
	return newest, best, nil
}
