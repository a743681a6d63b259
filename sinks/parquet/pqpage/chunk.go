// Package pqpage encodes the column chunks of flat Parquet columns without
// arrow-go's column writers: Arrow arrays of int64, float64, bool,
// timestamp[ms] or string values in, data pages V1 (zstd-compressed, with
// their Thrift headers) and the chunk's statistics out. The caller lays the
// chunks out in a file and writes the footer (package parquet's
// ColumnWriter).
//
// The pages are what arrow-go writes for the same properties: definition
// levels RLE/bit-packed (bit width 1) for optional columns, values PLAIN
// (booleans bit-packed) or DELTA_BYTE_ARRAY for strings, or strings
// dictionary-encoded (dict.go: a dictionary page, then data pages of
// RLE_DICTIONARY indices, PLAIN past the dictionary's size limit),
// statistics as arrow-go computes them (min and max of the non-null values, byte arrays
// as unsigned bytes, floats without NaN and with -0 as the least zero and
// +0 the greatest, min or max dropped past the size limit), but no
// statistics in the page headers, which readers do not need.
//
// A file is written by pqpage only when every column is one it encodes
// (ColumnOptions is all or nothing): the run sink's per-snapshot files and
// the days replayed into the lake. Compaction's files whose encoding trials
// chose a dictionary for a column other than a string,
// DELTA_BINARY_PACKED integers or DELTA_LENGTH_BYTE_ARRAY strings for any
// column go, whole, through arrow-go's column writers (as do the trials
// themselves).
package pqpage

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// Parquet's encoding numbers (format.Encoding).
const (
	encPlain          = 0
	encPlainDict      = 2
	encRLE            = 3
	encDeltaByteArray = 7
	encRLEDict        = 8
)

// defaultBatchRows is Options.BatchRows when it is not set (arrow-go's
// default write batch size).
const defaultBatchRows = 1024

// Options describe a column chunk.
type Options struct {
	Type         arrow.DataType       // of the arrays (Supported)
	Optional     bool                 // definition levels (the column is nullable)
	Delta        bool                 // DELTA_BYTE_ARRAY values (strings only); PLAIN otherwise
	Stats        bool                 // keep min, max and null count
	Signed       bool                 // the column's sort order is signed (statistics' legacy min/max fields)
	Codec        compress.Compression // of the pages
	Level        int                  // the codec's level
	PageSize     int64                // a page is closed once its values take this many bytes
	MaxStatsSize int64                // a longer min or max is left out (arrow-go's MaxStatsSize)
	BatchRows    int                  // rows encoded between two checks of the page's size (arrow-go's WriteBatchSize; 0: 1024)

	// Dict encodes strings with a dictionary (dict.go); not with Delta.
	Dict          bool
	DictPageSize  int64            // the dictionary's PLAIN bytes past which the chunk's later pages are PLAIN (arrow-go's DictionaryPageSizeLimit)
	IndexEncoding parquet.Encoding // of the data pages of indices: RLE_DICTIONARY (PLAIN_DICTIONARY for Parquet 1.0)
	DictEncoding  parquet.Encoding // of the dictionary page: PLAIN (PLAIN_DICTIONARY for Parquet 1.0)
}

type kind int

const (
	kindInt64 kind = iota + 1
	kindFloat64
	kindBool
	kindString
)

func kindOf(t arrow.DataType) kind {
	switch t.ID() {
	case arrow.INT64:
		return kindInt64
	case arrow.TIMESTAMP:
		if u := t.(*arrow.TimestampType).Unit; u == arrow.Millisecond || u == arrow.Microsecond {
			return kindInt64 // stored as is: INT64 TIMESTAMP(MILLIS) or TIMESTAMP(MICROS)
		}
	case arrow.FLOAT64:
		return kindFloat64
	case arrow.BOOL:
		return kindBool
	case arrow.STRING:
		return kindString
	}
	return 0
}

// Supported reports whether a Chunk encodes arrays of type t.
func Supported(t arrow.DataType) bool { return kindOf(t) != 0 }

// Chunk encodes one column's values into the pages of a column chunk:
// Append the row group's arrays, Finish, then read Bytes and Meta; Reset
// starts the next row group's chunk with the same buffers.
type Chunk struct {
	opt   Options
	kind  kind
	enc   int32
	codec compress.Codec // nil: uncompressed

	// the page under way
	rows   int    // its values, nulls included
	nulls  int    // its nulls
	valid  []byte // its validity bitmap (Optional)
	vals   []byte // head bytes left for the lead, then the values: PLAIN; DELTA_BYTE_ARRAY the suffixes
	head   int    // bytes before the values in vals
	nbits  int    // booleans in vals
	prefix []int32
	suffix []int32
	last   []byte // the page's last string (delta)

	// scratch: the page's lead (levels, delta lengths: what precedes the
	// values), the page when its lead does not fit in head, the page
	// compressed
	lead, page, comp []byte

	// the chunk
	out       []byte // pages with their headers
	values    int64
	uncomp    int64
	pages     int32
	nullCount int64

	// statistics
	hasMinMax      bool
	minI, maxI     int64
	minF, maxF     float64
	minB, maxB     bool
	minS, maxS     []byte
	minK, maxK     uint64 // key(minS), key(maxS)
	minBuf, maxBuf []byte // minS, maxS once owned
	lastBuf        []byte // last, once owned

	dictState // Options.Dict
}

// New returns a Chunk for opt.
func New(opt Options) (*Chunk, error) {
	k := kindOf(opt.Type)
	if k == 0 {
		return nil, fmt.Errorf("pqpage: no encoder for %s", opt.Type)
	}
	if opt.Delta && k != kindString {
		return nil, fmt.Errorf("pqpage: DELTA_BYTE_ARRAY for %s", opt.Type)
	}
	if opt.Dict && (k != kindString || opt.Delta) {
		return nil, fmt.Errorf("pqpage: dictionary for %s (delta %v)", opt.Type, opt.Delta)
	}
	if opt.Dict && (opt.IndexEncoding != encRLEDict && opt.IndexEncoding != encPlainDict || opt.DictEncoding != encPlain && opt.DictEncoding != encPlainDict) {
		return nil, fmt.Errorf("pqpage: dictionary pages %s, indices %s", opt.DictEncoding, opt.IndexEncoding)
	}
	if opt.BatchRows <= 0 {
		opt.BatchRows = defaultBatchRows
	}
	c := &Chunk{opt: opt, kind: k}
	if opt.Optional || opt.Delta {
		c.head = minHead
	}
	if opt.Codec != compress.Codecs.Uncompressed {
		codec, err := compress.GetCodec(opt.Codec)
		if err != nil {
			return nil, fmt.Errorf("pqpage: %w", err)
		}
		c.codec = codec
	}
	c.Reset()
	return c, nil
}

// Reset empties the chunk for the next row group.
func (c *Chunk) Reset() {
	c.out = c.out[:0]
	c.values, c.uncomp, c.pages, c.nullCount = 0, 0, 0, 0
	c.hasMinMax = false
	c.minI, c.maxI = math.MaxInt64, math.MinInt64
	c.minF, c.maxF = math.Inf(1), math.Inf(-1)
	c.minB, c.maxB = true, false
	c.minS, c.maxS = nil, nil
	c.enc = encPlain
	if c.opt.Delta {
		c.enc = encDeltaByteArray
	}
	c.resetDict()
	c.resetPage()
}

func (c *Chunk) resetPage() {
	c.rows, c.nulls, c.nbits = 0, 0, 0
	c.valid, c.vals = c.valid[:0], slices.Grow(c.vals[:0], c.head)[:c.head]
	c.prefix, c.suffix = c.prefix[:0], c.suffix[:0]
	c.last = nil
	c.idx, c.raw = c.idx[:0], 0
}

// Append adds arr's values (of the Options' type) to the chunk, closing
// pages as they fill.
func (c *Chunk) Append(arr arrow.Array) error {
	if !arrow.TypeEqual(arr.DataType(), c.opt.Type) {
		return fmt.Errorf("pqpage: %s array for a %s column", arr.DataType(), c.opt.Type)
	}
	if !c.opt.Optional && arr.NullN() > 0 {
		return fmt.Errorf("pqpage: %d nulls in a required column", arr.NullN())
	}
	if err := c.dictBy(byValue); err != nil {
		return err
	}
	n := arr.Len()
	for off := 0; off < n; off += c.opt.BatchRows {
		if err := c.batch(arr, off, min(n, off+c.opt.BatchRows)); err != nil {
			return err
		}
		if c.size() >= c.opt.PageSize {
			if err := c.flush(); err != nil {
				return err
			}
		}
		if c.dictOn && int64(len(c.dict)) >= c.opt.DictPageSize {
			c.fallBack()
		}
	}
	c.own()
	return nil
}

// size estimates the page's encoded values: their bytes (PLAIN), the
// suffixes' (DELTA_BYTE_ARRAY, whose lengths take a few bits each), as
// arrow-go's encoders estimate them. Counting the delta lengths as 2 bytes
// a value made the 1M listing's instrument_id 11% larger (smaller pages).
// A page of dictionary indices counts its values' PLAIN bytes, as arrow-go
// (and parquet-mr) size it.
func (c *Chunk) size() int64 {
	if c.dictOn {
		return c.raw
	}
	return int64(len(c.vals) - c.head)
}

// own copies what the chunk keeps of the last array (the page's last
// string, the min and max strings) out of it: the caller releases it.
func (c *Chunk) own() {
	if c.kind != kindString {
		return
	}
	if c.last != nil && !aliases(c.last, c.lastBuf) {
		c.lastBuf = append(c.lastBuf[:0], c.last...)
		c.last = c.lastBuf
	}
	if c.minS != nil && !aliases(c.minS, c.minBuf) {
		c.minBuf = append(c.minBuf[:0], c.minS...)
		c.minS = c.minBuf
	}
	if c.maxS != nil && !aliases(c.maxS, c.maxBuf) {
		c.maxBuf = append(c.maxBuf[:0], c.maxS...)
		c.maxS = c.maxBuf
	}
}

// aliases reports whether s is buf (a value already owned).
func aliases(s, buf []byte) bool {
	return len(s) == len(buf) && (len(s) == 0 && buf != nil || len(s) > 0 && &s[0] == &buf[0])
}

// batch encodes rows [lo, hi) of arr into the page under way.
func (c *Chunk) batch(arr arrow.Array, lo, hi int) error {
	data := arr.Data()
	off := data.Offset()
	n := hi - lo
	var bitmap []byte // arr's validity; nil: no nulls in arr
	if arr.NullN() > 0 {
		bitmap = data.Buffers()[0].Bytes()
	}
	nulls := 0
	if c.opt.Optional {
		start := c.rows
		if need := int(bitutil.BytesForBits(int64(start + n))); need > len(c.valid) {
			c.valid = append(c.valid, make([]byte, need-len(c.valid))...)
		}
		if bitmap == nil {
			bitutil.SetBitsTo(c.valid, int64(start), int64(n), true)
		} else {
			bitutil.CopyBitmap(bitmap, off+lo, n, c.valid, start)
			nulls = n - bitutil.CountSetBits(c.valid, start, n)
		}
	}
	c.rows += n
	c.nulls += nulls
	c.nullCount += int64(nulls)
	if nulls == n {
		return nil
	}
	if nulls == 0 {
		bitmap = nil
	}
	switch c.kind {
	case kindInt64, kindFloat64:
		c.vals = grow(c.vals, 8*n, c.full())
	case kindBool:
		c.vals = grow(c.vals, n/8+1, c.full())
	}
	switch c.kind {
	case kindInt64:
		vs := arrow.Int64Traits.CastFromBytes(data.Buffers()[1].Bytes())[off+lo : off+hi]
		c.int64s(vs, bitmap, off+lo)
	case kindFloat64:
		vs := arrow.Float64Traits.CastFromBytes(data.Buffers()[1].Bytes())[off+lo : off+hi]
		c.float64s(vs, bitmap, off+lo)
	case kindBool:
		c.bools(data.Buffers()[1].Bytes(), off+lo, n, bitmap)
	case kindString:
		offsets := arrow.Int32Traits.CastFromBytes(data.Buffers()[1].Bytes())[off+lo : off+hi+1]
		var values []byte
		if b := data.Buffers()[2]; b != nil {
			values = b.Bytes()
		}
		if c.dictOn {
			c.dictStrings(values, offsets, bitmap, off+lo)
		} else if c.opt.Delta {
			c.deltaStrings(values, offsets, bitmap, off+lo)
		} else {
			c.plainStrings(values, offsets, bitmap, off+lo)
		}
	}
	return nil
}

func (c *Chunk) int64s(vs []int64, bitmap []byte, bit int) {
	lo, hi, any := c.minI, c.maxI, false
	if bitmap == nil {
		c.vals = append(c.vals, arrow.Int64Traits.CastToBytes(vs)...)
		for _, v := range vs {
			lo, hi = min(lo, v), max(hi, v)
		}
		any = len(vs) > 0
	} else {
		for i, v := range vs {
			if bitutil.BitIsSet(bitmap, bit+i) {
				c.vals = binary.LittleEndian.AppendUint64(c.vals, uint64(v))
				lo, hi, any = min(lo, v), max(hi, v), true
			}
		}
	}
	if any {
		c.minI, c.maxI, c.hasMinMax = lo, hi, true
	}
}

func (c *Chunk) float64s(vs []float64, bitmap []byte, bit int) {
	lo, hi := c.minF, c.maxF
	if bitmap == nil {
		c.vals = append(c.vals, arrow.Float64Traits.CastToBytes(vs)...)
		for _, v := range vs {
			if v < lo { // NaN compares false: left out
				lo = v
			}
			if v > hi {
				hi = v
			}
		}
	} else {
		for i, v := range vs {
			if bitutil.BitIsSet(bitmap, bit+i) {
				c.vals = binary.LittleEndian.AppendUint64(c.vals, math.Float64bits(v))
				if v < lo {
					lo = v
				}
				if v > hi {
					hi = v
				}
			}
		}
	}
	c.minF, c.maxF = lo, hi
	// a ±0 run keeps the first zero seen; Meta makes min -0 and max +0
	c.hasMinMax = c.hasMinMax || lo <= hi
}

func (c *Chunk) bools(values []byte, bit, n int, bitmap []byte) {
	if bitmap == nil { // the bits copied as they are (bit-packed, LSB first)
		need := c.head + int(bitutil.BytesForBits(int64(c.nbits+n)))
		c.vals = append(c.vals, make([]byte, need-len(c.vals))...)
		bitutil.CopyBitmap(values, bit, n, c.vals[c.head:], c.nbits)
		c.nbits += n
		set := bitutil.CountSetBits(values, bit, n)
		c.minB = c.minB && set == n
		c.maxB = c.maxB || set > 0
		c.hasMinMax = c.hasMinMax || n > 0
		return
	}
	for i := range n {
		if bitmap != nil && !bitutil.BitIsSet(bitmap, bit+i) {
			continue
		}
		v := bitutil.BitIsSet(values, bit+i)
		if c.nbits%8 == 0 {
			c.vals = append(c.vals, 0)
		}
		if v {
			c.vals[len(c.vals)-1] |= 1 << (c.nbits % 8)
		}
		c.nbits++
		c.minB = c.minB && v
		c.maxB = c.maxB || v
		c.hasMinMax = true
	}
}

// str notes string v for the statistics: only a value that can be a new
// min or max (its key not strictly between theirs) is compared.
func (c *Chunk) str(v []byte) {
	if c.opt.Stats {
		c.strKey(v, key(v))
	}
}

// strKey is str for v of key k.
func (c *Chunk) strKey(v []byte, k uint64) {
	if !c.hasMinMax {
		c.minS, c.maxS, c.minK, c.maxK, c.hasMinMax = v, v, k, k, true
		return
	}
	if k > c.minK && k < c.maxK {
		return
	}
	if k < c.minK || k == c.minK && compareSameKey(v, c.minS) < 0 {
		c.minS, c.minK = v, k
	} else if k > c.maxK || k == c.maxK && compareSameKey(v, c.maxS) > 0 {
		c.maxS, c.maxK = v, k
	}
}

// compareSameKey is bytes.Compare(a, b) for a and b of the same key: past
// their first 8 bytes, or by length when one has no more (the shorter one's
// key is padded with zeros: it is the other's prefix).
func compareSameKey(a, b []byte) int {
	if len(a) <= 8 || len(b) <= 8 {
		return cmp.Compare(len(a), len(b))
	}
	return bytes.Compare(a[8:], b[8:])
}

// key is v's first 8 bytes as a big-endian number, zero-padded: a string
// whose key is less (greater) than another's is less (greater) as bytes.
func key(v []byte) uint64 {
	if len(v) >= 8 {
		return binary.BigEndian.Uint64(v)
	}
	var k uint64
	for i, b := range v {
		k |= uint64(b) << (56 - 8*i)
	}
	return k
}

// plainStrings appends the strings PLAIN: each its length, then its
// bytes. A string of at most 16 bytes is read and written as two words
// (the bytes written past it are overwritten by the next one; vals has
// room for them), which also give its key and the next 8 bytes' (tail).
// A string equal to the one before it is not compared with the min and
// max again (a sorted day repeats most columns' values row after row).
func (c *Chunk) plainStrings(values []byte, offsets []int32, bitmap []byte, bit int) {
	n := len(offsets) - 1
	vals := grow(c.vals, 4*n+int(offsets[n]-offsets[0])+16, c.full())
	stats := c.opt.Stats
	var prev []byte
	var prevK, prevT uint64
	noted := false // prev is in the statistics
	for i := range n {
		if bitmap != nil && !bitutil.BitIsSet(bitmap, bit+i) {
			continue
		}
		lo, hi := int(offsets[i]), int(offsets[i+1])
		v := values[lo:hi]
		var k, t uint64
		if m := len(vals); len(v) <= 16 && lo+16 <= len(values) {
			w0, w1 := binary.BigEndian.Uint64(values[lo:]), binary.BigEndian.Uint64(values[lo+8:])
			vals = vals[:m+20]
			binary.LittleEndian.PutUint32(vals[m:], uint32(len(v)))
			binary.BigEndian.PutUint64(vals[m+4:], w0)
			binary.BigEndian.PutUint64(vals[m+12:], w1)
			vals = vals[:m+4+len(v)]
			k, t = w0&firstBytes(len(v)), w1&firstBytes(len(v)-8)
		} else {
			vals = binary.LittleEndian.AppendUint32(vals, uint32(len(v)))
			vals = append(vals, v...)
			k, t = key(v), key(v[min(8, len(v)):])
		}
		if !stats || noted && k == prevK && t == prevT && len(v) == len(prev) && (len(v) <= 16 || bytes.Equal(v[16:], prev[16:])) {
			continue
		}
		c.strKey(v, k)
		prev, prevK, prevT, noted = v, k, t, true
	}
	c.vals = vals
}

// firstBytes is the mask of a big-endian word's first n bytes (none for n
// <= 0, all for n >= 8).
func firstBytes(n int) uint64 {
	return ^(1<<(64-8*min(max(n, 0), 8)) - 1)
}

// deltaStrings appends the strings DELTA_BYTE_ARRAY: the length of the
// prefix each shares with the one before it, the length of the rest and
// the rest. A string equal to the one before it (all of it a prefix of
// the same length) is not compared with the min and max again.
func (c *Chunk) deltaStrings(values []byte, offsets []int32, bitmap []byte, bit int) {
	n := len(offsets) - 1
	vals := grow(c.vals, int(offsets[n]-offsets[0]), c.full())
	prefix, suffix := grow(c.prefix, n, math.MaxInt), grow(c.suffix, n, math.MaxInt)
	last := c.last
	noted := false // last is in the statistics
	for i := range n {
		if bitmap != nil && !bitutil.BitIsSet(bitmap, bit+i) {
			continue
		}
		v := values[offsets[i]:offsets[i+1]]
		p := commonPrefix(last, v)
		prefix = append(prefix, int32(p))
		suffix = append(suffix, int32(len(v)-p))
		vals = append(vals, v[p:]...)
		same := noted && p == len(v) && p == len(last)
		last = v
		if same {
			continue
		}
		c.str(v)
		noted = true
	}
	c.vals, c.prefix, c.suffix, c.last = vals, prefix, suffix, last
}

// full is about the most a page's buffer holds: the page size, a batch
// of 8-byte values past it and the lead's room.
func (c *Chunk) full() int {
	return c.head + int(min(c.opt.PageSize, math.MaxInt32)) + 8*c.opt.BatchRows
}

// grow returns s with room for n more elements: twice its capacity, at
// most limit, or more if n needs it (append grows a large slice by 1.25x,
// so a page's buffer was copied some 20 times on its way to the page
// size; a chunk that never fills a page keeps a buffer of its size).
func grow[E any](s []E, n, limit int) []E {
	if n <= cap(s)-len(s) {
		return s
	}
	c := min(2*cap(s), limit)
	return slices.Grow(s, max(n, c-len(s)))
}

func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+8 <= n && binary.LittleEndian.Uint64(a[i:]) == binary.LittleEndian.Uint64(b[i:]) {
		i += 8
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// minHead is the room first left before the values of a page with a lead.
const minHead = 64

// flush closes the page under way: levels and values, compressed, after
// their header. The lead (levels, delta lengths) is written into the room
// left before the values, so that the values are not copied: when it does
// not fit, the page is put together in c.page and the next pages leave
// more room.
func (c *Chunk) flush() error {
	if c.rows == 0 {
		return nil
	}
	lead := c.lead[:0]
	if c.opt.Optional {
		lead = append(lead, 0, 0, 0, 0)
		var bitmap []byte
		if c.nulls > 0 {
			bitmap = c.valid
		}
		lead = appendLevels(lead, bitmap, c.rows)
		binary.LittleEndian.PutUint32(lead, uint32(len(lead)-4))
	}
	if c.dictOn {
		c.vals = c.appendIndices(c.vals)
	}
	if c.opt.Delta {
		lead = appendDeltaPacked(lead, c.prefix)
		lead = appendDeltaPacked(lead, c.suffix)
	}
	c.lead = lead
	var p []byte
	if len(lead) <= c.head {
		p = c.vals[c.head-len(lead):]
		copy(p, lead)
	} else {
		p = append(append(c.page[:0], lead...), c.vals[c.head:]...)
		c.page = p
		c.head = max(c.head, len(lead)+len(lead)/4)
	}
	if len(p) > math.MaxInt32 {
		return fmt.Errorf("pqpage: page of %d bytes", len(p))
	}
	data := p
	if c.codec != nil {
		c.comp = c.codec.EncodeLevel(c.comp[:0], p, c.opt.Level)
		data = c.comp
	}
	n := len(c.out)
	c.out = pageHeader(c.out, int32(len(p)), int32(len(data)), int32(c.rows), c.enc)
	c.uncomp += int64(len(c.out)-n) + int64(len(p))
	c.out = append(c.out, data...)
	c.values += int64(c.rows)
	c.pages++
	if c.dictOn {
		c.dictPages++
	}
	c.resetPage()
	return nil
}

// Finish closes the last page (and builds the dictionary page).
func (c *Chunk) Finish() error {
	if err := c.flush(); err != nil {
		return err
	}
	return c.finishDict()
}

// Done returns the finished chunk (after Finish) as a Chunk of its own
// holding only its pages (the dictionary page included) and what Meta
// says of them, for a later
// File.WriteRowGroup: c may be Reset and reused for another row group
// meanwhile (a file written a column at a time, every row group of a
// column before the next column).
func (c *Chunk) Done() *Chunk {
	return &Chunk{opt: c.opt, kind: c.kind, enc: c.enc, rows: c.rows,
		out: bytes.Clone(c.out), values: c.values, uncomp: c.uncomp, pages: c.pages, nullCount: c.nullCount,
		hasMinMax: c.hasMinMax, minI: c.minI, maxI: c.maxI, minF: c.minF, maxF: c.maxF, minB: c.minB, maxB: c.maxB,
		minS: bytes.Clone(c.minS), maxS: bytes.Clone(c.maxS),
		dictState: dictState{keepDict: c.keepDict, dictPages: c.dictPages, dictPage: bytes.Clone(c.dictPage)}}
}

// Bytes are the chunk's data pages, their headers included (after
// Finish); its dictionary page, if any, is DictPage.
func (c *Chunk) Bytes() []byte { return c.out }

// DictPage is the chunk's dictionary page, its header included, which
// precedes Bytes in the file (after Finish; empty: none).
func (c *Chunk) DictPage() []byte { return c.dictPage }

// Meta is what the footer says of the chunk (after Finish).
type Meta struct {
	Values           int64                       // nulls included
	CompressedSize   int64                       // len(DictPage) + len(Bytes)
	UncompressedSize int64                       // headers and uncompressed pages
	Pages            int32                       // data pages
	Encoding         parquet.Encoding            // of the data pages (after a dictionary's fallback, of the PLAIN ones)
	DictPage         int64                       // len(DictPage): 0 when the chunk has no dictionary page
	DictEncoding     parquet.Encoding            // of the dictionary page
	IndexPages       int32                       // the first of Pages, dictionary indices
	IndexEncoding    parquet.Encoding            // of IndexPages
	Fallback         bool                        // the dictionary filled up after IndexPages: the later values PLAIN
	Stats            *metadata.EncodedStatistics // nil without Options.Stats
}

// Meta returns the chunk's metadata.
func (c *Chunk) Meta() Meta {
	m := Meta{Values: c.values, CompressedSize: int64(len(c.dictPage) + len(c.out)), UncompressedSize: c.uncomp, Pages: c.pages, Encoding: parquet.Encoding(c.enc),
		DictPage: int64(len(c.dictPage)), DictEncoding: c.opt.DictEncoding, IndexPages: c.dictPages, IndexEncoding: c.opt.IndexEncoding, Fallback: c.keepDict}
	if !c.opt.Stats {
		return m
	}
	s := &metadata.EncodedStatistics{Signed: c.opt.Signed}
	s.SetNullCount(c.nullCount)
	s.AllNullValue = c.values == c.nullCount
	if c.hasMinMax {
		var lo, hi []byte
		switch c.kind {
		case kindInt64:
			lo, hi = binary.LittleEndian.AppendUint64(nil, uint64(c.minI)), binary.LittleEndian.AppendUint64(nil, uint64(c.maxI))
		case kindFloat64:
			mn, mx := c.minF, c.maxF
			if mn == 0 {
				mn = math.Copysign(0, -1)
			}
			if mx == 0 {
				mx = 0
			}
			lo, hi = binary.LittleEndian.AppendUint64(nil, math.Float64bits(mn)), binary.LittleEndian.AppendUint64(nil, math.Float64bits(mx))
		case kindBool:
			lo, hi = []byte{b2i(c.minB)}, []byte{b2i(c.maxB)}
		case kindString:
			lo, hi = bytes.Clone(c.minS), bytes.Clone(c.maxS)
			if lo == nil {
				lo = []byte{}
			}
			if hi == nil {
				hi = []byte{}
			}
		}
		if int64(len(lo)) <= c.opt.MaxStatsSize {
			s.SetMin(lo)
		}
		if int64(len(hi)) <= c.opt.MaxStatsSize {
			s.SetMax(hi)
		}
	}
	m.Stats = s
	return m
}

func b2i(b bool) byte {
	if b {
		return 1
	}
	return 0
}
