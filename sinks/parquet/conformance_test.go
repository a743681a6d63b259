package parquet

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/sinktest"
	"github.com/optlake/optlake/storage"
)

// duckReader reads a table's files back with DuckDB.
type duckReader struct{ dir string }

func (r duckReader) Rows(t testing.TB, tb *schema.Table) []sinktest.Row {
	t.Helper()
	glob := filepath.Join(r.dir, tb.Name, "*", "*.parquet")
	if files, _ := filepath.Glob(glob); len(files) == 0 {
		return nil
	}
	cols := make([]string, len(tb.Columns))
	for i, c := range tb.Columns {
		cols[i] = `"` + c.Name + `"`
	}
	res := testenv.DuckDBQuery(t, fmt.Sprintf("SELECT %s FROM read_parquet('%s', hive_partitioning = false)", strings.Join(cols, ", "), glob))
	out := make([]sinktest.Row, len(res.Rows))
	for i, row := range res.Rows {
		out[i] = make(sinktest.Row, len(row))
		for c, v := range row {
			out[i][c] = duckValue(t, tb.Columns[c], v)
		}
	}
	return out
}

func duckValue(t testing.TB, c schema.Column, v any) string {
	if v == nil {
		return sinktest.Null
	}
	switch c.Type {
	case schema.TimestampMs:
		ts, err := time.Parse(time.RFC3339Nano, v.(string))
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		return strconv.FormatInt(ts.UnixMilli(), 10)
	case schema.Float64:
		f, err := strconv.ParseFloat(fmt.Sprint(v), 64)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		return sinktest.Float(f)
	}
	return fmt.Sprint(v)
}

func (duckReader) Time(ms int64) (int64, bool) { return ms, true }

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{New: func(t testing.TB) (sinks.Sink, sinktest.Reader) {
		dir := t.TempDir()
		s, err := New(Options{Store: storage.NewLocal(dir)})
		if err != nil {
			t.Fatal(err)
		}
		return s, duckReader{dir}
	}})
}

// The same suite with the data directory on a bucket prefix of a real
// S3-compatible server; DuckDB reads the objects from the server's folder.
func TestConformanceOnBucket(t *testing.T) {
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	n := 0
	sinktest.Run(t, sinktest.Harness{New: func(t testing.TB) (sinks.Sink, sinktest.Reader) {
		n++
		prefix := fmt.Sprintf("case%d", n)
		st, err := storage.Open(context.Background(), g.URL("lake", prefix))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		s, err := New(Options{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		return s, duckReader{filepath.Join(g.Dir(), "lake", prefix)}
	}})
}
