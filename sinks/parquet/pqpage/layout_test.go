package pqpage

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// thriftReader reads the Thrift compact protocol far enough to walk a
// PageHeader: varints, zigzag integers, and skipping any field.
type thriftReader struct {
	b []byte
	i int
}

func (r *thriftReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b[r.i:])
	if n <= 0 {
		panic(fmt.Sprintf("bad varint at %d", r.i))
	}
	r.i += n
	return v
}

func (r *thriftReader) zigzag() int64 { u := r.uvarint(); return int64(u>>1) ^ -int64(u&1) }

// skip skips a value of compact type t.
func (r *thriftReader) skip(t byte) {
	switch t {
	case 1, 2: // booleans: in the field header
	case 3:
		r.i++
	case 4, 5, 6:
		r.uvarint()
	case 7:
		r.i += 8
	case 8:
		r.i += int(r.uvarint())
	case 12:
		r.structure(func(int, byte) bool { return false })
	case 9, 10:
		h := r.b[r.i]
		r.i++
		n := int(h >> 4)
		if n == 15 {
			n = int(r.uvarint())
		}
		for range n {
			r.skip(h & 15)
		}
	default:
		panic(fmt.Sprint("thrift type ", t))
	}
}

// structure reads a struct's fields: field(id, type) reads the value and
// returns true, or returns false to have it skipped.
func (r *thriftReader) structure(field func(id int, t byte) bool) {
	id := 0
	for {
		h := r.b[r.i]
		r.i++
		if h == 0 {
			return
		}
		if h>>4 == 0 {
			id = int(r.zigzag())
		} else {
			id += int(h >> 4)
		}
		if !field(id, h&15) {
			r.skip(h & 15)
		}
	}
}

// checkLayout walks every page header of the (zstd) file at path and fails
// unless the footer agrees with the pages: row groups and chunks back to
// back from offset 4, a chunk's dictionary page (if any) its first and
// its only one, each chunk's dictionary and data page offsets, sizes
// (headers included) and value count the sums of its pages', each page
// decompressing to its uncompressed size, the row groups' totals their
// chunks'. It returns the data pages of each row group's chunks.
func checkLayout(t testing.TB, path string) (pages [][]int) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	md := rd.MetaData()
	codec, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	pos := int64(4)
	for g := range md.NumRowGroups() {
		rg := md.RowGroup(g)
		var sumComp, sumUncomp int64
		if rg.FileOffset() != pos {
			t.Errorf("row group %d: file_offset %d, want %d", g, rg.FileOffset(), pos)
		}
		var rgPages []int
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				t.Fatal(err)
			}
			if cc.FileOffset() != pos || cc.HasDictionaryPage() && cc.DictionaryPageOffset() != pos {
				t.Errorf("row group %d column %d: file_offset %d dictionary_page_offset %d, want %d", g, c, cc.FileOffset(), cc.DictionaryPageOffset(), pos)
			}
			var comp, uncomp, values int64
			n := 0
			for p := pos; p < pos+cc.TotalCompressedSize(); {
				r := &thriftReader{b: raw[p:]}
				var typ, us, cs, nv int64
				r.structure(func(id int, _ byte) bool {
					switch id {
					case 1:
						typ = r.zigzag()
					case 2:
						us = r.zigzag()
					case 3:
						cs = r.zigzag()
					case 5: // data_page_header
						r.structure(func(id int, _ byte) bool {
							if id == 1 {
								nv = r.zigzag()
								return true
							}
							return false
						})
					default:
						return false
					}
					return true
				})
				switch {
				case typ == 2 && (p != pos || !cc.HasDictionaryPage()):
					t.Errorf("row group %d column %d: dictionary page at %d, chunk at %d (has one: %v)", g, c, p, pos, cc.HasDictionaryPage())
				case typ == 0 && n == 0 && cc.DataPageOffset() != p:
					t.Errorf("row group %d column %d: data_page_offset %d, first data page at %d", g, c, cc.DataPageOffset(), p)
				case typ == 0:
					n++
				case typ != 2:
					t.Errorf("row group %d column %d: page type %d", g, c, typ)
				}
				if typ == 0 && p == pos && cc.HasDictionaryPage() {
					t.Errorf("row group %d column %d: no dictionary page at %d", g, c, p)
				}
				h := int64(r.i)
				if p+h+cs > int64(len(raw)) {
					t.Fatalf("row group %d column %d page at %d: %d bytes past the file's end", g, c, p, p+h+cs-int64(len(raw)))
				}
				dec, err := codec.(interface {
					DecodeWithError(dst, src []byte) ([]byte, error)
				}).DecodeWithError(nil, raw[p+h:p+h+cs])
				if err != nil || int64(len(dec)) != us {
					t.Errorf("row group %d column %d page at %d: decoded %d bytes (%v), header says %d", g, c, p, len(dec), err, us)
				}
				comp += h + cs
				uncomp += h + us
				values += nv
				p += h + cs
			}
			if comp != cc.TotalCompressedSize() || uncomp != cc.TotalUncompressedSize() || values != cc.NumValues() {
				t.Errorf("row group %d column %d: pages of %d/%d bytes, %d values; metadata %d/%d, %d", g, c, comp, uncomp, values,
					cc.TotalCompressedSize(), cc.TotalUncompressedSize(), cc.NumValues())
			}
			rgPages = append(rgPages, n)
			sumComp += comp
			sumUncomp += uncomp
			pos += comp
		}
		if rg.TotalCompressedSize() != sumComp || rg.TotalByteSize() != sumUncomp {
			t.Errorf("row group %d: total_compressed_size %d total_byte_size %d, want %d %d", g, rg.TotalCompressedSize(), rg.TotalByteSize(), sumComp, sumUncomp)
		}
		pages = append(pages, rgPages)
	}
	return pages
}

// checkLayout agrees with arrow-go's files and ours: many pages, row groups
// cut across records, nulls.
func TestFileLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var recs []arrow.Record
	for _, n := range []int{2000, 999, 1, 64, 3000} {
		recs = append(recs, genRecord(r, n, func() nullMode { return nullMode(r.IntN(3)) }, nil, ""))
	}
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	dir := t.TempDir()
	for name, write := range map[string]func(testing.TB, string, *parquet.WriterProperties, []arrow.Record){"ours": writeOurs, "arrowgo": writeArrowGo} {
		p := filepath.Join(dir, name+".parquet")
		write(t, p, testProps(1500, 4<<10), recs)
		if pages := checkLayout(t, p); len(pages) != 5 || pages[0][0] < 2 {
			t.Errorf("%s: pages %v, want 5 row groups of several pages", name, pages)
		}
	}
}

// DELTA_BYTE_ARRAY pages of every count around the DELTA_BINARY_PACKED
// block (128 values) and miniblock (32) boundaries, their suffix lengths
// up to 17 bits wide, read back as written.
func TestDeltaPageCounts(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 2, 32, 33, 34, 128, 129, 130, 161, 257, 258, 300, 1025} {
		b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
		for c := range testSchema.Fields() {
			for i := range n {
				switch fb := b.Field(c).(type) {
				case *array.StringBuilder:
					if i%2 == 0 {
						fb.Append(strings.Repeat("x", r.IntN(70000)))
					} else {
						fb.Append("")
					}
				default:
					fb.AppendEmptyValues(1)
				}
			}
		}
		rec := b.NewRecord()
		b.Release()
		p := filepath.Join(t.TempDir(), "ours.parquet")
		writeOurs(t, p, testProps(int64(n), 1<<30), []arrow.Record{rec})
		checkLayout(t, p)
		_, tbl := readFile(t, p)
		for i, f := range testSchema.Fields() {
			sameValues(t, f.Name, rec.Column(i), column(t, tbl, i))
		}
		rec.Release()
	}
}
