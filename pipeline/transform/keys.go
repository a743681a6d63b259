package transform

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
)

// ReasonDuplicate is the reject reason of a row whose instrument_name came
// earlier in the same listing: the first row of a name is loaded, the
// later ones go to rejects, so that every sink holds the same rows (a
// ClickHouse ReplacingMergeTree would keep one of them, Parquet both).
const ReasonDuplicate = "duplicate key within snapshot: instrument_name came earlier in the listing"

// keySet holds the instrument names of one listing, to tell a name that
// came before. The names are kept back to back in one arena and found
// through an open-addressing table of 4-byte slots (the top byte is a tag
// from the name's hash, the rest the name's position + 1), so adding a name
// allocates nothing but the amortised growth of the arena and the table,
// and the table stays small enough for the cache (1 MiB at 100,000 names).
// Names past the table's reach (2^24-1 names, or 4 GiB of them: never a
// venue's listing) go to a map.
type keySet struct {
	seed  uint64 // random per set: a listing cannot aim at the table's slots
	arena []byte
	ends  []uint32 // ends[i] is the end of name i in arena
	table []uint32 // 0: empty
	more  map[string]struct{}
	// kept names (the first kept of ends, keptMore of moreOrder) came in
	// earlier requests of the endpoint (NameSet.Keep): reset keeps them.
	kept, keptMore int
	moreOrder      []string
}

// NameSet holds the instrument names of an endpoint's requests (a listing
// fanned out over several parameter sets), so that a name that came in an
// earlier request is a duplicate too (InstrumentDecoder.UseNames).
type NameSet struct{ k *keySet }

// NewNameSet returns an empty set.
func NewNameSet() *NameSet { return &NameSet{k: newKeySet()} }

// Keep makes the names of the last Decode part of the set: the next Decode
// (the endpoint's next request) rejects them. A Decode that follows
// without Keep (a retried attempt, a walk again) starts from the names
// kept.
func (n *NameSet) Keep() {
	n.k.kept, n.k.keptMore = len(n.k.ends), len(n.k.moreOrder)
}

const (
	keyPosBits = 24
	keyPosMask = 1<<keyPosBits - 1
)

func newKeySet() *keySet { return &keySet{seed: rand.Uint64()} }

// hash is a seeded multiply-mix hash of name, a word at a time (a name is
// about 20 bytes: hash/maphash's call costs as much as the rest of add).
func (k *keySet) hash(name []byte) uint64 {
	h := k.seed ^ uint64(len(name))*0x9e3779b97f4a7c15
	for ; len(name) >= 8; name = name[8:] {
		h = mix(h ^ binary.LittleEndian.Uint64(name))
	}
	if len(name) > 0 {
		var t uint64
		for i, c := range name {
			t |= uint64(c) << (8 * i)
		}
		h = mix(h ^ t ^ 0xff<<56)
	}
	return mix(h)
}

func mix(h uint64) uint64 {
	hi, lo := bits.Mul64(h, 0xbf58476d1ce4e5b9)
	return hi ^ lo
}

// reset empties the set, keeping its memory (up to a bound: a listing of
// millions does not pin its names for the next small one).
func (k *keySet) reset() {
	if k.kept > 0 || k.keptMore > 0 {
		k.truncate()
		return
	}
	const keep = 16 << 20
	if cap(k.arena) > keep {
		k.arena, k.ends, k.table = nil, nil, nil
	}
	k.arena, k.ends, k.more, k.moreOrder = k.arena[:0], k.ends[:0], nil, k.moreOrder[:0]
	clear(k.table)
}

// truncate drops the names added after the kept ones.
func (k *keySet) truncate() {
	for _, n := range k.moreOrder[k.keptMore:] {
		delete(k.more, n)
	}
	k.moreOrder = k.moreOrder[:k.keptMore]
	if len(k.ends) == k.kept {
		return
	}
	k.ends = k.ends[:k.kept]
	if k.kept == 0 {
		k.arena = k.arena[:0]
	} else {
		k.arena = k.arena[:k.ends[k.kept-1]]
	}
	clear(k.table)
	k.place()
}

// earlier reports whether name is one of the kept names (it is in the set).
func (k *keySet) earlier(name []byte) bool {
	if _, ok := k.more[string(name)]; ok {
		return slices.Index(k.moreOrder, string(name)) < k.keptMore
	}
	if len(k.table) == 0 {
		return false
	}
	h := k.hash(name)
	tag := uint32(h>>56) << keyPosBits
	mask := uint64(len(k.table) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := k.table[i]
		if s == 0 {
			return false
		}
		if s&^keyPosMask == tag && bytes.Equal(k.name(int(s&keyPosMask)-1), name) {
			return int(s&keyPosMask)-1 < k.kept
		}
	}
}

// add adds name and reports true, or reports false when it is there.
func (k *keySet) add(name []byte) bool {
	if 2*(len(k.ends)+1) > len(k.table) && len(k.ends) < keyPosMask {
		k.grow()
	}
	h := k.hash(name)
	tag := uint32(h>>56) << keyPosBits
	mask := uint64(len(k.table) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := k.table[i]
		if s == 0 {
			if len(k.ends) >= keyPosMask || len(k.arena)+len(name) > math.MaxUint32 {
				return k.addMore(name)
			}
			k.arena = append(k.arena, name...)
			k.ends = append(k.ends, uint32(len(k.arena)))
			k.table[i] = tag | uint32(len(k.ends))
			return true
		}
		if s&^keyPosMask == tag && bytes.Equal(k.name(int(s&keyPosMask)-1), name) {
			return false
		}
	}
}

// addMore adds a name past the table's reach.
func (k *keySet) addMore(name []byte) bool {
	if _, ok := k.more[string(name)]; ok {
		return false
	}
	if k.more == nil {
		k.more = map[string]struct{}{}
	}
	k.more[string(name)] = struct{}{}
	k.moreOrder = append(k.moreOrder, string(name))
	return true
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
	k.table = make([]uint32, max(1024, 2*len(k.table)))
	k.place()
}

// place puts every name into the (empty) table.
func (k *keySet) place() {
	mask := uint64(len(k.table) - 1)
	for j := range k.ends {
		h := k.hash(k.name(j))
		i := h & mask
		for k.table[i] != 0 {
			i = (i + 1) & mask
		}
		k.table[i] = uint32(h>>56)<<keyPosBits | uint32(j+1)
	}
}
