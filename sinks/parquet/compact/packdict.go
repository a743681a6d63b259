package compact

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/sinks/parquet/pqpage"
)

// A packed record's string column of few distinct values (the
// low-cardinality ones, run_id: one value a snapshot) is packed as the
// ids of its rows into the record's distinct values (a uint32 node, the
// column's validity) followed by those values (a string node):
// packedCol.dict. Its strings are not repeated row by row, so there is
// little for S2 to compress or decompress (~45% of a bench day's pack
// bytes were such columns' offsets and values; the ids node is still
// S2-compressed like any other node); the direct writer numbers a record's
// distinct values against the day's dictionary once each and its rows
// through them (dictidx.go), and every other reader gets the strings back
// (packReader.column).

// localDict numbers a record's string column's distinct values.
type localDict struct {
	index map[string]uint32
	ids   []uint32
	offs  []int32
	data  []byte
}

// encode numbers a's values (a null's id 0), false when a has more
// than an eighth of its rows (at most 256; the check comes after the
// value that passes it, so one more may be counted) distinct values, or
// an offset. A value equal to the one before it, or to the one before
// that (a record sorted by instrument alternates calls and puts), is not
// looked up.
func (l *localDict) encode(a *array.String) bool {
	n := a.Len()
	if n == 0 || a.Data().Offset() != 0 {
		return false
	}
	if l.index == nil {
		l.index = map[string]uint32{}
	}
	clear(l.index)
	l.ids = append(l.ids[:0], make([]uint32, n)...)
	l.offs, l.data = append(l.offs[:0], 0), l.data[:0]
	most := min(n/8, 256) + 1
	offs := a.ValueOffsets()
	var data []byte
	if b := a.Data().Buffers()[2]; b != nil {
		data = b.Bytes()
	}
	nulls := a.NullN() > 0
	var last, prev localVal // the last value and the one before it
	has, has2 := false, false
	for r := range n {
		if nulls && a.IsNull(r) {
			continue
		}
		lo, hi := int(offs[r]), int(offs[r+1])
		v := localVal{w: wordAt(data, lo, hi-lo), lo: lo, n: hi - lo}
		if has && v.same(&last, data) {
			l.ids[r] = last.id
			continue
		}
		if has2 && v.same(&prev, data) {
			l.ids[r] = prev.id
			last, prev = prev, last
			continue
		}
		prev, has2 = last, has
		id, ok := l.index[string(data[lo:hi])]
		if !ok {
			if len(l.offs) > most {
				return false
			}
			id = uint32(len(l.offs) - 1)
			l.data = append(l.data, data[lo:hi]...)
			l.offs = append(l.offs, int32(len(l.data)))
			l.index[string(data[lo:hi])] = id
		}
		v.id = id
		l.ids[r], last, has = id, v, true
	}
	return true
}

// localVal is a value of the array localDict.encode numbers: its first
// (up to) 8 bytes as a word, where it starts and its length, and its id.
type localVal struct {
	w     uint64
	lo, n int
	id    uint32
}

// same reports whether v and o, values of data, are equal: their words
// first (the whole of a value of at most 8 bytes), then the rest.
func (v *localVal) same(o *localVal, data []byte) bool {
	return v.n == o.n && v.w == o.w && (v.n <= 8 || bytes.Equal(data[v.lo+8:v.lo+v.n], data[o.lo+8:o.lo+o.n]))
}

// wordAt is the first (up to) 8 of the n bytes at data[lo:], little-endian,
// zero-padded.
func wordAt(data []byte, lo, n int) uint64 {
	if lo+8 <= len(data) {
		w := binary.LittleEndian.Uint64(data[lo:])
		if n < 8 {
			w &= 1<<(8*n) - 1
		}
		return w
	}
	var w uint64
	for i := range min(n, 8) {
		w |= uint64(data[lo+i]) << (8 * i)
	}
	return w
}

// write writes the ids' node (a's validity) and the values' node.
func (l *localDict) write(w *runWriter, a *array.String) {
	var valid []byte
	if a.NullN() > 0 {
		valid = a.Data().Buffers()[0].Bytes()[:bitutil.BytesForBits(int64(a.Len()))]
	}
	w.node(a.Len(), a.NullN(), valid, arrow.Uint32Traits.CastToBytes(l.ids))
	w.node(len(l.offs)-1, 0, nil, arrow.Int32Traits.CastToBytes(l.offs), l.data)
}

// dictColumn reads a dict-packed column (pc.dict) of rows rows: its ids
// (validity: the column's) and its distinct values, each id checked.
func (r *packReader) dictColumn(pc packedCol, rows int) (*array.Uint32, *array.String, error) {
	var ids *array.Uint32
	var vals *array.String
	err := r.nodes(pc, func() error {
		d, err := r.c.node(arrow.PrimitiveTypes.Uint32)
		if err != nil {
			return err
		}
		defer d.Release()
		v, err := r.c.node(arrow.BinaryTypes.String)
		if err != nil {
			return err
		}
		defer v.Release()
		if d.Len() != rows || v.NullN() != 0 {
			return fmt.Errorf("a dictionary column of %d rows (%d values, %d null), not %d", d.Len(), v.Len(), v.NullN(), rows)
		}
		ids, vals = array.NewUint32Data(d), array.NewStringData(v)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	n := uint32(vals.Len())
	for i, id := range ids.Uint32Values() {
		if id >= n && ids.IsValid(i) {
			ids.Release()
			vals.Release()
			return nil, nil, fmt.Errorf("read pack %s at %d: id %d of %d values", r.pf.f.Name(), pc.off, id, n)
		}
	}
	return ids, vals, nil
}

// strings are the column's strings: vals[ids[r]] (null where ids is).
func (r *packReader) strings(t arrow.DataType, ids *array.Uint32, vals *array.String) (arrow.Array, error) {
	n := ids.Len()
	iv := ids.Uint32Values()
	bytes := 0
	for i, id := range iv {
		if ids.IsValid(i) {
			bytes += vals.ValueLen(int(id))
		}
	}
	if err := stringsFit(0, bytes); err != nil {
		return nil, err
	}
	var valid *memory.Buffer
	if ids.NullN() > 0 {
		valid = r.pool.BufferUnzeroed(int(bitutil.BytesForBits(int64(n))))
		copy(valid.Bytes(), ids.Data().Buffers()[0].Bytes())
	}
	offBuf := r.pool.BufferUnzeroed((n + 1) * 4)
	offs := asSlice[int32](offBuf.Bytes())
	data := r.pool.AllocateUnzeroed(bytes)
	pos := 0
	for i, id := range iv {
		offs[i] = int32(pos)
		if ids.IsValid(i) {
			pos += copy(data[pos:], vals.Value(int(id)))
		}
	}
	offs[n] = int32(pos)
	return finishArray(t, n, ids.NullN(), valid, offBuf, memory.NewBufferWithAllocator(data, r.pool)), nil
}

// dayIDs sets out[r] to the day's id (d) of row r of a dict-packed
// column (pqpage.NullIndex: null), false once d's PLAIN bytes reach limit.
func (d *colDict) dayIDs(ids *array.Uint32, vals *array.String, out []uint32, limit int64) bool {
	to := make([]uint32, vals.Len())
	offs := vals.ValueOffsets()
	var data []byte
	if b := vals.Data().Buffers()[2]; b != nil {
		data = b.Bytes()
	}
	for k := range to {
		v := data[offs[k]:offs[k+1]]
		id, ok := d.index[string(v)]
		if !ok {
			if id = d.add(v); d.bytes >= limit {
				return false
			}
		}
		to[k] = id
	}
	nulls := ids.NullN() > 0
	for r, id := range ids.Uint32Values() {
		if nulls && ids.IsNull(r) {
			out[r] = pqpage.NullIndex
		} else {
			out[r] = to[id]
		}
	}
	return true
}
