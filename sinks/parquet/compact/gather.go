package compact

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/internal/arrowpool"
)

// gatherer collects rows (a record and a row of it, in output order) and
// builds them into a record a column at a time: the type switch once per
// column and batch, not per value as rowBuilder's appenders do (the sort
// and the merge move every row of a day; row at a time, that cost as much
// as decoding the day).
type gatherer struct {
	pool *arrowpool.Pool
	u    *arrow.Schema
	recs []arrow.Record // retained until flush
	refs []rowRef
	at   []int32 // per merge input: its current record's index in recs (-1: none)
}

func newGatherer(pool *arrowpool.Pool, u *arrow.Schema) *gatherer {
	return &gatherer{pool: pool, u: u}
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
func (g *gatherer) flush() (arrow.Record, error) {
	if len(g.refs) == 0 {
		return nil, nil
	}
	rec, err := gather(g.pool, g.u, g.recs, g.refs)
	g.release()
	return rec, err
}

// writeTo writes the rows added so far to w as a batch (none when none).
func (g *gatherer) writeTo(w *runWriter) error {
	if len(g.refs) == 0 {
		return nil
	}
	err := w.writeRows(g.recs, g.refs)
	g.release()
	return err
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

// gather builds the record of refs' rows of recs (all with schema u), its
// buffers from pool.
func gather(pool *arrowpool.Pool, u *arrow.Schema, recs []arrow.Record, refs []rowRef) (arrow.Record, error) {
	cols := make([]arrow.Array, 0, u.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for j, f := range u.Fields() {
		c, err := gatherColumn(pool, f.Type, recs, j, refs)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", f.Name, err)
		}
		cols = append(cols, c)
	}
	return array.NewRecord(u, cols, int64(len(refs))), nil
}

// gatherColumn gathers column j of refs' rows: flat columns into buffers
// of pool (every byte written), booleans and lists through arrow-go's
// builders (Go's zeroed memory: builders rely on it).
func gatherColumn(pool *arrowpool.Pool, t arrow.DataType, recs []arrow.Record, j int, refs []rowRef) (arrow.Array, error) {
	arrs := make([]arrow.Array, len(recs))
	for k, r := range recs {
		arrs[k] = r.Column(j)
	}
	return gatherArrays(pool, t, arrs, refs)
}

// gatherArrays is gatherColumn of arrays of type t, refs' rec indexing
// arrs.
func gatherArrays(pool *arrowpool.Pool, t arrow.DataType, arrs []arrow.Array, refs []rowRef) (arrow.Array, error) {
	switch t.ID() {
	case arrow.STRING:
		return gatherStrings(pool, t, as[*array.String](arrs), refs)
	case arrow.FLOAT64:
		return gatherFixed(pool, t, as[*array.Float64](arrs), (*array.Float64).Float64Values, refs), nil
	case arrow.INT64:
		return gatherFixed(pool, t, as[*array.Int64](arrs), (*array.Int64).Int64Values, refs), nil
	case arrow.TIMESTAMP:
		return gatherFixed(pool, t, as[*array.Timestamp](arrs), (*array.Timestamp).TimestampValues, refs), nil
	}
	b := array.NewBuilder(memory.DefaultAllocator, t)
	defer b.Release()
	b.Reserve(len(refs))
	if bb, ok := b.(*array.BooleanBuilder); ok {
		src := as[*array.Boolean](arrs)
		for _, r := range refs {
			if a := src[r.rec]; a.IsNull(int(r.row)) {
				bb.AppendNull()
			} else {
				bb.Append(a.Value(int(r.row)))
			}
		}
		return b.NewArray(), nil
	}
	// lists: the row appender
	app, err := appender(b, t)
	if err != nil {
		panic(err) // copyable has refused the schema before any row is gathered
	}
	for _, r := range refs {
		app(arrs[r.rec], int(r.row))
	}
	return b.NewArray(), nil
}

// columns returns column j of each record as its concrete array type.
func columns[A arrow.Array](recs []arrow.Record, j int) []A {
	out := make([]A, len(recs))
	for k, r := range recs {
		out[k] = r.Column(j).(A)
	}
	return out
}

// as returns the arrays as their concrete array type.
func as[A arrow.Array](arrs []arrow.Array) []A {
	out := make([]A, len(arrs))
	for k, a := range arrs {
		out[k] = a.(A)
	}
	return out
}

// validityInto gathers the validity bitmap of refs' rows into alloc(n)
// bytes, cleared first (nil, 0 when no source has a null), and counts the
// nulls.
func validityInto[A arrow.Array](src []A, refs []rowRef, alloc func(n int) []byte) ([]byte, int) {
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
	bits := alloc(int(bitutil.BytesForBits(int64(len(refs)))))
	clear(bits)
	n := 0
	for i, r := range refs {
		if src[r.rec].IsValid(int(r.row)) {
			bitutil.SetBit(bits, i)
		} else {
			n++
		}
	}
	return bits, n
}

// validity is validityInto a buffer of pool (nil when no row is null).
func validity[A arrow.Array](pool *arrowpool.Pool, src []A, refs []rowRef) (*memory.Buffer, int) {
	var buf *memory.Buffer
	_, n := validityInto(src, refs, func(n int) []byte {
		buf = pool.BufferUnzeroed(n)
		return buf.Bytes()
	})
	return buf, n
}

// asSlice views b as a slice of T (len(b) a multiple of T's size).
func asSlice[T any](b []byte) []T {
	var zero T
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/int(unsafe.Sizeof(zero)))
}

// gatherFixedInto gathers refs' values into dst (len(refs) values' bytes)
// and returns it; a row following the one before in its record is copied
// with it (a merge's output takes runs of rows from each input). A null's
// slot holds whatever its source's did.
func gatherFixedInto[T any, A arrow.Array](dst []byte, src []A, values func(A) []T, refs []rowRef) []byte {
	vals := make([][]T, len(src))
	for k, a := range src {
		vals[k] = values(a)
	}
	out := asSlice[T](dst)
	for i := 0; i < len(refs); {
		r := refs[i]
		k := i + 1
		for k < len(refs) && refs[k].rec == r.rec && refs[k].row == refs[k-1].row+1 {
			k++
		}
		if k-i == 1 {
			out[i] = vals[r.rec][r.row]
		} else {
			copy(out[i:k], vals[r.rec][r.row:int(r.row)+k-i])
		}
		i = k
	}
	return dst
}

// gatherFixed gathers a column of fixed-width values into buffers of pool.
func gatherFixed[T any, A arrow.Array](pool *arrowpool.Pool, t arrow.DataType, src []A, values func(A) []T, refs []rowRef) arrow.Array {
	valid, nulls := validity(pool, src, refs)
	var zero T
	buf := pool.BufferUnzeroed(len(refs) * int(unsafe.Sizeof(zero)))
	gatherFixedInto(buf.Bytes(), src, values, refs)
	return finishArray(t, len(refs), nulls, valid, buf)
}

// strSource is a string array's offsets (absolute) and its whole values
// buffer.
type strSource struct {
	offs []int32
	data []byte
}

func stringSources(src []*array.String) []strSource {
	ss := make([]strSource, len(src))
	for k, a := range src {
		ss[k].offs = a.ValueOffsets()
		if b := a.Data().Buffers()[2]; b != nil {
			ss[k].data = b.Bytes()
		}
	}
	return ss
}

// stringsGuess is about the bytes of n strings of the sources: their
// average length, and a quarter more.
func stringsGuess(ss []strSource, n int) int {
	bytes, rows := 0, 0
	for _, s := range ss {
		if len(s.offs) > 1 {
			bytes += int(s.offs[len(s.offs)-1] - s.offs[0])
			rows += len(s.offs) - 1
		}
	}
	if rows == 0 {
		return 64
	}
	return bytes/rows*n + bytes/rows*n/4 + 64
}

// gatherStringsInto gathers refs' strings: their offsets into offs
// (len(refs)+1) and their bytes into data (up to its capacity), which
// more replaces when they do not fit (more(n, data) returns at least n
// bytes beginning with data's: arrowpool.Pool.ReallocateUnzeroed); it returns data up to the last string's end. One pass over the
// sources (a pass to size the bytes first cost as much as the copy: the
// rows are spread over the inputs). A run of consecutive rows of a record
// is copied at once; a short string in word moves.
func gatherStringsInto(offs []int32, data []byte, more func(int, []byte) []byte, ss []strSource, refs []rowRef) ([]byte, error) {
	data = data[:cap(data)]
	pos := 0 // an int: the sum may pass int32's range, checked before it is an offset
	for i := 0; i < len(refs); {
		r := refs[i]
		s := &ss[r.rec]
		k := i + 1
		for k < len(refs) && refs[k].rec == r.rec && refs[k].row == refs[k-1].row+1 {
			k++
		}
		var n int
		if k-i == 1 {
			offs[i] = int32(pos)
			from, to := int(s.offs[r.row]), int(s.offs[r.row+1])
			n = to - from
			if err := stringsFit(pos, n); err != nil {
				return nil, err
			}
			switch {
			case n <= 16 && pos+16 <= len(data) && from+16 <= len(s.data):
				// a short string in two word moves: the bytes past it
				// are overwritten by the strings after it
				*(*[16]byte)(data[pos:]) = *(*[16]byte)(s.data[from:])
			case n <= 32 && pos+32 <= len(data) && from+32 <= len(s.data):
				*(*[32]byte)(data[pos:]) = *(*[32]byte)(s.data[from:])
			default:
				if pos+n > len(data) {
					data = more(pos+n+len(data)/2, data)
					data = data[:cap(data)]
				}
				copy(data[pos:], s.data[from:to])
			}
		} else {
			o := s.offs[r.row : int(r.row)+k-i+1]
			base := o[0]
			n = int(o[k-i] - base)
			if err := stringsFit(pos, n); err != nil {
				return nil, err
			}
			for x := range k - i {
				offs[i+x] = int32(pos) + o[x] - base
			}
			if pos+n > len(data) {
				data = more(pos+n+len(data)/2, data)
				data = data[:cap(data)]
			}
			copy(data[pos:], s.data[base:o[k-i]])
		}
		pos += n
		i = k
	}
	offs[len(refs)] = int32(pos)
	return data[:pos], nil
}

// stringsFit reports n more bytes of strings after pos past a string
// column's int32 offsets.
func stringsFit(pos, n int) error {
	if pos+n > math.MaxInt32 {
		return fmt.Errorf("gather strings: %d bytes and %d more pass a string column's 2 GiB", pos, n)
	}
	return nil
}

// gatherStrings gathers a string column into buffers of pool.
func gatherStrings(pool *arrowpool.Pool, t arrow.DataType, src []*array.String, refs []rowRef) (arrow.Array, error) {
	valid, nulls := validity(pool, src, refs)
	ss := stringSources(src)
	offBuf := pool.BufferUnzeroed((len(refs) + 1) * 4)
	data, err := gatherStringsInto(asSlice[int32](offBuf.Bytes()), pool.AllocateUnzeroed(stringsGuess(ss, len(refs))), pool.ReallocateUnzeroed, ss, refs)
	if err != nil {
		offBuf.Release()
		if valid != nil {
			valid.Release()
		}
		return nil, err
	}
	return finishArray(t, len(refs), nulls, valid, offBuf, memory.NewBufferWithAllocator(data, pool)), nil
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
