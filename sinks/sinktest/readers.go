package sinktest

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/schema"
)

// InMemory reads back a sink that keeps its committed records (memsink's
// Records): it returns the records of the named table.
type InMemory func(table string) []arrow.Record

// Rows implements Reader.
func (f InMemory) Rows(_ testing.TB, tb *schema.Table) []Row { return Rows(tb, Exact, f(tb.Name)...) }

// Time implements Reader: times are kept as written.
func (InMemory) Time(ms int64) (int64, bool) { return ms, true }

// ParquetFiles reads back a Parquet lake in the folder Dir with DuckDB:
// each table's files, TABLE/*/*.parquet.
type ParquetFiles struct{ Dir string }

// Rows implements Reader.
func (r ParquetFiles) Rows(t testing.TB, tb *schema.Table) []Row {
	t.Helper()
	glob := filepath.Join(r.Dir, tb.Name, "*", "*.parquet")
	if files, _ := filepath.Glob(glob); len(files) == 0 {
		return nil
	}
	return DuckDBRows(t, tb, "'"+glob+"'")
}

// Time implements Reader: times are kept as written.
func (ParquetFiles) Time(ms int64) (int64, bool) { return ms, true }

// DuckDBRows reads tb's columns from the Parquet files of files (the
// first argument of DuckDB's read_parquet: a quoted glob, or a list) in
// canonical text.
func DuckDBRows(t testing.TB, tb *schema.Table, files string) []Row {
	t.Helper()
	cols := make([]string, len(tb.Columns))
	for i, c := range tb.Columns {
		cols[i] = `"` + c.Name + `"`
	}
	res := testenv.DuckDBQuery(t, fmt.Sprintf("SELECT %s FROM read_parquet(%s, hive_partitioning = false)", strings.Join(cols, ", "), files))
	out := make([]Row, len(res.Rows))
	for i, row := range res.Rows {
		out[i] = make(Row, len(row))
		for c, v := range row {
			out[i][c] = duckValue(t, tb.Columns[c], v)
		}
	}
	return out
}

func duckValue(t testing.TB, c schema.Column, v any) string {
	if v == nil {
		return Null
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
		return Float(f)
	}
	return fmt.Sprint(v)
}
