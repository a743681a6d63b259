// Package iceberg keeps the lake's tables as Apache Iceberg v2 tables
// (issue 32): each table at DIR/<table>/ with metadata/ beside its data
// files, partitioned by the day of its snapshot time. The Parquet files
// the sink writes are registered in place; iceberg-go
// (github.com/apache/iceberg-go, linked from third_party/iceberg-go with
// a start-up patch) writes the metadata, manifests and
// snapshots, and this package supplies what is optlake's: the store
// (an iceberg-go IO over storage.Store) and the atomic commit of the next
// metadata version (a catalog with no server, see catalog).
package iceberg

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	icego "github.com/optlake/optlake/third_party/iceberg-go"
	icecatalog "github.com/optlake/optlake/third_party/iceberg-go/catalog"
	icetable "github.com/optlake/optlake/third_party/iceberg-go/table"

	"github.com/optlake/optlake/lake/layout"
	"github.com/optlake/optlake/schema"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/storage"
)

// Warehouse is the Iceberg tables of one data directory (Iceberg's word
// for the root location that holds a catalog's tables) with the catalog
// that commits them. The word "lake" is package lake's: the data
// directory's table format.
type Warehouse struct {
	cat *catalog
	log *slog.Logger
}

// New returns the lake of the data directory st. Locations in the metadata
// are absolute URIs, root + "/" + name, whatever folder the command runs
// in: file:///absolute/folder for a local data directory (a relative
// --data-dir, the default ./data, made absolute), or
// scheme://bucket/prefix.
func New(st storage.Store, log *slog.Logger) *Warehouse {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Warehouse{cat: newCatalog(st, Root(st)), log: log.With("table-format", "iceberg")}
}

// Root is the absolute URI of the data directory st that its tables'
// locations start with: file:///folder for a local folder (made absolute),
// st.String() (scheme://bucket/prefix) for a bucket.
func Root(st storage.Store) string {
	dir := storage.LocalDir(st)
	if dir == "" {
		return st.String()
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return "file://" + filepath.ToSlash(dir)
}

// SetCrash sets a test-only crash hook: fn is called with the table and the
// step of an Iceberg commit just done, in order: "file" (the snapshot's
// Parquet file committed, not appended yet), "manifest", "manifest-list",
// "metadata" (the next version created: the commit is done). A test's fn
// kills the process to check that a crash at any step leaves the table
// readable at its last commit. Call before the lake is used.
func (l *Warehouse) SetCrash(fn func(table, step string)) { l.cat.crash = fn }

// tableProps are the properties of every new table (and mergeProps).
var tableProps = icego.Properties{
	"format-version":                  "2",
	"write.format.default":            "parquet",
	"write.parquet.compression-codec": "zstd",
	icetable.ManifestMergeEnabledKey:  "true",
}

// mergeProps make an append merge the table's manifests (iceberg-go's
// merge append): past icetable.ManifestMinMergeCountDefault manifests of
// a partition spec they are merged into manifests of up to the target
// size, so the manifest list a commit reads and rewrites stays bounded
// instead of gaining one manifest per snapshot (a fast append's: a year
// of 5-minute snapshots made every commit rewrite a list of 105,120
// manifests, quadratic in the history).
var mergeProps = icego.Properties{icetable.ManifestMergeEnabledKey: "true"}

// mergeManifests turns manifest merging on in tx for a table made before
// it was a table property (its next append sets it, in the same commit).
func mergeManifests(tx *icetable.Transaction, tbl *icetable.Table) error {
	if tbl.Properties()[icetable.ManifestMergeEnabledKey] == "true" {
		return nil
	}
	return tx.SetProperties(mergeProps)
}

// Table loads table name; ok is false when it does not exist yet.
// A read-only lake reads a table its catalog does not hold yet at the
// data directory's newest vN.metadata.json.
func (l *Warehouse) Table(ctx context.Context, name string) (t *icetable.Table, ok bool, err error) {
	t, err = l.cat.LoadTable(ctx, icetable.Identifier{name})
	if nr := (*NotRegisteredError)(nil); errors.As(err, &nr) {
		t, _, err = l.cat.loadLocal(ctx, icetable.Identifier{name}, name)
	}
	if errors.Is(err, icecatalog.ErrNoSuchTable) {
		return nil, false, nil
	}
	return t, err == nil, err
}

// table loads t's Iceberg table, creating it (an empty version 1) when
// absent.
func (l *Warehouse) table(ctx context.Context, t *schema.Table) (*icetable.Table, error) {
	tbl, _, err := l.cat.cached(ctx, icetable.Identifier{t.Name})
	if err == nil && l.cat.movedFrom(t.Name) != "" {
		if err := l.writable(ctx, t.Name); err != nil {
			return nil, err
		}
		tbl, _, err = l.cat.cached(ctx, icetable.Identifier{t.Name})
	}
	if !errors.Is(err, icecatalog.ErrNoSuchTable) {
		return tbl, err
	}
	sc, err := Schema(t)
	if err != nil {
		return nil, err
	}
	return l.cat.create(ctx, t.Name, sc, t.PartitionTime, tableProps)
}

// Append registers the Parquet files names (store names under
// DIR/<t.Name>/) as one Iceberg append of table t: a table that does not
// exist yet is created; columns of t the table lacks are added (new field
// ids) in the same commit. props go into the snapshot's summary (e.g.
// optlake.run-id). It returns the new Iceberg snapshot's id. A version of
// the same snapshot's file that the table references (a replay or a
// catch-up wrote a new one, parquet.VersionedName) is replaced by the new
// one in the same commit, so its rows never count twice.
// Files without rows are left out (no bounds place them in a partition);
// when every file is empty nothing is committed and the id is 0.
func (l *Warehouse) Append(ctx context.Context, t *schema.Table, names []string, props map[string]string, opts ...AppendOption) (int64, error) {
	var o appendOptions
	for _, f := range opts {
		f(&o)
	}
	if len(names) == 0 {
		return 0, errors.New("iceberg append: no files")
	}
	return l.retry(ctx, t.Name, func() (int64, error) { return l.append(ctx, t, names, props, o) })
}

// retry runs commit until it does not lose a race: iceberg-go retries a
// lost race itself (refresh, rebuild the manifest list, commit again) a
// few times; past that the whole commit is done again on the new state.
func (l *Warehouse) retry(ctx context.Context, table string, commit func() (int64, error)) (int64, error) {
	var err error
	for attempt := range commitAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(time.Duration(attempt*attempt) * 50 * time.Millisecond):
			}
		}
		var id int64
		if id, err = commit(); !errors.Is(err, icetable.ErrCommitFailed) {
			return id, err
		}
		l.log.Info("iceberg commit conflict; committing again on the new state", "table", table, "attempt", attempt+1)
	}
	return 0, err
}

// commitAttempts bounds Append's attempts of a whole append.
const commitAttempts = 8

// AppendOption tunes Append.
type AppendOption func(*appendOptions)

type appendOptions struct{ fresh bool }

// Fresh tells Append that the files did not exist before this load, so the
// table cannot reference them: it skips looking for them among the table's
// files (a scan of the manifests of their days).
func Fresh() AppendOption { return func(o *appendOptions) { o.fresh = true } }

func (l *Warehouse) append(ctx context.Context, t *schema.Table, names []string, props map[string]string, o appendOptions) (int64, error) {
	tbl, err := l.table(ctx, t)
	if err != nil {
		return 0, fmt.Errorf("iceberg table %s: %w", t.Name, err)
	}
	tx := tbl.NewTransaction()
	if err := mergeManifests(tx, tbl); err != nil {
		return 0, fmt.Errorf("iceberg table %s: %w", t.Name, err)
	}
	sc, err := l.evolve(tx, tbl, t)
	if err != nil {
		return 0, err
	}
	files, err := l.dataFiles(ctx, tbl, t, sc, names)
	if err != nil {
		return 0, err
	}
	if len(files) == 0 {
		return 0, nil
	}
	var old []icego.DataFile
	if !o.fresh {
		if old, err = l.referenced(ctx, tbl, t, sc, files); err != nil {
			return 0, fmt.Errorf("iceberg table %s: %w", t.Name, err)
		}
	}
	summary := icego.Properties(props)
	if len(old) > 0 {
		// The same path cannot be removed and added by one operation:
		// a delete, then the append, staged in this one transaction
		// (one metadata commit, so readers never see the gap).
		if err := tx.ReplaceDataFilesWithDataFiles(ctx, old, nil, summary); err != nil {
			return 0, fmt.Errorf("iceberg table %s: stage replace: %w", t.Name, err)
		}
	}
	if err := tx.AddDataFiles(ctx, files, summary, icetable.WithoutDuplicateCheck()); err != nil {
		return 0, fmt.Errorf("iceberg table %s: stage append: %w", t.Name, err)
	}
	return commit(ctx, tx, t.Name)
}

// commit commits tx and returns the new current snapshot's id.
func commit(ctx context.Context, tx *icetable.Transaction, table string) (int64, error) {
	out, err := tx.Commit(ctx)
	if err != nil {
		return 0, fmt.Errorf("iceberg table %s: commit: %w", table, err)
	}
	snap := out.CurrentSnapshot()
	if snap == nil {
		return 0, fmt.Errorf("iceberg table %s: commit left no snapshot", table)
	}
	return snap.SnapshotID, nil
}

// evolve stages in tx the columns of t that tbl lacks (new field ids) and
// returns the schema the files are read with.
func (l *Warehouse) evolve(tx *icetable.Transaction, tbl *icetable.Table, t *schema.Table) (*icego.Schema, error) {
	add := newColumns(t, tbl.Schema())
	if len(add) == 0 {
		return tbl.Schema(), nil
	}
	us := tx.UpdateSchema(true, false, icetable.WithNameMapping(tbl.NameMapping()))
	for _, c := range add {
		typ, err := fieldType(c, 0)
		if err != nil {
			return nil, err
		}
		us.AddColumn([]string{c.Name}, typ, c.Doc, false, nil)
	}
	if err := us.Commit(); err != nil {
		return nil, fmt.Errorf("iceberg table %s: evolve schema: %w", t.Name, err)
	}
	staged, err := tx.StagedTable()
	if err != nil {
		return nil, fmt.Errorf("iceberg table %s: evolve schema: %w", t.Name, err)
	}
	l.log.Info("iceberg schema evolved", "table", t.Name, "columns", len(add))
	return staged.Schema(), nil
}

// dataFiles reads the footers of the Parquet files names (store names) as
// data files of tbl under the schema sc. Files without rows are left out:
// no bounds place them in a partition, and an empty snapshot adds nothing
// to read (the file stays for the Parquet readers).
func (l *Warehouse) dataFiles(ctx context.Context, tbl *icetable.Table, t *schema.Table, sc *icego.Schema, names []string) ([]icego.DataFile, error) {
	io := l.cat.io(ctx)
	files := make([]icego.DataFile, 0, len(names))
	for _, n := range names {
		df, err := icetable.FileToDataFile(ctx, io, io.location(n), sc, tbl.Spec(), 0, tbl.Properties())
		if err != nil {
			return nil, fmt.Errorf("iceberg table %s: read %s: %w", t.Name, n, err)
		}
		if df.Count() == 0 {
			continue
		}
		// The file's own units: an Iceberg lake's files are in µs, a
		// converted Parquet lake's (and older ones) in ms.
		millis, err := l.millisColumns(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("iceberg table %s: %w", t.Name, err)
		}
		if df, err = fixTimestamps(df, millis, sc, tbl.Spec()); err != nil {
			return nil, fmt.Errorf("iceberg table %s: %s: %w", t.Name, n, err)
		}
		files = append(files, df)
	}
	return files, nil
}

// snapshotFile is the location of the snapshot's file that the data file
// at loc is a version of (parquet.SnapshotName).
func snapshotFile(loc string) string {
	return path.Dir(loc) + "/" + pq.SnapshotName(path.Base(loc))
}

// referenced returns the data files of tbl's current snapshot that are
// versions of the same snapshots' files as files (parquet.VersionedName;
// a file loaded again under the same name, before files were versioned,
// too). It plans a scan filtered to the files' span of t's partition
// time, so it reads only the manifests of those days.
func (l *Warehouse) referenced(ctx context.Context, tbl *icetable.Table, t *schema.Table, sc *icego.Schema, files []icego.DataFile) ([]icego.DataFile, error) {
	if tbl.CurrentSnapshot() == nil {
		return nil, nil
	}
	want := make(map[string]bool, len(files))
	for _, f := range files {
		want[snapshotFile(f.FilePath())] = true
	}
	var opts []icetable.ScanOption
	if lo, hi, ok := timeSpan(files, sc, t.PartitionTime); ok {
		ref := icego.Reference(t.PartitionTime)
		opts = append(opts, icetable.WithRowFilter(icego.NewAnd(
			icego.GreaterThanEqual(ref, icego.Timestamp(lo)), icego.LessThanEqual(ref, icego.Timestamp(hi)))))
	}
	tasks, err := tbl.Scan(opts...).PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("plan files: %w", err)
	}
	var out []icego.DataFile
	for _, task := range tasks {
		if want[snapshotFile(task.File.FilePath())] {
			out = append(out, task.File)
		}
	}
	return out, nil
}

// timeSpan is the smallest and largest value (µs) of the column col over
// files, from their bounds; ok is false when a file has none.
func timeSpan(files []icego.DataFile, sc *icego.Schema, col string) (lo, hi int64, ok bool) {
	f, found := sc.FindFieldByName(col)
	if col == "" || !found {
		return 0, 0, false
	}
	for i, df := range files {
		l, u := df.LowerBoundValues()[f.ID], df.UpperBoundValues()[f.ID]
		if len(l) != 8 || len(u) != 8 {
			return 0, 0, false
		}
		fl, fu := int64(binary.LittleEndian.Uint64(l)), int64(binary.LittleEndian.Uint64(u))
		if i == 0 || fl < lo {
			lo = fl
		}
		if i == 0 || fu > hi {
			hi = fu
		}
	}
	return lo, hi, len(files) > 0
}

// fixTimestamps corrects what iceberg-go reads from the footer of a file
// whose timestamp columns are Parquet TIMESTAMP(MILLIS): it takes their
// statistics for microseconds (Iceberg's unit), so the bounds of every
// schema.TimestampMs column, and the day partition derived from them,
// would be 1000 times too small. The file itself is right (readers follow
// its logical type); only the bounds and the partition are rebuilt.
func fixTimestamps(df icego.DataFile, t *schema.Table, sc *icego.Schema, spec icego.PartitionSpec) (icego.DataFile, error) {
	lower, upper := scaleBounds(df.LowerBoundValues(), t, sc), scaleBounds(df.UpperBoundValues(), t, sc)
	part := make(map[int]any, len(df.Partition()))
	logical := map[int]string{}
	for _, pf := range spec.Fields() {
		src, ok := sc.FindFieldByID(pf.SourceID())
		if !ok {
			continue
		}
		if _, isDay := pf.Transform.(icego.DayTransform); !isDay {
			part[pf.FieldID] = df.Partition()[pf.FieldID]
			continue
		}
		b, ok := lower[src.ID]
		if !ok || len(b) != 8 {
			return nil, fmt.Errorf("no bounds for %s to derive its day partition", src.Name)
		}
		us := int64(binary.LittleEndian.Uint64(b))
		part[pf.FieldID] = icego.Timestamp(us).ToDate()
		logical[pf.FieldID] = "date"
	}
	b, err := icego.NewDataFileBuilder(spec, df.ContentType(), df.FilePath(), df.FileFormat(), part, logical, nil, df.Count(), df.FileSizeBytes())
	if err != nil {
		return nil, err
	}
	b.ColumnSizes(df.ColumnSizes()).ValueCounts(df.ValueCounts()).NullValueCounts(df.NullValueCounts()).
		NaNValueCounts(df.NaNValueCounts()).LowerBoundValues(lower).UpperBoundValues(upper).
		SplitOffsets(df.SplitOffsets())
	if id := df.SortOrderID(); id != nil {
		b.SortOrderID(*id)
	}
	return b.Build(), nil
}

// scaleBounds returns bounds with the values of t's TimestampMs columns
// turned from milliseconds into microseconds.
func scaleBounds(bounds map[int][]byte, t *schema.Table, sc *icego.Schema) map[int][]byte {
	out := make(map[int][]byte, len(bounds))
	for id, b := range bounds {
		out[id] = b
	}
	for _, c := range t.Columns {
		if c.Type != schema.TimestampMs || c.List {
			continue
		}
		f, ok := sc.FindFieldByName(c.Name)
		if !ok {
			continue
		}
		if b, ok := out[f.ID]; ok && len(b) == 8 {
			v := make([]byte, 8)
			binary.LittleEndian.PutUint64(v, uint64(int64(binary.LittleEndian.Uint64(b))*1000))
			out[f.ID] = v
		}
	}
	return out
}

// TableStatus is one Iceberg table of the lake as `optlake status` shows
// it.
type TableStatus struct {
	Table           string `json:"table"`
	MetadataVersion int    `json:"metadata_version"` // N of the current vN.metadata.json
	SnapshotID      int64  `json:"snapshot_id"`      // the current snapshot, 0 for none
	Snapshots       int    `json:"snapshots"`        // snapshots the metadata keeps
	// NotRegistered is a table of the data directory that the catalog
	// does not hold yet (a read-only lake does not register it);
	// MetadataVersion is then the lake's newest vN.
	NotRegistered bool `json:"not_registered,omitempty"`
}

// Tables returns the lake's Iceberg tables in name order: the table
// folders of the data directory that have a metadata version.
func (l *Warehouse) Tables(ctx context.Context) ([]TableStatus, error) {
	if l.cat.remote == nil {
		if err := l.cat.unbound(ctx); err != nil {
			return nil, err
		}
	}
	top, err := l.cat.st.ListDir(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("iceberg tables: %w", err)
	}
	var out []TableStatus
	for _, in := range top {
		name, ok := strings.CutSuffix(in.Name, "/")
		if !ok || !layout.IsTable(name) {
			continue
		}
		tbl, v, err := l.cat.load(ctx, icetable.Identifier{name})
		var nr *NotRegisteredError
		if errors.As(err, &nr) {
			out = append(out, TableStatus{Table: name, MetadataVersion: nr.Version, NotRegistered: true})
			continue
		}
		if errors.Is(err, icecatalog.ErrNoSuchTable) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ts := TableStatus{Table: name, MetadataVersion: v, Snapshots: len(tbl.Metadata().Snapshots())}
		if s := tbl.CurrentSnapshot(); s != nil {
			ts.SnapshotID = s.SnapshotID
		}
		out = append(out, ts)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Table < out[j].Table })
	return out, nil
}

// Files returns the store names of the data files the current snapshot of
// table name references, sorted; ok is false when the table does not
// exist. Files of the table's folders that it does not reference (replaced
// by a compaction, kept for time travel, or left by a crash) are not
// among them.
func (l *Warehouse) Files(ctx context.Context, name string) (names []string, ok bool, err error) {
	files, ok, err := l.fileInfos(ctx, name)
	for _, f := range files {
		names = append(names, f.Name)
	}
	return names, ok, err
}

// fileInfos is Files with each file's size as its manifest records it.
func (l *Warehouse) fileInfos(ctx context.Context, name string) (files []storage.Info, ok bool, err error) {
	tbl, ok, err := l.Table(ctx, name)
	if err != nil || !ok || tbl.CurrentSnapshot() == nil {
		return nil, ok, err
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return nil, true, fmt.Errorf("iceberg table %s: plan files: %w", name, err)
	}
	io := l.cat.io(ctx)
	for _, task := range tasks {
		n, err := io.name(task.File.FilePath())
		if err != nil {
			return nil, true, fmt.Errorf("iceberg table %s: %w", name, err)
		}
		files = append(files, storage.Info{Name: n, Size: task.File.FileSizeBytes()})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, true, nil
}
