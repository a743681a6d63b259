package pqpage

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
)

// BenchmarkPlainStrings appends a replayed day's kind of string column:
// 8,192-row arrays (16 a row group) sorted by instrument, each value repeated over the
// instrument's 150 snapshots, into zstd pages of 512 KiB.
func BenchmarkPlainStrings(b *testing.B) {
	for _, codec := range []compress.Compression{compress.Codecs.Uncompressed, compress.Codecs.Zstd} {
		b.Run(codec.String(), func(b *testing.B) {
			sb := array.NewStringBuilder(memory.DefaultAllocator)
			for i := range 8192 {
				sb.Append(fmt.Sprintf("BTC-%d", i/150%40))
			}
			a := sb.NewArray()
			sb.Release()
			defer a.Release()
			c, err := New(Options{Type: arrow.BinaryTypes.String, Optional: true, Stats: true, Codec: codec, Level: 3,
				PageSize: 512 << 10, MaxStatsSize: 4096})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(a.Len()))
			n := 0
			for b.Loop() {
				if err := c.Append(a); err != nil {
					b.Fatal(err)
				}
				if n++; n%16 == 0 { // row groups of 131,072 rows
					if err := c.Finish(); err != nil {
						b.Fatal(err)
					}
					c.Reset()
				}
			}
		})
	}
}
