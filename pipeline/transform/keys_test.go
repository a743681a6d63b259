package transform

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// With UniqueNames, the first row of an instrument_name loads and the later
// ones go to rejects with ReasonDuplicate, on the fast and the general path
// alike, and a second Decode starts with no names.
func TestDecodeDuplicateNames(t *testing.T) {
	a := inst(map[string]string{"instrument_name": `"A"`})
	b := inst(map[string]string{"instrument_name": `"B"`, "strike": `2`})
	a2 := inst(map[string]string{"instrument_name": `"A"`, "strike": `3`})
	bad := inst(map[string]string{"instrument_name": `"C"`, "strike": `"x"`})
	c := inst(map[string]string{"instrument_name": `"C"`})
	body := listing(a, b, a2, bad, c, `{"instrument_name":"B"}`)
	for _, fast := range []bool{true, false} {
		d := NewInstrumentDecoder(Options{UniqueNames: true})
		d.noFast = !fast
		for run := 0; run < 2; run++ {
			o := decodeOnce(d, []byte(body))
			if o.err != nil {
				t.Fatal(o.err)
			}
			var names, reasons []string
			for i, rec := range o.recs {
				for _, row := range rowsOf(rec) {
					if o.tabs[i].Name == "instruments" {
						names = append(names, fmt.Sprint(row["instrument_name"]))
					} else {
						reasons = append(reasons, fmt.Sprintf("%v %v", row["row_index"], row["reason"]))
					}
				}
				rec.Release()
			}
			if got := strings.Join(names, ","); got != "A,B,C" {
				t.Errorf("fast %v run %d: rows %s, want A,B,C (the first of each name)", fast, run, got)
			}
			want := "2 " + ReasonDuplicate + "|3 strike: expected number, got string|5 " + ReasonDuplicate
			if got := strings.Join(reasons, "|"); got != want {
				t.Errorf("fast %v run %d: rejects\n%s\nwant\n%s", fast, run, got, want)
			}
			if o.stats.Duplicates != 2 || o.stats.TopReason != ReasonDuplicate || o.stats.TopRejects != 2 {
				t.Errorf("fast %v: stats %+v", fast, o.stats)
			}
		}
		d.Release()
	}
	// Without the option, every row loads (the events' own rule applies).
	if o := decodeWith(t, []byte(body), true, Options{}); o.stats.Rows != 5 || o.stats.Duplicates != 0 {
		t.Errorf("without UniqueNames: %+v", o.stats)
	}
}

// The set finds every name among many, whatever the table's growth.
func TestKeySet(t *testing.T) {
	k := newKeySet()
	for round := 0; round < 2; round++ {
		for i := 0; i < 50000; i++ {
			if !k.add([]byte(fmt.Sprintf("BTC-%d-C", i))) {
				t.Fatalf("round %d: name %d reported twice", round, i)
			}
		}
		for i := 0; i < 50000; i += 7 {
			if k.add([]byte(fmt.Sprintf("BTC-%d-C", i))) {
				t.Fatalf("round %d: name %d not found", round, i)
			}
		}
		k.reset()
	}
	// Past the table's reach, names go to a map, with the same answers.
	if !k.add([]byte("A")) || !k.addMore([]byte("B")) || k.addMore([]byte("B")) || k.add([]byte("A")) {
		t.Error("names past the table are not kept once")
	}
}

// The set answers as a map does on listings with and without repeated
// names, small and past its filter's and table's growth, before and after
// a reset: the filter only ever spares the exact lookup of a new name.
func TestKeySetLikeMap(t *testing.T) {
	k := newKeySet()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		names int
		dup   float64 // share of adds that repeat an earlier name
	}{{10, 0.5}, {3_000, 0}, {3_000, 0.01}, {70_000, 0.001}, {200_000, 0.02}, {50_000, 0.9}} {
		k.reset()
		seen := map[string]bool{}
		var added []string
		for i := 0; i < tc.names; i++ {
			name := fmt.Sprintf("BTC-%dDEC26-%d-%c", i%97, rng.IntN(1<<40), "CP"[i&1])
			if len(added) > 0 && rng.Float64() < tc.dup {
				name = added[rng.IntN(len(added))]
			}
			want := !seen[name]
			if got := k.add([]byte(name)); got != want {
				t.Fatalf("%d names, dup %.3f: add #%d %q = %v, want %v", tc.names, tc.dup, i, name, got, want)
			}
			if want {
				seen[name] = true
				added = append(added, name)
			}
		}
		// Every name is found again, wherever it sits (table or pending).
		for _, name := range added {
			if k.add([]byte(name)) {
				t.Fatalf("%d names: %q not found at the end", tc.names, name)
			}
		}
	}
}

// A NameSet carries the names of an endpoint's requests on: a name that
// came in an earlier request (kept) is a duplicate of the next one
// (Repeated), on both paths; an attempt not kept (retried) leaves no
// names behind; without the set, each Decode starts empty.
func TestNameSetAcrossRequests(t *testing.T) {
	a := inst(map[string]string{"instrument_name": `"A"`})
	b := inst(map[string]string{"instrument_name": `"B"`})
	c := inst(map[string]string{"instrument_name": `"C"`})
	names := func(o outcome) (rows []string) {
		for i, rec := range o.recs {
			if o.tabs[i].Name == "instruments" {
				for _, row := range rowsOf(rec) {
					rows = append(rows, fmt.Sprint(row["instrument_name"]))
				}
			}
			rec.Release()
		}
		return rows
	}
	for _, fast := range []bool{true, false} {
		d := NewInstrumentDecoder(Options{UniqueNames: true})
		d.noFast = !fast
		ns := NewNameSet()
		d.UseNames(ns)
		if o := decodeOnce(d, []byte(listing(a, b))); strings.Join(names(o), ",") != "A,B" {
			t.Fatalf("fast %v: first request: %v", fast, o.err)
		}
		ns.Keep()
		// An attempt of the second request that is not kept (a retry):
		// its C must not count against the next attempt.
		if o := decodeOnce(d, []byte(listing(c))); o.stats.Duplicates != 0 {
			t.Fatalf("fast %v: attempt: %+v", fast, o.stats)
		}
		o := decodeOnce(d, []byte(listing(b, c, c)))
		if got := strings.Join(names(o), ","); got != "C" {
			t.Errorf("fast %v: second request loads %s, want C (B came in the first request)", fast, got)
		}
		if o.stats.Duplicates != 2 || o.stats.Repeated != 1 {
			t.Errorf("fast %v: second request: %+v, want 2 duplicates, 1 of them from the first request", fast, o.stats)
		}
		d.UseNames(nil)
		if o := decodeOnce(d, []byte(listing(a, b))); o.stats.Duplicates != 0 {
			t.Errorf("fast %v: the decoder's own set after UseNames(nil): %+v", fast, o.stats)
		}
		d.Release()
	}
}

// keyMasks narrow the set's hash (keySet.hmask) to force collisions: the
// full hash; one part of the table with 2 bits of slot and tag; one hash
// for every name (every name a collision, told apart by its bytes only).
var keyMasks = []uint64{^uint64(0), 0xff00_0003_0000_0000, 0}

// checkLikeMap adds names to k in windows of random sizes, with addAll and
// add, and fails unless every answer is a map's: the first of each name is
// new, every later one is there, whatever the hash.
func checkLikeMap(t *testing.T, k *keySet, names []string, rng *rand.Rand) {
	t.Helper()
	seen := map[string]bool{}
	for i := 0; i < len(names); {
		if rng.IntN(4) == 0 {
			want := !seen[names[i]]
			if got := k.add([]byte(names[i])); got != want {
				t.Fatalf("hmask %x: add #%d %q = %v, want %v", k.hmask, i, names[i], got, want)
			}
			seen[names[i]] = true
			i++
			continue
		}
		w := names[i:min(len(names), i+1+rng.IntN(300))]
		var data []byte
		offs := []int32{0}
		for _, n := range w {
			data = append(data, n...)
			offs = append(offs, int32(len(data)))
		}
		want := -1
		for j, n := range w {
			if seen[n] {
				want = j
				break
			}
			seen[n] = true
		}
		if got := k.addAll(data, offs); got != want {
			t.Fatalf("hmask %x: addAll of #%d..%d = %d, want %d", k.hmask, i, i+len(w)-1, got, want)
		}
		if want < 0 {
			i += len(w)
		} else {
			i += want + 1 // the repeat itself is not added
		}
	}
	for n := range seen {
		if k.add([]byte(n)) {
			t.Fatalf("hmask %x: %q not found at the end", k.hmask, n)
		}
	}
}

// randomNames are n names, a share dup of them repeating an earlier one
// (a recent one or any), some of them a prefix or an extension of another.
func randomNames(rng *rand.Rand, n int, dup float64) []string {
	var names []string
	for i := 0; i < n; i++ {
		switch {
		case len(names) > 0 && rng.Float64() < dup:
			if rng.IntN(2) == 0 {
				names = append(names, names[max(0, len(names)-1-rng.IntN(5))])
			} else {
				names = append(names, names[rng.IntN(len(names))])
			}
		case len(names) > 0 && rng.IntN(20) == 0:
			names = append(names, names[rng.IntN(len(names))]+"-X")
		default:
			n := fmt.Sprintf("ETH-%dJAN27-%d-%c", rng.IntN(31), rng.IntN(1<<30), "CP"[rng.IntN(2)])
			names = append(names, n[:min(len(n), 4+rng.IntN(20))])
		}
	}
	return names
}

// The set's batched adds (addAll) and single adds answer as a map does,
// with and without forced hash collisions, on listings with few and with
// many repeats, before and after a reset, and across its parts' growth.
func TestKeySetAddAllLikeMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 6))
	for _, hmask := range keyMasks {
		k := newKeySet()
		k.hmask = hmask
		for _, tc := range []struct {
			n   int
			dup float64
		}{{1, 0}, {40, 0.5}, {3_000, 0}, {3_000, 0.02}, {20_000, 0.001}, {2_000, 0.9}} {
			if hmask != ^uint64(0) && tc.n > 3_000 {
				continue // every name in one chain: quadratic
			}
			k.reset()
			checkLikeMap(t, k, randomNames(rng, tc.n, tc.dup), rng)
		}
	}
}

// FuzzKeySetLikeMap: names cut from the input at its commas, the set
// against a map, with the hash narrowed by the input's first byte.
func FuzzKeySetLikeMap(f *testing.F) {
	f.Add([]byte("\x00a,b,a,,b,c"))
	f.Add([]byte("\x01BTC-1,BTC-2,BTC-1,BTC-10,BTC-1,BTC-2"))
	f.Add([]byte("\x02" + strings.Repeat("x,y,xy,yx,", 50)))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		k := newKeySet()
		k.hmask = keyMasks[int(in[0])%len(keyMasks)]
		names := strings.Split(string(in[1:]), ",")
		checkLikeMap(t, k, names, rand.New(rand.NewPCG(uint64(len(in)), 1)))
	})
}

// dupListing is a listing of the names, as groups and bare instruments,
// with whitespace between elements (long runs of it now and then, which
// the scanner reads past a refill of its buffer) and some rows the fast
// path leaves to the general one: a reject (a number as text), a name
// with an escape, an unknown nested member.
func dupListing(rng *rand.Rand, names []string) []byte {
	var b strings.Builder
	b.WriteString("[")
	inGroup := false
	for i, name := range names {
		if i > 0 {
			if inGroup && rng.IntN(40) == 0 {
				b.WriteString(`]}`)
				inGroup = false
			}
			b.WriteString(",")
		}
		if rng.IntN(50) == 0 {
			b.WriteString(strings.Repeat(" ", rng.IntN(9000)))
		}
		if !inGroup && rng.IntN(30) < 25 {
			b.WriteString(`{"instruments":[`)
			inGroup = true
		}
		repl := map[string]string{"instrument_name": strconv.Quote(name), "strike": strconv.Itoa(rng.IntN(1e6))}
		switch rng.IntN(40) {
		case 0:
			repl["strike"] = `"7"` // rejected
		case 1:
			repl["instrument_name"] = `"` + name[:1] + `\u0041` + name[1:] + `"`
		case 2:
			repl["venue_note"] = `{"a":[1,2]}`
		}
		b.WriteString(inst(repl))
	}
	if inGroup {
		b.WriteString(`]}`)
	}
	b.WriteString("]")
	return []byte(b.String())
}

// The duplicate rule comes out the same whichever path decodes a row: the
// fast path's names, checked a window of rows at a time (checkNames), give
// the rows, rejects (reasons, row indexes, raw text), stats and record
// boundaries of the general path, which checks each name as its row ends;
// read in place as well; with names repeated within a window, across
// windows, batches and refills of the scanner's buffer, and from an
// earlier request of the endpoint (NameSet); with hash collisions forced.
func TestDuplicateCheckLikeGeneralPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(46, 1))
	for ci, tc := range []struct {
		n     int
		dup   float64
		batch int
	}{{700, 0.01, 100}, {2_000, 0.002, 32768}, {1_500, 0.3, 7}, {600, 0.9, 2}, {3_000, 0, 1000}} {
		for _, hmask := range keyMasks {
			if hmask != ^uint64(0) && tc.n > 1_000 {
				continue
			}
			first := randomNames(rng, tc.n, tc.dup)
			second := randomNames(rng, tc.n/3, tc.dup)
			for i := range second {
				if rng.IntN(10) == 0 { // a name of the first request
					second[i] = first[rng.IntN(len(first))]
				}
			}
			reqs := [][]byte{dupListing(rng, first), dupListing(rng, second)}
			var outs [3][]outcome
			var fast int64
			for way := range outs {
				d := NewInstrumentDecoder(Options{UniqueNames: true, BatchRows: tc.batch, ReadBuffer: 4096})
				d.noFast = way == 1
				ns := NewNameSet()
				ns.k.hmask = hmask
				d.UseNames(ns)
				for _, body := range reqs {
					var o outcome
					if way == 2 {
						o = decodeFrom(d, &inMemory{Reader: bytes.NewReader(body), body: body})
					} else {
						o = decodeOnce(d, body)
					}
					if o.err != nil {
						t.Fatalf("case %d: %v", ci, o.err)
					}
					if way == 0 {
						fast += o.fast
					}
					outs[way] = append(outs[way], o)
					ns.Keep()
				}
				d.Release()
			}
			for r := range reqs {
				sameAs(t, fmt.Sprintf("case %d hmask %x request %d fast", ci, hmask, r), outs[0][r], outs[1][r])
				sameAs(t, fmt.Sprintf("case %d hmask %x request %d in memory", ci, hmask, r), outs[2][r], outs[1][r])
			}
			if fast == 0 || outs[1][0].stats.Duplicates == 0 && tc.dup > 0 || outs[1][1].stats.Repeated == 0 {
				t.Fatalf("case %d: the listing does not test the rule: %d fast rows, stats %+v, %+v", ci, fast, outs[1][0].stats, outs[1][1].stats)
			}
			for _, o := range outs {
				for _, x := range o {
					x.release()
				}
			}
		}
	}
}

// A duplicate that fills the rejects batch ends the instruments batch just
// before it, as in the general path, which emits both as the duplicate's
// row ends: the fast path checks a row's name at once when its duplicate
// could fill the rejects batch, rather than with rows after it in the
// batch; a decode that fails after such a duplicate has emitted the rejects
// batch too. With the rejects batch filled by the first duplicate of a
// window and by a later one, and by a duplicate before a refill of the
// scanner's buffer.
func TestDuplicateFillingRejectsLikeGeneralPath(t *testing.T) {
	rows := func(prefix string, n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, `,{"instrument_name":"%s%d","strike":%d}`, prefix, i, i)
		}
		return b.String()
	}
	for i, tc := range []struct {
		body  string
		batch int
		fails bool // the body breaks off
	}{
		{`[{"x":1},{"instrument_name":"a"},{"instrument_name":"b"},{"instrument_name":"a"},{"instrument_name":"c"},{"instrument_name":"d"}]`, 2, false},
		{`[{"instrument_name":"0"},{"instruments":[{},{"instrument_name":"c"},{"instrument_name":"0"}`, 2, true},
		{`[{"x":1},{"instrument_name":"a"},{"instrument_name":"b"},{"instrument_name":"a"},{"instrument_name":"c"},{"instrument_name":"d"}`, 2, true},
		// 97 rejects, then a window with three duplicates, the third
		// filling the rejects batch, then rows after it.
		{`[` + strings.Repeat(`{"x":1},`, 97) + `{"instrument_name":"a"}` + rows("r", 30) + `,{"instrument_name":"a"}` +
			rows("s", 5) + `,{"instrument_name":"r3"},{"instrument_name":"s1"}` + rows("t", 40) + `]`, 100, false},
		// 99 rejects, then a duplicate in the middle of the second batch
		// of rows (refills of a 4096-byte buffer on the way).
		{`[` + strings.Repeat(`{"x":1},`, 99) + rows("u", 150)[1:] + `,{"instrument_name":"u7"}` + rows("v", 300) + `]`, 100, false},
	} {
		for _, buf := range []int{4096, 64 << 10} {
			t.Run(fmt.Sprintf("case%d/buffer%d", i, buf), func(t *testing.T) {
				opt := Options{BatchRows: tc.batch, ReadBuffer: buf, UniqueNames: true}
				g := decodeWith(t, []byte(tc.body), false, opt)
				defer g.release()
				if (g.err != nil) != tc.fails || g.stats.Duplicates == 0 || g.stats.Rejects < int64(tc.batch) {
					t.Fatalf("the listing does not test the rule: error %v, stats %+v", g.err, g.stats)
				}
				sameOutcome(t, []byte(tc.body), opt)
			})
		}
	}
}
