package iceberg_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/sinktest"
	"github.com/optlake/optlake/storage"
)

// parquetLake writes the instruments files of ticks 1..n into st as a
// Parquet lake does (milliseconds, no statistics on the Unfiltered
// columns) and returns their names.
func parquetLake(t *testing.T, st storage.Store, n int) []string {
	t.Helper()
	pq, err := parquet.New(parquet.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for tick := 1; tick <= n; tick++ {
		d := sinktest.Snapshot(t, tick, 250)
		sinktest.Load(t, pq, schema.Instruments, d.Snap, d.Records(schema.Instruments))
		names = append(names, filepath.ToSlash(parquet.Path(schema.Instruments, d.Snap)))
		d.Release()
	}
	return names
}

// Sync registers a table's files in place: it adds those the table lacks,
// removes those gone from the folder (a compaction replaced them after an
// interrupted conversion), and commits nothing when they match.
func TestSync(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := storage.NewLocal(dir)
	names := parquetLake(t, st, 3)
	lake := iceberg.New(st, nil)
	for _, step := range []struct {
		files          []string
		added, removed int
	}{
		{names[:2], 2, 0},
		{names[:2], 0, 0},
		{names[1:], 1, 1},
	} {
		s, err := lake.Sync(ctx, schema.Instruments, step.files, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.Added != step.added || s.Removed != step.removed || (s.SnapshotID == 0) != (step.added+step.removed == 0) {
			t.Errorf("sync %v: %+v, want +%d -%d", step.files, s, step.added, step.removed)
		}
	}
	tbl, _, err := lake.Table(ctx, schema.Instruments.Name)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tbl.Metadata().Snapshots()); n != 2 {
		t.Errorf("%d Iceberg snapshots, want 2 (an unchanged sync commits nothing)", n)
	}
	if err := st.Delete(ctx, names[0]); err != nil { // the folder as the table has it
		t.Fatal(err)
	}
	checkFiles(t, st, []*schema.Table{schema.Instruments})
	checkTables(t, dir, []*schema.Table{schema.Instruments}, "")
}
