package pqpage

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
)

// indexCase are a chunk's arrays of one dictionary column as indices into
// dict (NullIndex: null).
func indexArray(ids []uint32, dict [][]byte) arrow.Array {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	for _, id := range ids {
		if id == NullIndex {
			b.AppendNull()
		} else {
			b.BinaryBuilder.Append(dict[id])
		}
	}
	return b.NewArray()
}

// finishSame finishes the chunk given indices and the one given strings
// and fails t (what: which chunk) unless they have the same pages and
// metadata; it returns the metadata.
func finishSame(t *testing.T, what string, byIdx, byVal *Chunk) Meta {
	t.Helper()
	for _, c := range []*Chunk{byVal, byIdx} {
		if err := c.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(byIdx.DictPage(), byVal.DictPage()) || !bytes.Equal(byIdx.Bytes(), byVal.Bytes()) {
		t.Fatalf("%s: %d+%d bytes of pages, Append's %d+%d differ", what, len(byIdx.DictPage()), len(byIdx.Bytes()), len(byVal.DictPage()), len(byVal.Bytes()))
	}
	got, want := byIdx.Meta(), byVal.Meta()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: meta\n got %+v\nwant %+v", what, got, want)
	}
	return got
}

// A Chunk given indices into the caller's dictionary (AppendIndices) is
// the Chunk given the strings (Append), chunk after chunk of one Chunk
// Reset between them: the same dictionary page (the chunk's values in the
// order they first occur), pages of indices and metadata; nulls, a
// required column, repeated runs, the caller's dictionary grown between
// arrays, the fallback to PLAIN after pages of indices and before any (no
// dictionary page), without statistics, Parquet 1.0's encodings.
func TestChunkIndicesAreTheStrings(t *testing.T) {
	short := []string{"", "BTC", "ETH", "USDC", "option", "future", "perpetual", "ÿ", "\x00"}
	long := make([]string, 400)
	for i := range long {
		long[i] = fmt.Sprintf("%s-%05d", strings.Repeat("x", 40+i%50), i)
	}
	cases := []struct {
		name     string
		vals     []string
		optional bool
		stats    bool
		dictSize int64
		page     int64
		v1       bool
		want     string // a chunk's fallback: "kept" (its dictionary page kept), "dropped"
	}{
		{"low cardinality, nulls", short, true, true, 1 << 20, 2 << 10, false, ""},
		{"required", short, false, true, 1 << 20, 2 << 10, false, ""},
		{"falls back after pages of indices", long, true, true, 6 << 10, 1 << 10, false, "kept"},
		{"falls back before any page", long, true, true, 6 << 10, 1 << 20, false, "dropped"},
		{"no statistics, Parquet 1.0", long, true, false, 1 << 20, 4 << 10, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, uint64(len(tc.name))))
			opt := Options{Type: arrow.BinaryTypes.String, Optional: tc.optional, Stats: tc.stats, Codec: compress.Codecs.Snappy,
				PageSize: tc.page, MaxStatsSize: 4096, BatchRows: 100, Dict: true, DictPageSize: tc.dictSize,
				IndexEncoding: parquet.Encodings.RLEDict, DictEncoding: parquet.Encodings.Plain}
			if tc.v1 {
				opt.IndexEncoding, opt.DictEncoding = parquet.Encodings.PlainDict, parquet.Encodings.PlainDict
			}
			byVal, err := New(opt)
			if err != nil {
				t.Fatal(err)
			}
			byIdx, err := New(opt)
			if err != nil {
				t.Fatal(err)
			}
			// the caller's dictionary: the values in a random order, those
			// of the later chunks added as they come
			perm := r.Perm(len(tc.vals))
			var dict [][]byte
			fellBack := ""
			for chunk := range 4 {
				for _, p := range perm[len(dict) : len(dict)+(len(perm)-len(dict))/(4-chunk)] {
					dict = append(dict, []byte(tc.vals[p]))
				}
				for range 1 + r.IntN(4) {
					var ids []uint32
					for n := r.IntN(700); len(ids) < n; {
						id := uint32(r.IntN(len(dict)))
						if tc.optional && r.IntN(6) == 0 {
							id = NullIndex
						}
						for range min(1+r.IntN(20), n-len(ids)) {
							ids = append(ids, id)
						}
					}
					a := indexArray(ids, dict)
					err := byVal.Append(a)
					a.Release()
					if err != nil {
						t.Fatal(err)
					}
					if err := byIdx.AppendIndices(ids, dict); err != nil {
						t.Fatal(err)
					}
				}
				got := finishSame(t, fmt.Sprintf("chunk %d", chunk), byIdx, byVal)
				switch {
				case got.Fallback:
					fellBack = "kept"
				case got.Encoding == parquet.Encodings.Plain && got.DictPage == 0:
					fellBack = "dropped"
				}
				byVal.Reset()
				byIdx.Reset()
			}
			if fellBack != tc.want {
				t.Errorf("fallback %q, want %q: the case does not exercise its path", fellBack, tc.want)
			}
		})
	}
}

// AppendIndices refuses an index past the dictionary, a null in a
// required column, a column without a dictionary, and a chunk whose values
// came as strings (and Append one whose came as indices), until Reset.
func TestChunkIndicesRefused(t *testing.T) {
	dict := [][]byte{[]byte("a"), []byte("b")}
	opt := Options{Type: arrow.BinaryTypes.String, Optional: true, PageSize: 1 << 20, Dict: true, DictPageSize: 1 << 20,
		IndexEncoding: parquet.Encodings.RLEDict, DictEncoding: parquet.Encodings.Plain}
	c, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AppendIndices([]uint32{0, 2}, dict); err == nil {
		t.Error("an index past the dictionary taken")
	}
	a := indexArray([]uint32{0, 1}, dict)
	defer a.Release()
	if err := c.Append(a); err != nil {
		t.Fatal(err)
	}
	if err := c.AppendIndices([]uint32{0}, dict); err == nil {
		t.Error("indices after strings taken")
	}
	c.Reset()
	if err := c.AppendIndices([]uint32{0, NullIndex}, dict); err != nil {
		t.Fatal(err)
	}
	if err := c.Append(a); err == nil {
		t.Error("strings after indices taken")
	}
	req := opt
	req.Optional = false
	if c, err = New(req); err != nil {
		t.Fatal(err)
	}
	if err := c.AppendIndices([]uint32{0, NullIndex}, dict); err == nil {
		t.Error("a null in a required column taken")
	}
	plain := opt
	plain.Dict = false
	if c, err = New(plain); err != nil {
		t.Fatal(err)
	}
	if err := c.AppendIndices([]uint32{0}, dict); err == nil {
		t.Error("indices for a column without a dictionary taken")
	}
}
