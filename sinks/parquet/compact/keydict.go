package compact

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A replayed day's merges compare rows by integers, not strings: the
// day's snapshots repeat the same few thousand instrument names, so the
// day numbers the distinct values of its table's leading string key
// columns (source, instrument_name) as its writers see them (keyDict),
// every run carries its rows' numbers (ids, in run order), and a merge
// compares their ranks — the values' order, worked out once per merge on
// the distinct values — before the rest of the key (snapshot_time, an
// integer). Rows of equal rank have equal prefix values, so the order is
// exactly compareRows's; a run without ids (a file of another run, an
// earlier compaction's rows, a dictionary past its bounds) makes its
// merge compare rows the generic way.

// Bounds of a day's dictionary: past either, the day's later rows get no
// ids (its merges then compare strings). A day of instruments has
// thousands of distinct names.
const (
	maxDictKeys  = 1 << 17
	maxDictBytes = 16 << 20
)

// keyDict numbers the distinct prefixes of a table's key seen in a day:
// the values of its first cols key columns, all strings. Safe for
// concurrent use.
type keyDict struct {
	cols              int
	maxKeys, maxBytes int // bounds (maxDictKeys, maxDictBytes)

	mu    sync.Mutex
	ids   map[string]uint32
	keys  []string // by id: the encoded prefix (appendPrefix)
	bytes int
	full  bool     // past its bounds: no new ids
	next  []uint32 // by id: 1 + the id of the row after it last time (0: none)
	order []uint32 // ids in the order of their prefixes (ranks)
	rank  []uint32 // by id, for keys[:len(rank)] (ranks)
}

// newKeyDict returns the dictionary of a table of schema u and key, nil
// when the key does not start with a string column.
func newKeyDict(u *arrow.Schema, key []string) *keyDict {
	n := 0
	for _, name := range key {
		idx := u.FieldIndices(name)
		if len(idx) == 0 || u.Field(idx[0]).Type.ID() != arrow.STRING {
			break
		}
		n++
	}
	if n == 0 {
		return nil
	}
	return &keyDict{cols: n, maxKeys: maxDictKeys, maxBytes: maxDictBytes, ids: map[string]uint32{}}
}

// appendPrefix encodes the prefix of row i: per column a null flag (0
// null, 1 a value), then the value's length and bytes.
func appendPrefix(buf []byte, kv *keyView, cols, i int) []byte {
	for k := range cols {
		c := &kv.cols[k]
		if c.nulls && c.arr.IsNull(i) {
			buf = append(buf, 0)
			continue
		}
		v := c.str.Value(i)
		buf = append(buf, 1)
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(v)))
		buf = append(buf, v...)
	}
	return buf
}

// comparePrefixes orders two encoded prefixes as compareRows orders their
// rows' columns: column by column, a null first.
func comparePrefixes(a, b string) int {
	for len(a) > 0 && len(b) > 0 {
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		if a[0] == 0 {
			a, b = a[1:], b[1:]
			continue
		}
		na, nb := prefixLen(a), prefixLen(b)
		va, vb := a[5:5+na], b[5:5+nb]
		if c := strings.Compare(va, vb); c != 0 {
			return c
		}
		a, b = a[5+na:], b[5+nb:]
	}
	return len(a) - len(b) // equal lengths: every prefix has cols columns
}

// prefixLen reads the length of an encoded value (after its flag).
func prefixLen(s string) uint32 {
	return uint32(s[1])<<24 | uint32(s[2])<<16 | uint32(s[3])<<8 | uint32(s[4])
}

// idsOf numbers the prefixes of the view's n rows; nil when the
// dictionary is full (or d is nil).
func (d *keyDict) idsOf(kv *keyView, n int) []uint32 {
	if d == nil {
		return nil
	}
	if len(kv.cols) < d.cols {
		return nil
	}
	for k := range d.cols {
		if kv.cols[k].str == nil {
			return nil
		}
	}
	out := make([]uint32, n)
	var buf []byte
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.full {
		return nil
	}
	for i := range n {
		if i > 0 {
			// A snapshot lists its names in the order the one before
			// did: the name after the previous row's last time is a good
			// guess; then the previous row's. Both checked on the row's
			// values, not encoded.
			prev := out[i-1]
			if g := d.next[prev]; g > 0 && prefixIs(kv, d.cols, i, d.keys[g-1]) {
				out[i] = g - 1
				continue
			}
			if prefixIs(kv, d.cols, i, d.keys[prev]) {
				out[i] = prev
				continue
			}
		}
		buf = appendPrefix(buf[:0], kv, d.cols, i)
		id, ok := d.ids[string(buf)]
		if !ok {
			if len(d.keys) >= d.maxKeys || d.bytes+len(buf) > d.maxBytes {
				d.full = true
				return nil
			}
			id = uint32(len(d.keys))
			s := string(buf)
			d.ids[s] = id
			d.keys = append(d.keys, s)
			d.next = append(d.next, 0)
			d.bytes += len(s)
		}
		if i > 0 {
			d.next[out[i-1]] = id + 1
		}
		out[i] = id
	}
	return out
}

// prefixIs reports whether row i's prefix encodes as key (appendPrefix).
func prefixIs(kv *keyView, cols, i int, key string) bool {
	for k := range cols {
		c := &kv.cols[k]
		if len(key) == 0 {
			return false
		}
		if c.nulls && c.arr.IsNull(i) {
			if key[0] != 0 {
				return false
			}
			key = key[1:]
			continue
		}
		v := c.str.Value(i)
		if key[0] != 1 || len(key) < 5+len(v) || int(prefixLen(key)) != len(v) || key[5:5+len(v)] != v {
			return false
		}
		key = key[5+len(v):]
	}
	return len(key) == 0
}

// ranks returns each id's rank in the order of the prefixes (equal ranks
// only for the same id), for every id given so far. The slice is not
// changed later: a merge or a sort keeps it. The ids given since the last
// call are sorted and put in place by binary search: a day's snapshots
// bring a few new names each (the bench day: 8,495 names, 3,000 a
// snapshot).
func (d *keyDict) ranks() []uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.rank) == len(d.keys) {
		return d.rank
	}
	cmp := func(a, b uint32) int { return comparePrefixes(d.keys[a], d.keys[b]) }
	fresh := make([]uint32, 0, len(d.keys)-len(d.order))
	for id := len(d.order); id < len(d.keys); id++ {
		fresh = append(fresh, uint32(id))
	}
	slices.SortFunc(fresh, cmp)
	order := make([]uint32, 0, len(d.keys))
	at := 0
	for _, id := range fresh {
		n, _ := slices.BinarySearchFunc(d.order[at:], id, cmp) // never found: the ids' prefixes differ
		order = append(order, d.order[at:at+n]...)
		order = append(order, id)
		at += n
	}
	order = append(order, d.order[at:]...)
	rank := make([]uint32, len(order))
	for r, id := range order {
		rank[id] = uint32(r)
	}
	d.order, d.rank = order, rank
	return rank
}

// mergeKeys are a merge's integer keys: the ranks of the ids of its
// inputs' rows (each input's ids in its row order), the prefix columns
// they stand for, and, when out is set, the ids of the rows merged in
// their order (the merged run's).
type mergeKeys struct {
	rank   []uint32
	prefix int
	record bool
	out    []uint32
}

// keysFor returns the integer keys of a merge of runs, nil (the generic
// comparison) unless every run carries ids of d.
func keysFor(d *keyDict, runs []Run, record bool) *mergeKeys {
	if d == nil || len(runs) == 0 {
		return nil
	}
	for _, r := range runs {
		if !r.keyed {
			return nil
		}
	}
	return &mergeKeys{rank: d.ranks(), prefix: d.cols, record: record}
}

// prefixValues are, by rank (ranks), the values of the prefix's k-th
// column: vals[r], or null where valid[r] is false (valid nil: none).
func (d *keyDict) prefixValues(k int) (vals []string, valid []bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	vals = make([]string, len(d.order))
	for r, id := range d.order {
		v, ok := prefixValue(d.keys[id], k)
		if ok {
			vals[r] = v
			if valid != nil {
				valid[r] = true
			}
			continue
		}
		if valid == nil {
			valid = make([]bool, len(d.order))
			for x := range r {
				valid[x] = true
			}
		}
	}
	return vals, valid
}

// prefixValue is the k-th column's value of an encoded prefix (false:
// null).
func prefixValue(key string, k int) (string, bool) {
	for c := 0; ; c++ {
		null := key[0] == 0
		var v string
		if !null {
			n := prefixLen(key)
			v, key = key[5:5+n], key[5+n:]
		} else {
			key = key[1:]
		}
		if c == k {
			return v, !null
		}
	}
}

// prefixColumn is the k-th prefix column of rows of these ids: a packed
// record's, whose dictionary columns are not packed (pack.go).
func (d *keyDict) prefixColumn(k int, ids []uint32) (arrow.Array, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if k >= d.cols {
		return nil, fmt.Errorf("key column %d of a dictionary of %d", k, d.cols)
	}
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.Reserve(len(ids))
	for _, id := range ids {
		if int(id) >= len(d.keys) {
			return nil, fmt.Errorf("key id %d past the dictionary's %d", id, len(d.keys))
		}
		if v, ok := prefixValue(d.keys[id], k); ok {
			b.Append(v)
		} else {
			b.AppendNull()
		}
	}
	return b.NewArray(), nil
}
