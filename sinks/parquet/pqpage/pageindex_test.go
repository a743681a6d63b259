package pqpage

import (
	"bytes"
	"math"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// A file written with the page index enabled has arrow-go's offset index
// for every column (each page's first row, and its place: reading there
// gives the page's rows) and arrow-go's column index for its string
// columns with statistics, PLAIN, DELTA_BYTE_ARRAY and dictionary pages
// alike, nulls and all-null pages included; and SeekToRow goes to the
// page (reads the values from the row on).
func TestPageIndexMatchesArrowGo(t *testing.T) {
	cases := []struct {
		name  string
		rows  []int
		props *parquet.WriterProperties
		low   bool // s and su a few values in runs (dictionary pages)
	}{
		{"plain and delta", []int{700, 500, 300}, testProps(600, 1<<10, parquet.WithPageIndexEnabled(true)), false},
		{"all null", []int{40, 33}, testProps(50, 256, parquet.WithPageIndexEnabled(true)), false},
		{"dictionary", []int{900, 700}, dictProps(1000, 1<<10, parquet.WithPageIndexEnabled(true)), true},
		{"dictionary fallback", []int{900, 700}, dictProps(1000, 1<<10, parquet.WithPageIndexEnabled(true), parquet.WithDictionaryPageSizeLimit(300)), false},
	}
	for seed, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 49))
			modes := []nullMode{someNulls, noNulls}
			if tc.name == "all null" {
				modes = []nullMode{allNulls, someNulls}
			}
			recs := slicedRecords(t, tc.rows, func(n int) arrow.Record {
				rec := genRecord(r, n, func() nullMode { return modes[r.IntN(len(modes))] }, nil, "BTC-")
				if tc.low {
					rec = lowCard(r, rec, []string{"BTC", "ETH", "SOL", "XRP"}, 40, true)
				}
				return rec
			})
			dir := t.TempDir()
			want, got := filepath.Join(dir, "arrowgo.parquet"), filepath.Join(dir, "ours.parquet")
			writeArrowGo(t, want, tc.props, recs)
			writeOurs(t, got, tc.props, recs)
			wr, _ := readFile(t, want)
			gr, gt := readFile(t, got)
			indexed := 0
			for g := range wr.NumRowGroups() {
				wi, err := wr.GetPageIndexReader().RowGroup(g)
				if err != nil {
					t.Fatal(err)
				}
				gi, err := gr.GetPageIndexReader().RowGroup(g)
				if err != nil {
					t.Fatal(err)
				}
				for c := range testSchema.NumFields() {
					name := testSchema.Field(c).Name
					wo, err := wi.GetOffsetIndex(c)
					if err != nil {
						t.Fatal(err)
					}
					goi, err := gi.GetOffsetIndex(c)
					if err != nil {
						t.Fatal(err)
					}
					if (wo == nil) != (goi == nil) {
						t.Fatalf("row group %d column %s: offset index %v, want %v", g, name, goi != nil, wo != nil)
					}
					if wo == nil {
						continue
					}
					indexed++
					wl, gl := wo.GetPageLocations(), goi.GetPageLocations()
					if len(wl) != len(gl) {
						t.Fatalf("row group %d column %s: %d pages, want %d", g, name, len(gl), len(wl))
					}
					for p := range wl {
						if wl[p].FirstRowIndex != gl[p].FirstRowIndex {
							t.Errorf("row group %d column %s page %d: first row %d, want %d", g, name, p, gl[p].FirstRowIndex, wl[p].FirstRowIndex)
						}
					}
					seekEachPage(t, gr, g, c, gl, gt.Column(c).Data().Chunk(0))
					wc, err := wi.GetColumnIndex(c)
					if err != nil {
						t.Fatal(err)
					}
					gc, err := gi.GetColumnIndex(c)
					if err != nil {
						t.Fatal(err)
					}
					if testSchema.Field(c).Type.ID() != arrow.STRING || name == "su" {
						if gc != nil {
							t.Errorf("row group %d column %s: a column index", g, name)
						}
						continue
					}
					if (wc == nil) != (gc == nil) {
						t.Fatalf("row group %d column %s: column index %v, want %v", g, name, gc != nil, wc != nil)
					}
					if wc == nil {
						continue
					}
					if fmt.Sprint(wc.GetNullPages(), wc.GetNullCounts(), wc.GetBoundaryOrder()) != fmt.Sprint(gc.GetNullPages(), gc.GetNullCounts(), gc.GetBoundaryOrder()) {
						t.Errorf("row group %d column %s: null pages, counts, order %v %v %v, want %v %v %v", g, name,
							gc.GetNullPages(), gc.GetNullCounts(), gc.GetBoundaryOrder(), wc.GetNullPages(), wc.GetNullCounts(), wc.GetBoundaryOrder())
					}
					for p := range wc.GetMinValues() {
						if !bytes.Equal(wc.GetMinValues()[p], gc.GetMinValues()[p]) || !bytes.Equal(wc.GetMaxValues()[p], gc.GetMaxValues()[p]) {
							t.Errorf("row group %d column %s page %d: min %q max %q, want %q %q", g, name, p,
								gc.GetMinValues()[p], gc.GetMaxValues()[p], wc.GetMinValues()[p], wc.GetMaxValues()[p])
						}
					}
				}
			}
			if indexed == 0 {
				t.Fatal("no column indexed")
			}
		})
	}
}

// seekEachPage seeks column c of row group g to each page's first row and
// its next, and checks the value read there against all (the column's
// values, read whole).
func seekEachPage(t *testing.T, r *file.Reader, g, c int, locs []*metadata.PageLocation, all arrow.Array) {
	t.Helper()
	var start int64
	for rg := range g {
		start += r.MetaData().RowGroup(rg).NumRows()
	}
	for _, l := range locs {
		for _, row := range []int64{l.FirstRowIndex, l.FirstRowIndex + 1} {
			if row >= r.MetaData().RowGroup(g).NumRows() {
				continue
			}
			cr, err := r.RowGroup(g).Column(c)
			if err != nil {
				t.Fatal(err)
			}
			if err := cr.(interface{ SeekToRow(int64) error }).SeekToRow(row); err != nil {
				t.Fatalf("column %d seek to %d: %v", c, row, err)
			}
			got := readOne(t, cr)
			if want := valueAt(all, int(start+row)); got != want {
				t.Errorf("row group %d column %d row %d after a seek: %s, want %s", g, c, row, got, want)
			}
		}
	}
}

// valueAt is a's value i as readOne gives it.
func valueAt(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "null"
	}
	switch a := a.(type) {
	case *array.Int64:
		return fmt.Sprint(a.Value(i))
	case *array.Timestamp:
		return fmt.Sprint(int64(a.Value(i)))
	case *array.Float64:
		return fmt.Sprint(math.Float64bits(a.Value(i)))
	case *array.Boolean:
		return fmt.Sprint(a.Value(i))
	case *array.String:
		return fmt.Sprintf("%q", a.Value(i))
	}
	return "?"
}

// readOne reads the next value of cr as valueAt gives it.
func readOne(t *testing.T, cr file.ColumnChunkReader) string {
	t.Helper()
	defs := make([]int16, 1)
	var n int
	var err error
	var s string
	switch r := cr.(type) {
	case *file.Int64ColumnChunkReader:
		v := make([]int64, 1)
		_, n, err = r.ReadBatch(1, v, defs, nil)
		s = fmt.Sprint(v[0])
	case *file.Float64ColumnChunkReader:
		v := make([]float64, 1)
		_, n, err = r.ReadBatch(1, v, defs, nil)
		s = fmt.Sprint(math.Float64bits(v[0]))
	case *file.BooleanColumnChunkReader:
		v := make([]bool, 1)
		_, n, err = r.ReadBatch(1, v, defs, nil)
		s = fmt.Sprint(v[0])
	case *file.ByteArrayColumnChunkReader:
		v := make([]parquet.ByteArray, 1)
		_, n, err = r.ReadBatch(1, v, defs, nil)
		s = fmt.Sprintf("%q", string(v[0]))
	default:
		t.Fatalf("reader %T", cr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		return "null"
	}
	return s
}
