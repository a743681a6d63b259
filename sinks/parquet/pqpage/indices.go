package pqpage

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// A dictionary column's values may come as indices into the caller's
// dictionary instead of strings (AppendIndices): a replayed day's
// low-cardinality columns, whose values the caller numbered once per
// distinct value of the whole day, so that neither the caller gathers
// their strings nor the Chunk hashes each of them again. The chunk is the
// one Append writes of the same strings: its own dictionary holds the
// values in the order they first occur in the chunk (the caller's index
// of a value mapped to the chunk's entry with an array, not a map),
// pages are cut and the dictionary falls back to PLAIN at the same
// values, with the same statistics.

// NullIndex is a null's index (AppendIndices).
const NullIndex = ^uint32(0)

// dictMode is how a dictionary chunk's values come: Append's strings or
// AppendIndices' indices, not both (the chunk's dictionary has an index
// by string only for the former).
type dictMode uint8

const (
	byNone dictMode = iota
	byValue
	byIndex
)

// dictBy notes that the chunk's values come by m (a chunk takes its
// values one way between Resets).
func (c *Chunk) dictBy(m dictMode) error {
	if !c.opt.Dict {
		return nil
	}
	if c.mode != byNone && c.mode != m {
		return fmt.Errorf("pqpage: a chunk's values both as strings and as indices")
	}
	c.mode = m
	return nil
}

// AppendIndices adds the values dict[ids[i]] (a null for NullIndex) to
// the chunk of a dictionary column of strings (Options.Dict), as Append
// adds an array of those strings: the same pages and statistics. dict's
// entries must not change while the chunk is under way (it may grow); a
// chunk takes either Append's arrays or indices until it is Reset.
func (c *Chunk) AppendIndices(ids []uint32, dict [][]byte) error {
	if c.kind != kindString || !c.opt.Dict {
		return fmt.Errorf("pqpage: indices for a %s column without a dictionary", c.opt.Type)
	}
	nulls := 0
	for _, id := range ids {
		if id == NullIndex {
			nulls++
		} else if int(id) >= len(dict) {
			return fmt.Errorf("pqpage: index %d past a dictionary of %d values", id, len(dict))
		}
	}
	if !c.opt.Optional && nulls > 0 {
		return fmt.Errorf("pqpage: %d nulls in a required column", nulls)
	}
	if err := c.dictBy(byIndex); err != nil {
		return err
	}
	if len(c.local) < len(dict) {
		c.local = append(c.local, make([]int32, len(dict)-len(c.local))...)
	}
	for off := 0; off < len(ids); off += c.opt.BatchRows {
		c.indexBatch(ids[off:min(len(ids), off+c.opt.BatchRows)], dict, nulls > 0)
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

// indexBatch is batch for indices (maybeNull: some may be NullIndex).
func (c *Chunk) indexBatch(ids []uint32, dict [][]byte, maybeNull bool) {
	n := len(ids)
	nulls := 0
	if c.opt.Optional {
		start := c.rows
		if need := int(bitutil.BytesForBits(int64(start + n))); need > len(c.valid) {
			c.valid = append(c.valid, make([]byte, need-len(c.valid))...)
		}
		if !maybeNull {
			bitutil.SetBitsTo(c.valid, int64(start), int64(n), true)
		} else {
			for i, id := range ids {
				if id == NullIndex {
					bitutil.ClearBit(c.valid, start+i)
					nulls++
				} else {
					bitutil.SetBit(c.valid, start+i)
				}
			}
		}
	}
	c.rows += n
	c.nulls += nulls
	c.nullCount += int64(nulls)
	if nulls == n {
		return
	}
	if c.dictOn {
		c.dictIndices(ids, dict)
	} else {
		c.plainIndices(ids, dict)
	}
}

// dictIndices is dictStrings for indices: a value new to the chunk
// enters its dictionary (and the statistics).
func (c *Chunk) dictIndices(ids []uint32, dict [][]byte) {
	d := &c.dictState
	idx := grow(d.idx, len(ids), math.MaxInt)
	k, last, has := d.lastIdx, d.lastID, d.hasLast
	raw := d.raw
	for _, id := range ids {
		if id == NullIndex {
			continue
		}
		raw += 4 + int64(len(dict[id]))
		if !has || id != last {
			if k = d.local[id] - 1; k < 0 {
				k = c.appendEntry(dict[id])
				d.local[id] = k + 1
				d.touched = append(d.touched, id)
			}
			last, has = id, true
		}
		idx = append(idx, k)
	}
	d.idx, d.raw, d.lastIdx, d.lastID, d.hasLast = idx, raw, k, last, has
}

// plainIndices is plainStrings for indices (after a fallback).
func (c *Chunk) plainIndices(ids []uint32, dict [][]byte) {
	vals := c.vals
	stats := c.opt.Stats
	prev, noted := uint32(0), false // prev is in the statistics
	for _, id := range ids {
		if id == NullIndex {
			continue
		}
		v := dict[id]
		vals = grow(vals, 4+len(v), c.full())
		vals = binary.LittleEndian.AppendUint32(vals, uint32(len(v)))
		vals = append(vals, v...)
		if !stats || noted && id == prev {
			continue
		}
		c.str(v)
		prev, noted = id, true
	}
	c.vals = vals
}
