package transform

import (
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/schema"
)

// batch accumulates rows of schema.Instruments column by column in plain Go
// slices sized for a whole batch, and turns them into an Arrow record
// without copying (record). Compared with Arrow's builders it has no
// per-value capacity checks, no calls through function values, and a null
// costs nothing for fixed-width columns: slices start zeroed and a value
// is written at its row index.
//
// Every column is written for row b.rows before b.rows is incremented
// (commit). The meta columns (snapshot_time, run_id, source) are constant
// per batch and are filled in at record time.
type batch struct {
	t     *schema.Table
	cap   int // rows per batch (at most)
	alloc int // rows the column slices hold now; grows by doubling up to cap
	next  int // rows to allocate for the next batch: the last batch's size
	rows  int
	cols  []batchCol
	limit int // flush when a string column holds this many bytes (offsets are int32)
	full  bool
}

// batchCol is one column; which slice is used depends on typ. Validity is
// kept as the list of null rows (values are nearly always present), and the
// bitmap is made at record time, only for a column that has nulls.
type batchCol struct {
	typ   schema.Type
	nulls []int32 // rows that are null, ascending
	f64   []float64
	i64   []int64 // Int64 and TimestampMs
	bits  []byte  // Bool values
	offs  []int32 // String: offs[i+1] is the end of row i in data
	data  []byte
	hint  int // data bytes of the last batch, to size the next one
}

func newBatch(t *schema.Table, rows int) *batch {
	b := &batch{t: t, cap: rows, next: min(rows, initialBatchAlloc), cols: make([]batchCol, len(t.Columns)), limit: math.MaxInt32 / 2}
	for i, c := range t.Columns {
		b.cols[i].typ = c.Type
	}
	b.reset()
	return b
}

// initialBatchAlloc is the rows a decoder's first batch allocates: a small
// snapshot (a few thousand instruments) then costs what it holds, not a
// whole cleared batch of BatchRows rows.
const initialBatchAlloc = 1024

// reset starts the next batch empty, holding no column memory: the
// previous batch's memory belongs to the record handed to the sinks, and
// the next batch's is allocated by its first row (begin), so that the
// batch after a listing's last one, which most decoders never fill, costs
// nothing.
func (b *batch) reset() {
	for i := range b.cols {
		c := &b.cols[i]
		c.nulls = c.nulls[:0]
		c.f64, c.i64, c.bits, c.offs, c.data = nil, nil, nil, nil, nil
	}
	b.alloc, b.rows, b.full = 0, 0, false
}

// begin makes the batch ready for row b.rows: the first row of a batch
// allocates fresh (zeroed) column memory for as many rows as the last
// batch had (b.next) and a little more, for a decoder reused on listings
// of about the same size; a row past that grows the slices. Growing when
// a row comes, not when one ends, spares a listing that ends at the
// allocation a doubled copy.
func (b *batch) begin() {
	if b.rows < b.alloc {
		return
	}
	if b.alloc > 0 {
		b.grow(min(2*b.alloc, b.cap))
		return
	}
	n := max(min(b.next+b.next/16, b.cap), 1)
	b.alloc = n
	for i := range b.cols {
		c := &b.cols[i]
		switch c.typ {
		case schema.Float64:
			c.f64 = make([]float64, n)
		case schema.Int64, schema.TimestampMs:
			c.i64 = make([]int64, n)
		case schema.Bool:
			c.bits = make([]byte, (n+7)/8)
		case schema.String:
			c.offs = make([]int32, n+1)
			c.data = make([]byte, 0, max(c.hint+c.hint/8, 64))
		}
	}
}

// The appenders write row b.rows of column c.

func (b *batch) null(c int) {
	col := &b.cols[c]
	col.nulls = append(col.nulls, int32(b.rows))
	if col.typ == schema.String {
		col.offs[b.rows+1] = int32(len(col.data))
	}
}

func (b *batch) f64(c int, v float64) { b.cols[c].f64[b.rows] = v }

func (b *batch) i64(c int, v int64) { b.cols[c].i64[b.rows] = v }

func (b *batch) bool(c int, v bool) {
	if v {
		b.cols[c].bits[b.rows>>3] |= 1 << (b.rows & 7)
	}
}

func (b *batch) str(c int, v []byte) {
	col := &b.cols[c]
	if n := len(col.data); n+len(v) <= cap(col.data) {
		// Resliced in place: no pointer store, so no GC write barrier
		// for each value (appending stores the slice whole).
		col.data = col.data[:n+len(v)]
		copy(col.data[n:], v)
	} else {
		col.data = append(col.data, v...)
	}
	col.offs[b.rows+1] = int32(len(col.data))
	if len(col.data) >= b.limit {
		b.full = true
	}
}

// undoRow clears what was written of row b.rows (not committed, and with no
// nulls listed yet) so that it can be written again, and sets full back.
func (b *batch) undoRow(full bool) {
	r := b.rows
	for i := range b.cols {
		c := &b.cols[i]
		switch c.typ {
		case schema.Float64:
			c.f64[r] = 0
		case schema.Int64, schema.TimestampMs:
			c.i64[r] = 0
		case schema.Bool:
			c.bits[r>>3] &^= 1 << (r & 7)
		case schema.String:
			if c.offs != nil {
				c.data = c.data[:c.offs[r]]
			}
		}
	}
	b.full = full
}

// commit ends the row.
func (b *batch) commit() {
	b.rows++
	if b.rows >= b.cap {
		b.full = true
	}
}

// grow makes every column hold n rows, keeping the rows written so far.
// The new slices are fresh and zeroed past the copied rows, as begin's are.
func (b *batch) grow(n int) {
	for i := range b.cols {
		c := &b.cols[i]
		switch c.typ {
		case schema.Float64:
			s := make([]float64, n)
			copy(s, c.f64)
			c.f64 = s
		case schema.Int64, schema.TimestampMs:
			s := make([]int64, n)
			copy(s, c.i64)
			c.i64 = s
		case schema.Bool:
			s := make([]byte, (n+7)/8)
			copy(s, c.bits)
			c.bits = s
		case schema.String:
			s := make([]int32, n+1)
			copy(s, c.offs)
			c.offs = s
			// The bytes so far, per row, times n: append's doubling
			// would copy the column's bytes again and again.
			if want := len(c.data) * n / max(b.rows, 1); cap(c.data) < want {
				d := make([]byte, len(c.data), want)
				copy(d, c.data)
				c.data = d
			}
		}
	}
	b.alloc = n
}

// record returns the rows so far as a record (nil when there are none) and
// starts a new batch. The meta columns get snap, runID and source.
func (b *batch) record(snap arrow.Timestamp, runID, source string) arrow.Record {
	n := b.rows
	if n == 0 {
		b.full = false
		return nil
	}
	sc := b.t.ArrowSchema()
	arrs := make([]arrow.Array, len(b.cols))
	for i := range b.cols {
		c := &b.cols[i]
		switch i {
		case 0:
			for r := 0; r < n; r++ {
				c.i64[r] = int64(snap)
			}
		case 1, 2:
			v := runID
			if i == 2 {
				v = source
			}
			if need := n * len(v); cap(c.data) < need {
				c.data = make([]byte, 0, need)
			}
			d := c.data[:0] // a local: no write barrier per row
			for r := 0; r < n; r++ {
				d = append(d, v...)
				c.offs[r+1] = int32(len(d))
			}
			c.data = d
		}
		var valid *memory.Buffer
		if len(c.nulls) > 0 {
			bm := make([]byte, (n+7)/8)
			fillValid(bm, n)
			for _, r := range c.nulls {
				bm[r>>3] &^= 1 << (r & 7)
			}
			valid = memory.NewBufferBytes(bm)
		}
		var bufs []*memory.Buffer
		switch c.typ {
		case schema.Float64:
			bufs = []*memory.Buffer{valid, memory.NewBufferBytes(f64Bytes(c.f64[:n]))}
		case schema.Int64, schema.TimestampMs:
			bufs = []*memory.Buffer{valid, memory.NewBufferBytes(i64Bytes(c.i64[:n]))}
		case schema.Bool:
			bufs = []*memory.Buffer{valid, memory.NewBufferBytes(c.bits[:(n+7)/8])}
		case schema.String:
			bufs = []*memory.Buffer{valid, memory.NewBufferBytes(i32Bytes(c.offs[:n+1])), memory.NewBufferBytes(c.data)}
			c.hint = len(c.data)
		}
		data := array.NewData(sc.Field(i).Type, n, bufs, nil, len(c.nulls), 0)
		arrs[i] = array.MakeFromData(data)
		data.Release()
	}
	rec := array.NewRecord(sc, arrs, int64(n))
	for _, a := range arrs {
		a.Release()
	}
	b.next = n
	b.reset()
	return rec
}

// discard drops the rows so far.
func (b *batch) discard() {
	if b.rows > 0 {
		b.reset()
	}
}

func fillValid(bm []byte, n int) {
	for i := 0; i < n/8; i++ {
		bm[i] = 0xff
	}
	if n%8 != 0 {
		bm[n/8] = 1<<(n%8) - 1
	}
}

func f64Bytes(v []float64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*8)
}

func i64Bytes(v []int64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*8)
}

func i32Bytes(v []int32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*4)
}
