package events

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// buffer.sort orders by the whole name, whatever the names share: names
// that tie on their first 8 or 16 bytes, shorter names that are prefixes
// of longer ones, NUL bytes where the keys pad with zeros; and of equal
// names it keeps the last added.
func TestBufferSortMatchesBytewiseOrder(t *testing.T) {
	fixed := []string{
		"", "\x00", "A", "A\x00", "AB", "BTC-27NO", "BTC-27NO\x00", "BTC-27NOV26-9500",
		"BTC-27NOV26-9500\x00", "BTC-27NOV26-95000-C", "BTC-27NOV26-95000-P", "BTC-27NOV26-9500",
		"BTC-27NOV26-95000-C", "ETH-1", "BTC-27NOV26", "BTC-27NOV2\x00", "\xff\xff\xff\xff\xff\xff\xff\xff\xff",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("AB\x00-9\xff")
	for round := range 200 {
		names := slices.Clone(fixed)
		if round > 0 {
			names = names[:0]
			for range 1 + rng.IntN(300) {
				n := make([]byte, rng.IntN(22))
				for i := range n {
					n[i] = alphabet[rng.IntN(len(alphabet))]
				}
				names = append(names, string(n))
			}
		}
		var b buffer
		for i, n := range names {
			c, off, buf := b.ar.alloc(len(n) + 1)
			copy(buf, n)
			buf[len(n)] = byte(i) // the payload tells which row was kept
			b.ents = append(b.ents, entry{key: nameKey(n), chunk: c, off: off, nlen: uint32(len(n)), plen: 1})
		}
		b.sort()

		// The reference: the last row of each name, in bytewise order.
		last := map[string]byte{}
		for i, n := range names {
			last[n] = byte(i)
		}
		want := make([]string, 0, len(last))
		for n := range last {
			want = append(want, n)
		}
		slices.SortFunc(want, func(x, y string) int { return bytes.Compare([]byte(x), []byte(y)) })

		if len(b.ents) != len(want) {
			t.Fatalf("round %d: %d rows after sort, want %d", round, len(b.ents), len(want))
		}
		for i := range b.ents {
			e := &b.ents[i]
			got := string(b.name(e))
			p := b.ar.chunks[e.chunk][e.off+e.nlen]
			if got != want[i] || p != last[got] {
				t.Fatalf("round %d, row %d: %q (row %d), want %q (row %d)", round, i, got, p, want[i], last[want[i]])
			}
		}
	}
}

// The merge of sorted runs orders by the whole name as bytes.Compare does
// (the keys it compares first pad short names with zeros) and, of a name
// several runs hold, keeps the row of the last run.
func TestMergeMatchesBytewiseOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("AB\x00-9\xff")
	for round := range 200 {
		runs := make([]*buffer, 1+rng.IntN(6))
		last := map[string]byte{} // name → run that holds its row
		for r := range runs {
			b := &buffer{}
			for range rng.IntN(60) {
				n := make([]byte, rng.IntN(22))
				for i := range n {
					n[i] = alphabet[rng.IntN(len(alphabet))]
				}
				if round == 0 {
					n = append([]byte("BTC-27NOV26-9500"), n...) // ties on 16 bytes
				}
				c, off, buf := b.ar.alloc(len(n) + 1)
				copy(buf, n)
				buf[len(n)] = byte(r)
				b.ents = append(b.ents, entry{key: nameKey(string(n)), chunk: c, off: off, nlen: uint32(len(n)), plen: 1})
				last[string(n)] = byte(r)
			}
			b.sort()
			runs[r] = b
		}
		cs := make([]cursor, len(runs))
		for r, b := range runs {
			cs[r] = &memCursor{ar: &b.ar, ents: b.ents, i: -1}
		}
		want := make([]string, 0, len(last))
		for n := range last {
			want = append(want, n)
		}
		slices.SortFunc(want, func(x, y string) int { return bytes.Compare([]byte(x), []byte(y)) })
		m := newMerge(cs)
		i := 0
		for ; m.next(); i++ {
			if i >= len(want) {
				t.Fatalf("round %d: more than %d names", round, len(want))
			}
			if got := string(m.name()); got != want[i] {
				t.Fatalf("round %d: name %d is %q, want %q", round, i, got, want[i])
			}
			if p := m.payload(); len(p) != 1 || p[0] != last[want[i]] {
				t.Fatalf("round %d: %q from run %v, want run %d", round, want[i], p, last[want[i]])
			}
		}
		if i != len(want) || m.error() != nil {
			t.Fatalf("round %d: %d names (%v), want %d", round, i, m.error(), len(want))
		}
	}
}
