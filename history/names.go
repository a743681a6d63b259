package history

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// errNotDelta says a column chunk is not one fastRows reads: its pages
// are read through arrow-go's decoder instead (rowsDecoded).
var errNotDelta = errors.New("not a DELTA_BYTE_ARRAY or dictionary chunk without nulls")

// fastRows is rowsOf for the chunks the lake's files hold for
// instrument_name, pages of DELTA_BYTE_ARRAY (a replayed day, a
// per-snapshot file) or of dictionary indices (a day compaction chose a
// dictionary for), without nulls. It compares each DELTA_BYTE_ARRAY name,
// rebuilt in one buffer, with name, and of a dictionary it compares the
// entries once and then walks the indices' runs; it makes no value of a
// row. arrow-go's decoder allocates and copies every value of the chunk,
// which on a year of compacted days was most of history's CPU (a row group
// of 131,072 names a day, for the ~288 rows of one instrument).
// errNotDelta when the chunk has another encoding (a dictionary's PLAIN
// fallback pages) or nulls.
func fastRows(rg *file.RowGroupReader, cc *metadata.ColumnChunkMetaData, nameCol int, name string, sorted bool, n *Reads) (matches, error) {
	for _, e := range cc.Encodings() {
		switch e {
		case parquet.Encodings.DeltaByteArray, parquet.Encodings.RLE, parquet.Encodings.BitPacked,
			parquet.Encodings.RLEDict, parquet.Encodings.PlainDict, parquet.Encodings.Plain: // PLAIN: a dictionary page's
		default:
			return matches{}, errNotDelta
		}
	}
	desc := rg.MetaData().Schema.Column(nameCol)
	if desc.MaxRepetitionLevel() > 0 {
		return matches{}, errNotDelta
	}
	if desc.MaxDefinitionLevel() > 0 {
		stats, err := cc.Statistics()
		if err != nil || stats == nil || !stats.HasNullCount() || stats.NullCount() != 0 {
			return matches{}, errNotDelta // nulls: rows and values differ
		}
	}
	pr, err := rg.GetColumnPageReader(nameCol)
	if err != nil {
		return matches{}, err
	}
	defer pr.Close()
	m := matches{lo: -1, hi: -1, all: sorted, at: map[int64]bool{}}
	d := scans.Get().(*deltaScan)
	defer scans.Put(d)
	d.dict = nil
	var at int64
	hit := func(i, k int) { // rows at+i to at+i+k hold name
		r := at + int64(i)
		if m.lo < 0 {
			m.lo = r
		}
		m.hi = r + int64(k)
		if !sorted {
			for j := range int64(k) {
				m.at[r+j] = true
			}
		}
	}
	for pr.Next() {
		pg := pr.Page()
		var data []byte
		switch p := pg.(type) {
		case *file.DictionaryPage:
			if err := d.dictionary(pg.Data(), int(pg.NumValues()), name); err != nil {
				return matches{}, fmt.Errorf("instrument_name: dictionary: %w", err)
			}
			continue
		case *file.DataPageV1:
			data = pg.Data()
			if desc.MaxDefinitionLevel() > 0 { // RLE levels, after their 4-byte length
				if p.DefinitionLevelEncoding() != parquet.Encodings.RLE || len(data) < 4 {
					return matches{}, errNotDelta
				}
				l := int(binary.LittleEndian.Uint32(data))
				if l > len(data)-4 {
					return matches{}, fmt.Errorf("instrument_name: a page's levels are %d bytes of %d", l, len(data)-4)
				}
				data = data[4+l:]
			}
		case *file.DataPageV2:
			data = pg.Data()
			skip := int(p.DefinitionLevelByteLen()) + int(p.RepetitionLevelByteLen())
			if p.NumNulls() != 0 || skip > len(data) {
				return matches{}, errNotDelta
			}
			data = data[skip:]
		default:
			continue // an index page
		}
		rows := int64(pg.NumValues())
		n.Rows += rows
		var past bool
		switch parquet.Encoding(pg.Encoding()) {
		case parquet.Encodings.DeltaByteArray:
			past, err = d.scan(data, int(rows), name, hit, sorted)
		case parquet.Encodings.RLEDict, parquet.Encodings.PlainDict:
			past, err = d.indices(data, int(rows), hit, sorted)
		default:
			return matches{}, errNotDelta
		}
		if err != nil {
			return matches{}, fmt.Errorf("instrument_name: %w", err)
		}
		if past {
			return m.found(), nil
		}
		at += rows
	}
	if err := pr.Err(); err != nil {
		return matches{}, err
	}
	return m.found(), nil
}

// scans keeps fastRows' buffers from one row group to the next (a
// compacted day's are two lengths a row, 2 MiB).
var scans = sync.Pool{New: func() any { return new(deltaScan) }}

// deltaScan holds the buffers of fastRows' pages: a DELTA_BYTE_ARRAY
// page's lengths and its last value, and the dictionary's entries compared
// with the name read (-1, 0, 1).
type deltaScan struct {
	prefix, suffix []int64
	cur            []byte
	dict           []int8 // nil before the chunk's dictionary page
	dictBuf        []int8
	hasName        bool // an entry of dict is the name
}

// dictionary takes a dictionary page of n PLAIN strings (a 4-byte length
// and the bytes, each) and compares each with name.
func (d *deltaScan) dictionary(data []byte, n int, name string) error {
	d.dict, d.hasName = d.dictBuf[:0], false
	defer func() { d.dictBuf = d.dict }()
	want := []byte(name)
	for range n {
		if len(data) < 4 {
			return errors.New("truncated")
		}
		l := int(binary.LittleEndian.Uint32(data))
		if l > len(data)-4 {
			return errors.New("truncated")
		}
		c := int8(bytes.Compare(data[4:4+l], want))
		d.hasName = d.hasName || c == 0
		d.dict = append(d.dict, c)
		data = data[4+l:]
	}
	return nil
}

// indices walks a dictionary page's n indices (a bit width, then runs of
// the RLE/bit-packed hybrid) and calls hit with each run of rows whose
// entry is the name; sorted: it stops at the first entry past the name
// and reports it (past).
func (d *deltaScan) indices(data []byte, n int, hit func(i, k int), sorted bool) (past bool, err error) {
	if d.dict == nil {
		return false, errors.New("dictionary indices before a dictionary")
	}
	if !d.hasName && !sorted {
		return false, nil
	}
	if len(data) < 1 || data[0] > 32 {
		return false, errors.New("bad index bit width")
	}
	w := int(data[0])
	data = data[1:]
	entry := func(v uint64) (int8, error) {
		if v >= uint64(len(d.dict)) {
			return 0, fmt.Errorf("index %d of a dictionary of %d", v, len(d.dict))
		}
		return d.dict[v], nil
	}
	for i := 0; i < n; {
		h, k := binary.Uvarint(data)
		if k <= 0 {
			return false, errors.New("truncated indices")
		}
		data = data[k:]
		if h&1 == 0 { // a run of one index
			c, size := min(int(h>>1), n-i), (w+7)/8
			if len(data) < size || c == 0 {
				return false, errors.New("bad index run")
			}
			var v uint64
			for j := range size {
				v |= uint64(data[j]) << (8 * j)
			}
			data = data[size:]
			e, err := entry(v)
			if err != nil {
				return false, err
			}
			switch {
			case e == 0:
				hit(i, c)
			case e > 0 && sorted:
				return true, nil
			}
			i += c
			continue
		}
		c, size := int(h>>1)*8, int(h>>1)*w
		if len(data) < size || c == 0 {
			return false, errors.New("bad bit-packed indices")
		}
		for j := range min(c, n-i) {
			e, err := entry(bits(data, j*w, w))
			if err != nil {
				return false, err
			}
			switch {
			case e == 0:
				hit(i+j, 1)
			case e > 0 && sorted:
				return true, nil
			}
		}
		data = data[size:]
		i += c
	}
	return false, nil
}

// scan compares the n values of a DELTA_BYTE_ARRAY page with name and
// calls hit with the index of each that equals it; sorted: it stops at
// the first value past name and reports it (past).
func (d *deltaScan) scan(data []byte, n int, name string, hit func(i, k int), sorted bool) (past bool, err error) {
	if d.prefix, data, err = unpackDeltas(data, d.prefix[:0]); err != nil {
		return false, fmt.Errorf("prefix lengths: %w", err)
	}
	if d.suffix, data, err = unpackDeltas(data, d.suffix[:0]); err != nil {
		return false, fmt.Errorf("suffix lengths: %w", err)
	}
	if len(d.prefix) != n || len(d.suffix) != n {
		return false, fmt.Errorf("a page of %d values has %d prefix and %d suffix lengths", n, len(d.prefix), len(d.suffix))
	}
	// cur is the value, equal to want up to mis and compared c with it:
	// a value that keeps more than mis bytes of the one before compares
	// as it did (its first difference with want is the same byte), so
	// most values are not compared at all.
	cur, want := d.cur[:0], []byte(name)
	mis, c := 0, -1
	for i := range n {
		p, s := d.prefix[i], d.suffix[i]
		if p < 0 || p > int64(len(cur)) || s < 0 || s > int64(len(data)) {
			return false, fmt.Errorf("value %d: prefix %d of %d bytes, suffix %d of %d bytes left", i, p, len(cur), s, len(data))
		}
		cur = append(cur[:p], data[:s]...)
		data = data[s:]
		if int(p) <= mis {
			mis = min(mis, int(p))
			for mis < len(cur) && mis < len(want) && cur[mis] == want[mis] {
				mis++
			}
			c = bytes.Compare(cur[mis:], want[mis:])
		}
		switch {
		case c == 0:
			hit(i, 1)
		case c > 0 && sorted:
			d.cur = cur
			return true, nil
		}
	}
	d.cur = cur
	return false, nil
}

// unpackDeltas decodes one DELTA_BINARY_PACKED run at the start of data
// (the Parquet spec's: a header of block size, miniblocks per block, value
// count and first value; then blocks of a min delta, the miniblocks' bit
// widths and the bit-packed deltas), appends its values to out and returns
// the bytes after it.
func unpackDeltas(data []byte, out []int64) ([]int64, []byte, error) {
	uv := func() (uint64, error) {
		v, k := binary.Uvarint(data)
		if k <= 0 {
			return 0, errors.New("truncated header")
		}
		data = data[k:]
		return v, nil
	}
	block, err := uv()
	if err != nil {
		return nil, nil, err
	}
	minis, err := uv()
	if err != nil {
		return nil, nil, err
	}
	total, err := uv()
	if err != nil {
		return nil, nil, err
	}
	if block == 0 || block%128 != 0 || minis == 0 || block%minis != 0 || (block/minis)%32 != 0 || total > 1<<31 {
		return nil, nil, fmt.Errorf("bad header (block %d, miniblocks %d, values %d)", block, minis, total)
	}
	last, k := binary.Varint(data)
	if k <= 0 {
		return nil, nil, errors.New("truncated first value")
	}
	data = data[k:]
	if total == 0 {
		return out, data, nil
	}
	out = slices.Grow(out, int(total))
	out = append(out, last)
	per := int(block / minis)
	for uint64(len(out)) < total {
		minDelta, k := binary.Varint(data)
		if k <= 0 || uint64(len(data)-k) < minis {
			return nil, nil, errors.New("truncated block")
		}
		widths := data[k : k+int(minis)]
		data = data[k+int(minis):]
		for _, w := range widths {
			if uint64(len(out)) == total {
				break
			}
			if w > 64 {
				return nil, nil, fmt.Errorf("bit width %d", w)
			}
			size := per * int(w) / 8
			if len(data) < size {
				return nil, nil, errors.New("truncated miniblock")
			}
			k := min(per, int(total-uint64(len(out))))
			if w <= 56 && (k-1)*int(w)/8+8 <= len(data) { // a 64-bit load a value
				mask := uint64(1)<<w - 1
				for j := range k {
					off := j * int(w)
					last += minDelta + int64(binary.LittleEndian.Uint64(data[off>>3:])>>(off&7)&mask)
					out = append(out, last)
				}
			} else {
				for j := range k {
					last += minDelta + int64(bits(data, j*int(w), int(w)))
					out = append(out, last)
				}
			}
			data = data[size:]
		}
	}
	return out, data, nil
}

// bits reads w bits at bit offset off of b, least significant first (the
// Parquet bit-packing order); the caller checked that they are in b.
func bits(b []byte, off, w int) uint64 {
	if w == 0 {
		return 0
	}
	i, sh := off/8, off%8
	if w <= 56 && i+8 <= len(b) {
		return binary.LittleEndian.Uint64(b[i:]) >> sh & (1<<w - 1)
	}
	var v uint64
	for got := 0; got < w; {
		take := min(8-sh, w-got)
		v |= uint64(b[i]>>sh&(1<<take-1)) << got
		got += take
		i, sh = i+1, 0
	}
	return v
}
