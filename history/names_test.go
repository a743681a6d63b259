package history

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// fastRows (the lake's DELTA_BYTE_ARRAY and dictionary name chunks read
// without a value per row) finds the rows arrow-go's decoder finds
// (rowsDecoded), on files of many pages (V1 and V2 pages, required and
// optional columns, dictionaries with and without their PLAIN fallback),
// sorted or not, for names in the file, between its names and past both
// ends; chunks it does not read (nulls, PLAIN pages) say errNotDelta.
func TestFastRowsFindTheDecodersRows(t *testing.T) {
	delta := []parquet.WriterProperty{parquet.WithDictionaryDefault(false), parquet.WithEncoding(parquet.Encodings.DeltaByteArray)}
	dict := []parquet.WriterProperty{parquet.WithDictionaryDefault(true)}
	cases := []struct {
		name     string
		props    []parquet.WriterProperty
		nullable bool
		nulls    bool
		fast     bool // fastRows reads every chunk
	}{
		{"delta required", delta, false, false, true},
		{"delta optional", delta, true, false, true},
		{"delta optional V2", append(slices.Clone(delta), parquet.WithDataPageVersion(parquet.DataPageV2)), true, false, true},
		{"delta with nulls", delta, true, true, false},
		{"dictionary", dict, true, false, true},
		{"dictionary V2", append(slices.Clone(dict), parquet.WithDataPageVersion(parquet.DataPageV2)), false, false, true},
		{"dictionary falling back to PLAIN", append(slices.Clone(dict), parquet.WithDictionaryPageSizeLimit(256)), true, false, false},
		{"plain", []parquet.WriterProperty{parquet.WithDictionaryDefault(false)}, false, false, false},
	}
	for _, c := range cases {
		for _, sorted := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s sorted=%v", c.name, sorted), func(t *testing.T) {
				rnd := rand.New(rand.NewPCG(7, uint64(len(c.name))))
				var names []string
				for i := range 300 {
					// shared prefixes of every length, some names a prefix of others
					n := fmt.Sprintf("BTC-%dDEC26-%05d-%c", i%7, rnd.IntN(90000), "CP"[i%2])
					names = append(names, n[:5+rnd.IntN(len(n)-4)])
				}
				var rows []string
				for _, n := range names {
					for range 1 + rnd.IntN(40) {
						rows = append(rows, n)
					}
				}
				if sorted {
					slices.Sort(rows)
				} else {
					rnd.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
				}
				props := append([]parquet.WriterProperty{parquet.WithDataPageSize(512), parquet.WithMaxRowGroupLength(int64(len(rows)/3 + 1)), parquet.WithBatchSize(64)}, c.props...)
				pf := writeNames(t, rows, c.nullable, c.nulls, props)
				probes := append(slices.Clone(names[:20]), "", "A", "BTC-", "BTC-3DEC26-5", "ZZZ", names[len(names)-1]+"0")
				var fast int
				for g := range pf.NumRowGroups() {
					for _, name := range probes {
						var n1, n2 Reads
						got, err := rowsOf(pf.RowGroup(g), 0, name, sorted, &n1)
						if errors.Is(err, errNotDelta) {
							if c.fast {
								t.Fatalf("row group %d: %v", g, err)
							}
							continue
						}
						if err != nil {
							t.Fatal(err)
						}
						fast++
						want, err := rowsDecoded(pf.RowGroup(g), 0, name, sorted, &n2)
						if err != nil {
							t.Fatal(err)
						}
						if got.lo != want.lo || got.hi != want.hi || got.all != want.all || !equalRows(got, want) {
							t.Fatalf("row group %d, %q: fastRows %+v, the decoder %+v", g, name, got, want)
						}
					}
				}
				if none := c.nulls || c.name == "plain"; none && fast > 0 {
					t.Fatalf("fastRows read %d chunks", fast)
				}
			})
		}
	}
}

func equalRows(a, b matches) bool {
	for i := a.lo; i < a.hi; i++ {
		if a.has(i) != b.has(i) {
			return false
		}
	}
	return true
}

// writeNames writes rows as an instrument_name column (every tenth value
// null with nulls) and opens the file.
func writeNames(t *testing.T, rows []string, nullable, nulls bool, props []parquet.WriterProperty) *file.Reader {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "instrument_name", Type: arrow.BinaryTypes.String, Nullable: nullable}}, nil)
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	for i, r := range rows {
		if nulls && i%10 == 3 {
			b.AppendNull()
			continue
		}
		b.Append(r)
	}
	arr := b.NewArray()
	defer arr.Release()
	rec := array.NewRecord(sc, []arrow.Array{arr}, int64(len(rows)))
	defer rec.Release()
	return writeRecord(t, rec, props)
}

// writeRecord writes rec as a Parquet file with props (arrow-go's writer)
// and opens it.
func writeRecord(t *testing.T, rec arrow.Record, props []parquet.WriterProperty) *file.Reader {
	t.Helper()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, parquet.NewWriterProperties(props...), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pf.Close() })
	return pf
}
