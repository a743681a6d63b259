package pqpage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"

	"github.com/optlake/optlake/internal/testenv"
)

// readerFiles writes the same random records with Chunks (ours.parquet) and
// with arrow-go (arrowgo.parquet) into dir: several row groups of many
// pages, nulls (by modes), NaN, ±0, long and empty strings; with dict,
// columns s and su dictionary-encoded (dictProps: low-cardinality runs in
// the first two records, random strings in the others, whose dictionary
// fills up). It returns the
// non-null values of column sd.
func readerFiles(t *testing.T, dir string, dict bool, modes ...nullMode) (sd int) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	var recs []arrow.Record
	props := testProps(300, 2<<10)
	for i, n := range []int{400, 250, 1, 90} {
		rec := genRecord(r, n, func() nullMode { return modes[r.IntN(len(modes))] }, nil, "")
		if dict && i < 2 {
			rec = lowCard(r, rec, []string{"", "BTC", "ETH", "USDC", "option"}, 50, true)
		}
		recs = append(recs, rec)
	}
	if dict {
		props = dictProps(300, 2<<10, parquet.WithDictionaryPageSizeLimit(1<<10)) // the random strings' fall back
	}
	defer func() {
		for _, rec := range recs {
			sd += rec.Column(8).Len() - rec.Column(8).NullN()
			rec.Release()
		}
	}()
	writeArrowGo(t, filepath.Join(dir, "arrowgo.parquet"), props, recs)
	writeOurs(t, filepath.Join(dir, "ours.parquet"), props, recs)
	return 0 // counted as the records are released
}

// DuckDB reads a file of Chunks as arrow-go's: the same values row by row,
// and in parquet_metadata and parquet_schema the same row groups, types,
// encodings and statistics (min, max, their legacy fields, null counts).
//
// Without all-null batches: DuckDB (node-api 1.5.6) rejects arrow-go's page of a
// DELTA_BYTE_ARRAY column that holds only nulls ("invalid number of
// miniblocks per block"), see TestDuckDBReadsAllNullDeltaPages.
func TestDuckDBReadsAsArrowGo(t *testing.T) {
	for _, dict := range []bool{false, true} {
		t.Run(fmt.Sprint("dictionary=", dict), func(t *testing.T) { duckDBReadsAsArrowGo(t, dict) })
	}
}

func duckDBReadsAsArrowGo(t *testing.T, dict bool) {
	dir := t.TempDir()
	readerFiles(t, dir, dict, someNulls, noNulls)
	ours, ref := filepath.Join(dir, "ours.parquet"), filepath.Join(dir, "arrowgo.parquet")
	var differ []string
	for _, f := range testSchema.Fields() {
		differ = append(differ, fmt.Sprintf("a.%q IS DISTINCT FROM b.%[1]q", f.Name))
	}
	res := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT count(*) AS rows, count(*) FILTER (WHERE a.file_row_number IS NULL OR b.file_row_number IS NULL OR %s) AS differ
FROM read_parquet('%s', file_row_number = true) a FULL JOIN read_parquet('%s', file_row_number = true) b USING (file_row_number)`,
		strings.Join(differ, " OR "), ours, ref))
	if rows, d := fmt.Sprint(res.Rows[0][0]), fmt.Sprint(res.Rows[0][1]); rows != "741" || d != "0" {
		t.Errorf("DuckDB: %s rows, %s differ; want 741, 0", rows, d)
	}
	for _, q := range []string{
		`SELECT row_group_id, row_group_num_rows, column_id, num_values, path_in_schema, type, stats_min, stats_max, stats_null_count,
			stats_min_value, stats_max_value, compression, encodings FROM parquet_metadata('%s') ORDER BY row_group_id, column_id`,
		`SELECT name, type, repetition_type, converted_type, logical_type FROM parquet_schema('%s')`,
		`SELECT key, value FROM parquet_kv_metadata('%s') ORDER BY key`,
	} {
		got, want := testenv.DuckDBQuery(t, fmt.Sprintf(q, ours)), testenv.DuckDBQuery(t, fmt.Sprintf(q, ref))
		if len(want.Rows) == 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n%.2000v\nwant\n%.2000v", strings.Fields(q)[len(strings.Fields(q))-1], got.Rows, want.Rows)
		}
	}
}

// DuckDB reads a Chunk's page of a DELTA_BYTE_ARRAY column that holds only
// nulls (its DELTA_BINARY_PACKED lengths a header of no values), which it
// rejects in arrow-go's files.
func TestDuckDBReadsAllNullDeltaPages(t *testing.T) {
	dir := t.TempDir()
	sd := readerFiles(t, dir, false, someNulls, noNulls, allNulls, allNulls)
	res := testenv.DuckDBQuery(t, fmt.Sprintf("SELECT count(*), count(sd) FROM read_parquet('%s')", filepath.Join(dir, "ours.parquet")))
	if got, want := fmt.Sprint(res.Rows[0]), fmt.Sprintf("[741 %d]", sd); got != want {
		t.Errorf("DuckDB: rows, sd values %s, want %s", got, want)
	}
}

// chDB (ClickHouse) reads a file of Chunks as arrow-go's: the same rows,
// with and without dictionaries.
func TestChDBReadsAsArrowGo(t *testing.T) {
	for _, dict := range []bool{false, true} {
		t.Run(fmt.Sprint("dictionary=", dict), func(t *testing.T) { chDBReadsAsArrowGo(t, dict) })
	}
}

func chDBReadsAsArrowGo(t *testing.T, dict bool) {
	dir := t.TempDir()
	readerFiles(t, dir, dict, someNulls, someNulls, noNulls, allNulls)
	ch := testenv.NewChDB(t)
	ch.Workdir = dir
	digest := func(name string) string {
		out, err := ch.Query(context.Background(), fmt.Sprintf("SELECT count(), sum(sipHash64(formatRow('TSV', *))), countIf(isNull(s)), countIf(isNaN(f)) FROM file('%s', Parquet);", name))
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	got, want := digest("ours.parquet"), digest("arrowgo.parquet")
	if got != want || !strings.HasPrefix(got, "741\t") {
		t.Errorf("chDB: %q, want %q (741 rows)", got, want)
	}
}

// DuckDB reads definition levels of one bit-packed run of 2,500 groups
// (every other row null, 20,003 rows in one page) and the values around
// them.
func TestDuckDBReadsLongBitPackedLevels(t *testing.T) {
	const n = 20003
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	for c, f := range testSchema.Fields() {
		fb := b.Field(c)
		for i := range n {
			if f.Nullable && i%2 == 1 {
				fb.AppendNull()
				continue
			}
			switch fb := fb.(type) {
			case *array.StringBuilder:
				fb.Append(fmt.Sprint("v", i))
			case *array.Int64Builder:
				fb.Append(int64(i))
			default:
				fb.AppendEmptyValues(1)
			}
		}
	}
	rec := b.NewRecord()
	b.Release()
	defer rec.Release()
	p := filepath.Join(t.TempDir(), "ours.parquet")
	writeOurs(t, p, testProps(n, 1<<30), []arrow.Record{rec})
	if pages := checkLayout(t, p); pages[0][1] != 1 {
		t.Fatalf("column in: %d pages, want 1", pages[0][1])
	}
	res := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT count(*), count("in"), sum("in")::BIGINT, count(s), count(sd), sum(i)::BIGINT FROM read_parquet('%s')`, p))
	// in: the even rows 0, 2, ..., 20002: 10,002 of them, summing to 10,001 * 10,002
	if got := fmt.Sprint(res.Rows[0]); got != "[20003 10002 100030002 10002 10002 200050003]" {
		t.Errorf("DuckDB: %s, want [20003 10002 100030002 10002 10002 200050003]", got)
	}
}
