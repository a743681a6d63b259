package events

import (
	"bytes"
	"fmt"
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
			b.keys = append(b.keys, rowKey(buf[:len(n)], len(b.ents)))
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
				b.keys = append(b.keys, rowKey(buf[:len(n)], len(b.ents)))
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

// Compaction gives back the space of the runs it merged: with a budget so
// small that a snapshot makes many times maxRuns runs, the spill file
// holds only the live runs (before, every merged run stayed in the file
// until close and it grew about quadratically).
func TestCompactionFreesSpill(t *testing.T) {
	dir := t.TempDir()
	s := newSorter("test", 8<<10, dir, nil)
	defer s.close()
	p := make([]byte, 100)
	const rows = 60_000
	maxFile := int64(0)
	for i := range rows {
		if err := s.add(fmt.Sprintf("BTC-%08d-C", (i*7919)%rows), p); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 {
			if err := s.wait(); err != nil {
				t.Fatal(err)
			}
			if s.file == nil {
				continue
			}
			fi, err := s.file.f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			live := int64(0)
			for _, r := range s.runs {
				live += r.size
			}
			if fi.Size() > 2*live+(64<<10) {
				t.Fatalf("after %d rows: spill file of %d bytes for %d bytes of live runs", i+1, fi.Size(), live)
			}
			maxFile = max(maxFile, fi.Size())
		}
	}
	if maxFile < rows*100/2 {
		t.Fatalf("spill file at most %d bytes: the rows did not spill as the test expects", maxFile)
	}
	c, err := s.stream()
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	n := 0
	for c.next() {
		n++
	}
	if err := c.error(); err != nil || n != rows {
		t.Fatalf("streamed %d rows (%v), want %d", n, err, rows)
	}
}
