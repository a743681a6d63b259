package iceberg_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/sinktest"
	"github.com/optlake/optlake/storage"
)

// TestSinkForwards: the Iceberg sink is as atomic as the Parquet sink it
// wraps (so the pipeline does not stage an Iceberg lake's paginated
// loads), and refuses a sink that holds days.
func TestSinkForwards(t *testing.T) {
	wrap := func(t testing.TB, inner sinks.Sink) sinks.Sink {
		return iceberg.NewSink(inner, iceberg.New(storage.NewLocal(t.TempDir()), nil))
	}
	sinktest.Forwarding(t, wrap, map[sinktest.Capability]string{
		sinktest.DaySink:   "Commit appends the snapshot's file, which a sink that holds days has not written yet: refused",
		sinktest.Versioned: "the sink picks the versions of its files itself",
	})
	s := wrap(t, sinktest.NewCapable())
	if _, err := s.Open(context.Background(), schema.Runs, sinktest.SnapshotOf(0)); err == nil || !strings.Contains(err.Error(), "holds rows until their day") {
		t.Errorf("Open over a sink that holds days: %v", err)
	}
}

// tableFiles reads back an Iceberg lake: the rows of the data files each
// table's current snapshot references (iceberg-go's scan planning), with
// DuckDB.
type tableFiles struct {
	sinktest.ParquetFiles
	lake *iceberg.Warehouse
}

func (r tableFiles) Rows(t testing.TB, tb *schema.Table) []sinktest.Row {
	t.Helper()
	ctx := context.Background()
	tbl, ok, err := r.lake.Table(ctx, tb.Name)
	if err != nil || !ok {
		if err != nil {
			t.Fatal(err)
		}
		return nil
	}
	if tbl.CurrentSnapshot() == nil {
		return nil
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatalf("%s: plan: %v", tb.Name, err)
	}
	var files []string
	for _, task := range tasks {
		p := strings.TrimPrefix(task.File.FilePath(), "file://")
		if !filepath.IsAbs(p) {
			p = filepath.Join(r.Dir, p)
		}
		files = append(files, "'"+p+"'")
	}
	if len(files) == 0 {
		return nil
	}
	return sinktest.DuckDBRows(t, tb, "["+strings.Join(files, ", ")+"]")
}

// The Iceberg sink keeps the sinks.Sink contract (sinktest), read as the
// table's current snapshot shows it.
func TestSinkConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{New: func(t testing.TB) (sinks.Sink, sinktest.Reader) {
		dir := t.TempDir()
		st := storage.NewLocal(dir)
		pq, err := parquet.New(parquet.Options{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		lake := iceberg.New(st, nil)
		return iceberg.NewSink(pq, lake), tableFiles{sinktest.ParquetFiles{Dir: dir}, lake}
	}})
}
