package pqpage

import "encoding/binary"

// appendLevels appends the definition levels (bit width 1) of n values
// whose validity is bitmap (LSB first, from bit 0; nil: all valid) in the
// RLE/bit-packed hybrid encoding: groups of 8 values all valid or all null
// join runs of repeated values, the others bit-packed runs whose bytes are
// the bitmap's own (Parquet packs bits LSB first too).
func appendLevels(b []byte, bitmap []byte, n int) []byte {
	if n == 0 {
		return b
	}
	if bitmap == nil {
		return appendRepeated(b, n, 1)
	}
	full := n / 8
	tail := n % 8
	i := 0
	for i < full {
		v := bitmap[i]
		if v == 0 || v == 0xff {
			j := i + 1
			for j < full && bitmap[j] == v {
				j++
			}
			count := (j - i) * 8
			if j == full && tail > 0 && lastByte(bitmap[full], tail) == v&(1<<tail-1) {
				count += tail // the partial last group joins the run
				tail = 0
			}
			b = appendRepeated(b, count, v&1)
			i = j
			continue
		}
		j := i + 1
		for j < full && bitmap[j] != 0 && bitmap[j] != 0xff {
			j++
		}
		groups := j - i
		last := j == full && tail > 0
		if last {
			groups++
		}
		b = binary.AppendUvarint(b, uint64(groups)<<1|1)
		b = append(b, bitmap[i:j]...)
		if last {
			b = append(b, lastByte(bitmap[full], tail))
			tail = 0
		}
		i = j
	}
	if tail > 0 {
		v := lastByte(bitmap[full], tail)
		switch v {
		case 0:
			b = appendRepeated(b, tail, 0)
		case 1<<tail - 1:
			b = appendRepeated(b, tail, 1)
		default:
			b = append(b, 1<<1|1, v)
		}
	}
	return b
}

// lastByte is the first k bits of v, the others zero.
func lastByte(v byte, k int) byte { return v & (1<<k - 1) }

// appendRepeated appends a run of n copies of level v (bit width 1).
func appendRepeated(b []byte, n int, v byte) []byte {
	b = binary.AppendUvarint(b, uint64(n)<<1)
	return append(b, v)
}
