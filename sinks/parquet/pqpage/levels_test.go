package pqpage

import (
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Definition levels read back for validity patterns around the RLE
// groups of 8: uniform bytes then a tail that differs (a last null after
// valid groups, a last value after null groups, a partial group joining a
// run or not), pages of 1 to 40 rows.
func TestLevelTails(t *testing.T) {
	patterns := []struct {
		name  string
		valid func(i, n int) bool
	}{
		{"last null", func(i, n int) bool { return i != n-1 }},
		{"last valid", func(i, n int) bool { return i == n-1 }},
		{"alternate", func(i, n int) bool { return i%2 == 0 }},
		{"first half", func(i, n int) bool { return i < n/2 }},
		{"mixed then 9 valid", func(i, n int) bool { return i%3 == 0 || i >= n-9 }},
	}
	dir := t.TempDir()
	for _, p := range patterns {
		for n := 1; n <= 40; n++ {
			b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
			for c, f := range testSchema.Fields() {
				for i := range n {
					if f.Nullable && !p.valid(i, n) {
						b.Field(c).AppendNull()
					} else {
						b.Field(c).AppendEmptyValues(1)
					}
				}
			}
			rec := b.NewRecord()
			b.Release()
			path := filepath.Join(dir, "levels.parquet")
			writeOurs(t, path, testProps(int64(n), 1<<20), []arrow.Record{rec})
			_, tbl := readFile(t, path)
			for i, f := range testSchema.Fields() {
				got, want := column(t, tbl, i), rec.Column(i)
				for r := range n {
					if got.IsNull(r) != want.IsNull(r) {
						t.Fatalf("%s, %d rows: column %s row %d null %v, want %v", p.name, n, f.Name, r, got.IsNull(r), want.IsNull(r))
					}
				}
			}
			rec.Release()
		}
	}
}
