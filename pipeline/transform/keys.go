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
// came before. The names are kept back to back in chunks of an arena, each
// after a byte of its length + 1 (a 0 ends a chunk's names): nothing is
// copied as the arena grows. They are found through an open-addressing
// table of 8-byte slots: the high half is the top half of the name's hash,
// the low half the name's offset in the arena + 1. The table is split by
// the hash's top byte into keyParts parts that grow one at a time, each
// put back from its own slots (a slot keeps the hash bits that place it),
// so growing a table of millions of names works in the cache and reads no
// name. Names longer than keyMaxLen, or past the arena's reach (4 GiB),
// go to a map (never a venue's listing).
type keySet struct {
	seed   uint64 // random per set: a listing cannot aim at the table's slots
	hmask  uint64 // the hash's bits used (tests narrow it to force collisions)
	chunks [][]byte
	size   uint64 // arena bytes used: the next name goes at this offset
	parts  [keyParts][]uint64
	used   [keyParts]uint32 // slots used (or reserved by addAll) in each part
	more   map[string]struct{}
	// kept names (those below kept in the arena, keptMore of moreOrder)
	// came in earlier requests of the endpoint (NameSet.Keep): reset
	// keeps them.
	kept      uint64
	keptMore  int
	moreOrder []string

	hs    []uint64 // addAll's hashes
	touch uint64   // addAll's loads, kept so that they are made
}

const (
	keyParts     = 256 // parts of the table, by the hash's top byte
	keyPartSlots = 32  // a part's first size (the parts' first slots are one allocation)
	keyChunkBits = 16  // an arena chunk holds 1<<keyChunkBits bytes
	keyMaxLen    = 254 // longer names go to the map
	keyReach     = math.MaxUint32 - 1<<keyChunkBits
)

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
	n.k.kept, n.k.keptMore = n.k.size, len(n.k.moreOrder)
}

func newKeySet() *keySet { return &keySet{seed: rand.Uint64(), hmask: ^uint64(0)} }

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
	return mix(h) & k.hmask
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
	if k.size > keep {
		k.chunks, k.parts = nil, [keyParts][]uint64{}
	}
	k.size = 0
	k.more, k.moreOrder = nil, k.moreOrder[:0]
	k.clearTable()
}

func (k *keySet) clearTable() {
	for p := range k.parts {
		clear(k.parts[p])
	}
	k.used = [keyParts]uint32{}
}

// truncate drops the names added after the kept ones.
func (k *keySet) truncate() {
	for _, n := range k.moreOrder[k.keptMore:] {
		delete(k.more, n)
	}
	k.moreOrder = k.moreOrder[:k.keptMore]
	if k.size == k.kept {
		return
	}
	k.size = k.kept
	k.clearTable()
	for off := uint64(0); off < k.size; {
		c := k.chunks[off>>keyChunkBits]
		w := off & (1<<keyChunkBits - 1)
		if c[w] == 0 { // the chunk's names end
			off = (off>>keyChunkBits + 1) << keyChunkBits
			continue
		}
		h := k.hash(k.name(off + 1))
		k.room(h)
		k.put(h, off+1)
		off += 1 + uint64(c[w]-1)
	}
}

// name is the name at offset pos-1 of the arena.
func (k *keySet) name(pos uint64) []byte {
	c := k.chunks[(pos-1)>>keyChunkBits]
	w := (pos - 1) & (1<<keyChunkBits - 1)
	return c[w+1 : w+uint64(c[w])]
}

// store appends name to the arena and returns its offset + 1.
func (k *keySet) store(name []byte) uint64 {
	w := k.size & (1<<keyChunkBits - 1)
	if k.size>>keyChunkBits == uint64(len(k.chunks)) || w+1+uint64(len(name)) > 1<<keyChunkBits {
		if w != 0 { // the chunk's names end
			k.chunks[k.size>>keyChunkBits][w] = 0
			k.size += 1<<keyChunkBits - w
		}
		if c := k.size >> keyChunkBits; c == uint64(len(k.chunks)) {
			k.chunks = append(k.chunks, make([]byte, 1<<keyChunkBits))
		}
		w = 0
	}
	c := k.chunks[k.size>>keyChunkBits]
	c[w] = byte(len(name) + 1)
	copy(c[w+1:], name)
	pos := k.size + 1
	k.size += 1 + uint64(len(name))
	return pos
}

// inArena reports whether name goes to the arena (not the map).
func (k *keySet) inArena(name []byte) bool {
	return len(name) <= keyMaxLen && k.size < keyReach
}

// slot is name's slot in the table (0: not there).
func (k *keySet) slot(h uint64, name []byte) uint64 {
	t := k.parts[h>>56]
	if len(t) == 0 {
		return 0
	}
	mask := uint64(len(t) - 1)
	for i := h >> 32 & mask; ; i = (i + 1) & mask {
		s := t[i]
		if s == 0 || s>>32 == h>>32 && bytes.Equal(k.name(uint64(uint32(s))), name) {
			return s
		}
	}
}

// earlier reports whether name is one of the kept names (it is in the set).
func (k *keySet) earlier(name []byte) bool {
	if _, ok := k.more[string(name)]; ok {
		return slices.Index(k.moreOrder, string(name)) < k.keptMore
	}
	s := k.slot(k.hash(name), name)
	return s != 0 && uint64(uint32(s))-1 < k.kept
}

// add adds name and reports true, or reports false when it is there.
func (k *keySet) add(name []byte) bool {
	if _, ok := k.more[string(name)]; ok {
		return false
	}
	h := k.hash(name)
	if k.slot(h, name) != 0 {
		return false
	}
	if !k.inArena(name) {
		return k.addMore(name)
	}
	k.room(h)
	k.put(h, k.store(name))
	return true
}

// room makes the part of hash h room for one more name.
func (k *keySet) room(h uint64) {
	p := h >> 56
	if n := len(k.parts[p]); 2*int(k.used[p]+1) > n {
		k.grow(int(p))
	}
}

// put puts the name at offset pos-1, of hash h, into the table (it is not
// there, and its part has room).
func (k *keySet) put(h, pos uint64) {
	p := h >> 56
	t := k.parts[p]
	mask := uint64(len(t) - 1)
	i := h >> 32 & mask
	for t[i] != 0 {
		i = (i + 1) & mask
	}
	t[i] = h>>32<<32 | pos
	k.used[p]++
}

// addAll adds the names data[offs[i]:offs[i+1]] (i < len(offs)-1) in
// order, as add would one by one, up to the first one that is there
// already: it returns that one's i, or -1 when every name was new.
//
// It answers as add does, for less: in a listing of a million names the
// table is larger than the caches, and add's probe waits for memory once
// per name, between the decoding of one instrument and the next. Here the
// names' hashes come first, then a loop that only loads each name's slot
// (the loads do not wait for each other, so their misses overlap), then the
// probes, which find their slots in the cache.
func (k *keySet) addAll(data []byte, offs []int32) int {
	n := len(offs) - 1
	if n <= 0 {
		return -1
	}
	if len(k.more) > 0 || k.size+uint64(offs[n]-offs[0])+uint64(n)+2<<keyChunkBits > keyReach {
		return k.addEach(data, offs)
	}
	hs := k.hs[:0]
	for i := range n {
		name := data[offs[i]:offs[i+1]]
		if len(name) > keyMaxLen {
			k.unreserve(hs)
			return k.addEach(data, offs)
		}
		h := k.hash(name)
		hs = append(hs, h)
		k.room(h)
		k.used[h>>56]++ // reserved: the next room counts it
	}
	k.hs = hs
	var touch uint64
	for _, h := range hs {
		t := k.parts[h>>56]
		touch += t[h>>32&uint64(len(t)-1)]
	}
	k.touch = touch
	for j, h := range hs {
		name := data[offs[j]:offs[j+1]]
		t := k.parts[h>>56]
		mask := uint64(len(t) - 1)
		i := h >> 32 & mask
		for ; ; i = (i + 1) & mask {
			s := t[i]
			if s == 0 {
				break
			}
			if s>>32 == h>>32 && bytes.Equal(k.name(uint64(uint32(s))), name) {
				k.unreserve(hs[j:])
				return j
			}
		}
		t[i] = h>>32<<32 | k.store(name)
	}
	return -1
}

// unreserve gives back the slots addAll reserved for names of hashes hs.
func (k *keySet) unreserve(hs []uint64) {
	for _, h := range hs {
		k.used[h>>56]--
	}
}

// addEach is addAll one name at a time.
func (k *keySet) addEach(data []byte, offs []int32) int {
	for i := range len(offs) - 1 {
		if !k.add(data[offs[i]:offs[i+1]]) {
			return i
		}
	}
	return -1
}

// addMore adds a name to the map.
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

// grow doubles part p and puts its slots back: a slot's hash bits place
// it, so neither the names nor the rest of the table are read.
func (k *keySet) grow(p int) {
	old := k.parts[p]
	if len(old) == 0 {
		slab := make([]uint64, keyParts*keyPartSlots)
		for q := range k.parts {
			if len(k.parts[q]) == 0 {
				k.parts[q] = slab[q*keyPartSlots : (q+1)*keyPartSlots : (q+1)*keyPartSlots]
			}
		}
		return
	}
	t := make([]uint64, 2*len(old))
	mask := uint64(len(t) - 1)
	for _, s := range old {
		if s == 0 {
			continue
		}
		i := s >> 32 & mask
		for t[i] != 0 {
			i = (i + 1) & mask
		}
		t[i] = s
	}
	k.parts[p] = t
}
