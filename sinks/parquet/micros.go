package parquet

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Micros is sc with its millisecond timestamp columns in microseconds: the
// schema of an Iceberg lake's files (Options.Iceberg). Iceberg's
// timestamptz is microseconds in Parquet (TIMESTAMP(MICROS)), and some
// readers fail on a millisecond column (apache/iceberg#14430). A list of
// timestamps keeps its unit. sc itself when it has none.
func Micros(sc *arrow.Schema) *arrow.Schema {
	var fields []arrow.Field
	for i, f := range sc.Fields() {
		if ts, ok := f.Type.(*arrow.TimestampType); ok && ts.Unit == arrow.Millisecond {
			if fields == nil {
				fields = sc.Fields()
			}
			fields[i].Type = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: ts.TimeZone}
		}
	}
	if fields == nil {
		return sc
	}
	md := sc.Metadata()
	return arrow.NewSchema(fields, &md)
}

// ToMicros returns rec with the schema us (Micros of rec's): its
// millisecond timestamp columns' values times 1000, the other columns
// shared. The caller releases the result.
func ToMicros(mem memory.Allocator, us *arrow.Schema, rec arrow.Record) arrow.Record {
	cols := make([]arrow.Array, rec.NumCols())
	for i, c := range rec.Columns() {
		ts, ok := c.(*array.Timestamp)
		if !ok || ts.DataType().(*arrow.TimestampType).Unit != arrow.Millisecond || arrow.TypeEqual(c.DataType(), us.Field(i).Type) {
			c.Retain()
			cols[i] = c
			continue
		}
		off := ts.Data().Offset() // the validity bitmap's, kept: the values at the same offset
		buf := memory.NewResizableBuffer(mem)
		buf.Resize((off + ts.Len()) * 8)
		out := arrow.TimestampTraits.CastFromBytes(buf.Bytes())
		for k, v := range ts.TimestampValues() {
			out[off+k] = v * 1000
		}
		var valid *memory.Buffer
		if ts.NullN() > 0 {
			valid = ts.Data().Buffers()[0]
		}
		data := array.NewData(us.Field(i).Type, ts.Len(), []*memory.Buffer{valid, buf}, nil, ts.NullN(), off)
		buf.Release()
		cols[i] = array.MakeFromData(data)
		data.Release()
	}
	out := array.NewRecord(us, cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out
}
