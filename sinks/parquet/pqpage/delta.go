package pqpage

import (
	"encoding/binary"
	"math/bits"
)

// DELTA_BINARY_PACKED (Parquet's Encodings.md): blocks of deltaBlock
// values in deltaMiniblocks miniblocks, each miniblock bit-packed at its
// own width after the block's minimum delta is subtracted.
const (
	deltaBlock      = 128
	deltaMiniblocks = 4
	deltaMini       = deltaBlock / deltaMiniblocks
)

// appendDeltaPacked appends vs DELTA_BINARY_PACKED. Deltas wrap as int64
// (a reader's int32 decoding of values that fit in 32 bits wraps the
// same: lengths here are all below 2^31).
func appendDeltaPacked(b []byte, vs []int32) []byte {
	b = binary.AppendUvarint(b, deltaBlock)
	b = binary.AppendUvarint(b, deltaMiniblocks)
	b = binary.AppendUvarint(b, uint64(len(vs)))
	if len(vs) == 0 {
		return binary.AppendUvarint(b, 0)
	}
	b = binary.AppendVarint(b, int64(vs[0]))
	var deltas [deltaBlock]uint64
	prev := int64(vs[0])
	for start := 1; start < len(vs); start += deltaBlock {
		block := vs[start:min(start+deltaBlock, len(vs))]
		minDelta := int64(1<<63 - 1)
		for i, v := range block {
			d := int64(v) - prev
			prev = int64(v)
			deltas[i] = uint64(d)
			minDelta = min(minDelta, d)
		}
		b = binary.AppendVarint(b, minDelta)
		var widths [deltaMiniblocks]int
		for m := range deltaMiniblocks {
			lo := m * deltaMini
			if lo >= len(block) {
				break
			}
			var or uint64
			for i := lo; i < min(lo+deltaMini, len(block)); i++ {
				deltas[i] -= uint64(minDelta)
				or |= deltas[i]
			}
			widths[m] = bits.Len64(or)
		}
		for _, w := range widths {
			b = append(b, byte(w))
		}
		for m := range deltaMiniblocks {
			lo := m * deltaMini
			if lo >= len(block) {
				break
			}
			hi := min(lo+deltaMini, len(block))
			for i := hi; i < lo+deltaMini; i++ {
				deltas[i] = 0 // padding of the last miniblock
			}
			b = appendPacked(b, deltas[lo:lo+deltaMini], widths[m])
		}
	}
	return b
}

// appendPacked appends vs (deltaMini of them) bit-packed at width w, LSB
// first.
func appendPacked(b []byte, vs []uint64, w int) []byte {
	if w == 0 {
		return b
	}
	var acc uint64
	n := 0 // bits in acc
	for _, v := range vs {
		acc |= v << n
		if n+w >= 64 {
			b = binary.LittleEndian.AppendUint64(b, acc)
			spill := n + w - 64
			if spill > 0 {
				acc = v >> (w - spill)
			} else {
				acc = 0
			}
			n = spill
		} else {
			n += w
		}
	}
	for ; n > 0; n -= 8 {
		b = append(b, byte(acc))
		acc >>= 8
	}
	return b
}
