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
			appendLoop(b, c, a)
		})
	}
}

// BenchmarkDictStrings appends a replayed day's two kinds of
// low-cardinality string columns, PLAIN and with a dictionary: runs (a
// value per instrument, repeated over its 150 snapshots) and cycles (a
// value per snapshot, run_id: the 150 values in turn), in 8,192-row
// arrays into zstd pages of 512 KiB, row groups of 131,072 rows.
func BenchmarkDictStrings(b *testing.B) {
	shapes := map[string]func(i int) string{
		"runs":   func(i int) string { return fmt.Sprintf("BTC-%d", i/150%40) },
		"cycles": func(i int) string { return fmt.Sprintf("01a2185c-c6c9-7b2b-99fe-634f76e3%04d", i%150) },
	}
	for _, shape := range []string{"runs", "cycles"} {
		for _, dict := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/dict=%v", shape, dict), func(b *testing.B) {
				sb := array.NewStringBuilder(memory.DefaultAllocator)
				for i := range 8192 {
					sb.Append(shapes[shape](i))
				}
				a := sb.NewArray()
				sb.Release()
				defer a.Release()
				c, err := New(Options{Type: arrow.BinaryTypes.String, Optional: true, Stats: true, Codec: compress.Codecs.Zstd, Level: 3,
					PageSize: 512 << 10, MaxStatsSize: 4096, Dict: dict, DictPageSize: 1 << 20, IndexEncoding: encRLEDict, DictEncoding: encPlain})
				if err != nil {
					b.Fatal(err)
				}
				appendLoop(b, c, a)
			})
		}
	}
}

// appendLoop appends a to c in row groups of 16 arrays (131,072 rows of
// 8,192-row arrays) for the benchmark's loop; a row per byte.
func appendLoop(b *testing.B, c *Chunk, a arrow.Array) {
	b.SetBytes(int64(a.Len()))
	n := 0
	for b.Loop() {
		if err := c.Append(a); err != nil {
			b.Fatal(err)
		}
		if n++; n%16 == 0 {
			if err := c.Finish(); err != nil {
				b.Fatal(err)
			}
			c.Reset()
		}
	}
}
