package parquet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/storage"
)

var snap = sinks.Snapshot{
	Time:     time.Date(2026, 11, 22, 10, 15, 0, 250e6, time.UTC),
	RunID:    "01936f0e-7c00-7000-8000-000000000001",
	Source:   "venue.test",
	Endpoint: "instruments",
}

// record builds n instrument rows; row i has strike 1000*i, is_active i%2==0
// and a null index_price every third row.
func record(t *testing.T, n int) arrow.Record {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema.Instruments.ArrowSchema())
	defer b.Release()
	tb := schema.Instruments
	for i := 0; i < n; i++ {
		for c, col := range tb.Columns {
			f := b.Field(c)
			switch col.Name {
			case "snapshot_time":
				f.(*array.TimestampBuilder).Append(arrow.Timestamp(snap.Time.UnixMilli()))
			case "run_id":
				f.(*array.StringBuilder).Append(snap.RunID)
			case "source":
				f.(*array.StringBuilder).Append(snap.Source)
			case "instrument_name":
				f.(*array.StringBuilder).Append(fmt.Sprintf("BTC-27NOV26-%d-C", 1000*i))
			case "strike":
				f.(*array.Float64Builder).Append(float64(1000 * i))
			case "is_active":
				f.(*array.BooleanBuilder).Append(i%2 == 0)
			case "index_price":
				if i%3 == 0 {
					f.AppendNull()
				} else {
					f.(*array.Float64Builder).Append(95012.35)
				}
			case "expiration_time":
				f.(*array.TimestampBuilder).Append(arrow.Timestamp(time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC).UnixMilli()))
			default:
				f.AppendNull()
			}
		}
	}
	return b.NewRecord()
}

func write(t *testing.T, s *Sink, recs ...arrow.Record) sinks.Committed {
	t.Helper()
	ctx := context.Background()
	w, err := s.Open(ctx, schema.Instruments, snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	c, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestWriteReadByDuckDB(t *testing.T) {
	dir := t.TempDir()
	s, err := New(Options{Store: storage.NewLocal(dir)})
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := record(t, 100), record(t, 50)
	defer r1.Release()
	defer r2.Release()
	c := write(t, s, r1, r2)
	want := filepath.Join(dir, "instruments", "date=2026-11-22", "20261122T101500.250Z-"+snap.RunID+".parquet")
	if c.Where != want || c.Rows != 150 || c.Bytes == 0 {
		t.Fatalf("committed %+v, want file %s", c, want)
	}
	glob := filepath.Join(dir, "instruments", "*", "*.parquet")
	res := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT count(*) AS n, count(index_price) AS priced, sum(strike) AS strikes,
		count(*) FILTER (WHERE is_active) AS active, min(snapshot_time) AS snap, min(expiration_time) AS exp,
		any_value(date) AS date, any_value(typeof(snapshot_time)) AS ts_type, any_value(typeof(is_active)) AS b_type,
		any_value(typeof(index_price)) AS f_type
		FROM read_parquet('%s', hive_partitioning = true)`, glob))
	got := map[string]string{}
	for i, col := range res.Columns {
		got[col.Name] = fmt.Sprint(res.Rows[0][i])
	}
	wantVals := map[string]string{
		"n": "150", "priced": "99", "strikes": fmt.Sprint(1000 * (99*100/2 + 49*50/2)), "active": "75",
		"snap": "2026-11-22T10:15:00.250Z", "exp": "2026-11-27T08:00:00.000Z", "date": "2026-11-22",
		"ts_type": "TIMESTAMP WITH TIME ZONE", "b_type": "BOOLEAN", "f_type": "DOUBLE",
	}
	for k, v := range wantVals {
		if got[k] != v {
			t.Errorf("%s = %s, want %s", k, got[k], v)
		}
	}
	// zstd compressed, per the contract.
	meta := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT DISTINCT compression FROM parquet_metadata('%s')`, want))
	if len(meta.Rows) != 1 || meta.Rows[0][0] != "ZSTD" {
		t.Errorf("compression = %v", meta.Rows)
	}
	// The Dictionary columns are RLE_DICTIONARY (with their dictionary
	// pages PLAIN), the columns the schema marks SharedPrefix
	// DELTA_BYTE_ARRAY (names read back above, and by DuckDB here); the
	// others are plain.
	enc := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT path_in_schema, any_value(encodings) FROM parquet_metadata('%s') GROUP BY ALL`, want))
	if len(enc.Rows) != len(schema.Instruments.Columns) {
		t.Fatalf("%d columns in the file, want %d", len(enc.Rows), len(schema.Instruments.Columns))
	}
	for _, r := range enc.Rows {
		name, encs := fmt.Sprint(r[0]), fmt.Sprint(r[1])
		c := schema.Instruments.Columns[schema.Instruments.MustIndex(name)]
		dict := Dictionary(c)
		if delta := strings.Contains(encs, "DELTA_BYTE_ARRAY"); delta != (c.SharedPrefix && !dict) || strings.Contains(encs, "RLE_DICTIONARY") != dict {
			t.Errorf("column %s: encodings %s (shared prefix %v, dictionary %v)", name, encs, c.SharedPrefix, dict)
		}
	}
	names := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT count(DISTINCT instrument_name), min(instrument_name), max(instrument_name) FROM '%s'`, want))
	if fmt.Sprint(names.Rows[0]) != "[100 BTC-27NOV26-0-C BTC-27NOV26-99000-C]" {
		t.Errorf("instrument names read back by DuckDB: %v", names.Rows[0])
	}
}

// A replayed snapshot replaces its file; an aborted one leaves nothing; a
// file being written is invisible to readers' globs.
func TestAtomicReplaceAndAbort(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, _ := New(Options{Store: storage.NewLocal(dir)})
	r := record(t, 10)
	defer r.Release()
	write(t, s, r)
	write(t, s, r)
	files, _ := filepath.Glob(filepath.Join(dir, "instruments", "*", "*.parquet"))
	if len(files) != 1 {
		t.Fatalf("files after writing one snapshot twice: %v", files)
	}

	// In flight: only a hidden temp file exists, which *.parquet does not match.
	snap2 := snap
	snap2.Time = snap.Time.Add(time.Minute)
	w, err := s.Open(ctx, schema.Instruments, snap2)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, r); err != nil {
		t.Fatal(err)
	}
	files, _ = filepath.Glob(filepath.Join(dir, "instruments", "*", "*.parquet"))
	if len(files) != 1 {
		t.Errorf("a file in flight is visible: %v", files)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "instruments", "date=2026-11-22"))
	hidden := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") && strings.Contains(e.Name(), ".tmp-") {
			hidden++
		}
	}
	if hidden != 1 {
		t.Errorf("want one hidden temp file, dir has %v", entries)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	entries, _ = os.ReadDir(filepath.Join(dir, "instruments", "date=2026-11-22"))
	if len(entries) != 1 {
		t.Errorf("abort left files behind: %v", entries)
	}
	if err := w.Abort(); err != nil {
		t.Errorf("second abort: %v", err)
	}
	if _, err := w.Commit(ctx); err == nil {
		t.Error("commit after abort succeeded")
	}
}

func TestPathCannotEscape(t *testing.T) {
	cases := []sinks.Snapshot{
		{Time: snap.Time, RunID: "../../etc/passwd", Endpoint: "x"},
		{Time: snap.Time, RunID: "/abs", Endpoint: "../.."},
		{Time: snap.Time, RunID: "a\x00b", Endpoint: ".."},
		{Time: snap.Time, RunID: "..", Endpoint: "."},
	}
	for _, c := range cases {
		for _, tb := range []*schema.Table{schema.Instruments, schema.Rejects} {
			p := Path(tb, c)
			clean := filepath.Clean(p)
			if filepath.IsAbs(p) || strings.HasPrefix(clean, "..") || strings.ContainsRune(p, 0) ||
				!strings.HasPrefix(clean, tb.Name+string(filepath.Separator)) || strings.Count(clean, string(filepath.Separator)) != 2 {
				t.Errorf("Path(%q, %q) = %q escapes its folder", c.RunID, c.Endpoint, p)
			}
		}
	}
}

func TestCommitFailsWhenDirVanishes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, _ := New(Options{Store: storage.NewLocal(dir)})
	w, err := s.Open(ctx, schema.Instruments, snap)
	if err != nil {
		t.Fatal(err)
	}
	r := record(t, 3)
	defer r.Release()
	if err := w.Write(ctx, r); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, "instruments"))
	if _, err := w.Commit(ctx); err == nil || !strings.Contains(err.Error(), "parquet: commit") {
		t.Fatalf("commit into a removed folder: %v", err)
	}
}

// A snapshot's file has statistics on every column readers filter on (min
// and max where there are values) and none on the schema's Unfiltered columns.
func TestStatistics(t *testing.T) {
	dir := t.TempDir()
	s, err := New(Options{Store: storage.NewLocal(dir)})
	if err != nil {
		t.Fatal(err)
	}
	rec := record(t, 100)
	defer rec.Release()
	write(t, s, rec)
	r, err := file.OpenParquetFile(filepath.Join(dir, Path(schema.Instruments, snap)), false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	md := r.MetaData()
	unfiltered := map[string]bool{}
	for _, c := range schema.Instruments.Columns {
		unfiltered[c.Name] = c.Unfiltered
	}
	for c := 0; c < md.Schema.NumColumns(); c++ {
		name := md.Schema.Column(c).Name()
		cc, err := md.RowGroup(0).ColumnChunk(c)
		if err != nil {
			t.Fatal(err)
		}
		st, err := cc.Statistics()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case unfiltered[name] && st != nil:
			t.Errorf("%s has statistics", name)
		case !unfiltered[name] && st == nil:
			t.Errorf("%s has no statistics", name)
		}
	}
	for _, name := range []string{"snapshot_time", "run_id", "source", "instrument_name", "strike", "expiration_time"} {
		cc, _ := md.RowGroup(0).ColumnChunk(md.Schema.ColumnIndexByName(name))
		if st, _ := cc.Statistics(); st == nil || !st.HasMinMax() {
			t.Errorf("%s: no min/max", name)
		}
	}
	for _, name := range []string{"base_currency", "kind", "option_type", "instrument_name", "expiration_time"} {
		if unfiltered[name] {
			t.Errorf("%s is a filter column without statistics", name)
		}
	}
}

// A file's records are gathered into row groups of RowGroupRows rows (the
// last one shorter), not one row group per record; DuckDB reads back every
// row, in order.
func TestRowGroupsGatherRecords(t *testing.T) {
	dir := t.TempDir()
	s, err := New(Options{Store: storage.NewLocal(dir), RowGroupRows: 64})
	if err != nil {
		t.Fatal(err)
	}
	var recs []arrow.Record
	for _, n := range []int{50, 50, 50, 30} {
		r := record(t, n)
		defer r.Release()
		recs = append(recs, r)
	}
	write(t, s, recs...)
	name := filepath.Join(dir, Path(schema.Instruments, snap))
	r, err := file.OpenParquetFile(name, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rows []int64
	for g := range r.NumRowGroups() {
		rows = append(rows, r.MetaData().RowGroup(g).NumRows())
	}
	if fmt.Sprint(rows) != "[64 64 52]" {
		t.Errorf("row groups of %v rows, want [64 64 52]", rows)
	}
	res := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT string_agg(strike::BIGINT::VARCHAR, ',' ORDER BY file_row_number) AS strikes,
		count(index_price) AS priced FROM read_parquet('%s', file_row_number = true)`, name))
	var want []string
	for _, n := range []int{50, 50, 50, 30} {
		for i := range n {
			want = append(want, fmt.Sprint(1000*i))
		}
	}
	if got := fmt.Sprint(res.Rows[0][0]); got != strings.Join(want, ",") {
		t.Errorf("strikes read back in file order:\n%s\nwant\n%s", got, strings.Join(want, ","))
	}
	if got := fmt.Sprint(res.Rows[0][1]); got != "119" { // every third row is null: 33+33+33+20
		t.Errorf("%s prices, want 119", got)
	}
}
