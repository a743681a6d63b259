package compact

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// gatherer collects rows (a record and a row of it, in output order) and
// builds them into a record a column at a time: the type switch once per
// column and batch, not per value as rowBuilder's appenders do (the sort
// and the merge move every row of a day; row at a time, that cost as much
// as decoding the day).
type gatherer struct {
	mem  memory.Allocator
	u    *arrow.Schema
	recs []arrow.Record // retained until flush
	refs []rowRef
}

func newGatherer(mem memory.Allocator, u *arrow.Schema) *gatherer {
	return &gatherer{mem: mem, u: u}
}

// add appends row i of rec (schema u); rec is retained until flush.
func (g *gatherer) add(rec arrow.Record, i int) {
	k := len(g.recs) - 1
	if k < 0 || g.recs[k] != rec {
		rec.Retain()
		g.recs = append(g.recs, rec)
		k++
	}
	g.refs = append(g.refs, rowRef{int32(k), int32(i)})
}

func (g *gatherer) rows() int { return len(g.refs) }

// flush returns the rows added so far as one record (nil when none).
func (g *gatherer) flush() arrow.Record {
	if len(g.refs) == 0 {
		return nil
	}
	rec := gather(g.mem, g.u, g.recs, g.refs)
	g.release()
	return rec
}

// release drops the rows not flushed.
func (g *gatherer) release() {
	for _, r := range g.recs {
		r.Release()
	}
	g.recs, g.refs = g.recs[:0], g.refs[:0]
}

// gather builds the record of refs' rows of recs (all with schema u).
func gather(mem memory.Allocator, u *arrow.Schema, recs []arrow.Record, refs []rowRef) arrow.Record {
	cols := make([]arrow.Array, u.NumFields())
	for j, f := range u.Fields() {
		cols[j] = gatherColumn(mem, f.Type, recs, j, refs)
	}
	out := array.NewRecord(u, cols, int64(len(refs)))
	for _, c := range cols {
		c.Release()
	}
	return out
}

func gatherColumn(mem memory.Allocator, t arrow.DataType, recs []arrow.Record, j int, refs []rowRef) arrow.Array {
	b := array.NewBuilder(mem, t)
	defer b.Release()
	b.Reserve(len(refs))
	switch bb := b.(type) {
	case *array.StringBuilder:
		src := columns[*array.String](recs, j)
		var size int
		for _, r := range refs {
			size += src[r.rec].ValueLen(int(r.row))
		}
		bb.ReserveData(size)
		for _, r := range refs {
			if a := src[r.rec]; a.IsNull(int(r.row)) {
				bb.AppendNull()
			} else {
				bb.Append(a.Value(int(r.row)))
			}
		}
	case *array.Float64Builder:
		gatherFixed(bb, columns[*array.Float64](recs, j), refs)
	case *array.Int64Builder:
		gatherFixed(bb, columns[*array.Int64](recs, j), refs)
	case *array.TimestampBuilder:
		gatherFixed(bb, columns[*array.Timestamp](recs, j), refs)
	case *array.BooleanBuilder:
		gatherFixed(bb, columns[*array.Boolean](recs, j), refs)
	default: // lists: the row appender
		app, err := appender(b, t)
		if err != nil {
			panic(err) // copyable has refused the schema before any row is gathered
		}
		for _, r := range refs {
			app(recs[r.rec].Column(j), int(r.row))
		}
	}
	return b.NewArray()
}

// columns returns column j of each record as its concrete array type.
func columns[A arrow.Array](recs []arrow.Record, j int) []A {
	out := make([]A, len(recs))
	for k, r := range recs {
		out[k] = r.Column(j).(A)
	}
	return out
}

type valueArray[T any] interface {
	arrow.Array
	Value(int) T
}

type valueBuilder[T any] interface {
	Append(T)
	AppendNull()
}

func gatherFixed[T any, A valueArray[T], B valueBuilder[T]](b B, src []A, refs []rowRef) {
	for _, r := range refs {
		if a := src[r.rec]; a.IsNull(int(r.row)) {
			b.AppendNull()
		} else {
			b.Append(a.Value(int(r.row)))
		}
	}
}

// copyable reports a column type the gatherer cannot copy (checked before
// rows are gathered, which cannot fail).
func copyable(mem memory.Allocator, u *arrow.Schema) error {
	rb, err := newRowBuilder(mem, u)
	if err != nil {
		return err
	}
	rb.release()
	return nil
}
