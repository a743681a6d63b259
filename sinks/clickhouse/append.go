package clickhouse

import (
	"fmt"
	"unsafe"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/optlake/optlake/schema"
)

// appendRecord appends every column of rec to batch as one typed slice per
// column: no per-row boxing into any. The loader decides nulls itself from
// Arrow's validity bitmaps (18.16 would turn some empty values into 0).
// With ms the batch has one more column, schema.SnapshotMs, filled with
// the millisecond of each row's snapshot_time.
func appendRecord(batch driver.Batch, t *schema.Table, f schema.Features, rec arrow.Record, ms bool) error {
	if int(rec.NumCols()) != len(t.Columns) {
		return fmt.Errorf("record has %d columns, table %s has %d", rec.NumCols(), t.Name, len(t.Columns))
	}
	for i, c := range t.Columns {
		v, err := columnValues(c, f, rec.Column(i))
		if err != nil {
			return fmt.Errorf("column %s: %w", c.Name, err)
		}
		if err := batch.Column(i).Append(v); err != nil {
			return fmt.Errorf("column %s: %w", c.Name, err)
		}
	}
	if ms {
		v, err := snapshotMillis(rec.Column(t.MustIndex("snapshot_time")))
		if err != nil {
			return fmt.Errorf("column %s: %w", schema.SnapshotMs, err)
		}
		if err := batch.Column(len(t.Columns)).Append(v); err != nil {
			return fmt.Errorf("column %s: %w", schema.SnapshotMs, err)
		}
	}
	return nil
}

// snapshotMillis is the millisecond (0-999) of every instant of a
// snapshot_time column, for schema.SnapshotMs.
func snapshotMillis(a arrow.Array) ([]uint16, error) {
	ta, ok := a.(*array.Timestamp)
	if !ok {
		return nil, fmt.Errorf("want timestamp array, got %s", a.DataType())
	}
	out := make([]uint16, ta.Len())
	for i := range out {
		v := int64(ta.Value(i))
		out[i] = uint16(v - floorDiv(v, 1000)*1000)
	}
	return out, nil
}

// columnValues converts one Arrow column to the slice type clickhouse-go
// takes for the column's ClickHouse type: []T when no value is null, []*T
// (pointing into one backing slice) otherwise.
func columnValues(c schema.Column, f schema.Features, a arrow.Array) (any, error) {
	if c.List {
		return listValues(c, f, a)
	}
	n := a.Len()
	nulls := a.NullN() > 0
	switch c.Type {
	case schema.String:
		s, ok := a.(*array.String)
		if !ok {
			return nil, fmt.Errorf("want string array, got %s", a.DataType())
		}
		vals := make([]string, n)
		for i := range vals {
			vals[i] = s.Value(i) // aliases the Arrow buffer; no copy
		}
		if !nulls {
			return vals, nil
		}
		return pointers(vals, a), nil
	case schema.Float64:
		fa, ok := a.(*array.Float64)
		if !ok {
			return nil, fmt.Errorf("want float64 array, got %s", a.DataType())
		}
		vals := fa.Float64Values()
		if !nulls {
			return vals, nil
		}
		return pointers(vals, a), nil
	case schema.Int64:
		ia, ok := a.(*array.Int64)
		if !ok {
			return nil, fmt.Errorf("want int64 array, got %s", a.DataType())
		}
		vals := ia.Int64Values()
		if !nulls {
			return vals, nil
		}
		return pointers(vals, a), nil
	case schema.Bool:
		ba, ok := a.(*array.Boolean)
		if !ok {
			return nil, fmt.Errorf("want bool array, got %s", a.DataType())
		}
		if f.Bool {
			vals := make([]bool, n)
			for i := range vals {
				vals[i] = ba.Value(i)
			}
			if !nulls {
				return vals, nil
			}
			return pointers(vals, a), nil
		}
		vals := make([]uint8, n)
		for i := range vals {
			if ba.Value(i) {
				vals[i] = 1
			}
		}
		if !nulls {
			return vals, nil
		}
		return pointers(vals, a), nil
	case schema.TimestampMs:
		ta, ok := a.(*array.Timestamp)
		if !ok {
			return nil, fmt.Errorf("want timestamp array, got %s", a.DataType())
		}
		raw := ta.TimestampValues()
		ms := unsafe.Slice((*int64)(unsafe.SliceData(raw)), len(raw))
		lo, hi := f.TimeRange()
		vals := make([]int64, n)
		valid := make([]bool, n)
		allValid := true
		for i, v := range ms {
			ok := a.IsValid(i) && v >= lo && v <= hi
			valid[i] = ok
			if !ok {
				allValid = false
				if a.IsValid(i) && !c.Nullable {
					return nil, fmt.Errorf("%s is outside the range of the column's ClickHouse type", arrow.Timestamp(v).ToTime(arrow.Millisecond).UTC())
				}
				continue
			}
			if f.DateTime64 {
				vals[i] = v
			} else {
				vals[i] = floorDiv(v, 1000) // DateTime takes seconds
			}
		}
		if allValid {
			return vals, nil
		}
		ptrs := make([]*int64, n)
		for i := range vals {
			if valid[i] {
				ptrs[i] = &vals[i]
			}
		}
		return ptrs, nil
	}
	return nil, fmt.Errorf("unsupported type %v", c.Type)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// pointers returns []*T with nil where a is null, pointing into vals.
func pointers[T any](vals []T, a arrow.Array) []*T {
	out := make([]*T, len(vals))
	for i := range vals {
		if a.IsValid(i) {
			out[i] = &vals[i]
		}
	}
	return out
}

// listValues converts a list column (arrays of scalars; small account
// tables only) to [][]*T: elements may be null.
func listValues(c schema.Column, f schema.Features, a arrow.Array) (any, error) {
	la, ok := a.(*array.List)
	if !ok {
		return nil, fmt.Errorf("want list array, got %s", a.DataType())
	}
	offs := la.Offsets()
	vals := la.ListValues()
	switch c.Type {
	case schema.String:
		sa := vals.(*array.String)
		return listOf(la, offs, func(j int) (string, bool) { return sa.Value(j), sa.IsValid(j) }), nil
	case schema.Float64:
		fa := vals.(*array.Float64)
		return listOf(la, offs, func(j int) (float64, bool) { return fa.Value(j), fa.IsValid(j) }), nil
	case schema.Int64:
		ia := vals.(*array.Int64)
		return listOf(la, offs, func(j int) (int64, bool) { return ia.Value(j), ia.IsValid(j) }), nil
	case schema.TimestampMs:
		ta := vals.(*array.Timestamp)
		lo, hi := f.TimeRange()
		return listOf(la, offs, func(j int) (int64, bool) {
			v := int64(ta.Value(j))
			if !ta.IsValid(j) || v < lo || v > hi {
				return 0, false
			}
			if !f.DateTime64 {
				v = floorDiv(v, 1000)
			}
			return v, true
		}), nil
	case schema.Bool:
		ba := vals.(*array.Boolean)
		if f.Bool {
			return listOf(la, offs, func(j int) (bool, bool) { return ba.Value(j), ba.IsValid(j) }), nil
		}
		return listOf(la, offs, func(j int) (uint8, bool) {
			if ba.Value(j) {
				return 1, ba.IsValid(j)
			}
			return 0, ba.IsValid(j)
		}), nil
	}
	return nil, fmt.Errorf("unsupported list of %v", c.Type)
}

// listOf builds [][]*T from a list array's offsets and an element getter.
func listOf[T any](la *array.List, offs []int32, get func(int) (T, bool)) [][]*T {
	out := make([][]*T, la.Len())
	for i := range out {
		row := make([]*T, 0, offs[i+1]-offs[i])
		if la.IsValid(i) {
			for j := offs[i]; j < offs[i+1]; j++ {
				if v, ok := get(int(j)); ok {
					row = append(row, &v)
				} else {
					row = append(row, nil)
				}
			}
		}
		out[i] = row
	}
	return out
}
