package sinktest

import (
	"bytes"
	"embed"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/schema"
)

// The fixtures are the records of the simulator's listing at ticks 0 to 5
// (seed 18, 600 instruments, wrong types, index price variants and extra
// fields), decoded by package transform: testdata/tick-N.TABLE.arrow, one
// Arrow IPC file each. TestFixturesAreTransformOutput checks them against
// the decoder and rewrites them with -update.
//
//go:embed testdata/*.arrow
var fixtures embed.FS

// FixtureTicks is the number of ticks with fixtures.
const FixtureTicks = 6

// BodyBytesKey is the metadata key of the instruments fixture's schema
// that holds the size of the tick's listing body (for the runs row).
const BodyBytesKey = "optlake.sinktest.body_bytes"

// FixtureName is the fixture file of tb's records at tick.
func FixtureName(tick int, tb *schema.Table) string {
	return fmt.Sprintf("testdata/tick-%d.%s.arrow", tick, tb.Name)
}

// fixture reads tb's records at tick, re-cut into records of batch rows
// (fresh arrays, no offsets) with tb's schema.
func fixture(tick int, tb *schema.Table, batch int) ([]arrow.Record, arrow.Metadata, error) {
	if tick < 0 || tick >= FixtureTicks {
		return nil, arrow.Metadata{}, fmt.Errorf("sinktest: no fixture for tick %d", tick)
	}
	b, err := fixtures.ReadFile(FixtureName(tick, tb))
	if err != nil {
		return nil, arrow.Metadata{}, fmt.Errorf("sinktest: %w", err)
	}
	r, err := ipc.NewFileReader(bytes.NewReader(b))
	if err != nil {
		return nil, arrow.Metadata{}, fmt.Errorf("sinktest: %s: %w", FixtureName(tick, tb), err)
	}
	defer r.Close()
	md := r.Schema().Metadata()
	var cols [][]arrow.Array
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.Record(i)
		if err != nil {
			return nil, arrow.Metadata{}, fmt.Errorf("sinktest: %s: %w", FixtureName(tick, tb), err)
		}
		if int(rec.NumCols()) != len(tb.Columns) {
			return nil, arrow.Metadata{}, fmt.Errorf("sinktest: %s: %d columns for %d", FixtureName(tick, tb), rec.NumCols(), len(tb.Columns))
		}
		for n := int64(0); n < rec.NumRows(); n += int64(batch) {
			end := min(n+int64(batch), rec.NumRows())
			row := make([]arrow.Array, rec.NumCols())
			for c := range row {
				s := array.NewSlice(rec.Column(c), n, end)
				row[c], err = array.Concatenate([]arrow.Array{s}, memory.DefaultAllocator)
				s.Release()
				if err != nil {
					return nil, arrow.Metadata{}, fmt.Errorf("sinktest: %s: %w", FixtureName(tick, tb), err)
				}
			}
			cols = append(cols, row)
		}
	}
	out := make([]arrow.Record, 0, len(cols))
	for _, row := range cols {
		out = append(out, array.NewRecord(tb.ArrowSchema(), row, int64(row[0].Len())))
		for _, a := range row {
			a.Release()
		}
	}
	return out, md, nil
}
