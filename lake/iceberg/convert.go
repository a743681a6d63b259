package iceberg

import (
	"context"
	"fmt"

	icego "github.com/optlake/optlake/third_party/iceberg-go"
	icetable "github.com/optlake/optlake/third_party/iceberg-go/table"

	"github.com/optlake/optlake/schema"
)

// Synced is what Sync committed to one table.
type Synced struct {
	Added, Removed int   // data files
	SnapshotID     int64 // the new Iceberg snapshot, 0 when nothing changed
}

// Sync makes table t reference exactly the Parquet files names (store names
// under DIR/<t.Name>/, read in place, never rewritten) in one commit: the
// files it lacks are added, the files it references that are not among
// names (a compaction replaced them since an earlier, interrupted
// conversion) are removed. A table that does not exist yet is created;
// columns of t it lacks are added (new field ids; files without them read
// null through the name mapping). Files without rows are left out. When
// the table already references exactly names, nothing is committed: Sync
// is what `optlake lake convert` runs on every table, any number of times.
func (l *Warehouse) Sync(ctx context.Context, t *schema.Table, names []string, props map[string]string) (Synced, error) {
	var out Synced
	_, err := l.retry(ctx, t.Name, func() (int64, error) {
		var err error
		out, err = l.sync(ctx, t, names, props)
		return out.SnapshotID, err
	})
	return out, err
}

func (l *Warehouse) sync(ctx context.Context, t *schema.Table, names []string, props map[string]string) (Synced, error) {
	tbl, err := l.table(ctx, t)
	if err != nil {
		return Synced{}, fmt.Errorf("iceberg table %s: %w", t.Name, err)
	}
	have := map[string]icego.DataFile{}
	if tbl.CurrentSnapshot() != nil {
		tasks, err := tbl.Scan().PlanFiles(ctx)
		if err != nil {
			return Synced{}, fmt.Errorf("iceberg table %s: plan files: %w", t.Name, err)
		}
		for _, task := range tasks {
			have[task.File.FilePath()] = task.File
		}
	}
	io := l.cat.io(ctx)
	want := make(map[string]bool, len(names))
	var add []string
	for _, n := range names {
		loc := io.location(n)
		want[loc] = true
		if _, ok := have[loc]; !ok {
			add = append(add, n)
		}
	}
	var remove []icego.DataFile
	for loc, df := range have {
		if !want[loc] {
			remove = append(remove, df)
		}
	}
	tx := tbl.NewTransaction()
	sc, err := l.evolve(tx, tbl, t)
	if err != nil {
		return Synced{}, err
	}
	files, err := l.dataFiles(ctx, tbl, t, sc, add)
	if err != nil {
		return Synced{}, err
	}
	if len(files) == 0 && len(remove) == 0 {
		return Synced{}, nil
	}
	summary := icego.Properties(props)
	if len(remove) > 0 {
		err = tx.ReplaceDataFilesWithDataFiles(ctx, remove, files, summary)
	} else {
		err = tx.AddDataFiles(ctx, files, summary, icetable.WithoutDuplicateCheck())
	}
	if err != nil {
		return Synced{}, fmt.Errorf("iceberg table %s: stage: %w", t.Name, err)
	}
	id, err := commit(ctx, tx, t.Name)
	if err != nil {
		return Synced{}, err
	}
	return Synced{Added: len(files), Removed: len(remove), SnapshotID: id}, nil
}
