package events

import (
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/sinks"
)

// nullOver returns a copy of column a with row i null and its value left in
// place (Arrow does not define a null's value: a reader may leave any).
func nullOver(a arrow.Array, i int) arrow.Array {
	d := a.Data()
	valid := make([]byte, bitutil.BytesForBits(int64(d.Offset()+d.Len())))
	for k := range d.Offset() + d.Len() {
		bitutil.SetBit(valid, k)
	}
	bitutil.ClearBit(valid, d.Offset()+i)
	bufs := append([]*memory.Buffer{memory.NewBufferBytes(valid)}, d.Buffers()[1:]...)
	nd := array.NewData(d.DataType(), d.Len(), bufs, nil, 1, d.Offset())
	defer nd.Release()
	return array.MakeFromData(nd)
}

// TestCheckRowsNullOverGoodValue: a null source or snapshot_time whose
// value under the null is the expected one is refused by the checks of a
// whole record (the background Observe's) as by the checks row by row,
// with the same error, wherever the row is, in a record sliced or not.
func TestCheckRowsNullOverGoodValue(t *testing.T) {
	for _, col := range []string{"source", "snapshot_time"} {
		for _, pos := range []int{0, 299, 599} {
			for _, off := range []int{0, 3} {
				rows := make([]row, 600+off)
				for i := range rows {
					rows[i] = inst(fmt.Sprintf("A%04d", i))
				}
				whole := record(t, memory.DefaultAllocator, "s", at(1), rows)
				rec := whole.NewSlice(int64(off), whole.NumRows())
				whole.Release()
				k := rec.Schema().FieldIndices(col)[0]
				cols := append([]arrow.Array(nil), rec.Columns()...)
				cols[k] = nullOver(cols[k], pos)
				bad := array.NewRecord(rec.Schema(), cols, rec.NumRows())
				cols[k].Release()
				rec.Release()
				var errs [2]error
				for i, bg := range []bool{false, true} {
					d, err := NewDiffer(nil, sinks.Snapshot{Source: "s", Time: at(1)}, Options{Background: bg})
					if err != nil {
						t.Fatal(err)
					}
					errs[i] = d.Observe(bad)
					d.Close()
				}
				bad.Release()
				if errs[0] == nil || !strings.Contains(errs[0].Error(), fmt.Sprintf("row %d ", pos)) {
					t.Errorf("null %s at %d (offset %d): row by row: %v", col, pos, off, errs[0])
				}
				if fmt.Sprint(errs[1]) != fmt.Sprint(errs[0]) {
					t.Errorf("null %s at %d (offset %d): whole record: %v, row by row: %v", col, pos, off, errs[1], errs[0])
				}
			}
		}
	}
}
