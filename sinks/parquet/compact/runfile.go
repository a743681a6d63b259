package compact

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/klauspost/compress/s2"

	"github.com/optlake/optlake/internal/arrowpool"
)

// A spilled run is a file of batches, each its rows' count and then each
// column's Arrow array, written as it is laid out in memory:
//
//	batch  = uvarint rows, node per column of the run's schema, CRC-32C
//	         (Castagnoli, little-endian) of the batch's bytes before it
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
//
// The reader trusts nothing in the file: each node is checked against its
// type (buffers, offsets, lengths) before arrow-go sees it, and a batch
// whose checksum differs is an error, not wrong rows.
const (
	bufNone = iota
	bufRaw
	bufS2
)

// runWriter writes one sorted run.
type runWriter struct {
	f    *os.File
	bw   *bufio.Writer
	pool *arrowpool.Pool
	u    *arrow.Schema
	tmp  [binary.MaxVarintLen64]byte
	crc  uint32    // of the batch's bytes so far
	zbuf []byte    // S2 output
	cols [3][]byte // a column's gathered buffers (validity, values or offsets, string bytes)
	// noS2 writes the buffers raw, S2 not tried (a pack's column that
	// does not compress); s2In and s2Out count the bytes S2 was tried on
	// and what it made of them.
	noS2        bool
	s2In, s2Out int
}

func newRunWriter(pool *arrowpool.Pool, u *arrow.Schema, dir string) (*runWriter, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("spill: %w", err)
	}
	f, err := os.CreateTemp(dir, "run-*.spill")
	if err != nil {
		return nil, fmt.Errorf("spill: %w", err)
	}
	return &runWriter{f: f, bw: bufio.NewWriterSize(f, 1<<20), pool: pool, u: u}, nil
}

// writeRows writes refs' rows of recs (schema u) as a batch, each column
// gathered into the writer's scratch buffers.
func (w *runWriter) writeRows(recs []arrow.Record, refs []rowRef) error {
	w.uvarint(uint64(len(refs)))
	for j, f := range w.u.Fields() {
		done, err := w.gatherInto(f.Type, recs, j, refs)
		if err == nil && !done {
			var arr arrow.Array
			if arr, err = gatherColumn(w.pool, f.Type, recs, j, refs); err == nil {
				w.array(arr.Data())
				arr.Release()
			}
		}
		if err != nil {
			return fmt.Errorf("spill: column %s: %w", f.Name, err)
		}
	}
	binary.LittleEndian.PutUint32(w.tmp[:4], w.crc)
	w.bw.Write(w.tmp[:4])
	w.crc = 0
	return w.flushErr()
}

// gatherInto gathers column j of refs' rows into the scratch buffers and
// writes it; false for a type it leaves to gatherColumn.
func (w *runWriter) gatherInto(t arrow.DataType, recs []arrow.Record, j int, refs []rowRef) (bool, error) {
	n := len(refs)
	var valid []byte
	nulls := 0
	switch t.ID() {
	case arrow.STRING:
		src := columns[*array.String](recs, j)
		valid, nulls = validityInto(src, refs, w.alloc)
		ss := stringSources(src)
		offs := grow(&w.cols[1], (n+1)*4)
		data, err := gatherStringsInto(asSlice[int32](offs), w.cols[2], w.more, ss, refs)
		if err != nil {
			return false, err
		}
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
		return false, nil
	}
	return true, nil
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
	if len(b) >= 64 && !w.noS2 {
		if need := s2.MaxEncodedLen(len(b)); cap(w.zbuf) < need {
			w.zbuf = make([]byte, need)
		}
		z := s2.Encode(w.zbuf[:cap(w.zbuf)], b)
		w.s2In += len(b)
		w.s2Out += len(z)
		if len(z) < len(b) {
			w.uvarint(bufS2)
			w.uvarint(uint64(len(b)))
			w.uvarint(uint64(len(z)))
			w.put(z)
			return
		}
	}
	w.uvarint(bufRaw)
	w.uvarint(uint64(len(b)))
	w.put(b)
}

func (w *runWriter) varint(v int64) {
	n := binary.PutVarint(w.tmp[:], v)
	w.put(w.tmp[:n])
}

func (w *runWriter) uvarint(v uint64) {
	n := binary.PutUvarint(w.tmp[:], v)
	w.put(w.tmp[:n])
}

// put writes b, a part of the batch's checksummed bytes.
func (w *runWriter) put(b []byte) {
	w.crc = crc32.Update(w.crc, castagnoli, b)
	w.bw.Write(b)
}

// castagnoli is CRC-32C's table (SSE 4.2's and ARMv8's instruction).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

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
	f       *os.File
	in      runReader
	pool    *arrowpool.Pool
	u       *arrow.Schema
	cur     arrow.Record
	batch   int
	zbuf    []byte // a compressed buffer
	skipCRC bool   // tests: damaged batches reach the nodes' checks
}

// runReader reads a run's bytes, summing them (CRC-32C) and counting the
// bytes left in the file: no length read can allocate more than that.
type runReader struct {
	br   *bufio.Reader
	crc  uint32
	left int64
	one  [1]byte
}

func (r *runReader) ReadByte() (byte, error) {
	b, err := r.br.ReadByte()
	if err == nil {
		r.one[0] = b
		r.crc = crc32.Update(r.crc, castagnoli, r.one[:])
		r.left--
	}
	return b, err
}

func (r *runReader) readFull(p []byte) error {
	n, err := io.ReadFull(r.br, p)
	r.crc = crc32.Update(r.crc, castagnoli, p[:n])
	r.left -= int64(n)
	return noEOF(err)
}

func openRun(pool *arrowpool.Pool, u *arrow.Schema, path string) (*runCursor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open run: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open run: %w", err)
	}
	in := runReader{br: bufio.NewReaderSize(f, 256<<10), left: st.Size()}
	return &runCursor{f: f, in: in, pool: pool, u: u}, nil
}

// next returns the run's next batch (nil at its end), valid until the
// next call.
func (c *runCursor) next() (arrow.Record, error) {
	if c.cur != nil {
		c.cur.Release()
		c.cur = nil
	}
	rec, err := c.read()
	if err != nil {
		return nil, fmt.Errorf("read run %s: batch %d: %w", c.f.Name(), c.batch, err)
	}
	c.batch++
	c.cur = rec
	return rec, nil
}

func (c *runCursor) read() (arrow.Record, error) {
	c.in.crc = 0
	rows, err := binary.ReadUvarint(&c.in)
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if rows > math.MaxInt32 {
		return nil, fmt.Errorf("%d rows", rows)
	}
	datas := make([]arrow.ArrayData, c.u.NumFields())
	defer func() {
		for _, d := range datas {
			if d != nil {
				d.Release()
			}
		}
	}()
	for j, f := range c.u.Fields() {
		d, err := c.node(f.Type)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", f.Name, err)
		}
		datas[j] = d
		if d.Len() != int(rows) {
			return nil, fmt.Errorf("column %s has %d rows, the batch %d", f.Name, d.Len(), rows)
		}
	}
	sum := c.in.crc
	var tail [4]byte
	if err := c.in.readFull(tail[:]); err != nil {
		return nil, err
	}
	if got := binary.LittleEndian.Uint32(tail[:]); got != sum && !c.skipCRC {
		return nil, fmt.Errorf("checksum %08x, the bytes' %08x: the file is damaged", got, sum)
	}
	return buildRecord(c.u, datas, int64(rows))
}

// buildRecord makes a batch's record from its nodes. node checks every
// node against its type first, because arrow-go panics on buffers that do
// not fit; a case those checks miss becomes the batch's error here, not a
// crash of the merge's goroutine.
func buildRecord(u *arrow.Schema, datas []arrow.ArrayData, rows int64) (rec arrow.Record, err error) {
	cols := make([]arrow.Array, 0, len(datas))
	defer func() {
		for _, a := range cols {
			a.Release()
		}
		if r := recover(); r != nil {
			rec, err = nil, fmt.Errorf("arrays do not fit their buffers: %v", r)
		}
	}()
	for _, d := range datas {
		cols = append(cols, array.MakeFromData(d))
	}
	return array.NewRecord(u, cols, rows), nil
}

// node reads an array's node of type t and checks it against t.
func (c *runCursor) node(t arrow.DataType) (arrow.ArrayData, error) {
	var hdr [4]uint64 // length, nulls, offset, buffers
	for i := range hdr {
		var v uint64
		var err error
		if i == 1 {
			var n int64
			n, err = binary.ReadVarint(&c.in)
			v = uint64(n)
		} else {
			v, err = binary.ReadUvarint(&c.in)
		}
		if err != nil {
			return nil, noEOF(err)
		}
		hdr[i] = v
	}
	if hdr[0] > math.MaxInt32 || hdr[2] > math.MaxInt32-hdr[0] {
		return nil, fmt.Errorf("a node of length %d at offset %d", hdr[0], hdr[2])
	}
	if hdr[3] > 8 {
		return nil, fmt.Errorf("%d buffers", hdr[3])
	}
	bufs := make([]*memory.Buffer, hdr[3])
	var kids []arrow.ArrayData
	release := func() {
		for _, b := range bufs {
			if b != nil {
				b.Release()
			}
		}
		for _, k := range kids {
			k.Release()
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
	nk, err := binary.ReadUvarint(&c.in)
	if err != nil {
		release()
		return nil, noEOF(err)
	}
	var fields []arrow.Field
	if nt, ok := t.(arrow.NestedType); ok {
		fields = nt.Fields()
	}
	if nk != uint64(len(fields)) {
		release()
		return nil, fmt.Errorf("%d children for type %s", nk, t)
	}
	for _, f := range fields {
		k, err := c.node(f.Type)
		if err != nil {
			release()
			return nil, err
		}
		kids = append(kids, k)
	}
	n, nulls, off := int(hdr[0]), int(int64(hdr[1])), int(hdr[2])
	if err := checkNode(t, n, nulls, off, bufs, kids); err != nil {
		release()
		return nil, fmt.Errorf("type %s: %w", t, err)
	}
	d := array.NewData(t, n, bufs, kids, nulls, off)
	release()
	return d, nil
}

// checkNode checks that arrow-go can read an array of type t, length n
// from offset off (n+off < 2^31) of these buffers and children: it
// indexes them unchecked, or panics.
func checkNode(t arrow.DataType, n, nulls, off int, bufs []*memory.Buffer, kids []arrow.ArrayData) error {
	if nulls < -1 || nulls > n {
		return fmt.Errorf("%d nulls in %d rows", nulls, n)
	}
	want := 2
	switch t.ID() {
	case arrow.STRING, arrow.BINARY:
		want = 3
	}
	if len(bufs) != want {
		return fmt.Errorf("%d buffers, not %d", len(bufs), want)
	}
	size := func(i int) int {
		if bufs[i] == nil {
			return 0
		}
		return bufs[i].Len()
	}
	end := off + n
	if bufs[0] == nil {
		if nulls > 0 {
			return fmt.Errorf("%d nulls and no validity bitmap", nulls)
		}
	} else if need := int(bitutil.BytesForBits(int64(end))); size(0) < need {
		return fmt.Errorf("a validity bitmap of %d bytes for %d rows", size(0), end)
	}
	switch t.ID() {
	case arrow.STRING, arrow.BINARY, arrow.LIST:
		if n == 0 {
			return nil // arrow-go reads no offset of an empty array
		}
		limit := 0
		if t.ID() == arrow.LIST {
			limit = kids[0].Len()
		} else {
			limit = size(2)
		}
		return checkOffsets(bufs[1], off, n, limit)
	case arrow.BOOL:
		if need := int(bitutil.BytesForBits(int64(end))); size(1) < need {
			return fmt.Errorf("%d bytes of values for %d rows", size(1), end)
		}
		return nil
	}
	fw, ok := t.(arrow.FixedWidthDataType)
	if !ok || fw.BitWidth()%8 != 0 {
		return errors.New("not a type of a spilled run")
	}
	if n == 0 && bufs[1] == nil {
		return nil
	}
	// arrow-go slices the values [off, off+n) even of an empty array.
	if need := end * (fw.BitWidth() / 8); size(1) < need {
		return fmt.Errorf("%d bytes of values for %d rows", size(1), end)
	}
	return nil
}

// checkOffsets checks the int32 offsets of rows [off, off+n) in b: there
// are n+1 from off, not decreasing, the first not negative, the last at
// most limit (the values' length).
func checkOffsets(b *memory.Buffer, off, n, limit int) error {
	if b == nil || b.Len()/4 < off+n+1 {
		return fmt.Errorf("fewer than %d offsets", off+n+1)
	}
	o := arrow.Int32Traits.CastFromBytes(b.Bytes())[off : off+n+1]
	if o[0] < 0 {
		return fmt.Errorf("a negative offset %d", o[0])
	}
	for i := 1; i < len(o); i++ {
		if o[i] < o[i-1] {
			return fmt.Errorf("offset %d after %d", o[i], o[i-1])
		}
	}
	if int(o[n]) > limit {
		return fmt.Errorf("offsets to %d in %d values", o[n], limit)
	}
	return nil
}

// buffer reads a buffer into one of the pool's (nil: none).
func (c *runCursor) buffer() (*memory.Buffer, error) {
	kind, err := binary.ReadUvarint(&c.in)
	if err != nil {
		return nil, noEOF(err)
	}
	if kind == bufNone {
		return nil, nil
	}
	n, err := binary.ReadUvarint(&c.in)
	if err != nil {
		return nil, noEOF(err)
	}
	if n > 1<<31 {
		return nil, fmt.Errorf("a buffer of %d bytes", n)
	}
	switch kind {
	case bufRaw:
		if n > uint64(c.in.left) {
			return nil, fmt.Errorf("a buffer of %d bytes, %d left in the file", n, c.in.left)
		}
		b := c.pool.BufferUnzeroed(int(n))
		if err := c.in.readFull(b.Bytes()); err != nil {
			b.Release()
			return nil, err
		}
		return b, nil
	case bufS2:
		z, err := binary.ReadUvarint(&c.in)
		if err != nil {
			return nil, noEOF(err)
		}
		if z > n+n/2+64 || z > uint64(c.in.left) {
			return nil, fmt.Errorf("a compressed buffer of %d bytes for %d, %d left in the file", z, n, c.in.left)
		}
		zb := grow(&c.zbuf, int(z))
		if err := c.in.readFull(zb); err != nil {
			return nil, err
		}
		if dn, err := s2.DecodedLen(zb); err != nil || dn != int(n) {
			return nil, fmt.Errorf("a compressed buffer of %d bytes, not %d (%v)", dn, n, err)
		}
		b := c.pool.BufferUnzeroed(int(n))
		if _, err := s2.Decode(b.Bytes(), zb); err != nil {
			b.Release()
			return nil, err
		}
		return b, nil
	}
	return nil, fmt.Errorf("buffer kind %d", kind)
}

// recovered runs fn, a panic an error: a merge on a goroutine of its own
// must not end the process (a damaged run or a bug in one day's merge
// fails that day, through the merge's error).
func recovered(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return fn()
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
