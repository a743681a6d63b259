package compact

import (
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
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
	at   []int32 // per merge input: its current record's index in recs (-1: none)
}

func newGatherer(mem memory.Allocator, u *arrow.Schema) *gatherer {
	return &gatherer{mem: mem, u: u}
}

// add appends row i of rec (schema u), the current record of merge input
// src; rec is retained until flush.
func (g *gatherer) add(src int, rec arrow.Record, i int) {
	for src >= len(g.at) {
		g.at = append(g.at, -1)
	}
	k := g.at[src]
	if k < 0 || g.recs[k] != rec {
		rec.Retain()
		k = int32(len(g.recs))
		g.recs = append(g.recs, rec)
		g.at[src] = k
	}
	g.refs = append(g.refs, rowRef{k, int32(i)})
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
	for k := range g.at {
		g.at[k] = -1
	}
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
	switch t.ID() {
	case arrow.STRING:
		return gatherStrings(mem, t, columns[*array.String](recs, j), refs)
	case arrow.FLOAT64:
		return gatherFixed(mem, t, columns[*array.Float64](recs, j), (*array.Float64).Float64Values, refs)
	case arrow.INT64:
		return gatherFixed(mem, t, columns[*array.Int64](recs, j), (*array.Int64).Int64Values, refs)
	case arrow.TIMESTAMP:
		return gatherFixed(mem, t, columns[*array.Timestamp](recs, j), (*array.Timestamp).TimestampValues, refs)
	}
	b := array.NewBuilder(mem, t)
	defer b.Release()
	b.Reserve(len(refs))
	if bb, ok := b.(*array.BooleanBuilder); ok {
		src := columns[*array.Boolean](recs, j)
		for _, r := range refs {
			if a := src[r.rec]; a.IsNull(int(r.row)) {
				bb.AppendNull()
			} else {
				bb.Append(a.Value(int(r.row)))
			}
		}
		return b.NewArray()
	}
	// lists: the row appender
	app, err := appender(b, t)
	if err != nil {
		panic(err) // copyable has refused the schema before any row is gathered
	}
	for _, r := range refs {
		app(recs[r.rec].Column(j), int(r.row))
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

// validity gathers the validity bitmap of refs' rows (nil, 0 when none is
// null) and counts the nulls.
func validity[A arrow.Array](mem memory.Allocator, src []A, refs []rowRef) (*memory.Buffer, int) {
	nulls := false
	for _, a := range src {
		if a.NullN() > 0 {
			nulls = true
			break
		}
	}
	if !nulls {
		return nil, 0
	}
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(int64(len(refs)))))
	bits := buf.Bytes()
	clear(bits)
	n := 0
	for i, r := range refs {
		if src[r.rec].IsValid(int(r.row)) {
			bitutil.SetBit(bits, i)
		} else {
			n++
		}
	}
	return buf, n
}

// gatherFixed gathers a column of fixed-width values straight into its
// buffers.
func gatherFixed[T any, A arrow.Array](mem memory.Allocator, t arrow.DataType, src []A, values func(A) []T, refs []rowRef) arrow.Array {
	vals := make([][]T, len(src))
	for k, a := range src {
		vals[k] = values(a)
	}
	valid, nulls := validity(mem, src, refs)
	buf := memory.NewResizableBuffer(mem)
	var zero T
	buf.Resize(len(refs) * int(unsafe.Sizeof(zero)))
	out := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(buf.Bytes()))), len(refs))
	for i, r := range refs {
		out[i] = vals[r.rec][r.row] // a null's slot holds whatever its source's did
	}
	return finishArray(t, len(refs), nulls, valid, buf)
}

// gatherStrings gathers a string column straight into its buffers.
func gatherStrings(mem memory.Allocator, t arrow.DataType, src []*array.String, refs []rowRef) arrow.Array {
	valid, nulls := validity(mem, src, refs)
	type strings struct {
		offs []int32 // the array's offsets into data (absolute)
		data []byte  // the whole values buffer
	}
	ss := make([]strings, len(src))
	for k, a := range src {
		ss[k].offs = a.ValueOffsets()
		if b := a.Data().Buffers()[2]; b != nil {
			ss[k].data = b.Bytes()
		}
	}
	size := 0
	for _, r := range refs {
		o := ss[r.rec].offs
		size += int(o[r.row+1] - o[r.row])
	}
	offBuf := memory.NewResizableBuffer(mem)
	offBuf.Resize((len(refs) + 1) * 4)
	offs := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(offBuf.Bytes()))), len(refs)+1)
	data := memory.NewResizableBuffer(mem)
	data.Resize(size)
	b := data.Bytes()
	pos := 0
	for i, r := range refs {
		offs[i] = int32(pos)
		s := &ss[r.rec]
		pos += copy(b[pos:], s.data[s.offs[r.row]:s.offs[r.row+1]])
	}
	offs[len(refs)] = int32(pos)
	return finishArray(t, len(refs), nulls, valid, offBuf, data)
}

// finishArray makes the array of buffers (after the validity bitmap) and
// releases them.
func finishArray(t arrow.DataType, n, nulls int, valid *memory.Buffer, bufs ...*memory.Buffer) arrow.Array {
	all := append([]*memory.Buffer{valid}, bufs...)
	data := array.NewData(t, n, all, nil, nulls, 0)
	defer data.Release()
	for _, b := range all {
		if b != nil {
			b.Release()
		}
	}
	return array.MakeFromData(data)
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
