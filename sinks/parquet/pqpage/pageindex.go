package pqpage

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// The page index (Parquet's OffsetIndex and ColumnIndex, written between
// the last row group and the footer) lets a reader go straight to the
// pages of the rows it wants: a column's offset index gives each data
// page's place and first row (SeekToRow reads one page, not every page
// before it), a string column's column index each page's min and max (a
// reader of one instrument reads the pages whose names may hold it).
// Written for the columns whose properties enable it
// (parquet.WithPageIndexEnabled): an offset index for every such column,
// a column index for its string columns with statistics.

// pageLoc is a data page of the chunk: where it starts in Bytes (its
// header), its size with the header and its first row in the chunk.
type pageLoc struct {
	off   int64
	size  int32
	first int64
}

// notePage records the page under way (rows c.rows, from row c.values of
// the chunk) before flush encodes it: its min and max for the column
// index (read from the page's values as they are about to be encoded).
func (c *Chunk) notePageStats() {
	if !c.opt.ColumnIndex {
		return
	}
	s := metadata.EncodedStatistics{}
	s.SetNullCount(int64(c.nulls))
	s.AllNullValue = c.nulls == c.rows
	if lo, hi, ok := c.pageMinMax(); ok { // a longer one left out, as Meta leaves it (the column index is then dropped)
		if int64(len(lo)) <= c.opt.MaxStatsSize {
			s.SetMin(bytes.Clone(lo))
		}
		if int64(len(hi)) <= c.opt.MaxStatsSize {
			s.SetMax(bytes.Clone(hi))
		}
	}
	c.pstats = append(c.pstats, s)
}

// pageMinMax is the least and greatest string of the page under way
// (dictionary indices, DELTA_BYTE_ARRAY or PLAIN); ok false when the
// page holds only nulls.
func (c *Chunk) pageMinMax() (lo, hi []byte, ok bool) {
	lo, hi = c.pmin[:0], c.pmax[:0]
	note := func(v []byte) {
		switch {
		case !ok:
			lo, hi, ok = append(lo[:0], v...), append(hi[:0], v...), true
		case bytes.Compare(v, lo) < 0:
			lo = append(lo[:0], v...)
		case bytes.Compare(v, hi) > 0:
			hi = append(hi[:0], v...)
		}
	}
	switch {
	case c.dictOn:
		prev := int32(-1)
		for _, k := range c.idx {
			if k != prev {
				note(c.entries[k])
				prev = k
			}
		}
	case c.opt.Delta:
		cur, pos := c.pcur[:0], c.head
		for i, p := range c.prefix {
			n, before := int(c.suffix[i]), len(cur)
			cur = append(cur[:p], c.vals[pos:pos+n]...)
			pos += n
			if i > 0 && n == 0 && int(p) == before {
				continue // the string before it again
			}
			note(cur)
		}
		c.pcur = cur
	default:
		var prev []byte
		for pos := c.head; pos+4 <= len(c.vals); {
			n := int(binary.LittleEndian.Uint32(c.vals[pos:]))
			v := c.vals[pos+4 : pos+4+n]
			pos += 4 + n
			if prev != nil && bytes.Equal(v, prev) {
				continue
			}
			note(v)
			prev = v
		}
	}
	c.pmin, c.pmax = lo, hi
	return lo, hi, ok
}

// tellWriter is the File as arrow-go's page index builder writes to it.
type tellWriter struct{ f *File }

func (t tellWriter) Write(b []byte) (int, error) {
	if err := t.f.write(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (t tellWriter) Tell() int64 { return t.f.pos }

// indexRowGroup adds the row group's chunks to the page index: chunk i's
// data pages start at data[i] in the file.
func (f *File) indexRowGroup(chunks []*Chunk, data []int64) error {
	if f.index == nil {
		return nil
	}
	if err := f.index.AppendRowGroup(); err != nil {
		return err
	}
	for i, c := range chunks {
		if !c.opt.OffsetIndex {
			continue
		}
		ob, err := f.index.GetOffsetIndexBuilder(i)
		if err != nil {
			return err
		}
		for _, l := range c.locs {
			if err := ob.AddPage(l.off, l.first, l.size); err != nil {
				return err
			}
		}
		if err := ob.Finish(data[i]); err != nil {
			return err
		}
		if !c.opt.ColumnIndex {
			continue
		}
		if len(c.pstats) != len(c.locs) {
			return fmt.Errorf("parquet: column %d: statistics of %d pages for %d pages", i, len(c.pstats), len(c.locs))
		}
		cb, err := f.index.GetColumnIndexBuilder(i)
		if err != nil {
			return err
		}
		for j := range c.pstats {
			if err := cb.AddPage(&c.pstats[j]); err != nil {
				return err
			}
		}
		if err := cb.Finish(); err != nil {
			return err
		}
	}
	return nil
}

// writeIndex writes the page index before the footer and notes where in
// the footer's column chunks.
func (f *File) writeIndex() error {
	if f.index == nil {
		return nil
	}
	f.index.Finish()
	var loc metadata.PageIndexLocation
	if err := f.index.WriteTo(tellWriter{f}, &loc); err != nil {
		if f.err != nil {
			return f.err
		}
		return fmt.Errorf("parquet: page index: %w", err)
	}
	return f.meta.SetPageIndexLocation(loc)
}
