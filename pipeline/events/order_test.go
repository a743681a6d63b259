package events

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// radixSort sorts by (k1, k2, k3) and keeps the order of equal keys, also
// when most bytes are the same in every key (the passes it skips) and when
// none is.
func TestRadixSortStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 100 {
		n := rng.IntN(2000)
		keys := make([]sortKey, n)
		for i := range keys {
			k1, k2, k3 := rng.Uint64(), rng.Uint64(), rng.Uint32()
			if round%2 == 0 { // few distinct bytes, many equal keys
				k1 = 0x4254432d32374e4f | uint64(rng.IntN(3))<<8
				k2 = uint64(rng.IntN(4)) << 40
				k3 = uint32(rng.IntN(3)) << 16
			}
			keys[i] = sortKey{k1: k1, k2: k2, k3: k3, i: uint32(i)}
		}
		want := slices.Clone(keys)
		slices.SortStableFunc(want, func(x, y sortKey) int {
			return cmp.Or(cmp.Compare(x.k1, y.k1), cmp.Compare(x.k2, y.k2), cmp.Compare(x.k3, y.k3))
		})
		got, _ := radixSort(keys, make([]sortKey, n))
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: radix order differs from a stable sort", round)
		}
	}
}

// sortKeys gives exactly a stable sort's order (equal keys in arrival
// order) whether it merges the input's ascending runs or radix sorts it:
// ascending runs that overlap, do not, repeat keys of other runs, and more
// runs than it merges.
func TestSortKeysStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 400 {
		n := rng.IntN(3000)
		runs := 1 + rng.IntN(2*maxMergeRuns)
		keys := make([]sortKey, n)
		for i := range keys {
			k1 := uint64(rng.IntN(1 + rng.IntN(50)))
			if round%3 == 0 {
				k1 = rng.Uint64()
			}
			keys[i] = sortKey{k1: 0x4254432d00000000 | k1<<8, k2: uint64(rng.IntN(3)), k3: uint32(rng.IntN(2)), i: uint32(i)}
		}
		// Sort slices of the input so that it has about runs ascending
		// runs, some of them disjoint from their neighbours.
		for lo := 0; lo < n; {
			hi := min(n, lo+1+rng.IntN(2*n/runs+1))
			slices.SortStableFunc(keys[lo:hi], func(x, y sortKey) int {
				return cmp.Or(cmp.Compare(x.k1, y.k1), cmp.Compare(x.k2, y.k2), cmp.Compare(x.k3, y.k3))
			})
			if round%4 == 1 && hi < n { // the next slice starts above this one
				for j := hi; j < n; j++ {
					keys[j].k1 += 1 << 60
				}
			}
			lo = hi
		}
		for i := range keys {
			keys[i].i = uint32(i) // arrival order after the shuffle above
		}
		want := slices.Clone(keys)
		slices.SortStableFunc(want, func(x, y sortKey) int {
			return cmp.Or(cmp.Compare(x.k1, y.k1), cmp.Compare(x.k2, y.k2), cmp.Compare(x.k3, y.k3))
		})
		got, other := sortKeys(keys, make([]sortKey, n))
		if !slices.Equal(got, want) {
			t.Fatalf("round %d (%d keys, ~%d runs): order differs from a stable sort", round, n, runs)
		}
		if len(other) != n {
			t.Fatalf("round %d: the other slice has %d keys, want %d", round, len(other), n)
		}
	}
}

// Many names sharing their first 20 bytes (more than the insertion sort
// takes, and a few), with repeats: ordered by the whole name, the last row of a name
// kept.
func TestBufferSortLongTies(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var names []string
	for range 400 {
		if rng.IntN(2) == 0 { // one long run of names sharing 20 bytes
			names = append(names, fmt.Sprintf("BTC-27NOV26-100000-C-%d", rng.IntN(40)))
		} else { // short ones
			names = append(names, fmt.Sprintf("ETH-27NOV26-10%02d-%c-%d", rng.IntN(40), "CP"[rng.IntN(2)], rng.IntN(3)))
		}
	}
	var b buffer
	last := map[string]int{}
	for i, n := range names {
		c, off, buf := b.ar.alloc(len(n) + 2)
		copy(buf, n)
		buf[len(n)], buf[len(n)+1] = byte(i), byte(i>>8)
		b.keys = append(b.keys, rowKey(buf[:len(n)], len(b.ents)))
		b.ents = append(b.ents, entry{key: nameKey(n), chunk: c, off: off, nlen: uint32(len(n)), plen: 2})
		last[n] = i
	}
	b.sort()
	want := slices.SortedFunc(func(yield func(string) bool) {
		for n := range last {
			if !yield(n) {
				return
			}
		}
	}, func(x, y string) int { return bytes.Compare([]byte(x), []byte(y)) })
	if len(b.ents) != len(want) {
		t.Fatalf("%d rows, want %d", len(b.ents), len(want))
	}
	for i := range b.ents {
		e := &b.ents[i]
		p := b.ar.chunks[e.chunk][e.off+e.nlen:]
		if got := string(b.name(e)); got != want[i] || int(p[0])|int(p[1])<<8 != last[got] {
			t.Fatalf("row %d: %q (row %d), want %q (row %d)", i, got, int(p[0])|int(p[1])<<8, want[i], last[want[i]])
		}
	}
}

// Runs of a listing that arrives nearly in name order hardly overlap (the
// merge's fast path keeps the current run while it comes first); names at
// their edges repeat in the next run, which wins.
func TestMergeOrderedRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for round := range 50 {
		var runs []*buffer
		last := map[string]byte{}
		next := 0
		for r := range 1 + rng.IntN(8) {
			b := &buffer{}
			start := next - rng.IntN(3) // may repeat the previous run's last names
			if round%5 == 0 {
				start = rng.IntN(next + 1) // or overlap it widely
			}
			end := next + 1 + rng.IntN(40)
			for k := max(start, 0); k < end; k++ {
				n := fmt.Sprintf("BTC-27NOV26-%06d-C", k)
				c, off, buf := b.ar.alloc(len(n) + 1)
				copy(buf, n)
				buf[len(n)] = byte(r)
				b.keys = append(b.keys, rowKey(buf[:len(n)], len(b.ents)))
				b.ents = append(b.ents, entry{key: nameKey(n), chunk: c, off: off, nlen: uint32(len(n)), plen: 1})
				last[n] = byte(r)
			}
			next = end
			b.sort()
			runs = append(runs, b)
		}
		cs := make([]cursor, len(runs))
		for r, b := range runs {
			cs[r] = &memCursor{ar: &b.ar, ents: b.ents, i: -1}
		}
		want := slices.Sorted(maps.Keys(last))
		m := newMerge(cs)
		i := 0
		for ; m.next(); i++ {
			if i >= len(want) || string(m.name()) != want[i] || m.payload()[0] != last[want[i]] {
				t.Fatalf("round %d: entry %d is %q from run %d", round, i, m.name(), m.payload()[0])
			}
		}
		if i != len(want) {
			t.Fatalf("round %d: %d names, want %d", round, i, len(want))
		}
	}
}

// Spilled runs are read in place from the reader's buffer, and copied
// when an entry is larger than the buffer: both give the rows as written.
func TestRunCursorLargeEntries(t *testing.T) {
	big := strings.Repeat("x", runReadBuf+100)
	var rows []row
	for i := range 300 {
		r := inst(fmt.Sprintf("I-%03d", i))
		if i%37 == 5 {
			r["instrument_id"] = big
		}
		rows = append(rows, r)
	}
	var want []string
	for _, memBytes := range []int{1 << 30, 64 << 10} {
		_, _, st := diff(t, NewState("s"), "s", at(1), rows, 50, Options{MemBytes: memBytes, TempDir: t.TempDir()})
		got := entriesOf(t, st)
		st.Close()
		if want == nil {
			want = got
			continue
		}
		if d := diffStrings(got, want); d != "" {
			t.Fatalf("spilled: %.300s", d)
		}
	}
}
