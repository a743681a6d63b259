package iceberg

import (
	"context"
	"errors"
	"fmt"
	"maps"

	icego "github.com/optlake/optlake/third_party/iceberg-go"
	icetable "github.com/optlake/optlake/third_party/iceberg-go/table"

	"github.com/optlake/optlake/storage"
)

// Relocate registers at this data directory every table whose metadata
// places it elsewhere: a relative location (a lake made with a relative
// --data-dir before locations were absolute URIs) or another absolute one
// (a lake copied or moved from another folder or bucket). It returns the
// tables it registered. See relocate. The caller holds the data directory.
func (l *Warehouse) Relocate(ctx context.Context) ([]string, error) {
	l.cat.mu.Lock()
	l.cat.adopt = true
	l.cat.mu.Unlock()
	names, err := l.tableNames(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg relocate: %w", err)
	}
	var out []string
	for _, name := range names {
		if _, _, err := l.cat.load(ctx, icetable.Identifier{name}); err != nil {
			return out, err
		}
		if l.cat.movedFrom(name) == "" {
			continue
		}
		if err := l.relocate(ctx, name); err != nil {
			return out, err
		}
		out = append(out, name)
	}
	return out, nil
}

// writable relocates table name first when its metadata places it
// elsewhere (a relative location): every commit builds on a table whose
// locations are absolute URIs in this data directory.
func (l *Warehouse) writable(ctx context.Context, name string) error {
	if l.cat.movedFrom(name) == "" {
		return nil
	}
	return l.relocate(ctx, name)
}

// relocate registers table name, whose metadata names another root, at
// this data directory's root: the next metadata version is a table of the
// same id, schema, partitioning, sort order and properties at
// root/name, whose one snapshot appends the current snapshot's data files
// under their locations in this data directory (their statistics
// copied). Earlier snapshots are not carried over (their manifests name
// the old locations), so time travel starts again here; the files only
// they referenced become unreferenced and go with the next upkeep.
func (l *Warehouse) relocate(ctx context.Context, name string) error {
	ident := icetable.Identifier{name}
	tbl, v, err := l.cat.load(ctx, ident)
	if err != nil {
		return err
	}
	from := l.cat.movedFrom(name)
	if from == "" {
		return nil
	}
	if l.cat.remote != nil {
		return fmt.Errorf("iceberg table %s: its metadata (in the iceberg catalog %s) names the location %s/%s, not this data directory's: run optlake with the --data-dir the table was made with; optlake does not relocate a table kept in a catalog", name, l.cat.remote.where, from, name)
	}
	io := l.cat.io(ctx)
	var old []icego.DataFile
	if tbl.CurrentSnapshot() != nil {
		tasks, err := tbl.Scan().PlanFiles(ctx)
		if err != nil {
			return fmt.Errorf("iceberg table %s: relocate: plan files: %w", name, err)
		}
		for _, task := range tasks {
			old = append(old, task.File)
		}
	}
	props := maps.Clone(tbl.Properties())
	delete(props, icetable.DefaultNameMappingKey) // ids are assigned afresh: the append maps them again
	props[icetable.PropertyFormatVersion] = "2"
	spec := tbl.Spec()
	md, err := icetable.NewMetadataWithUUID(tbl.Schema(), &spec, tbl.SortOrder(), io.location(name), props, tbl.Metadata().TableUUID())
	if err != nil {
		return fmt.Errorf("iceberg table %s: relocate: %w", name, err)
	}
	var files []icego.DataFile
	for _, df := range old {
		rel, err := io.name(df.FilePath())
		if err != nil {
			return fmt.Errorf("iceberg table %s: relocate: %w", name, err)
		}
		nf, err := moveDataFile(df, io.location(rel), tbl.Spec(), md.PartitionSpec())
		if err != nil {
			return fmt.Errorf("iceberg table %s: relocate %s: %w", name, rel, err)
		}
		files = append(files, nf)
	}
	rb := &rebase{cat: l.cat, name: name, v: v, md: md}
	base := icetable.New(ident, md, io.location(metadataName(name, v)), l.cat.fsF, rb)
	if len(files) == 0 {
		_, _, err = rb.CommitTable(ctx, ident, nil, nil)
	} else {
		tx := base.NewTransaction()
		if err = tx.AddDataFiles(ctx, files, icego.Properties{"optlake.operation": "relocate", "optlake.relocated-from": from + "/" + name}, icetable.WithoutDuplicateCheck()); err == nil {
			_, err = tx.Commit(ctx)
		}
	}
	if err != nil {
		return fmt.Errorf("iceberg table %s: relocate: %w", name, err)
	}
	l.log.Warn("iceberg table registered at its absolute location; its earlier snapshots are dropped", "table", name, "from", from+"/"+name, "to", io.location(name), "data_files", len(files))
	return nil
}

// moveDataFile is df at location loc, its partition keyed by the fields of
// spec (the same fields as from's, in order), every statistic kept.
func moveDataFile(df icego.DataFile, loc string, from, spec icego.PartitionSpec) (icego.DataFile, error) {
	part := map[int]any{}
	logical := map[int]string{}
	var fromFields []icego.PartitionField
	for _, pf := range from.Fields() {
		fromFields = append(fromFields, pf)
	}
	for i, pf := range spec.Fields() {
		if i >= len(fromFields) {
			return nil, errors.New("partition spec changed")
		}
		part[pf.FieldID] = df.Partition()[fromFields[i].FieldID]
		if _, isDay := pf.Transform.(icego.DayTransform); isDay {
			logical[pf.FieldID] = "date"
		}
	}
	b, err := icego.NewDataFileBuilder(spec, df.ContentType(), loc, df.FileFormat(), part, logical, nil, df.Count(), df.FileSizeBytes())
	if err != nil {
		return nil, err
	}
	b.ColumnSizes(df.ColumnSizes()).ValueCounts(df.ValueCounts()).NullValueCounts(df.NullValueCounts()).
		NaNValueCounts(df.NaNValueCounts()).LowerBoundValues(df.LowerBoundValues()).UpperBoundValues(df.UpperBoundValues()).
		SplitOffsets(df.SplitOffsets())
	if id := df.SortOrderID(); id != nil {
		b.SortOrderID(*id)
	}
	return b.Build(), nil
}

// rebase is the catalog of a relocation's commit: the updates apply to the
// new metadata md (not to the table's current version v, whose snapshots
// name the old locations), and the result is created as version v+1 only
// if absent, as catalog.CommitTable does.
type rebase struct {
	cat  *catalog
	name string
	v    int
	md   icetable.Metadata
}

var _ icetable.CatalogIO = (*rebase)(nil)

func (r *rebase) LoadTable(ctx context.Context, ident icetable.Identifier) (*icetable.Table, error) {
	return r.cat.LoadTable(ctx, ident)
}

func (r *rebase) CommitTable(ctx context.Context, ident icetable.Identifier, _ []icetable.Requirement, updates []icetable.Update) (icetable.Metadata, string, error) {
	md, err := icetable.UpdateTableMetadata(r.md, updates, "")
	if err != nil {
		return nil, "", fmt.Errorf("commit table %s: %w", r.name, err)
	}
	next := metadataName(r.name, r.v+1)
	switch err := r.cat.writeExclusive(ctx, next, md); {
	case errors.Is(err, storage.ErrExist):
		r.cat.forget(r.name)
		return nil, "", fmt.Errorf("%w: %s v%d was committed by another writer", icetable.ErrCommitFailed, r.name, r.v+1)
	case err != nil:
		return nil, "", fmt.Errorf("commit table %s: %w", r.name, err)
	}
	r.cat.writeHint(ctx, r.name, r.v+1)
	r.cat.mu.Lock()
	delete(r.cat.moved, r.name)
	r.cat.mu.Unlock()
	loc := r.cat.io(ctx).location(next)
	r.cat.remember(r.name, r.v+1, icetable.New(ident, md, loc, r.cat.fsF, r.cat))
	return md, loc, nil
}
