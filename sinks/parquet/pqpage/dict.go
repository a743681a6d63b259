package pqpage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// Dictionary encoding of strings (Options.Dict), as arrow-go writes it
// for the same properties: per column chunk a dictionary page (the
// distinct values PLAIN, in the order first seen, compressed like the
// data pages) before data pages whose values are indices into it (a byte
// of bit width, then the RLE/bit-packed hybrid). A page is closed when its
// values' PLAIN bytes reach the page size. Once the dictionary's PLAIN
// bytes reach Options.DictPageSize the chunk falls back: the page under
// way and the later ones are PLAIN; the dictionary page stays if a page of
// indices was written, else the chunk is all PLAIN.
//
// A value equal to the one before it (a sorted day repeats most of its
// low-cardinality values row after row) takes the same index without
// being looked up; so does a value equal to the one that followed the
// value before it the last time (run_id in a day sorted by instrument
// cycles through the snapshots' ids in the same order for every
// instrument: a map lookup was 60% of such a column's cost); the others
// are looked up in a map. The statistics are
// the dictionary's: each distinct value is compared with the min and max
// once, when it enters the dictionary.
type dictState struct {
	dictOn    bool             // the values go to the dictionary (Options.Dict, not fallen back)
	keepDict  bool             // fallen back after pages of indices: the dictionary page is written
	dict      []byte           // the entries PLAIN (length, bytes): the dictionary page's values
	entries   [][]byte         // entry i's bytes (in dict)
	next      []int32          // per entry, the entry that followed it last (-1: none yet)
	index     map[string]int32 // entry of a value
	idx       []int32          // the page's indices
	raw       int64            // the page's values' PLAIN bytes
	last      []byte           // the last value's entry (hasLast)
	lastIdx   int32
	hasLast   bool
	dictPages int32  // pages of indices in the chunk
	dictPage  []byte // the dictionary page with its header (Finish)

	// AppendIndices (indices.go)
	mode    dictMode // how the chunk's values came (one way a chunk)
	local   []int32  // entry+1 of each caller's index (0: not in the chunk)
	touched []uint32 // the caller's indices set in local
	lastID  uint32   // the caller's index of the last value (hasLast)
}

// resetDict empties the dictionary for the next chunk.
func (c *Chunk) resetDict() {
	d := &c.dictState
	d.dictOn, d.keepDict, d.hasLast = c.opt.Dict, false, false
	d.dict, d.entries, d.next, d.last = d.dict[:0], d.entries[:0], d.next[:0], nil
	clear(d.index)
	d.dictPages, d.dictPage = 0, d.dictPage[:0]
	d.mode = byNone
	for _, id := range d.touched {
		d.local[id] = 0
	}
	d.touched = d.touched[:0]
	if d.dictOn {
		c.enc = int32(c.opt.IndexEncoding)
	}
}

// dictStrings adds the strings' indices to the page (a new string to the
// dictionary and the statistics).
func (c *Chunk) dictStrings(values []byte, offsets []int32, bitmap []byte, bit int) {
	d := &c.dictState
	n := len(offsets) - 1
	idx := grow(d.idx, n, math.MaxInt)
	last, k, has := d.last, d.lastIdx, d.hasLast
	raw := d.raw
	for i := range n {
		if bitmap != nil && !bitutil.BitIsSet(bitmap, bit+i) {
			continue
		}
		v := values[offsets[i]:offsets[i+1]]
		raw += 4 + int64(len(v))
		if !has {
			k, has = c.lookup(v), true
			last = d.entries[k]
		} else if !bytes.Equal(v, last) {
			prev := k
			if k = d.next[prev]; k < 0 || !bytes.Equal(v, d.entries[k]) {
				k = c.lookup(v)
				d.next[prev] = k
			}
			last = d.entries[k]
		}
		idx = append(idx, k)
	}
	d.idx, d.raw, d.last, d.lastIdx, d.hasLast = idx, raw, last, k, has
}

// lookup returns v's entry, adding it if it is new.
func (c *Chunk) lookup(v []byte) int32 {
	if k, ok := c.index[string(v)]; ok {
		return k
	}
	return c.addEntry(v)
}

// addEntry adds v to the dictionary and returns its index.
func (c *Chunk) addEntry(v []byte) int32 {
	d := &c.dictState
	if d.index == nil {
		d.index = make(map[string]int32)
	}
	k := c.appendEntry(v)
	d.index[string(v)] = k
	return k
}

// appendEntry adds v to the dictionary's entries (not to its index) and
// returns its index.
func (c *Chunk) appendEntry(v []byte) int32 {
	d := &c.dictState
	k := int32(len(d.entries))
	d.dict = binary.LittleEndian.AppendUint32(d.dict, uint32(len(v)))
	start := len(d.dict)
	d.dict = append(d.dict, v...)
	e := d.dict[start:len(d.dict):len(d.dict)]
	d.entries = append(d.entries, e)
	d.next = append(d.next, -1)
	c.str(e)
	return k
}

// fallBack makes the page under way and the chunk's later ones PLAIN: the
// page's values so far are written PLAIN from their entries. Without a page
// of indices written, the dictionary is dropped.
func (c *Chunk) fallBack() {
	d := &c.dictState
	vals := c.vals
	for _, k := range d.idx {
		e := d.entries[k]
		vals = binary.LittleEndian.AppendUint32(vals, uint32(len(e)))
		vals = append(vals, e...)
	}
	c.vals = vals
	d.idx, d.raw = d.idx[:0], 0
	d.dictOn, d.keepDict, d.hasLast = false, d.dictPages > 0, false
	c.enc = encPlain
}

// bitWidth is the indices' bit width with n entries (arrow-go's: at least
// 1 once there is an entry).
func bitWidth(n int) int {
	if n <= 1 {
		return n
	}
	return bits.Len32(uint32(n - 1))
}

// appendIndices appends the page's indices: their bit width, then the
// RLE/bit-packed hybrid.
func (c *Chunk) appendIndices(b []byte) []byte {
	w := bitWidth(len(c.entries))
	b = append(b, byte(w))
	return appendHybrid(b, c.idx, w)
}

// minRepeat is the shortest run of an index written as a repeated run.
const minRepeat = 8

// appendHybrid appends vs at bit width w in the RLE/bit-packed hybrid
// encoding: runs of at least minRepeat equal values as repeated runs,
// the values between them bit-packed in groups of 8 (a run first fills
// the group under way; the last group padded with zeros).
func appendHybrid(b []byte, vs []int32, w int) []byte {
	lit := 0 // vs[lit:i] are waiting to be bit-packed
	i := 0
	for i < len(vs) {
		j := i + 1
		for j < len(vs) && vs[j] == vs[i] {
			j++
		}
		if j-i < minRepeat {
			i = j
			continue
		}
		if r := (i - lit) % 8; r != 0 {
			i += 8 - r // the run fills the group under way
		}
		b = appendBitPacked(b, vs[lit:i], w)
		if i < j {
			b = binary.AppendUvarint(b, uint64(j-i)<<1)
			for k, v := 0, uint32(vs[i]); k < (w+7)/8; k++ {
				b = append(b, byte(v>>(8*k)))
			}
		}
		i, lit = j, j
	}
	return appendBitPacked(b, vs[lit:], w)
}

// appendBitPacked appends vs as one bit-packed run at width w, padded to
// a multiple of 8 values with zeros. A group of 8 values of at most 8 bits
// is packed in a word.
func appendBitPacked(b []byte, vs []int32, w int) []byte {
	if len(vs) == 0 {
		return b
	}
	groups := (len(vs) + 7) / 8
	b = binary.AppendUvarint(b, uint64(groups)<<1|1)
	if w <= 8 {
		for len(vs) > 0 {
			var acc uint64
			for j, v := range vs[:min(8, len(vs))] {
				acc |= uint64(uint32(v)) << (j * w)
			}
			b = binary.LittleEndian.AppendUint64(b, acc)
			b = b[:len(b)-8+w] // 8 values of w bits: w bytes
			vs = vs[min(8, len(vs)):]
		}
		return b
	}
	var acc uint64
	n := 0 // bits in acc
	for g := range groups * 8 {
		var v uint64
		if g < len(vs) {
			v = uint64(uint32(vs[g]))
		}
		acc |= v << n
		for n += w; n >= 8; n -= 8 {
			b = append(b, byte(acc))
			acc >>= 8
		}
	}
	return b
}

// finishDict builds the chunk's dictionary page (if it has one).
func (c *Chunk) finishDict() error {
	d := &c.dictState
	if !d.dictOn && !d.keepDict {
		return nil
	}
	if len(d.dict) > math.MaxInt32 {
		return fmt.Errorf("pqpage: dictionary page of %d bytes", len(d.dict))
	}
	data := d.dict
	if c.codec != nil {
		c.comp = c.codec.EncodeLevel(c.comp[:0], d.dict, c.opt.Level)
		data = c.comp
	}
	p := dictPageHeader(d.dictPage[:0], int32(len(d.dict)), int32(len(data)), int32(len(d.entries)), int32(c.opt.DictEncoding))
	c.uncomp += int64(len(p) + len(d.dict))
	d.dictPage = append(p, data...)
	return nil
}
