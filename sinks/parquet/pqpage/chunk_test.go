package pqpage

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
)

// poisonAllocator overwrites memory when it is freed, as a pool handing it
// to the next batch would.
type poisonAllocator struct{ memory.GoAllocator }

func (p *poisonAllocator) Free(b []byte) {
	for i := range b {
		b[i] = 0xAA
	}
}

// A Chunk keeps no view into an array after Append: each batch's strings
// are delta-encoded against the page's last string and compared with the
// min and max after the previous array's memory was overwritten. The
// statistics and the values read back are the strings appended.
func TestChunkKeepsNoViewsAfterRelease(t *testing.T) {
	sc := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	for _, enc := range []parquet.Encoding{parquet.Encodings.Plain, parquet.Encodings.DeltaByteArray} {
		t.Run(enc.String(), func(t *testing.T) {
			props := parquet.NewWriterProperties(parquet.WithDictionaryDefault(false), parquet.WithEncoding(enc), parquet.WithStats(true))
			pqschema, chunks := chunksOf(t, sc, props)
			c := chunks[0]
			mem := &poisonAllocator{}
			want := array.NewStringBuilder(memory.DefaultAllocator)
			defer want.Release()
			for k := range 3 {
				b := array.NewStringBuilder(mem)
				for i := range 10 {
					s := fmt.Sprintf("BTC-27NOV26-%d-%d", 5-k, i)
					b.Append(s)
					want.Append(s)
				}
				a := b.NewArray()
				b.Release()
				if err := c.Append(a); err != nil {
					t.Fatal(err)
				}
				a.Release() // overwrites the values
			}
			if err := c.Finish(); err != nil {
				t.Fatal(err)
			}
			m := c.Meta()
			if string(m.Stats.Min) != "BTC-27NOV26-3-0" || string(m.Stats.Max) != "BTC-27NOV26-5-9" {
				t.Errorf("min %q max %q, want BTC-27NOV26-3-0 BTC-27NOV26-5-9", m.Stats.Min, m.Stats.Max)
			}
			path := filepath.Join(t.TempDir(), "s.parquet")
			out, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := NewFile(out, pqschema, props)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.WriteRowGroup(30, []*Chunk{c}); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			_, tbl := readFile(t, path)
			w := want.NewArray()
			defer w.Release()
			sameValues(t, "s", w, column(t, tbl, 0))
		})
	}
}

// A string equal to the one before it is left out of the statistics'
// comparisons (a sorted day repeats most values row after row): what it
// skips is a value already compared, and only that. The first value of
// each array is compared even when it equals the last one kept (an empty
// string after a nil last), nulls between equal values keep the skip, and
// neither a delta string that is a prefix of the one before it (all of it
// a prefix) nor a PLAIN one that differs past its key or in its length
// only is taken for an equal one. Padded, the arrays' value buffers
// go on past their last string: PLAIN reads the short ones as words.
func TestChunkStatsOverRepeats(t *testing.T) {
	const null = "\x00null"
	cases := []struct {
		name     string
		arrays   [][]string
		min, max string
	}{
		{"runs", [][]string{{"b", "b", "b", "c", "c", "a", "a"}}, "a", "c"},
		{"empty first", [][]string{{"b", "b"}, {"", "", "c", "c"}, {"a", "a"}}, "", "c"},
		{"empty only first", [][]string{{""}, {"x", "x"}}, "", "x"},
		{"nulls in a run", [][]string{{"m", null, "m", null, null, "m", "z", null, "z"}}, "m", "z"},
		{"prefix of the last", [][]string{{"bc", "b", "b"}, {"bcd", "bc"}}, "b", "bcd"},
		{"tails", [][]string{{"venue-sim-b", "venue-sim-b", "venue-sim-a", "venue-sim-a"}}, "venue-sim-a", "venue-sim-b"},
		{"past 16 bytes", [][]string{{"0123456789abcdef-b", "0123456789abcdef-b", "0123456789abcdef-a"}}, "0123456789abcdef-a", "0123456789abcdef-b"},
		{"zero bytes after", [][]string{{"abcdefghij", "abcdefghij\x00", "abcdefghij\x00"}}, "abcdefghij", "abcdefghij\x00"},
		{"shared key", [][]string{{"BTC-27NOV26-2", "BTC-27NOV26-2", "BTC-27NOV26-10", "BTC-27NOV26-10", "BTC-27NOV26-3"}}, "BTC-27NOV26-10", "BTC-27NOV26-3"},
	}
	for _, v := range []struct{ delta, padded bool }{{false, false}, {false, true}, {true, false}} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s delta=%v padded=%v", tc.name, v.delta, v.padded), func(t *testing.T) {
				delta := v.delta
				c, err := New(Options{Type: arrow.BinaryTypes.String, Optional: true, Delta: delta, Stats: true, PageSize: 1 << 20, MaxStatsSize: 4096})
				if err != nil {
					t.Fatal(err)
				}
				for _, vs := range tc.arrays {
					b := array.NewStringBuilder(memory.DefaultAllocator)
					for _, v := range vs {
						if v == null {
							b.AppendNull()
						} else {
							b.Append(v)
						}
					}
					if v.padded {
						b.Append("past the last string")
					}
					a := b.NewArray()
					b.Release()
					if v.padded {
						full := a
						a = array.NewSlice(full, 0, int64(len(vs)))
						full.Release()
					}
					err := c.Append(a)
					a.Release()
					if err != nil {
						t.Fatal(err)
					}
				}
				if err := c.Finish(); err != nil {
					t.Fatal(err)
				}
				s := c.Meta().Stats
				if !s.HasMin || !s.HasMax || string(s.Min) != tc.min || string(s.Max) != tc.max {
					t.Errorf("min %q (%v) max %q (%v), want %q %q", s.Min, s.HasMin, s.Max, s.HasMax, tc.min, tc.max)
				}
			})
		}
	}
}

// A chunk that never fills a page holds a buffer about the size of its
// values, not of a page (it is made anew for each file: a small file's
// columns would each hold a page's worth).
func TestChunkBufferFitsItsValues(t *testing.T) {
	c, err := New(Options{Type: arrow.BinaryTypes.String, Optional: true, PageSize: 512 << 10, BatchRows: 1024})
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	for i := range 3000 {
		b.Append(fmt.Sprintf("BTC-27NOV26-%012d", i)) // 25 bytes
	}
	a := b.NewArray()
	defer a.Release()
	if err := c.Append(a); err != nil {
		t.Fatal(err)
	}
	if n, m := len(c.vals), cap(c.vals); m > 3*n { // a page's worth was 6.4 times
		t.Errorf("%d bytes of values in a buffer of %d", n, m)
	}
}
