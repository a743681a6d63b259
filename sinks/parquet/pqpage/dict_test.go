package pqpage

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
)

// dictProps are testProps with dictionaries for the PLAIN string columns
// s and su (su without statistics).
func dictProps(rowGroupRows, pageSize int64, extra ...parquet.WriterProperty) *parquet.WriterProperties {
	return testProps(rowGroupRows, pageSize, append([]parquet.WriterProperty{
		parquet.WithDictionaryFor("s", true), parquet.WithDictionaryFor("su", true)}, extra...)...)
}

// lowCard replaces rec's string columns s and su with runs (1 to maxRun
// long) of values drawn from vals, some of the runs null: what a sorted
// day's low-cardinality columns hold.
func lowCard(r *rand.Rand, rec arrow.Record, vals []string, maxRun int, nulls bool) arrow.Record {
	defer rec.Release()
	n := int(rec.NumRows())
	cols := rec.Columns()
	out := make([]arrow.Array, len(cols))
	for i, f := range testSchema.Fields() {
		if f.Name != "s" && f.Name != "su" {
			out[i] = cols[i]
			out[i].Retain()
			continue
		}
		b := array.NewStringBuilder(memory.DefaultAllocator)
		for b.Len() < n {
			run := min(1+r.IntN(maxRun), n-b.Len())
			if nulls && r.IntN(5) == 0 {
				b.AppendNulls(run)
				continue
			}
			v := vals[r.IntN(len(vals))]
			for range run {
				b.Append(v)
			}
		}
		out[i] = b.NewArray()
		b.Release()
	}
	defer func() {
		for _, a := range out {
			a.Release()
		}
	}()
	return array.NewRecord(testSchema, out, int64(n))
}

// A file of Chunks with dictionary-encoded strings reads back as its
// records, and as arrow-go's file of the same records and properties: the
// dictionary page first, data pages of indices (and PLAIN ones after a
// fallback) cut where arrow-go cuts them, the encodings listed, the
// statistics. Low-cardinality runs (repeated runs of indices), random
// strings (bit-packed indices up to 13 bits wide), one value (bit width
// 1), all-null pages, the fallback after pages of indices and before any
// (no dictionary page), Parquet 1.0's PLAIN_DICTIONARY.
func TestFileDictMatchesArrowGo(t *testing.T) {
	short := []string{"", "BTC", "ETH", "USDC", "option", "future", "perpetual"}
	long := []string{strings.Repeat("x", 5000), "ÿ", "\x00", "BTC-27NOV26-100000-C"}
	cases := []struct {
		name           string
		rows           []int
		rowGroup, page int64
		vals           []string // nil: genRecord's strings
		maxRun         int
		modes          []nullMode
		extra          []parquet.WriterProperty
	}{
		{"low cardinality", []int{3000, 2000, 7}, 4000, 4 << 10, short, 300, []nullMode{someNulls, noNulls}, nil},
		{"short runs", []int{1500, 700}, 1000, 2 << 10, append(short, long...), 3, []nullMode{someNulls}, nil},
		{"one value", []int{500, 20}, 400, 1 << 10, []string{"BTC"}, 50, []nullMode{noNulls}, nil},
		{"random strings", []int{5000, 3000}, 6000, 32 << 10, nil, 0, []nullMode{someNulls, noNulls}, nil},
		{"all null", []int{40, 33}, 50, 1 << 10, nil, 0, []nullMode{allNulls}, nil},
		// null runs of up to 200 rows checked every 16 rows: pages of nulls only
		{"null runs", []int{100, 50, 1, 64, 300, 7}, 128, 64, short, 200, []nullMode{someNulls}, []parquet.WriterProperty{parquet.WithBatchSize(16)}},
		{"fallback after pages", []int{3000, 2000}, 4000, 4 << 10, nil, 0, []nullMode{someNulls},
			[]parquet.WriterProperty{parquet.WithDictionaryPageSizeLimit(16 << 10)}},
		{"fallback before a page", []int{3000}, 4000, 1 << 20, nil, 0, []nullMode{someNulls},
			[]parquet.WriterProperty{parquet.WithDictionaryPageSizeLimit(4 << 10)}},
		{"small batches", []int{700, 500}, 1000, 1 << 10, short, 40, []nullMode{someNulls}, []parquet.WriterProperty{parquet.WithBatchSize(100)}},
		{"parquet 1.0", []int{800, 300}, 1000, 2 << 10, short, 30, []nullMode{someNulls}, []parquet.WriterProperty{parquet.WithVersion(parquet.V1_0)}},
	}
	for seed, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(seed), 9))
			recs := slicedRecords(t, tc.rows, func(n int) arrow.Record {
				rec := genRecord(r, n, func() nullMode { return tc.modes[r.IntN(len(tc.modes))] }, nil, "")
				if tc.vals != nil {
					rec = lowCard(r, rec, tc.vals, tc.maxRun, tc.modes[0] != noNulls)
				}
				return rec
			})
			got := compareWithArrowGo(t, dictProps(tc.rowGroup, tc.page, tc.extra...), recs)
			gr, _ := readFile(t, got)
			cc, _ := gr.MetaData().RowGroup(0).ColumnChunk(testSchema.FieldIndices("s")[0])
			encs := fmt.Sprint(cc.Encodings())
			if strings.Contains(tc.name, "before") != !cc.HasDictionaryPage() || !cc.HasDictionaryPage() && strings.Contains(encs, "DICT") {
				t.Errorf("column s: dictionary page %v, encodings %s", cc.HasDictionaryPage(), encs)
			}
		})
	}
}

// appendHybrid's runs read back as the values: every run length around
// the group of 8 and minRepeat, at the widths 1 to 20.
func TestHybridRuns(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for w := 1; w <= 20; w++ {
		var vs []int32
		for run := 1; run <= 20; run++ {
			for _, k := range []int{run, 1, 2, 3} {
				v := int32(r.Uint32() & (1<<w - 1))
				for range k {
					vs = append(vs, v)
				}
			}
		}
		got := decodeHybrid(t, appendHybrid(nil, vs, w), w, len(vs))
		if fmt.Sprint(got) != fmt.Sprint(vs) {
			t.Fatalf("width %d: %v, want %v", w, got, vs)
		}
	}
}

// decodeHybrid decodes n values of width w of the RLE/bit-packed hybrid
// (Parquet's Encodings.md), independently of arrow-go.
func decodeHybrid(t *testing.T, b []byte, w, n int) []int32 {
	t.Helper()
	var out []int32
	for len(out) < n {
		h, k := uvarint(b)
		if k <= 0 {
			t.Fatalf("bad run header after %d values", len(out))
		}
		b = b[k:]
		if h&1 == 0 { // repeated
			var v uint32
			for i := range (w + 7) / 8 {
				v |= uint32(b[i]) << (8 * i)
			}
			b = b[(w+7)/8:]
			for range h >> 1 {
				out = append(out, int32(v))
			}
			continue
		}
		bitsN := int(h>>1) * 8 * w
		for i := 0; i < int(h>>1)*8; i++ {
			var v uint32
			for j := range w {
				bit := i*w + j
				v |= uint32(b[bit/8]>>(bit%8)&1) << j
			}
			out = append(out, int32(v))
		}
		b = b[bitsN/8:]
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes left after %d values", len(b), n)
	}
	return out[:n]
}

func uvarint(b []byte) (uint64, int) {
	var v uint64
	for i, c := range b {
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}

// distinctRecord is a record of n rows whose string columns hold
// distinct values of 6 bytes (v and the row's number, 5 digits reversed:
// few shared prefixes): one dictionary entry of 10 PLAIN bytes a row.
func distinctRecord(n, from int) arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for c := range testSchema.Fields() {
		switch fb := b.Field(c).(type) {
		case *array.StringBuilder:
			for i := range n {
				d := []byte(fmt.Sprintf("%05d", from+i))
				slices.Reverse(d)
				fb.Append("v" + string(d))
			}
		default:
			fb.AppendEmptyValues(n)
		}
	}
	return b.NewRecord()
}

// A dictionary that fills up in the batch that closes a page (100 rows of
// 10 bytes a batch, pages of 1,000 bytes, a dictionary of 3,000) falls
// back with no page under way: at the row group's last row (no PLAIN page
// after the pages of indices, PLAIN still listed), before more rows, and
// a chunk Reset after a fallback has its dictionary again. And indices
// past 16 bits wide (70,000 entries), their width growing across the
// pages of one chunk, as arrow-go writes and reads them.
func TestFileDictFallbackAtPageEndAndWideIndices(t *testing.T) {
	for _, tc := range []struct{ rows, rowGroup, limit int }{
		{300, 300, 3000}, {600, 300, 3000}, {400, 300, 3000}, {350, 1000, 3000}, {70000, 100000, 1 << 20},
	} {
		t.Run(fmt.Sprint(tc.rows, "/", tc.rowGroup), func(t *testing.T) {
			rec := distinctRecord(tc.rows, 0)
			defer rec.Release()
			got := compareWithArrowGo(t, dictProps(int64(tc.rowGroup), 1000, parquet.WithBatchSize(100), parquet.WithDictionaryPageSizeLimit(int64(tc.limit))), []arrow.Record{rec})
			gr, _ := readFile(t, got)
			cc, _ := gr.MetaData().RowGroup(0).ColumnChunk(testSchema.FieldIndices("s")[0])
			if encs := fmt.Sprint(cc.Encodings()); !cc.HasDictionaryPage() || strings.Contains(encs, "PLAIN RLE PLAIN") != (tc.rows >= 300 && tc.limit == 3000) {
				t.Errorf("column s: dictionary page %v, encodings %s", cc.HasDictionaryPage(), encs)
			}
		})
	}
}
