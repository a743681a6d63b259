package pqpage

import (
	"bytes"
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// fuzzRecord makes a record of testSchema from data: per row a byte of
// flags (nulls), a string as a prefix of the previous one plus new bytes
// (the delta encodings' prefix and suffix lengths; a keep byte of 0xff
// repeats the new bytes 300 times instead: lengths of up to 15 bits), and
// 8 bytes for the int64, float64 and timestamp values (the deltas between
// them).
func fuzzRecord(data []byte) arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	var prev []byte
	for len(data) >= 3 {
		flags, keep, add := data[0], int(data[1]), int(data[2])%64
		data = data[3:]
		suffix := data[:min(add, len(data))]
		data = data[len(suffix):]
		var v []byte
		if keep == 0xff {
			v = bytes.Repeat(suffix, 300)
		} else {
			v = append(append([]byte(nil), prev[:min(keep, len(prev))]...), suffix...)
		}
		prev = v
		var x uint64
		if len(data) >= 8 {
			x, data = binary.LittleEndian.Uint64(data), data[8:]
		}
		for c, f := range testSchema.Fields() {
			fb := b.Field(c)
			if f.Nullable && flags&(1<<(c%8)) != 0 {
				fb.AppendNull()
				continue
			}
			switch fb := fb.(type) {
			case *array.Int64Builder:
				fb.Append(int64(x))
			case *array.TimestampBuilder:
				fb.Append(arrow.Timestamp(x))
			case *array.Float64Builder:
				fb.Append(math.Float64frombits(x))
			case *array.BooleanBuilder:
				fb.Append(x&1 == 1)
			case *array.StringBuilder:
				fb.Append(string(v))
			}
		}
	}
	return b.NewRecord()
}

// fuzzProps are the properties data[0] picks: row groups of 5, 50 or 2000
// rows, pages of 64, 256 or 4096 bytes, the page size checked every 7, 64
// or 1024 rows; dictionaries for s and su (dictProps) of at most 1 MiB or
// 300 bytes (a fallback) or none.
func fuzzProps(cfg byte) *parquet.WriterProperties {
	rowGroup := []int64{5, 50, 2000}[cfg%3]
	page := []int64{64, 256, 4096}[cfg/3%3]
	batch := []int64{7, 64, 1024}[cfg/9%3]
	switch cfg / 27 % 3 {
	case 1:
		return dictProps(rowGroup, page, parquet.WithBatchSize(batch))
	case 2:
		return dictProps(rowGroup, page, parquet.WithBatchSize(batch), parquet.WithDictionaryPageSizeLimit(300))
	}
	return testProps(rowGroup, page, parquet.WithBatchSize(batch))
}

// naiveMinMax are the least and greatest of a's non-null strings, by
// bytes.Compare (ok false: none).
func naiveMinMax(a *array.String) (lo, hi []byte, ok bool) {
	for i := range a.Len() {
		if a.IsNull(i) {
			continue
		}
		v := []byte(a.Value(i))
		if !ok || bytes.Compare(v, lo) < 0 {
			lo = v
		}
		if !ok || bytes.Compare(v, hi) > 0 {
			hi = v
		}
		ok = true
	}
	return lo, hi, ok
}

// The encoders round-trip through arrow-go's reader: RLE/bit-packed
// levels, PLAIN values and DELTA_BYTE_ARRAY strings (their
// DELTA_BINARY_PACKED lengths), across batches, pages, row groups and
// appends of 1 to 3 slices of the record (arrays at an offset: validity
// bitmaps copied from a non-zero bit; the delta state carried across
// appends), and dictionary-encoded strings (indices, fallbacks). A string chunk's statistics are bytes.Compare's min and max.
func FuzzChunk(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o', 1, 2, 3, 4, 5, 6, 7, 8, 0xff, 3, 2, 'x', 'y', 0, 0, 0, 0, 0, 0, 0, 0x80})
	f.Add(append([]byte{2, 100, 200}, make([]byte, 12000)...)) // > 1024 rows in a row group
	f.Add(append([]byte{13, 3, 9, 0x55, 0xff, 40}, bytes.Repeat([]byte("BTC-27NOV26-"), 60)...))
	f.Add(append([]byte{27 + 2, 100, 200}, bytes.Repeat([]byte{0, 0, 3, 'B', 'T', 'C', 0, 0, 0, 0, 0, 0, 0, 0}, 300)...)) // one value: a dictionary of one entry
	f.Add(append([]byte{54 + 4, 3, 9, 0x55, 0xff, 40}, bytes.Repeat([]byte("ETH-27NOV26-"), 60)...))                      // a dictionary past 300 bytes
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		props := fuzzProps(data[0])
		rec := fuzzRecord(data[3:])
		defer rec.Release()
		n := rec.NumRows()
		a := min(int64(data[1]), n)
		b := min(a+int64(data[2]), n)
		var parts []arrow.Record
		for _, p := range [][2]int64{{0, a}, {a, b}, {b, n}} {
			if p[1] > p[0] || n == 0 && p[0] == 0 {
				parts = append(parts, rec.NewSlice(p[0], p[1]))
			}
		}
		defer func() {
			for _, p := range parts {
				p.Release()
			}
		}()
		path := filepath.Join(t.TempDir(), "f.parquet")
		writeOurs(t, path, props, parts)
		checkLayout(t, path)
		_, tbl := readFile(t, path)
		for i, f := range testSchema.Fields() {
			sameValues(t, f.Name, rec.Column(i), column(t, tbl, i))
		}

		// one chunk of all the rows: its statistics
		pqschema, err := pqarrow.ToParquet(testSchema, props, pqarrow.DefaultWriterProps())
		if err != nil {
			t.Fatal(err)
		}
		opts, _ := ColumnOptions(pqschema, testSchema.Fields(), props)
		for i, o := range opts {
			if o.Type.ID() != arrow.STRING || !o.Stats {
				continue
			}
			c, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range parts {
				if err := c.Append(p.Column(i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Finish(); err != nil {
				t.Fatal(err)
			}
			s := c.Meta().Stats
			lo, hi, ok := naiveMinMax(rec.Column(i).(*array.String))
			wantMin, wantMax := ok && int64(len(lo)) <= o.MaxStatsSize, ok && int64(len(hi)) <= o.MaxStatsSize
			if s.HasMin != wantMin || s.HasMin && !bytes.Equal(s.Min, lo) || s.HasMax != wantMax || s.HasMax && !bytes.Equal(s.Max, hi) {
				t.Fatalf("column %s: min %.40q (%v) max %.40q (%v), want %.40q (%v) %.40q (%v)", testSchema.Field(i).Name,
					s.Min, s.HasMin, s.Max, s.HasMax, lo, wantMin, hi, wantMax)
			}
		}
	})
}
