package compact

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/s2"
)

// A spilled run is a file of batches, each its rows' count and then each
// column's Arrow array, written as it is laid out in memory:
//
//	batch  = uvarint rows, node per column of the run's schema
//	node   = uvarint length, varint nulls (-1: not counted), uvarint
//	         offset, buffers; buffer*; uvarint
//	         children; node per child (a list's values)
//	buffer = uvarint 0 (none) | 1 (raw), len, bytes | 2 (S2), len,
//	         stored len, S2 block
//
// The schema is the Run's, not in the file. Unlike Arrow IPC, nothing is
// allocated per batch to write one: the merges gather each column into
// the writer's scratch buffers and compress from there (gatherInto), and
// the reader decompresses into its pool's buffers, which the batch's
// arrays give back when released.
const (
	bufNone = iota
	bufRaw
	bufS2
)

// runWriter writes one sorted run.
type runWriter struct {
	f    *os.File
	bw   *bufio.Writer
	pool *bufPool
	u    *arrow.Schema
	tmp  [binary.MaxVarintLen64]byte
	zbuf []byte    // S2 output
	cols [3][]byte // a column's gathered buffers (validity, values or offsets, string bytes)
}

func newRunWriter(pool *bufPool, u *arrow.Schema, dir string) (*runWriter, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("spill: %w", err)
	}
	f, err := os.CreateTemp(dir, "run-*.spill")
	if err != nil {
		return nil, fmt.Errorf("spill: %w", err)
	}
	return &runWriter{f: f, bw: bufio.NewWriterSize(f, 1<<20), pool: pool, u: u}, nil
}

// write writes rec (schema u) as a batch and releases it.
func (w *runWriter) write(rec arrow.Record) error {
	defer rec.Release()
	w.uvarint(uint64(rec.NumRows()))
	for _, c := range rec.Columns() {
		w.array(c.Data())
	}
	return w.flushErr()
}

// writeRows writes refs' rows of recs (schema u) as a batch, each column
// gathered into the writer's scratch buffers.
func (w *runWriter) writeRows(recs []arrow.Record, refs []rowRef) error {
	w.uvarint(uint64(len(refs)))
	for j, f := range w.u.Fields() {
		if !w.gatherInto(f.Type, recs, j, refs) {
			arr := gatherColumn(w.pool, f.Type, recs, j, refs)
			w.array(arr.Data())
			arr.Release()
		}
	}
	return w.flushErr()
}

// gatherInto gathers column j of refs' rows into the scratch buffers and
// writes it; false for a type it leaves to gatherColumn.
func (w *runWriter) gatherInto(t arrow.DataType, recs []arrow.Record, j int, refs []rowRef) bool {
	n := len(refs)
	var valid []byte
	nulls := 0
	switch t.ID() {
	case arrow.STRING:
		src := columns[*array.String](recs, j)
		valid, nulls = validityInto(src, refs, w.alloc)
		ss := stringSources(src)
		offs := grow(&w.cols[1], (n+1)*4)
		data := gatherStringsInto(asSlice[int32](offs), w.cols[2], w.more, ss, refs)
		w.node(n, nulls, valid, offs, data)
	case arrow.FLOAT64:
		src := columns[*array.Float64](recs, j)
		valid, nulls = validityInto(src, refs, w.alloc)
		w.node(n, nulls, valid, gatherFixedInto(grow(&w.cols[1], n*8), src, (*array.Float64).Float64Values, refs))
	case arrow.INT64:
		src := columns[*array.Int64](recs, j)
		valid, nulls = validityInto(src, refs, w.alloc)
		w.node(n, nulls, valid, gatherFixedInto(grow(&w.cols[1], n*8), src, (*array.Int64).Int64Values, refs))
	case arrow.TIMESTAMP:
		src := columns[*array.Timestamp](recs, j)
		valid, nulls = validityInto(src, refs, w.alloc)
		w.node(n, nulls, valid, gatherFixedInto(grow(&w.cols[1], n*8), src, (*array.Timestamp).TimestampValues, refs))
	default:
		return false
	}
	return true
}

// alloc is the scratch of a column's validity bitmap.
func (w *runWriter) alloc(n int) []byte { return grow(&w.cols[0], n) }

// node writes a flat array's node: length, nulls, offset 0, its buffers
// after the validity bitmap, no children.
func (w *runWriter) node(n, nulls int, valid []byte, bufs ...[]byte) {
	w.uvarint(uint64(n))
	w.varint(int64(nulls))
	w.uvarint(0)
	w.uvarint(uint64(1 + len(bufs)))
	if valid == nil {
		w.uvarint(bufNone)
	} else {
		w.buffer(valid)
	}
	for _, b := range bufs {
		w.buffer(b)
	}
	w.uvarint(0)
}

// array writes an array's node, its children's after it.
func (w *runWriter) array(d arrow.ArrayData) {
	w.uvarint(uint64(d.Len()))
	w.varint(int64(d.NullN())) // -1 when not counted (a slice)
	w.uvarint(uint64(d.Offset()))
	bufs := d.Buffers()
	w.uvarint(uint64(len(bufs)))
	for _, b := range bufs {
		if b == nil {
			w.uvarint(bufNone)
			continue
		}
		w.buffer(b.Bytes())
	}
	kids := d.Children()
	w.uvarint(uint64(len(kids)))
	for _, k := range kids {
		w.array(k)
	}
}

// buffer writes b, S2-compressed when that is smaller.
func (w *runWriter) buffer(b []byte) {
	if len(b) >= 64 {
		if need := s2.MaxEncodedLen(len(b)); cap(w.zbuf) < need {
			w.zbuf = make([]byte, need)
		}
		z := s2.Encode(w.zbuf[:cap(w.zbuf)], b)
		if len(z) < len(b) {
			w.uvarint(bufS2)
			w.uvarint(uint64(len(b)))
			w.uvarint(uint64(len(z)))
			w.bw.Write(z)
			return
		}
	}
	w.uvarint(bufRaw)
	w.uvarint(uint64(len(b)))
	w.bw.Write(b)
}

func (w *runWriter) varint(v int64) {
	n := binary.PutVarint(w.tmp[:], v)
	w.bw.Write(w.tmp[:n])
}

func (w *runWriter) uvarint(v uint64) {
	n := binary.PutUvarint(w.tmp[:], v)
	w.bw.Write(w.tmp[:n])
}

// flushErr is the first write error so far (bufio keeps it).
func (w *runWriter) flushErr() error {
	if _, err := w.bw.Write(nil); err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	return nil
}

func (w *runWriter) finish() (string, error) {
	err := w.bw.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(w.f.Name())
		return "", fmt.Errorf("spill: %w", err)
	}
	return w.f.Name(), nil
}

func (w *runWriter) abort() {
	w.f.Close()
	os.Remove(w.f.Name())
}

// more is the strings' scratch of n bytes or more, data's bytes first.
func (w *runWriter) more(n int, data []byte) []byte {
	w.cols[2] = append(data, make([]byte, n-len(data))...)
	return w.cols[2]
}

// grow returns (*b)[:n], reallocating *b when it is too small.
func grow(b *[]byte, n int) []byte {
	if cap(*b) < n {
		*b = make([]byte, n+n/4)
	}
	return (*b)[:n]
}

// runCursor reads a spilled run of schema u; it deletes the file when
// closed. A batch's buffers come from the pool and go back to it when the
// batch is released (the cursor's reference at the next batch; a merge's
// gatherer may hold one longer).
type runCursor struct {
	f    *os.File
	br   *bufio.Reader
	pool *bufPool
	u    *arrow.Schema
	cur  arrow.Record
	zbuf []byte // a compressed buffer
}

func openRun(pool *bufPool, u *arrow.Schema, path string) (*runCursor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open run: %w", err)
	}
	return &runCursor{f: f, br: bufio.NewReaderSize(f, 256<<10), pool: pool, u: u}, nil
}

func (c *runCursor) next() (arrow.Record, error) {
	if c.cur != nil {
		c.cur.Release()
		c.cur = nil
	}
	rows, err := binary.ReadUvarint(c.br)
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read run: %w", err)
	}
	cols := make([]arrow.Array, c.u.NumFields())
	defer func() {
		for _, a := range cols {
			if a != nil {
				a.Release()
			}
		}
	}()
	for j, f := range c.u.Fields() {
		d, err := c.node(f.Type)
		if err != nil {
			return nil, fmt.Errorf("read run: column %s: %w", f.Name, err)
		}
		cols[j] = array.MakeFromData(d)
		d.Release()
		if cols[j].Len() != int(rows) {
			return nil, fmt.Errorf("read run: column %s has %d rows, the batch %d", f.Name, cols[j].Len(), rows)
		}
	}
	c.cur = array.NewRecord(c.u, cols, int64(rows))
	return c.cur, nil
}

// node reads an array's node of type t.
func (c *runCursor) node(t arrow.DataType) (arrow.ArrayData, error) {
	var hdr [4]uint64 // length, nulls, offset, buffers
	for i := range hdr {
		var v uint64
		var err error
		if i == 1 {
			var n int64
			n, err = binary.ReadVarint(c.br)
			v = uint64(n)
		} else {
			v, err = binary.ReadUvarint(c.br)
		}
		if err != nil {
			return nil, noEOF(err)
		}
		hdr[i] = v
	}
	if hdr[3] > 8 {
		return nil, fmt.Errorf("%d buffers", hdr[3])
	}
	bufs := make([]*memory.Buffer, hdr[3])
	release := func() {
		for _, b := range bufs {
			if b != nil {
				b.Release()
			}
		}
	}
	for i := range bufs {
		b, err := c.buffer()
		if err != nil {
			release()
			return nil, err
		}
		bufs[i] = b
	}
	nk, err := binary.ReadUvarint(c.br)
	if err != nil {
		release()
		return nil, noEOF(err)
	}
	var kids []arrow.ArrayData
	var fields []arrow.Field
	if nt, ok := t.(arrow.NestedType); ok {
		fields = nt.Fields()
	}
	if int(nk) != len(fields) {
		release()
		return nil, fmt.Errorf("%d children for type %s", nk, t)
	}
	for _, f := range fields {
		k, err := c.node(f.Type)
		if err != nil {
			release()
			for _, k := range kids {
				k.Release()
			}
			return nil, err
		}
		kids = append(kids, k)
	}
	d := array.NewData(t, int(hdr[0]), bufs, kids, int(int64(hdr[1])), int(hdr[2]))
	release()
	for _, k := range kids {
		k.Release()
	}
	return d, nil
}

// buffer reads a buffer into one of the pool's (nil: none).
func (c *runCursor) buffer() (*memory.Buffer, error) {
	kind, err := binary.ReadUvarint(c.br)
	if err != nil {
		return nil, noEOF(err)
	}
	if kind == bufNone {
		return nil, nil
	}
	n, err := binary.ReadUvarint(c.br)
	if err != nil {
		return nil, noEOF(err)
	}
	if n > 1<<31 {
		return nil, fmt.Errorf("a buffer of %d bytes", n)
	}
	switch kind {
	case bufRaw:
		b := c.pool.buffer(int(n))
		if _, err := io.ReadFull(c.br, b.Bytes()); err != nil {
			b.Release()
			return nil, noEOF(err)
		}
		return b, nil
	case bufS2:
		z, err := binary.ReadUvarint(c.br)
		if err != nil {
			return nil, noEOF(err)
		}
		if z > n+n/2+64 {
			return nil, fmt.Errorf("a compressed buffer of %d bytes for %d", z, n)
		}
		zb := grow(&c.zbuf, int(z))
		if _, err := io.ReadFull(c.br, zb); err != nil {
			return nil, noEOF(err)
		}
		if dn, err := s2.DecodedLen(zb); err != nil || dn != int(n) {
			return nil, fmt.Errorf("a compressed buffer of %d bytes, not %d (%v)", dn, n, err)
		}
		b := c.pool.buffer(int(n))
		if _, err := s2.Decode(b.Bytes(), zb); err != nil {
			b.Release()
			return nil, err
		}
		return b, nil
	}
	return nil, fmt.Errorf("buffer kind %d", kind)
}

// noEOF makes an end of file inside a batch an error of its own.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (c *runCursor) close() error {
	if c.cur != nil {
		c.cur.Release()
		c.cur = nil
	}
	err := c.f.Close()
	os.Remove(c.f.Name())
	return err
}
