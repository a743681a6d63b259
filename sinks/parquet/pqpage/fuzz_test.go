package pqpage

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// fuzzRecord makes a record of testSchema from data: per row a byte of
// flags (nulls), a string as a prefix of the previous one plus new bytes
// (the delta encodings' prefix and suffix lengths), and 8 bytes for the
// int64, float64 and timestamp values (the deltas between them).
func fuzzRecord(data []byte) arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	var prev []byte
	for len(data) >= 3 {
		flags, keep, add := data[0], int(data[1]), int(data[2])%64
		data = data[3:]
		v := append([]byte(nil), prev[:min(keep, len(prev))]...)
		v = append(v, data[:min(add, len(data))]...)
		data = data[min(add, len(data)):]
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

// The encoders round-trip through arrow-go's reader: RLE/bit-packed
// levels, PLAIN values and DELTA_BYTE_ARRAY strings (their
// DELTA_BINARY_PACKED lengths), across pages and row groups.
func FuzzChunk(f *testing.F) {
	f.Add([]byte{0, 0, 5, 'h', 'e', 'l', 'l', 'o', 1, 2, 3, 4, 5, 6, 7, 8, 0xff, 3, 2, 'x', 'y', 0, 0, 0, 0, 0, 0, 0, 0x80})
	f.Add(make([]byte, 3000))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec := fuzzRecord(data)
		defer rec.Release()
		path := filepath.Join(t.TempDir(), "f.parquet")
		writeOurs(t, path, testProps(50, 256), []arrow.Record{rec})
		_, tbl := readFile(t, path)
		for i, f := range testSchema.Fields() {
			sameValues(t, f.Name, rec.Column(i), column(t, tbl, i))
		}
	})
}
