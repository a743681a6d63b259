package iceberg

import (
	"context"
	"fmt"
	"strings"

	"github.com/optlake/optlake/lake/layout"
	"github.com/optlake/optlake/lake/tableformat"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/storage"
)

// Name is the format's name.
const Name = "iceberg"

// Format is the iceberg table format of one data directory: its tables
// (Warehouse) and how each command uses them.
type Format struct {
	wh  *Warehouse
	st  storage.Store
	opt tableformat.Options
	cat CatalogConfig
}

var _ tableformat.Format = (*Format)(nil)

// Option is an option of the Iceberg format beyond every format's
// tableformat.Options (where a catalog plugs in).
type Option func(*Format)

// WithCatalog registers the format's tables in the catalog cfg (Open); the
// format's Close closes the catalog's connection.
func WithCatalog(cfg CatalogConfig) Option {
	return func(f *Format) { f.cat = cfg }
}

// NewFormat returns the iceberg format of the data directory st, its
// tables registered in the catalog of WithCatalog, if any (Open).
func NewFormat(ctx context.Context, st storage.Store, opt tableformat.Options, more ...Option) (*Format, error) {
	f := &Format{st: st, opt: opt}
	for _, o := range more {
		o(f)
	}
	wh, err := Open(ctx, st, f.cat, opt.Log)
	if err != nil {
		return nil, err
	}
	f.wh = wh
	if crash := opt.CommitCrash; crash != nil {
		f.wh.SetCrash(func(table, step string) { crash(table, Name+"-"+step) })
	}
	return f, nil
}

// Close implements tableformat.Format: it closes the catalog's connection
// (Warehouse.Close).
func (f *Format) Close() error { return f.wh.Close() }

// Tables is the format's Iceberg tables.
func (f *Format) Warehouse() *Warehouse { return f.wh }

// Name implements tableformat.Format.
func (f *Format) Name() string { return Name }

// Files implements tableformat.Format: files as an Iceberg table wants
// them (parquet.Options.Iceberg), a snapshot of a compacted day parked for
// the day's next compaction (compact.Parking), which registers its rows.
func (f *Format) Files(opt parquet.Options) parquet.Options {
	opt.Iceberg = true
	opt.Park = compact.Parking(f.st)
	return opt
}

// Sink implements tableformat.Format: each committed file is appended to
// its Iceberg table (NewSink).
func (f *Format) Sink(files sinks.Sink) sinks.Sink { return NewSink(files, f.wh) }

// ReplaySink implements tableformat.Format: a replay writes each
// snapshot's file like a run (a new version of it where one exists) and
// appends a table's files one day at a time (ReplaySink).
func (f *Format) ReplaySink(files, _ sinks.Sink) (sinks.Sink, error) {
	return NewReplaySink(NewSink(files, f.wh)), nil
}

// Compaction implements tableformat.Format: one replace commit per table
// and day (Compaction).
func (f *Format) Compaction() tableformat.Compaction { return f.wh.Compaction(f.opt.Crash) }

// View implements tableformat.Format: a listing of a table's day folders
// holds only the files the table's current snapshot references, not those
// a compaction replaced (kept until they expire) nor those a crash left
// unregistered.
func (f *Format) View() storage.Store { return view{Store: f.st, wh: f.wh} }

// Upkeep implements tableformat.Format: snapshots older than u.Keep leave
// the tables' metadata, and files no snapshot references are deleted once
// older than u.Grace (Warehouse.Expire).
func (f *Format) Upkeep(ctx context.Context, u tableformat.Upkeep) (string, error) {
	reps, err := f.wh.Expire(ctx, u.Tables, u.Keep, u.Grace)
	var snaps, files int
	var bytes int64
	for _, r := range reps {
		snaps, files, bytes = snaps+r.Expired, files+r.Deleted, bytes+r.DeletedBytes
	}
	return fmt.Sprintf("iceberg: expired %d snapshot(s) older than %s; deleted %d unreferenced file(s), %d bytes, older than %s", snaps, u.Keep, files, bytes, u.Grace), err
}

// Status implements tableformat.Format: iceberg_tables, each table's
// current metadata version and snapshot.
func (f *Format) Status(ctx context.Context) (tableformat.Status, error) {
	tables, err := f.wh.Tables(ctx)
	if tables == nil {
		tables = []TableStatus{}
	}
	s := tableformat.Status{JSON: map[string]any{"iceberg_tables": tables}}
	for _, t := range tables {
		if t.NotRegistered {
			s.Lines = append(s.Lines, fmt.Sprintf("iceberg table %s: not registered in the catalog (metadata v%d in the lake)", t.Table, t.MetadataVersion))
			continue
		}
		s.Lines = append(s.Lines, fmt.Sprintf("iceberg table %s: snapshot %d (metadata v%d, %d snapshots)", t.Table, t.SnapshotID, t.MetadataVersion, t.Snapshots))
	}
	return s, err
}

// view is the data directory as readers of an Iceberg lake's files see
// it (Format.View).
type view struct {
	storage.Store
	wh *Warehouse
}

// List implements storage.Store: TABLE/date=… of an Iceberg table lists its
// current files; anything else lists as the store does.
func (v view) List(ctx context.Context, prefix string) ([]storage.Info, error) {
	table, _, _ := strings.Cut(prefix, "/")
	if !strings.HasPrefix(prefix, layout.Days(table)) {
		return v.Store.List(ctx, prefix)
	}
	files, ok, err := v.wh.fileInfos(ctx, table)
	if err != nil || !ok {
		return nil, err
	}
	var out []storage.Info
	for _, f := range files {
		if strings.HasPrefix(f.Name, prefix) {
			out = append(out, f)
		}
	}
	return out, nil
}

// OpenListed implements storage.ListedOpener: a file List described is
// opened with the size its manifest records, on a bucket without a HEAD
// (a year's history reads 730 files).
func (v view) OpenListed(ctx context.Context, o storage.Info) (storage.Reader, error) {
	return storage.OpenListed(ctx, v.Store, o)
}

// ClosedFrom implements tableformat.Compaction: the compacted days' mark
// (tableformat.Mark), as in a Parquet lake. Without it every run
// --compact planned every table's files (each manifest read) to find the
// days to compact: a run's CPU grew with the lake's age.
func (c *Compaction) ClosedFrom(ctx context.Context) string {
	return tableformat.Mark{St: c.st}.ClosedFrom(ctx)
}

// Closed implements tableformat.Compaction: the mark moves to to.
func (c *Compaction) Closed(ctx context.Context, to string) error {
	return tableformat.Mark{St: c.st}.Closed(ctx, to)
}

// Reopen implements tableformat.Compaction: the mark moves back to day
// when later (a catch-up's or a replay's per-snapshot files of day).
func (c *Compaction) Reopen(ctx context.Context, day string) error {
	return tableformat.Mark{St: c.st}.Reopen(ctx, day)
}
