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
	// mem allocates the columns' memory; the record's buffers free it
	// when its last holder releases them (goMem: Go's make, the GC frees).
	mem memory.Allocator
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
	// raw is the memory from mem that f64, i64, bits or offs view (as
	// allocated: the buffer frees it whole); draw is data's (data's cap
	// is draw's length).
	raw, draw []byte
}

func newBatch(t *schema.Table, rows int) *batch {
	b := &batch{t: t, cap: rows, next: min(rows, initialBatchAlloc), cols: make([]batchCol, len(t.Columns)), limit: math.MaxInt32 / 2, mem: goMem{}}
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
		c.raw, c.draw = nil, nil
	}
	b.alloc, b.rows, b.full = 0, 0, false
}

// free gives the columns' memory back to mem and resets the batch (rows
// not made into a record).
func (b *batch) free() {
	for i := range b.cols {
		c := &b.cols[i]
		if c.raw != nil {
			b.mem.Free(c.raw)
		}
		if c.draw != nil {
			b.mem.Free(c.draw)
		}
	}
	b.reset()
}

// useMem makes mem (nil: Go's make) allocate the next batches' columns.
func (b *batch) useMem(mem memory.Allocator) {
	if mem == nil {
		mem = goMem{}
	}
	if mem != b.mem {
		b.free()
		b.mem = mem
	}
}

// allocVals gives c memory from mem for n rows of its type (zeroed);
// String: its offsets (not data).
func (b *batch) allocVals(c *batchCol, n int) {
	switch c.typ {
	case schema.Float64:
		c.raw = b.mem.Allocate(8 * n)
		c.f64 = unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(c.raw))), n)
	case schema.Int64, schema.TimestampMs:
		c.raw = b.mem.Allocate(8 * n)
		c.i64 = unsafe.Slice((*int64)(unsafe.Pointer(unsafe.SliceData(c.raw))), n)
	case schema.Bool:
		c.raw = b.mem.Allocate((n + 7) / 8)
		c.bits = c.raw
	case schema.String:
		c.raw = b.mem.Allocate(4 * (n + 1))
		c.offs = unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(c.raw))), n+1)
	}
}

// growData gives c.data room for n bytes (more than its cap), keeping
// its bytes.
func (b *batch) growData(c *batchCol, n int) {
	nd := b.mem.Allocate(n)
	copy(nd, c.data)
	if c.draw != nil {
		b.mem.Free(c.draw)
	}
	c.draw = nd
	c.data = nd[:len(c.data):len(nd)]
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
		b.allocVals(c, n)
		if c.typ == schema.String {
			c.draw = b.mem.Allocate(max(c.hint+c.hint/8, 64))
			c.data = c.draw[:0:len(c.draw)]
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
	n := len(col.data)
	if n+len(v) > cap(col.data) {
		b.growData(col, max(2*cap(col.data), n+len(v)))
	}
	// Resliced in place: no pointer store, so no GC write barrier for
	// each value (appending stores the slice whole).
	col.data = col.data[:n+len(v)]
	copy(col.data[n:], v)
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

// truncate drops the committed rows from row m on (m <= b.rows), leaving
// the columns as if they had never been written: row m is written next.
// full is recomputed from the rows and bytes left.
func (b *batch) truncate(m int) {
	for i := range b.cols {
		c := &b.cols[i]
		k := len(c.nulls)
		for k > 0 && int(c.nulls[k-1]) >= m {
			k--
		}
		c.nulls = c.nulls[:k]
		switch c.typ {
		case schema.Float64:
			clear(c.f64[m:b.rows])
		case schema.Int64, schema.TimestampMs:
			clear(c.i64[m:b.rows])
		case schema.Bool:
			for r := m; r < b.rows; r++ {
				c.bits[r>>3] &^= 1 << (r & 7)
			}
		case schema.String:
			if c.offs != nil {
				c.data = c.data[:c.offs[m]]
				clear(c.offs[m+1 : b.rows+1])
			}
		}
	}
	b.rows = m
	b.full = false
	for i := range b.cols {
		if c := &b.cols[i]; c.typ == schema.String && len(c.data) >= b.limit {
			b.full = true
		}
	}
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
		old := *c
		b.allocVals(c, n)
		switch c.typ {
		case schema.Float64:
			copy(c.f64, old.f64)
		case schema.Int64, schema.TimestampMs:
			copy(c.i64, old.i64)
		case schema.Bool:
			copy(c.bits, old.bits)
		case schema.String:
			copy(c.offs, old.offs)
			// The bytes so far, per row, times n: append's doubling
			// would copy the column's bytes again and again.
			if want := len(c.data) * n / max(b.rows, 1); cap(c.data) < want {
				b.growData(c, want)
			}
		}
		if old.raw != nil {
			b.mem.Free(old.raw)
		}
	}
	b.alloc = n
}

// record returns the rows so far as a record (nil when there are none) and
// starts a new batch. The meta columns get snap, runID and source.
func (b *batch) record(snap arrow.Timestamp, runID, source string) arrow.Record {
	n := b.rows
	if n == 0 {
		b.free() // memory of a row begun and not committed
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
				b.growData(c, need)
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
		case schema.Float64, schema.Int64, schema.TimestampMs:
			bufs = []*memory.Buffer{valid, b.buffer(c.raw, 8*n)}
		case schema.Bool:
			bufs = []*memory.Buffer{valid, b.buffer(c.raw, (n+7)/8)}
		case schema.String:
			bufs = []*memory.Buffer{valid, b.buffer(c.raw, 4*(n+1)), b.buffer(c.draw, len(c.data))}
			c.hint = len(c.data)
		}
		data := array.NewData(sc.Field(i).Type, n, bufs, nil, len(c.nulls), 0)
		for _, buf := range bufs[1:] {
			buf.Release() // data holds them
		}
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

// buffer is the record's buffer of a column's memory raw (from mem, which
// it frees when released), used bytes long.
func (b *batch) buffer(raw []byte, used int) *memory.Buffer {
	buf := memory.NewBufferWithAllocator(raw, b.mem)
	buf.ResizeNoShrink(used) // no allocation: used <= len(raw)
	return buf
}

// discard drops the rows so far (and the memory allocated for them).
func (b *batch) discard() {
	b.free()
}

// goMem is Go's make as a memory.Allocator: the GC frees the memory (the
// decoder's default, a live run's).
type goMem struct{}

func (goMem) Allocate(n int) []byte { return make([]byte, n) }
func (goMem) Reallocate(n int, b []byte) []byte {
	if n <= len(b) {
		return b[:n]
	}
	nb := make([]byte, n)
	copy(nb, b)
	return nb
}
func (goMem) Free([]byte) {}

func fillValid(bm []byte, n int) {
	for i := 0; i < n/8; i++ {
		bm[i] = 0xff
	}
	if n%8 != 0 {
		bm[n/8] = 1<<(n%8) - 1
	}
}
