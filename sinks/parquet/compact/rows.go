package compact

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	pq "github.com/optlake/optlake/sinks/parquet"
)

// unionSchema is the union of the files' schemas by column name: columns
// in the order they first appear (files in the order given), a column
// nullable when any file has it nullable or lacks it. A column whose type
// differs between files is an error: the day is left as it is.
func unionSchema(schemas []*arrow.Schema) (*arrow.Schema, error) {
	var fields []arrow.Field
	pos := map[string]int{}
	count := map[string]int{}
	var md arrow.Metadata
	for k, sc := range schemas {
		if k == 0 {
			md = sc.Metadata()
		}
		for _, f := range sc.Fields() {
			count[f.Name]++
			i, ok := pos[f.Name]
			if !ok {
				pos[f.Name] = len(fields)
				fields = append(fields, arrow.Field{Name: f.Name, Type: f.Type, Nullable: f.Nullable})
				continue
			}
			if !arrow.TypeEqual(fields[i].Type, f.Type) {
				if wider, ok := widerTime(fields[i].Type, f.Type); ok {
					// Millisecond files and microsecond ones (an Iceberg
					// lake written before and after its files' timestamps
					// were microseconds): microseconds, conform scales.
					fields[i].Type = wider
				} else {
					return nil, fmt.Errorf("column %s is %s in one file and %s in another", f.Name, fields[i].Type, f.Type)
				}
			}
			fields[i].Nullable = fields[i].Nullable || f.Nullable
		}
	}
	for i := range fields {
		if count[fields[i].Name] < len(schemas) {
			fields[i].Nullable = true
		}
	}
	return arrow.NewSchema(fields, &md), nil
}

// widerTime is the microsecond timestamp type when a and b are timestamps
// of the same zone in milliseconds and microseconds.
func widerTime(a, b arrow.DataType) (arrow.DataType, bool) {
	ta, ok1 := a.(*arrow.TimestampType)
	tb, ok2 := b.(*arrow.TimestampType)
	if !ok1 || !ok2 || ta.TimeZone != tb.TimeZone {
		return nil, false
	}
	for _, u := range []arrow.TimeUnit{ta.Unit, tb.Unit} {
		if u != arrow.Millisecond && u != arrow.Microsecond {
			return nil, false
		}
	}
	return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: ta.TimeZone}, true
}

// conform returns rec with schema u: its columns by name, all-null arrays
// for the columns it lacks, millisecond timestamps scaled to u's
// microseconds. The caller releases the result.
func conform(mem memory.Allocator, u *arrow.Schema, rec arrow.Record) arrow.Record {
	n := int(rec.NumRows())
	cols := make([]arrow.Array, len(u.Fields()))
	sc := rec.Schema()
	for j, f := range u.Fields() {
		if idx := sc.FieldIndices(f.Name); len(idx) > 0 {
			cols[j] = rec.Column(idx[0])
			if !arrow.TypeEqual(cols[j].DataType(), f.Type) {
				if _, ok := widerTime(cols[j].DataType(), f.Type); ok {
					one := array.NewRecord(arrow.NewSchema([]arrow.Field{{Name: f.Name, Type: cols[j].DataType(), Nullable: true}}, nil), []arrow.Array{cols[j]}, int64(n))
					us := pq.ToMicros(mem, arrow.NewSchema([]arrow.Field{{Name: f.Name, Type: f.Type, Nullable: true}}, nil), one)
					cols[j] = us.Column(0)
					cols[j].Retain()
					us.Release()
					one.Release()
					continue
				}
			}
			cols[j].Retain()
		} else {
			cols[j] = array.MakeArrayOfNull(mem, f.Type, n)
		}
	}
	out := array.NewRecord(u, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return out
}

// keyView reads the sort key (and the snapshot group) of one record.
type keyView struct {
	cols []keyCol
	// group columns; nil when the table lacks them
	snap *array.Timestamp
	run  *array.String
	ep   *array.String
}

type keyCol struct {
	str   *array.String
	i64   *array.Int64
	ts    *array.Timestamp
	arr   arrow.Array
	nulls bool // the column has nulls (else compareRows skips the checks)
}

func newKeyView(rec arrow.Record, key []string) (keyView, error) {
	var kv keyView
	sc := rec.Schema()
	for _, name := range key {
		idx := sc.FieldIndices(name)
		if len(idx) == 0 {
			return kv, fmt.Errorf("no key column %s", name)
		}
		arr := rec.Column(idx[0])
		c := keyCol{arr: arr, nulls: arr.NullN() > 0}
		switch a := arr.(type) {
		case *array.String:
			c.str = a
		case *array.Int64:
			c.i64 = a
		case *array.Timestamp:
			c.ts = a
		default:
			return kv, fmt.Errorf("key column %s has type %s, not string, int64 or timestamp", name, arr.DataType())
		}
		kv.cols = append(kv.cols, c)
	}
	if idx := sc.FieldIndices("snapshot_time"); len(idx) > 0 {
		kv.snap, _ = rec.Column(idx[0]).(*array.Timestamp)
	}
	if idx := sc.FieldIndices("run_id"); len(idx) > 0 {
		kv.run, _ = rec.Column(idx[0]).(*array.String)
	}
	if idx := sc.FieldIndices("endpoint"); len(idx) > 0 {
		kv.ep, _ = rec.Column(idx[0]).(*array.String)
	}
	return kv, nil
}

// group returns the snapshot group of row i.
func (kv *keyView) group(i int) pq.Group {
	var g pq.Group
	if kv.snap != nil && kv.snap.IsValid(i) {
		// In milliseconds whatever the file's unit (an Iceberg lake's
		// files are in microseconds, a manifest's groups in ms).
		g.SnapshotMs = int64(kv.snap.Value(i))
		if kv.snap.DataType().(*arrow.TimestampType).Unit == arrow.Microsecond {
			g.SnapshotMs = int64(kv.snap.Value(i)) / 1000
		}
	}
	if kv.run != nil && kv.run.IsValid(i) {
		g.RunID = kv.run.Value(i)
	}
	if kv.ep != nil && kv.ep.IsValid(i) {
		g.Endpoint = kv.ep.Value(i)
	}
	return g
}

// compareRows orders row i of a against row j of b by the key; nulls first.
func compareRows(a *keyView, i int, b *keyView, j int) int {
	return compareRowsFrom(a, i, b, j, 0)
}

// compareRowsFrom is compareRows on the key's columns from the first-th
// on (the ones before are equal: a merge's integer keys).
func compareRowsFrom(a *keyView, i int, b *keyView, j int, first int) int {
	for k := first; k < len(a.cols); k++ {
		ca, cb := &a.cols[k], &b.cols[k]
		if ca.nulls || cb.nulls {
			na, nb := ca.arr.IsNull(i), cb.arr.IsNull(j)
			if na || nb {
				if na && nb {
					continue
				}
				if na {
					return -1
				}
				return 1
			}
		}
		var c int
		switch {
		case ca.str != nil:
			c = strings.Compare(ca.str.Value(i), cb.str.Value(j))
		case ca.i64 != nil:
			c = cmp.Compare(ca.i64.Value(i), cb.i64.Value(j))
		default:
			c = cmp.Compare(ca.ts.Value(i), cb.ts.Value(j))
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// rowBuilder appends rows of records with schema u, column by column.
type rowBuilder struct {
	b    *array.RecordBuilder
	apps []func(arr arrow.Array, i int)
	n    int
}

func newRowBuilder(mem memory.Allocator, u *arrow.Schema) (*rowBuilder, error) {
	rb := &rowBuilder{b: array.NewRecordBuilder(mem, u)}
	for j, f := range u.Fields() {
		app, err := appender(rb.b.Field(j), f.Type)
		if err != nil {
			rb.b.Release()
			return nil, fmt.Errorf("column %s: %w", f.Name, err)
		}
		rb.apps = append(rb.apps, app)
	}
	return rb, nil
}

// add appends row i of rec (schema u).
func (rb *rowBuilder) add(rec arrow.Record, i int) {
	for j, app := range rb.apps {
		app(rec.Column(j), i)
	}
	rb.n++
}

// flush returns the rows added so far as a record (nil when none).
func (rb *rowBuilder) flush() arrow.Record {
	if rb.n == 0 {
		return nil
	}
	rb.n = 0
	return rb.b.NewRecord()
}

func (rb *rowBuilder) release() { rb.b.Release() }

// appender returns a function appending arr's value i to b, for the types
// optlake's tables have (see schema.ArrowType): string, float64, int64,
// bool, timestamp, and lists of them.
func appender(b array.Builder, t arrow.DataType) (func(arr arrow.Array, i int), error) {
	switch bb := b.(type) {
	case *array.StringBuilder:
		return func(arr arrow.Array, i int) {
			if arr.IsNull(i) {
				bb.AppendNull()
				return
			}
			bb.Append(arr.(*array.String).Value(i))
		}, nil
	case *array.Float64Builder:
		return func(arr arrow.Array, i int) {
			if arr.IsNull(i) {
				bb.AppendNull()
				return
			}
			bb.Append(arr.(*array.Float64).Value(i))
		}, nil
	case *array.Int64Builder:
		return func(arr arrow.Array, i int) {
			if arr.IsNull(i) {
				bb.AppendNull()
				return
			}
			bb.Append(arr.(*array.Int64).Value(i))
		}, nil
	case *array.BooleanBuilder:
		return func(arr arrow.Array, i int) {
			if arr.IsNull(i) {
				bb.AppendNull()
				return
			}
			bb.Append(arr.(*array.Boolean).Value(i))
		}, nil
	case *array.TimestampBuilder:
		return func(arr arrow.Array, i int) {
			if arr.IsNull(i) {
				bb.AppendNull()
				return
			}
			bb.Append(arr.(*array.Timestamp).Value(i))
		}, nil
	case *array.ListBuilder:
		lt := t.(*arrow.ListType)
		elem, err := appender(bb.ValueBuilder(), lt.Elem())
		if err != nil {
			return nil, err
		}
		return func(arr arrow.Array, i int) {
			if arr.IsNull(i) {
				bb.AppendNull()
				return
			}
			la := arr.(*array.List)
			start, end := la.ValueOffsets(i)
			bb.Append(true)
			vals := la.ListValues()
			for k := start; k < end; k++ {
				elem(vals, int(k))
			}
		}, nil
	}
	return nil, fmt.Errorf("type %s is not supported by compaction", t)
}
