package events

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/schema"
)

// A replay's snapshots repeat the one before almost exactly: of a
// realistic listing's 3,000 instruments about 95% come back with the same
// compared values (only index_price, which is not compared, moves), in
// nearly the same order. Encoding every row's 24 values again costs most
// of a replay's comparison; checking them against the earlier snapshot's
// Arrow columns costs a fraction of it. So a Reuse remembers, per source
// and record of a snapshot, the record last encoded (retained) with each
// row's payload (a memo), and the next comparison's encoder matches its
// rows with the memo's by name and, where every compared value is the same
// (compared column by column on the Arrow buffers), copies the remembered
// payload instead of encoding the row. A payload is a function of the
// compared values alone, so a copied one is byte for byte the one encoding
// would write: the events and the state are exactly the same whichever
// earlier snapshot the memo holds (a pipelined replay encodes two at
// once; each takes the memo there is).

// memoRows bounds the rows a Reuse remembers per source: the records of a
// snapshot that lie within its first memoRows rows (a realistic listing's
// whole snapshot; of a listing of a million instruments, replayed in
// catch-up, only its first records, so that the memory held stays small).
const memoRows = 1 << 14

// memoBytes bounds the payload bytes of one memo.
const memoBytes = 64 << 20

// memoWindow is how far ahead of the expected row a name is looked for
// before the memo's name index is used.
const memoWindow = 8

// rowID identifies a row's instrument name and payload within a Reuse (0:
// no identity). Each row a memo remembers has one: a row encoded from its
// values gets a new one (its memo's gen and its row in the memo), a row
// copied from an earlier memo's row keeps that row's. Rows of equal
// (non-zero) rowID therefore have the same name and the same payload, by
// induction: a copied row has its source's name (matched) and payload
// (every compared value equal). The entries of a sorter and of a State
// built with a Reuse carry their rows' ids, so that the comparison with
// the previous state can pass over the instruments whose ids are equal
// without reading their names or payloads (Differ.merge): of a replay's
// snapshots most instruments come back with the same values, and their
// rows are copied from the memo of the snapshot before, whose rows are
// the previous state's.
type rowID uint64

// newRowID returns the id of row k of the memo of generation gen.
func newRowID(gen uint64, k int) rowID { return rowID(gen<<16 | uint64(k)) }

// memoRows < 1<<16: a row of a memo fits newRowID's low bits.
var _ [1<<16 - memoRows]struct{}

// memoKey names a memo: the source and the record's place in its snapshot.
type memoKey struct {
	source string
	ord    int
}

// memo is one encoded record of an earlier snapshot: its columns (the
// record is retained) and each row's payload. It is not modified once
// remembered, except for its name index, built once at the first need.
type memo struct {
	rec  arrow.Record
	cols []column
	row0 int64 // the record's first row in its snapshot
	n    int
	rows []memoRow // each row's sort key and place in chunks
	ids  []rowID   // each row's identity (see rowID)
	gen  uint64    // the memo's generation: its new rows' ids (newRowID)
	// chunks are the arena chunks (whole, to their capacity) the
	// record's rows were written to by the sorter: each row's name then
	// its payload, a block of rows one span. The memo shares them with
	// the sorter and the State that own them instead of copying the
	// rows, and pins each (Reuse.pin) so that no arena hands one out
	// again while the memo may read it (unref unpins them).
	chunks [][]byte
	bytes  int  // the rows' bytes (names and payloads)
	full   bool // rows past memoBytes: not remembered
	refs   int  // users (under Reuse.mu): the Reuse while it is current, and each encoder using it

	idxOnce sync.Once
	seed    maphash.Seed
	idx     []int32 // open addressing: row+1, 0 = empty
}

// memoRow is a memo's row: its name's sort key (rowKey's k1, k2, k3) and
// where its name and payload lie in the memo's chunks.
type memoRow struct {
	k1, k2          uint64
	k3              uint32
	chunk           uint32 // in memo.chunks
	off, nlen, plen uint32 // name at off, payload after it
}

// payload returns row k's payload.
func (m *memo) payload(k int) []byte {
	r := &m.rows[k]
	start := r.off + r.nlen
	return m.chunks[r.chunk][start : start+r.plen]
}

func (m *memo) name(k int) []byte { return m.cols[len(fields)+colName].strAt(k) }

// near returns the row of name in the memo among the memoWindow rows
// from p, -1 when there is none.
func (m *memo) near(name []byte, p int) int {
	for k := p; k < min(p+memoWindow, m.n); k++ {
		if string(m.name(k)) == string(name) {
			return k
		}
	}
	return -1
}

// lookup returns a row of name in the memo, -1 when it has none.
func (m *memo) lookup(name []byte) int {
	m.idxOnce.Do(m.index)
	mask := uint64(len(m.idx) - 1)
	for h := maphash.Bytes(m.seed, name) & mask; ; h = (h + 1) & mask {
		k := int(m.idx[h]) - 1
		if k < 0 || string(m.name(k)) == string(name) {
			return k
		}
	}
}

// index builds the name index (the first row of a name wins; any row of
// it would do).
func (m *memo) index() {
	size := 16
	for size < 2*m.n {
		size *= 2
	}
	m.seed = maphash.MakeSeed()
	m.idx = make([]int32, size)
	mask := uint64(size - 1)
	for k := range m.n {
		name := m.name(k)
		h := maphash.Bytes(m.seed, name) & mask
		for ; m.idx[h] != 0; h = (h + 1) & mask {
			if string(m.name(int(m.idx[h])-1)) == string(name) {
				break
			}
		}
		if m.idx[h] == 0 {
			m.idx[h] = int32(k + 1)
		}
	}
}

// memoUse is an encoder's use of the memos while it encodes one record:
// old, the memo it copies from (nil: none), next, the memo of this record
// it builds, p, the row of old expected next, and misses, the rows in a
// row not found near p.
type memoUse struct {
	old, next *memo
	p         int
	misses    int
}

// memoResync is the rows in a row not found near the expected one after
// which the memo's name index is used: a listing's new instruments come a
// few at a time (each is looked for near the expected row, and that row
// is expected next), a run of them or of removed ones is rarer (the index
// costs about as much as encoding a few dozen rows).
const memoResync = 16

// recall returns the memo of record ord of source's snapshots to copy
// from (nil when there is none) and a new one for the record rec being
// encoded (bound to cols, n rows); give both back with done. A nil Reuse
// returns nothing.
func (r *Reuse) recall(source string, ord int, rec arrow.Record, cols []column, row0 int64, n int) memoUse {
	if r == nil {
		return memoUse{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := memoKey{source, ord}
	old := r.memos[key]
	if old != nil {
		old.refs++
	}
	r.gen++
	next := &memo{rec: rec, cols: append([]column(nil), cols...), row0: row0, n: n, gen: r.gen}
	if k := len(r.spare) - 1; k >= 0 {
		next.rows, next.chunks, next.ids = r.spare[k].rows[:0], r.spare[k].chunks[:0], r.spare[k].ids[:0]
		r.spare[k] = nil
		r.spare = r.spare[:k]
	}
	rec.Retain()
	return memoUse{old: old, next: next}
}

// done gives back a memoUse: next, when ok (the record was encoded whole),
// becomes the memo of its record.
func (r *Reuse) done(source string, ord int, u memoUse, ok bool) {
	if r == nil || u.next == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if u.old != nil {
		r.unref(u.old)
	}
	if !ok || u.next.full {
		u.next.refs = 1
		r.unref(u.next)
		return
	}
	if r.memos == nil {
		r.memos, r.held = map[memoKey]*memo{}, map[string]int{}
	}
	key := memoKey{source, ord}
	if cur := r.memos[key]; cur != nil {
		r.drop(key, cur)
	}
	u.next.refs = 1
	r.memos[key] = u.next
	r.held[source] += u.next.n
	r.trimMemos(source, ord)
}

// drop forgets memo m of key (under r.mu).
func (r *Reuse) drop(key memoKey, m *memo) {
	r.held[key.source] -= m.n
	delete(r.memos, key)
	r.unref(m)
}

// trimMemos keeps the memos of source within 2*memoRows rows (under r.mu)
// after record ord's was remembered. Snapshots split into records
// differently leave memos of other records that cover the same rows
// (still good to copy from: a payload depends on the values only); past
// the bound, those that overlap ord's go, then, if that is not enough,
// every other one of the source.
func (r *Reuse) trimMemos(source string, ord int) {
	bound := r.maxHeld
	if bound == 0 {
		bound = 2 * memoRows
	}
	cur := r.memos[memoKey{source, ord}]
	for _, all := range []bool{false, true} {
		if r.held[source] <= bound {
			return
		}
		for k, m := range r.memos {
			if k.source == source && m != cur && (all || m.row0 < cur.row0+int64(cur.n) && cur.row0 < m.row0+int64(m.n)) {
				r.drop(k, m)
			}
		}
	}
}

// unref drops a user of m (under r.mu); the last one releases its record,
// unpins its chunks and keeps its slices for the next memo.
func (r *Reuse) unref(m *memo) {
	if m.refs--; m.refs > 0 {
		return
	}
	m.rec.Release()
	r.unpin(m.chunks)
	clear(m.chunks) // a spare must not keep the chunks alive
	if len(r.spare) < 2 && cap(m.rows)*int(unsafe.Sizeof(memoRow{})) <= reuseSliceBytes {
		r.spare = append(r.spare, &memo{rows: m.rows, chunks: m.chunks, ids: m.ids})
	}
	*m = memo{}
}

// Close drops the records a Reuse remembers (their memory is released);
// the Reuse can still be used.
func (r *Reuse) Close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, m := range r.memos {
		r.drop(k, m)
	}
}

// match sets at[j] to the memo row of the name of row lo+j (j < n), -1
// when none is found, and p[j] to the memo row expected after it. A name
// found where expected is followed by a span of the names after it,
// compared at once while they go on repeating the memo's (most do).
func (u *memoUse) match(name *column, lo, n int, at, p *[encodeBlock]int32) {
	m := u.old
	names := &m.cols[len(fields)+colName]
	q := u.p
	for j := 0; j < n; {
		nm := name.strAt(lo + j)
		k := -1
		if q < m.n && string(m.name(q)) == string(nm) {
			k = q
		} else if k = m.near(nm, q+1); k < 0 {
			if u.misses++; u.misses >= memoResync {
				k = m.lookup(nm)
			}
		}
		if k >= 0 {
			q = k + 1
			u.misses = 0
		}
		at[j], p[j] = int32(k), int32(q)
		j++
		if k < 0 {
			continue
		}
		for j < n {
			r := min(memoSpan, n-j, m.n-q)
			if r == 0 || !name.sameStrings(names, lo+j, q, r) {
				break
			}
			for t := range r {
				at[j+t], p[j+t] = int32(q+t), int32(q+t+1)
			}
			j, q = j+r, q+r
		}
	}
	u.p = q
}

// memoSpan is the names match compares at once.
const memoSpan = 32

// same sets at[j] to -1 for each row i+j (j < len(at)) of c whose value
// differs from row k+j of o (the memo's column), both of type t; the rows
// are a run that repeats the memo's rows in order, so each column is
// compared as one span of its Arrow buffers (a block compare), row by row
// only when the span differs. Equal values, to the bit (a float's -0 and
// 0 differ here), encode to equal items.
func (c *column) same(o *column, t schema.Type, i, k int, at []int32) {
	if c.nulls || o.nulls {
		// a column of no nulls is all valid, whatever its bitmap says
		cv, ov := c.valid, o.valid
		if !c.nulls {
			cv = nil
		}
		if !o.nulls {
			ov = nil
		}
		diffBits(cv, c.off+i, ov, o.off+k, at)
	}
	switch t {
	case schema.String:
		if c.sameStrings(o, i, k, len(at)) {
			return
		}
		for j := range at {
			if at[j] >= 0 && !c.isNull(i+j) && string(c.strAt(i+j)) != string(o.strAt(k+j)) {
				at[j] = -1
			}
		}
	case schema.Float64:
		sameFixed(c, bitsOf(c.f64), bitsOf(o.f64), i, k, at)
	case schema.Int64:
		sameFixed(c, c.i64, o.i64, i, k, at)
	case schema.TimestampMs:
		sameFixed(c, c.ts, o.ts, i, k, at)
	case schema.Bool:
		if c.bits == nil || o.bits == nil {
			for j := range at { // an empty array's: nothing to compare
				at[j] = -1
			}
			break
		}
		// A null's value bit is whatever it is: a differing one clears
		// the row for nothing (the row is encoded).
		diffBits(c.bits, c.off+i, o.bits, o.off+k, at)
	}
}

// diffBits sets at[j] to -1 where bit ci+j of cb differs from bit oi+j of
// ob (a nil bitmap has every bit set: a validity bitmap of no nulls).
func diffBits(cb []byte, ci int, ob []byte, oi int, at []int32) {
	for j := 0; j < len(at); j += 64 {
		w := min(64, len(at)-j)
		for x := bitsAt(cb, ci+j, w) ^ bitsAt(ob, oi+j, w); x != 0; x &= x - 1 {
			at[j+bits.TrailingZeros64(x)] = -1
		}
	}
}

// bitsAt returns bits [off, off+n) of b (n <= 64) as the low bits of a
// word; a nil b has every bit set.
func bitsAt(b []byte, off, n int) uint64 {
	mask := uint64(1)<<n - 1
	if n == 64 {
		mask = ^uint64(0)
	}
	if b == nil {
		return mask
	}
	i, sh := off>>3, uint(off&7)
	var w [9]byte
	copy(w[:], b[i:min(len(b), i+9)])
	v := binary.LittleEndian.Uint64(w[:8])>>sh | uint64(w[8])<<(64-sh)
	return v & mask
}

// sameStrings reports whether rows [i, i+r) of string column c hold the
// same bytes as rows [k, k+r) of o (nulls aside).
func (c *column) sameStrings(o *column, i, k, r int) bool {
	co, oo := c.offs[i:i+r+1], o.offs[k:k+r+1]
	if d := oo[0] - co[0]; d == 0 {
		// the same offsets (most often: every earlier value of the
		// columns has the same length): compared as one block
		if string(bytesOf(co)) != string(bytesOf(oo)) {
			return false
		}
	} else {
		for j := 1; j <= r; j++ {
			if co[j]+d != oo[j] {
				return false
			}
		}
	}
	cb, ob := c.offs[0], o.offs[0]
	return string(c.vals[co[0]-cb:co[r]-cb]) == string(o.vals[oo[0]-ob:oo[r]-ob])
}

// sameFixed is same for fixed-width values cv (c's) and ov (the memo's).
func sameFixed[T comparable](c *column, cv, ov []T, i, k int, at []int32) {
	a, b := cv[i:i+len(at)], ov[k:k+len(at)]
	if string(bytesOf(a)) == string(bytesOf(b)) {
		return
	}
	for j, v := range a {
		if at[j] >= 0 && v != b[j] && !c.isNull(i+j) {
			at[j] = -1
		}
	}
}

// bytesOf returns the memory of s.
func bytesOf[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}

// bitsOf returns the bits of float64 values (compared as bits: NaN equals
// itself, -0 differs from 0).
func bitsOf(f []float64) []uint64 {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&f[0])), len(f))
}

// add appends a block of rows as allocated by sorter.allocRows and
// written: they lie in chunk (the arena's chunk holding the block's span
// of size bytes), ents and keys are their entries and sort keys (the
// sorter's last ones), ids their ids. The memo shares the chunk (pinned
// in re) rather than copying the rows. A memo past memoBytes is given up
// (done drops it).
func (m *memo) add(re *Reuse, chunk []byte, size int, ents []entry, keys []sortKey, ids *[encodeBlock]rowID) {
	if m.full || m.bytes+size > memoBytes {
		m.full = true
		return
	}
	m.bytes += size
	c := chunk[:cap(chunk)]
	ci := len(m.chunks) - 1
	if ci < 0 || unsafe.SliceData(m.chunks[ci]) != unsafe.SliceData(c) {
		re.pin(c)
		m.chunks = append(m.chunks, c)
		ci++
	}
	keys = keys[:len(ents)]
	for j := range ents {
		e, k := &ents[j], &keys[j]
		m.rows = append(m.rows, memoRow{k1: k.k1, k2: k.k2, k3: k.k3, chunk: uint32(ci), off: e.off, nlen: e.nlen, plen: e.plen})
	}
	m.ids = append(m.ids, ids[:len(ents)]...)
}
