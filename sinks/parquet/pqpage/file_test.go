package pqpage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

// testSchema has every type and shape a Chunk writes: required and
// optional, PLAIN and DELTA_BYTE_ARRAY strings, a column without
// statistics.
var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "i", Type: arrow.PrimitiveTypes.Int64},
	{Name: "in", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "fr", Type: arrow.PrimitiveTypes.Float64},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "br", Type: arrow.FixedWidthTypes.Boolean},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "sd", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "sdr", Type: arrow.BinaryTypes.String},
	{Name: "su", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// testProps are the properties of the test files: small pages (many per
// chunk), delta strings, no statistics on su; then extra.
func testProps(rowGroupRows, pageSize int64, extra ...parquet.WriterProperty) *parquet.WriterProperties {
	return parquet.NewWriterProperties(append([]parquet.WriterProperty{
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithCompressionLevel(1),
		parquet.WithStats(true),
		parquet.WithCreatedBy("optlake"),
		parquet.WithMaxRowGroupLength(rowGroupRows),
		parquet.WithDataPageSize(pageSize),
		parquet.WithDictionaryDefault(false),
		parquet.WithEncodingFor("sd", parquet.Encodings.DeltaByteArray),
		parquet.WithEncodingFor("sdr", parquet.Encodings.DeltaByteArray),
		parquet.WithStatsFor("su", false),
	}, extra...)...)
}

// nullMode is how a generated column has nulls.
type nullMode int

const (
	someNulls nullMode = iota
	noNulls
	allNulls
)

// genRecord makes n rows of testSchema: each column's nulls by mode (the
// required columns none), values drawn from the edge cases (floats from
// only unless nil), every string starting with prefix.
func genRecord(r *rand.Rand, n int, mode func() nullMode, only []float64, prefix string) arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	ints := []int64{math.MinInt64, math.MaxInt64, 0, -1, 1}
	floats := []float64{math.NaN(), math.Copysign(0, -1), 0, math.Inf(1), math.Inf(-1), math.MaxFloat64, -math.SmallestNonzeroFloat64}
	prefixes := []string{"", "AAPL-20261127-", "AAPL-20261127-C-", "BTC-27NOV26-", "ÿ", "\x00"}
	str := func() string {
		switch r.IntN(8) {
		case 0:
			return ""
		case 1:
			return strings.Repeat(string(rune('a'+r.IntN(26))), 4000+r.IntN(200)) // around the 4096-byte statistics limit
		case 2:
			return prefixes[r.IntN(len(prefixes))]
		}
		return prefixes[r.IntN(len(prefixes))] + fmt.Sprint(r.IntN(100000))
	}
	for c, f := range testSchema.Fields() {
		m := noNulls
		if f.Nullable {
			m = mode()
		}
		fb := b.Field(c)
		for range n {
			if m == allNulls || m == someNulls && r.IntN(3) == 0 {
				fb.AppendNull()
				continue
			}
			switch fb := fb.(type) {
			case *array.Int64Builder:
				if r.IntN(4) == 0 {
					fb.Append(ints[r.IntN(len(ints))])
				} else {
					fb.Append(r.Int64() - r.Int64())
				}
			case *array.TimestampBuilder:
				fb.Append(arrow.Timestamp(1_700_000_000_000 + r.Int64N(1e10)))
			case *array.Float64Builder:
				if only != nil {
					fb.Append(only[r.IntN(len(only))])
				} else if r.IntN(4) == 0 {
					fb.Append(floats[r.IntN(len(floats))])
				} else {
					fb.Append(r.NormFloat64() * 1e3)
				}
			case *array.BooleanBuilder:
				fb.Append(r.IntN(2) == 0)
			case *array.StringBuilder:
				fb.Append(prefix + str())
			}
		}
	}
	return b.NewRecord()
}

// writeOurs writes recs with Chunks and File in row groups of
// props.MaxRowGroupLength rows, as pqarrow's WriteBuffered does.
func writeOurs(t testing.TB, path string, props *parquet.WriterProperties, recs []arrow.Record) {
	t.Helper()
	pqschema, chunks := testChunks(t, props)
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFile(out, pqschema, props)
	if err != nil {
		t.Fatal(err)
	}
	var rows int64
	end := func() {
		for _, c := range chunks {
			if err := c.Finish(); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.WriteRowGroup(rows, chunks); err != nil {
			t.Fatal(err)
		}
		for _, c := range chunks {
			c.Reset()
		}
		rows = 0
	}
	for _, rec := range recs {
		for off := int64(0); off < rec.NumRows(); {
			k := min(rec.NumRows()-off, props.MaxRowGroupLength()-rows)
			part := rec.NewSlice(off, off+k)
			for i, c := range chunks {
				if err := c.Append(part.Column(i)); err != nil {
					t.Fatal(err)
				}
			}
			part.Release()
			rows += k
			off += k
			if rows == props.MaxRowGroupLength() {
				end()
			}
		}
	}
	if rows > 0 {
		end()
	}
	if err := f.AppendKeyValueMetadata("k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// testChunks are the Parquet schema of testSchema and a Chunk per column,
// with props.
func testChunks(t testing.TB, props *parquet.WriterProperties) (*schema.Schema, []*Chunk) {
	return chunksOf(t, testSchema, props)
}

// chunksOf are the Parquet schema of sc and a Chunk per column, with props.
func chunksOf(t testing.TB, sc *arrow.Schema, props *parquet.WriterProperties) (*schema.Schema, []*Chunk) {
	t.Helper()
	pqschema, err := pqarrow.ToParquet(sc, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	opts, ok := ColumnOptions(pqschema, sc.Fields(), props)
	if !ok {
		t.Fatal("ColumnOptions: not ours")
	}
	chunks := make([]*Chunk, len(opts))
	for i, o := range opts {
		if chunks[i], err = New(o); err != nil {
			t.Fatal(err)
		}
	}
	return pqschema, chunks
}

// writeArrowGo writes recs with pqarrow's writer.
func writeArrowGo(t testing.TB, path string, props *parquet.WriterProperties, recs []arrow.Record) {
	t.Helper()
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(testSchema, out, props, pqarrow.NewArrowWriterProperties())
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if err := w.WriteBuffered(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AppendKeyValueMetadata("k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// readFile reads path back with pqarrow.
func readFile(t testing.TB, path string) (*file.Reader, arrow.Table) {
	t.Helper()
	r, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	t.Cleanup(func() { tbl.Release(); r.Close() })
	return r, tbl
}

// sameValues fails unless column got holds exactly want's values (floats
// bit for bit: NaN, -0).
func sameValues(t testing.TB, name string, want, got arrow.Array) {
	t.Helper()
	if want.Len() != got.Len() {
		t.Fatalf("column %s: %d values, want %d", name, got.Len(), want.Len())
	}
	if wf, ok := want.(*array.Float64); ok {
		gf := got.(*array.Float64)
		for i := range want.Len() {
			if wf.IsNull(i) != gf.IsNull(i) || wf.IsValid(i) && math.Float64bits(wf.Value(i)) != math.Float64bits(gf.Value(i)) {
				t.Fatalf("column %s row %d: %v, want %v", name, i, gf.ValueStr(i), wf.ValueStr(i))
			}
		}
		return
	}
	if !array.Equal(want, got) {
		for i := range want.Len() {
			if want.ValueStr(i) != got.ValueStr(i) {
				t.Fatalf("column %s row %d: %.40q, want %.40q", name, i, got.ValueStr(i), want.ValueStr(i))
			}
		}
		t.Fatalf("column %s differs", name)
	}
}

// column concatenates a table's column.
func column(t testing.TB, tbl arrow.Table, i int) arrow.Array {
	t.Helper()
	a, err := array.Concatenate(tbl.Column(i).Data().Chunks(), memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Release)
	return a
}

// compareFiles fails unless got reads back as recs, as want does, with
// want's schema, row groups, pages (checkLayout), encodings, statistics and
// key-value metadata.
func compareFiles(t testing.TB, want, got string, recs []arrow.Record) {
	t.Helper()
	wr, wt := readFile(t, want)
	gr, gt := readFile(t, got)
	if !wt.Schema().Equal(gt.Schema()) {
		t.Fatalf("schema:\n%s\nwant\n%s", gt.Schema(), wt.Schema())
	}
	wm, gm := wr.MetaData(), gr.MetaData()
	if !wm.Schema.Equals(gm.Schema) {
		t.Fatalf("Parquet schema:\n%s\nwant\n%s", gm.Schema, wm.Schema)
	}
	if gm.NumRows != wm.NumRows || len(gm.RowGroups) != len(wm.RowGroups) {
		t.Fatalf("%d rows in %d row groups, want %d in %d", gm.NumRows, len(gm.RowGroups), wm.NumRows, len(wm.RowGroups))
	}
	if v := gm.KeyValueMetadata().FindValue("k"); v == nil || *v != "v" {
		t.Errorf("key-value metadata k = %v, want v", v)
	}
	for i, f := range testSchema.Fields() {
		g := column(t, gt, i)
		sameValues(t, f.Name, column(t, wt, i), g)
		var in []arrow.Array
		for _, r := range recs {
			in = append(in, r.Column(i))
		}
		if len(in) > 0 {
			all, err := array.Concatenate(in, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			sameValues(t, f.Name, all, g)
			all.Release()
		}
	}
	wantPages, gotPages := checkLayout(t, want), checkLayout(t, got)
	for rg := range len(wm.RowGroups) {
		if w, g := wm.RowGroup(rg).NumRows(), gm.RowGroup(rg).NumRows(); w != g {
			t.Fatalf("row group %d: %d rows, want %d", rg, g, w)
		}
		for c := range wm.Schema.NumColumns() {
			name := wm.Schema.Column(c).Name()
			wc, _ := wm.RowGroup(rg).ColumnChunk(c)
			gc, _ := gm.RowGroup(rg).ColumnChunk(c)
			if encodingStats(wc) != encodingStats(gc) || gotPages[rg][c] != wantPages[rg][c] {
				t.Errorf("row group %d column %s: %d pages %v, want %d %v", rg, name, gotPages[rg][c], encodingStats(gc), wantPages[rg][c], encodingStats(wc))
			}
			if fmt.Sprint(wc.Encodings()) != fmt.Sprint(gc.Encodings()) || wc.NumValues() != gc.NumValues() || wc.Compression() != gc.Compression() {
				t.Errorf("row group %d column %s: %v %d values %v, want %v %d %v", rg, name, gc.Encodings(), gc.NumValues(), gc.Compression(), wc.Encodings(), wc.NumValues(), wc.Compression())
			}
			wset, _ := wc.StatsSet()
			gset, _ := gc.StatsSet()
			if wset != gset {
				t.Fatalf("row group %d column %s: statistics set %v, want %v", rg, name, gset, wset)
			}
			if !wset {
				continue
			}
			ws, err := wc.Statistics()
			if err != nil {
				t.Fatal(err)
			}
			gs, err := gc.Statistics()
			if err != nil {
				t.Fatal(err)
			}
			if ws.HasMinMax() != gs.HasMinMax() || !bytes.Equal(ws.EncodeMin(), gs.EncodeMin()) || !bytes.Equal(ws.EncodeMax(), gs.EncodeMax()) ||
				ws.HasNullCount() != gs.HasNullCount() || ws.NullCount() != gs.NullCount() {
				t.Errorf("row group %d column %s: statistics min %.20q max %.20q nulls %d (minmax %v), want %.20q %.20q %d (%v)", rg, name,
					gs.EncodeMin(), gs.EncodeMax(), gs.NullCount(), gs.HasMinMax(), ws.EncodeMin(), ws.EncodeMax(), ws.NullCount(), ws.HasMinMax())
			}
		}
	}
}

// encodingStats are a chunk's page types and encodings, sorted (arrow-go
// lists a fallen-back dictionary chunk's two data page encodings in map
// order).
func encodingStats(cc *metadata.ColumnChunkMetaData) string {
	var s []string
	for _, e := range cc.EncodingStats() {
		s = append(s, fmt.Sprint(e.PageType, e.Encoding))
	}
	slices.Sort(s)
	return fmt.Sprint(s)
}

// A file of Chunks reads back as its records, and as arrow-go's file of
// the same records and properties: schema, row groups, values, encodings,
// statistics. Random records over the edge cases: nulls, all-null and
// no-null batches, empty and long strings, shared prefixes, NaN, ±0, ±Inf,
// the int64 extremes; many pages and row groups, sliced arrays, and the
// 0-row and 1-row files.
func TestFileMatchesArrowGo(t *testing.T) {
	cases := []struct {
		name           string
		rows           []int // the records' rows
		rowGroup, page int64
		modes          []nullMode
		floats         []float64 // the floats drawn from (nil: any)
		prefix         string    // of every string
		batch          int64     // the write batch size (0: arrow-go's default)
	}{
		{"empty", nil, 100, 1 << 10, []nullMode{someNulls}, nil, "", 0},
		{"one row", []int{1}, 100, 1 << 10, []nullMode{someNulls}, nil, "", 0},
		{"one null row", []int{1}, 100, 1 << 10, []nullMode{allNulls}, nil, "", 0},
		{"mixed", []int{100, 50, 1, 64, 300, 7}, 128, 1 << 10, []nullMode{someNulls, noNulls, allNulls}, nil, "", 0},
		{"all null", []int{40, 33}, 50, 1 << 10, []nullMode{allNulls}, nil, "", 0},
		{"no nulls", []int{2000, 999}, 1000, 4 << 10, []nullMode{noNulls}, nil, "", 0},
		{"big pages", []int{5000, 3000}, 6000, 512 << 10, []nullMode{someNulls, noNulls}, nil, "", 0},
		{"zeros", []int{30, 20}, 40, 1 << 10, []nullMode{someNulls, noNulls}, []float64{0, math.Copysign(0, -1), 2.5, math.NaN()}, "", 0},
		{"negative zeros", []int{30, 20}, 40, 1 << 10, []nullMode{someNulls, noNulls}, []float64{0, math.Copysign(0, -1), -2.5}, "", 0},
		{"NaN", []int{30}, 40, 1 << 10, []nullMode{someNulls, noNulls}, []float64{math.NaN()}, "", 0},
		// every key (a string's first 8 bytes) the same: min and max by compareSameKey
		{"shared prefix", []int{300, 200}, 400, 4 << 10, []nullMode{someNulls, noNulls}, nil, "BTC-27NOV26-", 0},
		// the page size checked every 100 rows: more pages than with 1024
		{"small write batches", []int{700, 500}, 1000, 1 << 10, []nullMode{someNulls, noNulls}, nil, "", 100},
	}
	for seed, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 7))
			recs := slicedRecords(t, tc.rows, func(n int) arrow.Record {
				return genRecord(r, n, func() nullMode { return tc.modes[r.IntN(len(tc.modes))] }, tc.floats, tc.prefix)
			})
			var extra []parquet.WriterProperty
			if tc.batch > 0 {
				extra = append(extra, parquet.WithBatchSize(tc.batch))
			}
			compareWithArrowGo(t, testProps(tc.rowGroup, tc.page, extra...), recs)
		})
	}
}

// slicedRecords are records of rows rows, each a slice of a larger one
// that gen makes (arrays with an offset), released when t ends.
func slicedRecords(t testing.TB, rows []int, gen func(n int) arrow.Record) []arrow.Record {
	var recs []arrow.Record
	for _, n := range rows {
		full := gen(n + 5)
		recs = append(recs, full.NewSlice(3, int64(n)+3))
		full.Release()
	}
	t.Cleanup(func() {
		for _, rec := range recs {
			rec.Release()
		}
	})
	return recs
}

// compareWithArrowGo writes recs with arrow-go and with Chunks, both with
// props, and compares the files (compareFiles); it returns ours.
func compareWithArrowGo(t testing.TB, props *parquet.WriterProperties, recs []arrow.Record) string {
	t.Helper()
	dir := t.TempDir()
	want, got := filepath.Join(dir, "arrowgo.parquet"), filepath.Join(dir, "ours.parquet")
	writeArrowGo(t, want, props, recs)
	writeOurs(t, got, props, recs)
	compareFiles(t, want, got, recs)
	return got
}

// Columns of only empty strings (an Arrow array whose value buffer is
// empty) have the statistics arrow-go gives them.
func TestFileEmptyStrings(t *testing.T) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for c := range testSchema.Fields() {
		switch fb := b.Field(c).(type) {
		case *array.StringBuilder:
			fb.AppendValues([]string{"", "", ""}, nil)
		default:
			fb.AppendEmptyValues(3)
		}
	}
	rec := b.NewRecord()
	defer rec.Release()
	dir := t.TempDir()
	want, got := filepath.Join(dir, "arrowgo.parquet"), filepath.Join(dir, "ours.parquet")
	writeArrowGo(t, want, testProps(10, 1<<10), []arrow.Record{rec})
	writeOurs(t, got, testProps(10, 1<<10), []arrow.Record{rec})
	compareFiles(t, want, got, []arrow.Record{rec})
}

// closeCounter is a file that counts its Close calls; a write fails once
// failAt bytes were written (0: never).
type closeCounter struct {
	bytes.Buffer
	closes int
	failAt int
}

func (c *closeCounter) Write(b []byte) (int, error) {
	if c.failAt > 0 && c.Len()+len(b) > c.failAt {
		return 0, errors.New("disk full")
	}
	return c.Buffer.Write(b)
}

func (c *closeCounter) Close() error { c.closes++; return nil }

// A row group whose chunks do not all hold its rows is refused before any
// of it is written, and fails the File: the next row group and Close return
// the error, and Close writes no footer (a file of the magic alone, which
// no reader takes for a Parquet file).
func TestFileRowGroupCheckedBeforeWriting(t *testing.T) {
	props := testProps(100, 1<<20) // no page closed before Finish
	rec := genRecord(rand.New(rand.NewPCG(1, 1)), 10, func() nullMode { return someNulls }, nil, "")
	defer rec.Release()
	for _, tc := range []struct {
		name  string
		short int // the column given a row less
		pend  int // the column left unfinished (-1: none)
		props *parquet.WriterProperties
	}{
		{"last column short", len(testSchema.Fields()) - 1, -1, props},
		{"middle column short", 5, -1, props},
		{"last column unfinished", -1, len(testSchema.Fields()) - 1, props},
		// its pages all closed by Append, but no dictionary page yet
		{"dictionary column unfinished", -1, testSchema.FieldIndices("s")[0], dictProps(100, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pqschema, chunks := testChunks(t, tc.props)
			out := &closeCounter{}
			f, err := NewFile(out, pqschema, tc.props)
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range chunks {
				arr := rec.Column(i)
				if i == tc.short {
					arr = array.NewSlice(arr, 1, int64(arr.Len()))
					defer arr.Release()
				}
				if err := c.Append(arr); err != nil {
					t.Fatal(err)
				}
				if i != tc.pend {
					if err := c.Finish(); err != nil {
						t.Fatal(err)
					}
				}
			}
			err = f.WriteRowGroup(rec.NumRows(), chunks)
			if err == nil {
				t.Fatal("WriteRowGroup: no error")
			}
			if out.Len() != len(magic) {
				t.Errorf("%d bytes written, want the magic's %d", out.Len(), len(magic))
			}
			for _, c := range chunks {
				c.Reset()
			}
			if err2 := f.WriteRowGroup(0, chunks); err2 != err {
				t.Errorf("next WriteRowGroup: %v, want %v", err2, err)
			}
			if cerr := f.Close(); cerr != err {
				t.Errorf("Close: %v, want %v", cerr, err)
			}
			if out.Len() != len(magic) || out.closes != 1 {
				t.Errorf("after Close: %d bytes, %d closes; want %d, 1", out.Len(), out.closes, len(magic))
			}
		})
	}
}

// Close is idempotent, as arrow-go's file writer's: a second Close writes
// no second footer and does not close the file again, returning nil after
// a good Close and the first error after a failed one (compaction closes
// a file again to abort it when closing it failed).
func TestFileCloseTwice(t *testing.T) {
	props := testProps(100, 1<<10)
	for _, failAt := range []int{0, 6} {
		pqschema, _ := testChunks(t, props)
		out := &closeCounter{failAt: failAt}
		f, err := NewFile(out, pqschema, props)
		if err != nil {
			t.Fatal(err)
		}
		first := f.Close()
		if (first != nil) != (failAt > 0) {
			t.Fatalf("failAt %d: first Close: %v", failAt, first)
		}
		size := out.Len()
		if second := f.Close(); second != first {
			t.Errorf("failAt %d: second Close: %v, want %v", failAt, second, first)
		}
		if out.Len() != size || out.closes != 1 {
			t.Errorf("failAt %d: second Close wrote %d bytes, %d closes in all; want 0, 1", failAt, out.Len()-size, out.closes)
		}
		if err := f.WriteRowGroup(0, nil); err == nil {
			t.Errorf("failAt %d: WriteRowGroup after Close: no error", failAt)
		}
	}
}
