package events

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/bitutil"

	"github.com/optlake/optlake/schema"
)

// Observe encodes a record's rows in blocks of encodeBlock rows, column by
// column: per block, one pass over each column sizes the rows' payloads,
// the rows are allocated in the sorter's arena (name, then payload), and a
// second pass per column writes its items in place. The result is exactly
// the payload of fields.go's append functions (the row-by-row encoding it
// replaces, kept in the tests as the reference), at a fraction of the cost:
// one type switch per column and block instead of one per value, and tight
// loops over each column's Arrow buffers.
const encodeBlock = 256

// blockEnc is the working memory of one block. It holds no pointers: the
// rows of a block are one span of the arena, and each row's write position
// is an offset into it (storing a slice per value would cost a GC write
// barrier each while a collection runs).
type blockEnc struct {
	size [encodeBlock]uint32 // payload bytes of each row
	pos  [encodeBlock]uint32 // where each row's next item goes in the span
	at   [encodeBlock]int32  // each row's row in the memo copied from, -1: encoded (memo.go)
	p    [encodeBlock]int32  // the memo row expected after each row
	id   [encodeBlock]rowID  // each row's identity, when the record is memoized (memo.go)
}

func uvarintLen(v uint64) uint32 { return uint32(bits.Len64(v|1)+6) / 7 }

func varintLen(v int64) uint32 {
	return uvarintLen(uint64(v<<1) ^ uint64(v>>63))
}

// integral reports whether appendFloat writes v as an integer item.
func integral(v float64) bool {
	return v == math.Trunc(v) && math.Abs(v) < 1<<53 && !(v == 0 && math.Signbit(v))
}

// isNull reports whether row i (of the column's slice) is null.
func (c *column) isNull(i int) bool {
	return c.nulls && bitutil.BitIsNotSet(c.valid, c.off+i)
}

// str returns the bytes of row i of a string column.
func (c *column) strAt(i int) []byte {
	return c.vals[c.offs[i]-c.offs[0] : c.offs[i+1]-c.offs[0]]
}

// sizes adds the item sizes of rows [lo, lo+n) of column c (type t) to
// size[:n].
func (c *column) sizes(t schema.Type, lo, n int, size []uint32) {
	size = size[:n]
	switch t {
	case schema.String:
		for j := 0; j < n; j++ {
			if c.isNull(lo + j) {
				size[j]++
				continue
			}
			l := uint32(c.offs[lo+j+1] - c.offs[lo+j])
			size[j] += 1 + uvarintLen(uint64(l)) + l
		}
	case schema.Float64:
		for j, v := range c.f64[lo : lo+n] {
			switch {
			case c.isNull(lo + j):
				size[j]++
			case integral(v):
				size[j] += 1 + varintLen(int64(v))
			default:
				size[j] += 9
			}
		}
	case schema.Int64:
		for j, v := range c.i64[lo : lo+n] {
			if c.isNull(lo + j) {
				size[j]++
			} else {
				size[j] += 1 + varintLen(v)
			}
		}
	case schema.TimestampMs:
		for j, v := range c.ts[lo : lo+n] {
			if c.isNull(lo + j) {
				size[j]++
			} else {
				size[j] += 1 + varintLen(int64(v))
			}
		}
	case schema.Bool:
		for j := 0; j < n; j++ {
			size[j]++
		}
	}
}

// write writes the items of rows [lo, lo+n) of column c (type t) into buf,
// each at its row's pos (pos[:n]), and moves pos past them.
func (c *column) write(t schema.Type, lo, n int, buf []byte, pos []uint32) {
	pos = pos[:n]
	switch t {
	case schema.String:
		for j := 0; j < n; j++ {
			d := buf[pos[j]:]
			if c.isNull(lo + j) {
				d[0] = tagNull
				pos[j]++
				continue
			}
			s := c.strAt(lo + j)
			d[0] = tagValue
			k := 1 + binary.PutUvarint(d[1:], uint64(len(s)))
			pos[j] += uint32(k + copy(d[k:], s))
		}
	case schema.Float64:
		for j, v := range c.f64[lo : lo+n] {
			d := buf[pos[j]:]
			switch {
			case c.isNull(lo + j):
				d[0] = tagNull
				pos[j]++
			case integral(v):
				d[0] = tagInt
				pos[j] += uint32(1 + binary.PutVarint(d[1:], int64(v)))
			default:
				d[0] = tagValue
				binary.LittleEndian.PutUint64(d[1:9], math.Float64bits(v))
				pos[j] += 9
			}
		}
	case schema.Int64:
		for j, v := range c.i64[lo : lo+n] {
			pos[j] += writeInt(buf[pos[j]:], c.isNull(lo+j), v)
		}
	case schema.TimestampMs:
		for j, v := range c.ts[lo : lo+n] {
			pos[j] += writeInt(buf[pos[j]:], c.isNull(lo+j), int64(v))
		}
	case schema.Bool:
		for j := 0; j < n; j++ {
			d := buf[pos[j]:]
			switch {
			case c.isNull(lo + j):
				d[0] = tagNull
			case c.bln.Value(lo + j):
				d[0] = tagTrue
			default:
				d[0] = tagValue
			}
			pos[j]++
		}
	}
}

// writeInt writes an int64 item at the front of d and returns its length.
func writeInt(d []byte, null bool, v int64) uint32 {
	if null {
		d[0] = tagNull
		return 1
	}
	d[0] = tagValue
	return uint32(1 + binary.PutVarint(d[1:], v))
}

// checkRow checks row i of a record bound to cols (row is its number in
// the snapshot): instrument_name not null and not too long, the builder's
// source and snapshot.
func (b *Builder) checkRow(cols []column, i int, row int64) error {
	name := &cols[len(fields)+colName]
	src := &cols[len(fields)+colSource]
	snap := &cols[len(fields)+colSnapshot]
	if name.isNull(i) {
		return fmt.Errorf("instrument events: %s: row %d: instrument_name is null", b.source, row)
	}
	nm := name.strAt(i)
	if src.arr != nil && (src.isNull(i) || string(src.strAt(i)) != b.source) {
		return fmt.Errorf("instrument events: %s: row %d (%q) belongs to source %q", b.source, row, nm, src.arr.ValueStr(i))
	}
	if snap.arr != nil && (snap.isNull(i) || int64(snap.ts[i]) != b.snapMs) {
		return fmt.Errorf("instrument events: %s: row %d (%q) has snapshot_time %s, expected %s",
			b.source, row, nm, snap.arr.ValueStr(i), time.UnixMilli(b.snapMs).UTC().Format(time.RFC3339Nano))
	}
	if len(nm) > maxName {
		return b.tooLong(row, nm)
	}
	return nil
}

// checkRows checks the n rows of a record bound to cols (row0 is its
// first row's number in the snapshot) as checkRow does, and returns
// checkRow's error for the first row that fails. The rows of a listing
// pass: each check is made over a whole column (no nulls, every name
// short, every source and snapshot time the builder's), row by row only
// when one fails.
func (b *Builder) checkRows(cols []column, n int, row0 int64) error {
	if n == 0 {
		return nil
	}
	name := &cols[len(fields)+colName]
	src := &cols[len(fields)+colSource]
	snap := &cols[len(fields)+colSnapshot]
	ok := !name.nulls
	if ok && int(name.offs[n]-name.offs[0]) > maxName {
		for i := range n {
			if name.offs[i+1]-name.offs[i] > maxName {
				ok = false
				break
			}
		}
	}
	if ok && src.arr != nil {
		ok = !src.nulls && src.allEqual(b.source, n, &b.srcRun)
	}
	if ok && snap.arr != nil {
		ok = !snap.nulls
		for _, v := range snap.ts[:n] {
			if int64(v) != b.snapMs {
				ok = false
				break
			}
		}
	}
	if ok {
		return nil
	}
	for i := range n {
		if err := b.checkRow(cols, i, row0+int64(i)); err != nil {
			return err
		}
	}
	return nil
}

// allEqual reports whether rows [0, n) of string column c all hold s
// (nulls aside); *run caches s repeated, to compare many at once.
func (c *column) allEqual(s string, n int, run *[]byte) bool {
	l := int32(len(s))
	o := c.offs[:n+1]
	for i := range o {
		if o[i]-o[0] != int32(i)*l {
			return false
		}
	}
	k := min(n, encodeBlock) // repetitions compared at once
	if len(*run) != k*len(s) {
		*run = []byte(strings.Repeat(s, k))
	}
	for v := c.vals[:n*len(s)]; len(v) > 0; {
		m := min(len(v), len(*run))
		if string(v[:m]) != string((*run)[:m]) {
			return false
		}
		v = v[m:]
	}
	return true
}

func (b *Builder) tooLong(row int64, nm []byte) error {
	return fmt.Errorf("instrument events: %s: row %d (%.64q): instrument %.64q: name or values too long", b.source, row, nm, nm)
}

// encodeRecord adds the n rows of record rec, bound to cols, whose first
// row is row0 of the snapshot and which is record ord of the snapshot (of
// those with rows), to the sorter. check: check each row (checkRow) as it
// goes; without, the rows were checked already. With a Reuse, the rows
// that repeat the memo of the record (memo.go) are copied from it, and
// the record becomes the next memo.
func (b *Builder) encodeRecord(rec arrow.Record, cols []column, n int, row0 int64, ord int, check bool) error {
	var u memoUse
	memoize := b.re != nil && !b.noMemo && row0+int64(n) <= memoRows
	if memoize {
		u = b.re.recall(b.source, ord, rec, cols, row0, n)
	}
	var err error
	for lo := 0; lo < n && err == nil; {
		var m int
		m, err = b.encode(cols, lo, min(encodeBlock, n-lo), row0+int64(lo), check, &u)
		lo += m
	}
	if memoize {
		b.re.done(b.source, ord, u, err == nil)
	}
	return err
}

// encode adds rows [lo, lo+m) of a record bound to cols to the sorter
// and returns m: the n rows asked for (n <= encodeBlock), or fewer when
// they take more than chunkSize bytes (at least one row), so that a block
// is one arena span of bounded size; row0 is the number of row lo in the
// snapshot. The rows u's memo holds with the same values are copied from
// it; u.next remembers every row's payload.
func (b *Builder) encode(cols []column, lo, n int, row0 int64, check bool, u *memoUse) (int, error) {
	e := b.enc
	if e == nil {
		e = new(blockEnc)
		b.enc = e
	}
	size := &e.size
	clear(size[:n])
	exp := &cols[len(fields)+colExpiration]
	name := &cols[len(fields)+colName]
	old := u.old
	if old == nil {
		sizeRows(cols, lo, 0, n, size)
	} else {
		u.match(name, lo, n, &e.at, &e.p)
		for a := 0; a < n; {
			k := e.at[a]
			if k < 0 {
				a++
				continue
			}
			z := a + 1
			for z < n && e.at[z] == k+int32(z-a) {
				z++
			}
			// Rows [lo+a, lo+z) repeat the memo's rows from k on.
			at := e.at[a:z]
			for c := range fields {
				cols[c].same(&old.cols[c], fields[c].typ, lo+a, int(k), at)
			}
			exp.same(&old.cols[len(fields)+colExpiration], schema.TimestampMs, lo+a, int(k), at)
			a = z
		}
		for a := 0; a < n; {
			if k := e.at[a]; k >= 0 {
				size[a] = uint32(len(old.payload(int(k))))
				a++
				continue
			}
			z := missRun(&e.at, a, n)
			sizeRows(cols, lo, a, z, size)
			a = z
		}
	}
	total := 0
	for j := 0; j < n; j++ {
		if total += len(name.strAt(lo+j)) + int(size[j]); total > chunkSize && j > 0 {
			n = j // row j and the rest in the next block
			if old != nil {
				u.p = int(e.p[j-1])
			}
			break
		}
		if check {
			if err := b.checkRow(cols, lo+j, row0+int64(j)); err != nil {
				return 0, err
			}
		}
		if size[j] > maxPayload {
			return 0, b.tooLong(row0+int64(j), name.strAt(lo+j))
		}
	}
	var ids *[encodeBlock]rowID
	if u.next != nil {
		// A row encoded is new (this record's memo's), a row copied
		// keeps the id of the row it is copied from.
		ids = &e.id
		for j := range n {
			ids[j] = newRowID(u.next.gen, lo+j)
		}
		if old != nil {
			for j := range n {
				if k := e.at[j]; k >= 0 {
					ids[j] = old.ids[k]
				}
			}
		}
	}
	buf := b.srt.allocRows(n, name, lo, size, &e.pos, ids, old, &e.at)
	if old == nil {
		writeRows(cols, lo, 0, n, buf, &e.pos)
	} else {
		copied := 0
		for a := 0; a < n; {
			if e.at[a] >= 0 {
				copied++
				a++
				continue
			}
			z := missRun(&e.at, a, n)
			writeRows(cols, lo, a, z, buf, &e.pos)
			a = z
		}
		b.re.copied.Add(int64(copied))
	}
	if u.next != nil {
		k := len(b.srt.ents) - n
		u.next.add(b.re, b.srt.ar.chunks[b.srt.ents[k].chunk], len(buf), b.srt.ents[k:], b.srt.keys[k:], ids)
	}
	if err := b.srt.settle(); err != nil {
		return 0, fmt.Errorf("instrument events: %s: %w", b.source, err)
	}
	return n, nil
}

// missRun returns the end of the run of rows from a (< n) that are not
// copied from the memo (at < 0).
func missRun(at *[encodeBlock]int32, a, n int) int {
	z := a + 1
	for z < n && at[z] < 0 {
		z++
	}
	return z
}

// sizeRows sets size[a:z] to the payload sizes of rows [lo+a, lo+z) of a
// record bound to cols (size[a:z] is zero).
func sizeRows(cols []column, lo, a, z int, size *[encodeBlock]uint32) {
	for k := range fields {
		cols[k].sizes(fields[k].typ, lo+a, z-a, size[a:z])
	}
	cols[len(fields)+colExpiration].sizes(schema.TimestampMs, lo+a, z-a, size[a:z])
}

// writeRows writes the payloads of rows [lo+a, lo+z) of a record bound to
// cols into buf at pos[a:z].
func writeRows(cols []column, lo, a, z int, buf []byte, pos *[encodeBlock]uint32) {
	for k := range fields {
		cols[k].write(fields[k].typ, lo+a, z-a, buf, pos[a:z])
	}
	cols[len(fields)+colExpiration].write(schema.TimestampMs, lo+a, z-a, buf, pos[a:z])
}

// encoder encodes a Differ's records on a goroutine of its own, off the
// caller's (the decoder's, the busiest of a run): Observe binds and checks
// a record's rows, and hands the record over; the goroutine encodes it
// column by column into the sorter (which spills in the background as
// before). Two records wait at most: Observe blocks when the encoder is
// behind.
type encoder struct {
	jobs    chan encodeJob
	done    chan struct{}
	err     atomic.Pointer[error] // the first failure; later records are dropped
	pending atomic.Int64          // records handed over and not yet encoded
}

type encodeJob struct {
	rec  arrow.Record
	cols []column
	n    int
	row0 int64
	ord  int
}

// newEncoder starts the encoder; a non-nil gate holds it before its first
// record until the gate is closed (tests).
func newEncoder(b *Builder, gate <-chan struct{}) *encoder {
	e := &encoder{jobs: make(chan encodeJob, 2), done: make(chan struct{})}
	go func() {
		defer close(e.done)
		if gate != nil {
			<-gate
		}
		var err error
		for j := range e.jobs {
			if err == nil {
				if err = b.encodeRecord(j.rec, j.cols, j.n, j.row0, j.ord, false); err != nil {
					e.err.Store(&err)
				}
			}
			j.rec.Release()
			e.pending.Add(-1)
		}
	}()
	return e
}

// idle reports whether the encoder has no record to encode (nor a nil
// one): the caller may add rows to the sorter itself.
func (e *encoder) idle() bool { return e == nil || e.pending.Load() == 0 }

// failed returns the encoder's failure so far (nil for a nil encoder).
func (e *encoder) failed() error {
	if e == nil {
		return nil
	}
	if p := e.err.Load(); p != nil {
		return *p
	}
	return nil
}

// stop waits until every record handed over is encoded (or dropped) and
// returns the first failure; nil does nothing.
func (e *encoder) stop() error {
	if e == nil {
		return nil
	}
	close(e.jobs)
	<-e.done
	return e.failed()
}
