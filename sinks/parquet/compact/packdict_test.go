package compact

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/internal/arrowpool"
)

// A string column of few distinct values packed as ids (packdict.go)
// reads back as its strings, and as the day's ids of its values: nulls,
// all null, empty strings, alternating values; a column of more distinct
// values is not packed so; an id past the values is an error.
func TestPackedIDsReadBackAsTheStrings(t *testing.T) {
	build := func(n int, val func(i int) (string, bool)) *array.String {
		b := array.NewStringBuilder(memory.DefaultAllocator)
		defer b.Release()
		for i := range n {
			if v, ok := val(i); ok {
				b.Append(v)
			} else {
				b.AppendNull()
			}
		}
		return b.NewStringArray()
	}
	cases := []struct {
		name string
		a    *array.String
		ids  bool // packed as ids
	}{
		{"few values, nulls", build(300, func(i int) (string, bool) { return []string{"C", "P", "", "C"}[i%4], i%7 != 3 }), true},
		{"one value", build(50, func(int) (string, bool) { return "run-1", true }), true},
		{"all null", build(20, func(int) (string, bool) { return "", false }), true},
		{"distinct", build(300, func(i int) (string, bool) { return fmt.Sprint(i), true }), false},
	}
	pool := arrowpool.New(1 << 20)
	pf, err := newPackFile(pool, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer pf.remove()
	var ld localDict
	var cols []packedCol
	for _, c := range cases {
		defer c.a.Release()
		off := pf.pos()
		pf.w.crc = 0
		if got := ld.encode(c.a); got != c.ids {
			t.Fatalf("%s: packed as ids %v, want %v", c.name, got, c.ids)
		}
		if c.ids {
			ld.write(pf.w, c.a)
		} else {
			pf.w.array(c.a.Data())
		}
		cols = append(cols, packedCol{off: off, n: pf.pos() - off, crc: pf.w.crc, dict: c.ids})
	}
	if err := pf.w.bw.Flush(); err != nil {
		t.Fatal(err)
	}
	rd := newPackReader(pf, pool)
	d := newColDict()
	for k, c := range cases {
		got, err := rd.column(arrow.BinaryTypes.String, cols[k], c.a.Len())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !array.Equal(got, c.a) {
			t.Fatalf("%s: read back\n got %v\nwant %v", c.name, got, c.a)
		}
		got.Release()
		if !c.ids {
			continue
		}
		ids, vals, err := rd.dictColumn(cols[k], c.a.Len())
		if err != nil {
			t.Fatal(err)
		}
		out := make([]uint32, c.a.Len())
		if !d.dayIDs(ids, vals, out, 1<<20) {
			t.Fatal("the day's dictionary full")
		}
		ids.Release()
		vals.Release()
		for i, id := range out {
			if c.a.IsNull(i) != (id == ^uint32(0)) || c.a.IsValid(i) && string(d.vals[id]) != c.a.Value(i) {
				t.Fatalf("%s: row %d has day id %d, value %q", c.name, i, id, c.a.Value(i))
			}
		}
	}
	// an id past the values, its checksum right
	bad := localDict{ids: []uint32{0, 5}, offs: []int32{0, 1}, data: []byte("x")}
	a := build(2, func(int) (string, bool) { return "x", true })
	defer a.Release()
	off := pf.pos()
	pf.w.crc = 0
	bad.write(pf.w, a)
	pc := packedCol{off: off, n: pf.pos() - off, crc: pf.w.crc, dict: true}
	if err := pf.w.bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := rd.column(arrow.BinaryTypes.String, pc, 2); err == nil {
		t.Fatal("an id past the values read")
	}
}
