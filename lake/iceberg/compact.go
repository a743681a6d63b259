package iceberg

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
	icego "github.com/optlake/optlake/third_party/iceberg-go"
	icetable "github.com/optlake/optlake/third_party/iceberg-go/table"

	"github.com/optlake/optlake/lake/layout"
	"github.com/optlake/optlake/schema"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/storage"
)

// Compaction is an Iceberg lake as compaction sees it (compact.Target): the
// merge, sort and output are compaction's; what is Iceberg's is which
// files a day holds and how the new ones replace them.
//
//   - A partition's files are the data files the table's current snapshot
//     holds for the day (never a file a crash or an expired snapshot left
//     in the folder), and the files parked for it (a replay of a
//     compacted snapshot, see sinks/parquet).
//   - The compacted files are written into the day's folder under names
//     no snapshot references; an Iceberg reader sees none of them until
//     the commit.
//   - Publish is one Iceberg "replace" commit (iceberg-go's RewriteFiles):
//     the consumed data files out, the compacted ones in. Readers see the
//     old snapshot until then, the whole new one after: no window, on a
//     local disk or a bucket alike. The replaced files stay, for time
//     travel, until their snapshots expire (Warehouse.Expire).
//   - A crash before the commit leaves the compacted files as orphans,
//     which Warehouse.Expire deletes after its grace period; a crash after it
//     leaves consumed parked files, which the next compaction applies
//     again to the same rows (idempotent). There is no journal.
//
// Every method runs under the data directory's lock, as compact.Target says.
type Compaction struct {
	// The Parquet lake of the same data directory: its partitions, file
	// reading, spills and Recover (a Parquet compaction's journal left
	// from before the lake was Iceberg) are this lake's too.
	*compact.Folders
	wh *Warehouse
	st storage.Store
	// Crash, when set, is called after each of PublishSteps (tests kill
	// the process there).
	Crash func(step string)
	// Now names the compacted files (newest first, see stampName).
	Now func() time.Time

	tables map[string]map[string]map[string]icego.DataFile // table -> date -> file name -> data file
}

// PublishSteps are the steps of an Iceberg publish: the compacted files
// written (not referenced), the replace commit, the consumed parked files
// deleted.
var PublishSteps = []string{"staged", "committed", "done"}

var _ compact.Target = (*Compaction)(nil)

// Compaction returns the lake's compaction store; crash is the tests' hook
// (nil: none).
func (l *Warehouse) Compaction(crash func(step string)) *Compaction {
	return &Compaction{Folders: &compact.Folders{St: l.cat.st}, wh: l, st: l.cat.st, Crash: crash, Now: time.Now}
}

func (c *Compaction) crash(step string) {
	if c.Crash != nil {
		c.Crash(step)
	}
}

// parkedDir is the folder of the files parked for p (sinks/parquet).
func parkedDir(p compact.Partition) string { return layout.Parked(p.Table, p.Date) }

func partDir(p compact.Partition) string { return layout.Day(p.Table, p.Date) + "/" }

// files is the data files of the current snapshot of table, by day and
// name (read once per compaction; a publish updates its day).
func (c *Compaction) files(ctx context.Context, table string) (map[string]map[string]icego.DataFile, error) {
	if days, ok := c.tables[table]; ok {
		return days, nil
	}
	days := map[string]map[string]icego.DataFile{}
	tbl, ok, err := c.wh.Table(ctx, table)
	if err == nil && ok && c.wh.cat.movedFrom(table) != "" {
		if err = c.wh.writable(ctx, table); err == nil {
			tbl, ok, err = c.wh.Table(ctx, table)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("iceberg table %s: %w", table, err)
	}
	if ok && tbl.CurrentSnapshot() != nil {
		tasks, err := tbl.Scan().PlanFiles(ctx)
		if err != nil {
			return nil, fmt.Errorf("iceberg table %s: plan files: %w", table, err)
		}
		io := c.wh.cat.io(ctx)
		for _, task := range tasks {
			rel, err := io.name(task.File.FilePath())
			if err != nil {
				return nil, fmt.Errorf("iceberg table %s: %w", table, err)
			}
			p, name, ok := splitPartition(rel)
			if !ok || p.Table != table {
				continue // not in a day folder: not compaction's
			}
			if days[p.Date] == nil {
				days[p.Date] = map[string]icego.DataFile{}
			}
			days[p.Date][name] = task.File
		}
	}
	if c.tables == nil {
		c.tables = map[string]map[string]map[string]icego.DataFile{}
	}
	c.tables[table] = days
	return days, nil
}

// List implements compact.Target: the day's data files of the table's
// current snapshot (not the folder's: it keeps files of older snapshots
// until they expire), and the files parked for it.
func (c *Compaction) List(ctx context.Context, p compact.Partition) ([]compact.File, error) {
	days, err := c.files(ctx, p.Table)
	if err != nil {
		return nil, err
	}
	var out []compact.File
	for name, df := range days[p.Date] {
		out = append(out, compact.File{Name: name, Size: df.FileSizeBytes()})
	}
	all, err := c.Folders.List(ctx, p)
	if err != nil {
		return nil, err
	}
	for _, f := range all {
		if f.Parked {
			out = append(out, f)
		}
	}
	return out, nil
}

// Stage implements compact.Target.
func (c *Compaction) Stage(ctx context.Context, p compact.Partition) (compact.Staged, error) {
	return &staged{c: c, p: p, ctx: ctx}, nil
}

type staged struct {
	c     *Compaction
	p     compact.Partition
	ctx   context.Context
	names []string // written, in the day's folder
	open  []storage.Writer
}

// stampName puts a descending time stamp in front of a compacted file's
// id, so that the newest compaction's files list first in their folder:
// the Parquet sink decides whether to park a replayed snapshot by the
// first compacted file it lists (sinks/parquet parkName), and in an
// Iceberg lake the files of earlier compactions stay there for time
// travel until their snapshots expire. The "-" before the stamp sorts
// before any hex digit, so the stamped files list before a Parquet
// compaction's "compacted-<id>" files too (a lake converted to Iceberg).
func stampName(name string, now time.Time) string {
	rest := strings.TrimPrefix(name, pq.CompactedPrefix)
	return fmt.Sprintf("%s-%016x-%s", pq.CompactedPrefix, uint64(math.MaxInt64-now.UnixNano()), rest)
}

// Create implements compact.Staged: the file is written into the day's
// folder, where no snapshot references it.
func (s *staged) Create(name string) (io.WriteCloser, error) {
	name = stampName(name, s.c.Now())
	w, err := s.c.st.Create(s.ctx, partDir(s.p)+name)
	if err != nil {
		return nil, err
	}
	s.open = append(s.open, w)
	return &stagedFile{s: s, w: w, name: name}, nil
}

type stagedFile struct {
	s    *staged
	w    storage.Writer
	name string
}

func (f *stagedFile) Write(p []byte) (int, error) { return f.w.Write(p) }

func (f *stagedFile) Close() error {
	if err := f.w.Commit(); err != nil {
		return err
	}
	f.s.names = append(f.s.names, f.name)
	return nil
}

// Abort implements compact.Staged: the files written go.
func (s *staged) Abort() error {
	for _, w := range s.open {
		w.Abort()
	}
	var first error
	for _, n := range s.names {
		if err := s.c.st.Delete(context.WithoutCancel(s.ctx), partDir(s.p)+n); err != nil && first == nil {
			first = err
		}
	}
	s.open, s.names = nil, nil
	return first
}

// Publish implements compact.Staged: one Iceberg replace commit of the
// consumed data files by the compacted ones, then the consumed parked
// files are deleted.
func (s *staged) Publish(ctx context.Context, id string, consumed []compact.File) error {
	c, p := s.c, s.p
	c.crash("staged")
	days, err := c.files(ctx, p.Table)
	if err != nil {
		return err
	}
	var dels []icego.DataFile
	var parked []string
	for _, f := range consumed {
		if f.Parked {
			parked = append(parked, f.Name)
			continue
		}
		df, ok := days[p.Date][f.Name]
		if !ok {
			return fmt.Errorf("publish %s: %s is not in the table's current snapshot", p, f.Name)
		}
		dels = append(dels, df)
	}
	tbl, ok, err := c.wh.Table(ctx, p.Table)
	if err != nil || !ok {
		return fmt.Errorf("publish %s: iceberg table: %v", p, err)
	}
	// The table declares the order its compacted files are in (a table
	// made before it did gets it in this commit), and they name it.
	tx := tbl.NewTransaction()
	orderID := 0
	if order, ok := sortOrder(p.Table, tbl.Schema()); ok {
		if err := tx.ReplaceSortOrder(order); err != nil {
			return fmt.Errorf("publish %s: sort order: %w", p, err)
		}
		staged, err := tx.StagedTable()
		if err != nil {
			return fmt.Errorf("publish %s: sort order: %w", p, err)
		}
		orderID = staged.SortOrder().OrderID()
	}
	added := map[string]icego.DataFile{}
	var adds []icego.DataFile
	for _, n := range s.names {
		df, err := c.wh.dataFile(ctx, tbl, partDir(p)+n, orderID)
		if err != nil {
			return fmt.Errorf("publish %s: %w", p, err)
		}
		if df.Count() == 0 {
			continue // no rows, no bounds to place it in a partition
		}
		adds = append(adds, df)
		added[n] = df
	}
	if len(dels) > 0 || len(adds) > 0 {
		props := icego.Properties{"optlake.compaction-id": id}
		if len(dels) == 0 {
			err = tx.AddDataFiles(ctx, adds, props)
		} else {
			rw := tx.NewRewrite(props)
			for _, df := range dels {
				rw.DeleteFile(df)
			}
			for _, df := range adds {
				rw.AddDataFile(df)
			}
			err = rw.Commit(ctx)
		}
		if err != nil {
			return fmt.Errorf("publish %s: stage replace: %w", p, err)
		}
		if _, err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("publish %s: commit: %w", p, err)
		}
	}
	// Committed: the files are the table's, Abort must not touch them.
	s.names, s.open = nil, nil
	days[p.Date] = added
	c.crash("committed")
	for _, n := range parked {
		if err := c.st.Delete(ctx, parkedDir(p)+n); err != nil {
			return fmt.Errorf("remove parked %s: %w", n, err)
		}
	}
	c.crash("done")
	return nil
}

// dataFile reads the footer of the Parquet file rel (a store name) into an
// Iceberg data file of tbl, its millisecond timestamps' bounds rescaled
// (fixTimestamps), in the table's sort order orderID (0: unsorted).
func (l *Warehouse) dataFile(ctx context.Context, tbl *icetable.Table, rel string, orderID int) (icego.DataFile, error) {
	io := l.cat.io(ctx)
	df, err := icetable.FileToDataFile(ctx, io, io.location(rel), tbl.Schema(), tbl.Spec(), orderID, tbl.Properties())
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel, err)
	}
	if df.Count() == 0 {
		return df, nil
	}
	t, err := l.millisColumns(ctx, rel)
	if err != nil {
		return nil, err
	}
	return fixTimestamps(df, t, tbl.Schema(), tbl.Spec())
}

// millisColumns is a table whose only columns are the top-level
// TIMESTAMP(MILLIS) columns of the Parquet file rel: what fixTimestamps
// rescales, known from the file itself (a compacted file of an account
// table has no schema/ entry).
func (l *Warehouse) millisColumns(ctx context.Context, rel string) (*schema.Table, error) {
	r, err := l.cat.st.Open(ctx, rel)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	pf, err := file.NewParquetReader(io.NewSectionReader(r, 0, r.Size()))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", rel, err)
	}
	defer pf.Close()
	t := &schema.Table{}
	sc := pf.MetaData().Schema
	for i := range sc.NumColumns() {
		col := sc.Column(i)
		if isMillis(col.LogicalType()) && len(col.ColumnPath()) == 1 {
			t.Columns = append(t.Columns, schema.Column{Name: col.Name(), Type: schema.TimestampMs})
		}
	}
	return t, nil
}

// isMillis reports a Parquet TIMESTAMP(MILLIS) logical type. arrow-go's
// column descriptors hold it as a value, a logical type built by hand may
// be a pointer: both are.
func isMillis(lt pqschema.LogicalType) bool {
	switch ts := lt.(type) {
	case pqschema.TimestampLogicalType:
		return ts.TimeUnit() == pqschema.TimeUnitMillis
	case *pqschema.TimestampLogicalType:
		return ts.TimeUnit() == pqschema.TimeUnitMillis
	}
	return false
}

// splitPartition parses TABLE/date=YYYY-MM-DD/NAME.parquet.
func splitPartition(rel string) (compact.Partition, string, bool) {
	table, date, name, ok := layout.SplitFile(rel)
	return compact.Partition{Table: table, Date: date}, name, ok
}
