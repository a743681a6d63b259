package transform

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/optlake/optlake/schema"
)

// Records a decoder emitted keep their values while it goes on: across
// batches (each allocated by its first row, grown by doubling, its string
// bytes sized from the rows so far) and across bodies decoded by the same
// decoder, whose first batch is sized by the previous body's last. The
// names grow longer along a body, so a string column's bytes outgrow what
// its first rows projected.
func TestBatchRecordsKeepValues(t *testing.T) {
	for _, tc := range []struct {
		name      string
		batchRows int
		bodies    []int // instruments per body
	}{
		{"one row", 100, []int{1}},
		{"first alloc exactly", 4096, []int{initialBatchAlloc, initialBatchAlloc + 1}},
		{"grown twice", 32768, []int{3000, 3000, 10}},
		{"batch boundaries", 700, []int{2500, 1, 1401}},
		{"empty body between", 64, []int{130, 0, 65}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewInstrumentDecoder(Options{BatchRows: tc.batchRows})
			defer d.Release()
			var kept []arrow.Record
			defer func() {
				for _, r := range kept {
					r.Release()
				}
			}()
			var want []string
			for b, n := range tc.bodies {
				insts := make([]string, n)
				for i := range insts {
					name := fmt.Sprintf("B%d-%d-%s", b, i, strings.Repeat("x", i*40/max(n, 1)))
					want = append(want, name)
					insts[i] = inst(map[string]string{"instrument_name": `"` + name + `"`})
				}
				_, err := d.Decode(context.Background(), strings.NewReader(listing(insts...)), testMeta, func(tb *schema.Table, rec arrow.Record) error {
					if tb == schema.Instruments {
						rec.Retain()
						kept = append(kept, rec)
					}
					return nil
				})
				if err != nil {
					t.Fatalf("body %d: %v", b, err)
				}
			}
			col := schema.Instruments.MustIndex("instrument_name")
			runCol := schema.Instruments.MustIndex("run_id")
			var got []string
			for _, rec := range kept {
				if int(rec.NumRows()) > tc.batchRows {
					t.Fatalf("record of %d rows, batch is %d", rec.NumRows(), tc.batchRows)
				}
				names := rec.Column(col).(*array.String)
				runs := rec.Column(runCol).(*array.String)
				for i := 0; i < names.Len(); i++ {
					got = append(got, names.Value(i))
					if runs.Value(i) != testMeta.RunID {
						t.Fatalf("run_id %q, want %q", runs.Value(i), testMeta.RunID)
					}
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d rows, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("row %d: instrument_name %q, want %q", i, got[i], want[i])
				}
			}
		})
	}
}
