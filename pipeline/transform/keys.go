package transform

import (
	"bytes"
	"hash/maphash"
)

// ReasonDuplicate is the reject reason of a row whose instrument_name came
// earlier in the same listing: the first row of a name is loaded, the
// later ones go to rejects, so that every sink holds the same rows (a
// ClickHouse ReplacingMergeTree would keep one of them, Parquet both).
const ReasonDuplicate = "duplicate key within snapshot: instrument_name came earlier in the listing"

// keySet holds the instrument names of one listing, to tell a name that
// came before. The names are kept back to back in one arena and found
// through an open-addressing table of their hashes (the upper half of a
// slot is the hash's, the lower the name's position + 1), so adding a name
// allocates nothing but the amortised growth of the arena and the table.
type keySet struct {
	seed  maphash.Seed
	arena []byte
	ends  []uint32 // ends[i] is the end of name i in arena
	table []uint64 // 0: empty
}

func newKeySet() *keySet { return &keySet{seed: maphash.MakeSeed()} }

// reset empties the set, keeping its memory (up to a bound: a listing of
// millions does not pin its names for the next small one).
func (k *keySet) reset() {
	const keep = 1 << 20
	if cap(k.arena) > 16*keep {
		k.arena, k.ends, k.table = nil, nil, nil
		return
	}
	k.arena, k.ends = k.arena[:0], k.ends[:0]
	clear(k.table)
}

// add adds name and reports true, or reports false when it is there.
func (k *keySet) add(name []byte) bool {
	if 2*(len(k.ends)+1) > len(k.table) {
		k.grow()
	}
	h := maphash.Bytes(k.seed, name)
	tag := h &^ (1<<32 - 1)
	mask := uint64(len(k.table) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := k.table[i]
		if s == 0 {
			k.arena = append(k.arena, name...)
			k.ends = append(k.ends, uint32(len(k.arena)))
			k.table[i] = tag | uint64(len(k.ends))
			return true
		}
		if s&^(1<<32-1) == tag && bytes.Equal(k.name(int(s&(1<<32-1))-1), name) {
			return false
		}
	}
}

func (k *keySet) name(i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = k.ends[i-1]
	}
	return k.arena[start:k.ends[i]]
}

// grow doubles the table and puts the names back.
func (k *keySet) grow() {
	n := max(1024, 2*len(k.table))
	k.table = make([]uint64, n)
	mask := uint64(n - 1)
	for j := range k.ends {
		h := maphash.Bytes(k.seed, k.name(j))
		i := h & mask
		for k.table[i] != 0 {
			i = (i + 1) & mask
		}
		k.table[i] = h&^(1<<32-1) | uint64(j+1)
	}
}
