package events

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/sinks"
)

// memoListing returns n instruments with varied values of every type.
func memoListing(n int) []row {
	rows := make([]row, n)
	for i := range rows {
		name := fmt.Sprintf("BTC-%02dDEC26-%06d-%c", i%7+1, 1000*(i/2), "CP"[i%2])
		r := inst(name, "instrument_id", fmt.Sprint(1000+i), "strike", float64(1000*(i/2)),
			"tick_size", 0.0005*float64(i%3+1), "min_trade_amount", float64(i%4), "is_active", i%5 != 0,
			"creation_timestamp", int64(1_700_000_000_000+i))
		if i%9 == 0 {
			r["option_type"], r["strike"] = nil, nil // a future
		}
		if i%11 == 0 {
			r["rfq"] = nil
		}
		rows[i] = r
	}
	return rows
}

// memoSnapshots is a chain of snapshots, each changing the one before in
// a way the memo must see: values of every type (to and from null, -0,
// NaN, integral or not), rows inserted, removed (near and far), moved,
// repeated, and records split and sliced differently.
func memoSnapshots() [][]row {
	base := memoListing(300)
	clone := func(rs []row) []row {
		out := make([]row, len(rs))
		for i, r := range rs {
			out[i] = inst(r["instrument_name"].(string))
			for k, v := range r {
				out[i][k] = v
			}
		}
		return out
	}
	snaps := [][]row{base}
	next := func(f func(rs []row) []row) {
		snaps = append(snaps, f(clone(snaps[len(snaps)-1])))
	}
	next(func(rs []row) []row { // the same again, but index_price
		for _, r := range rs {
			r["index_price"] = 96000.5
		}
		return rs
	})
	next(func(rs []row) []row { // one value of each type
		rs[3]["base_currency"] = "ETH"
		rs[5]["instrument_id"] = "x5"
		rs[7]["option_type"] = nil
		rs[9]["option_type"] = "put" // a future's null
		rs[12]["strike"] = 1000.5
		rs[14]["tick_size"] = math.Copysign(0, -1)
		rs[15]["tick_size"] = 0.0
		rs[16]["maker_commission"] = math.NaN()
		rs[17]["contract_size"] = math.Inf(1)
		rs[20]["creation_timestamp"] = int64(-5)
		rs[22]["is_active"] = !rs[22]["is_active"].(bool)
		rs[23]["deployed"] = nil
		rs[24]["rfq"] = true
		rs[33]["rfq"] = false // was null
		rs[26]["expiration_time"] = t0.Add(time.Hour)
		rs[27]["expiration_timestamp"] = nil
		rs[299]["settlement_period"] = "month"
		for i := 56; i < 72; i += 3 { // bits past a word's first byte
			rs[i]["deployed"] = false
			rs[i+64]["option_type"] = nil
		}
		return rs
	})
	next(func(rs []row) []row { // the same rows change again (encoded twice in a row)
		rs[3]["base_currency"] = "SOL"
		rs[5]["instrument_id"] = "x6"
		rs[12]["strike"] = 1001.5
		rs[22]["is_active"] = !rs[22]["is_active"].(bool)
		return rs
	})
	next(func(rs []row) []row { // strings across a row boundary, then moved over it
		rs[10]["kind"], rs[11]["kind"] = "ab", "c"
		return rs
	})
	next(func(rs []row) []row {
		rs[10]["kind"], rs[11]["kind"] = "a", "bc"
		return rs
	})
	next(func(rs []row) []row { // -0 back to 0, NaN stays NaN
		rs[14]["tick_size"] = 0.0
		return rs
	})
	next(func(rs []row) []row { // a few inserted and removed near each other
		rs = slices.Delete(rs, 40, 43)
		rs = slices.Insert(rs, 50, inst("NEW-A"), inst("NEW-B"))
		return slices.Delete(rs, 100, 101)
	})
	next(func(rs []row) []row { // a long run removed, another inserted, far apart
		rs = slices.Delete(rs, 60, 110)
		var fresh []row
		for i := range 40 {
			fresh = append(fresh, inst(fmt.Sprintf("ZZ-%03d", i), "strike", float64(i)))
		}
		return slices.Insert(rs, 150, fresh...)
	})
	next(func(rs []row) []row { // moved: a block reversed, the ends swapped
		slices.Reverse(rs[20:80])
		rs[0], rs[len(rs)-1] = rs[len(rs)-1], rs[0]
		return rs
	})
	next(func(rs []row) []row { // a name twice: the last wins
		dup := inst(rs[10]["instrument_name"].(string), "kind", "future")
		return slices.Insert(rs, 200, dup)
	})
	next(func(rs []row) []row { // the duplicate gone again
		return slices.Delete(rs, 200, 201)
	})
	return snaps
}

// TestMemoSameEventsAndStates: comparisons whose Reuse copies the rows a
// snapshot repeats from the memo give exactly the events and state files
// of comparisons that encode every row, whatever changed between the
// snapshots, however the records are split (memo record by memo record)
// and sliced (bit offsets), encoded inline or in the background, in
// memory or spilled; and the memo was used. Closing the Reuse releases
// the records it held.
func TestMemoSameEventsAndStates(t *testing.T) {
	snaps := memoSnapshots()
	for _, tc := range []struct {
		name  string
		batch []int // rows per record, by snapshot (cycled); 0: one record
		slice bool  // observe each record as a slice of a larger one
		opt   Options
		// copied is about 90% of the rows copied from memos in the
		// two rounds (fewer when the records are split differently
		// from one snapshot to the next): most rows repeat the
		// snapshot before.
		copied int64
		// passed is about 90% of the instruments that the merges
		// pass over by their rows' ids (rowID): rows copied from the
		// memo of the snapshot before (fewer when the records are
		// split differently: rows copied from an older snapshot's
		// memo); none when the rows are spilled (compared by their
		// bytes).
		passed int64
	}{
		{"one record", []int{0}, false, Options{}, 4100, 5000},
		{"records", []int{64, 64, 100, 64}, false, Options{}, 2700, 3200},
		{"sliced", []int{0, 77}, true, Options{}, 2000, 1200},
		{"background", []int{64}, true, Options{Background: true, backgroundMin: 16}, 3800, 4800},
		{"spilled", []int{0, 50}, false, Options{MemBytes: 24 << 10}, 1700, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, wantStates := memoChain(t, snaps, tc.batch, tc.slice, withReuse(tc.opt, true), nil)
			// Freed memory is overwritten: a memo whose record was
			// released too early no longer matches (too few copied).
			mem := memory.NewCheckedAllocator(poisonAllocator{memory.NewGoAllocator()})
			opt := withReuse(tc.opt, false)
			for round := range 2 { // the second round starts with the first's memos
				got, gotStates := memoChain(t, snaps, tc.batch, tc.slice, opt, mem)
				if d := diffStrings(got, want); d != "" {
					t.Fatalf("round %d: events with memos differ:\n%s", round, d)
				}
				for i := range gotStates {
					if !bytes.Equal(gotStates[i], wantStates[i]) {
						t.Fatalf("round %d: state file after snapshot %d differs with memos", round, i)
					}
				}
			}
			if got := opt.Reuse.copied.Load(); got < tc.copied {
				t.Fatalf("%d rows copied from memos, want at least %d", got, tc.copied)
			}
			if got := opt.Reuse.passed.Load(); got < tc.passed {
				t.Fatalf("%d instruments passed over by their rows' ids, want at least %d", got, tc.passed)
			}
			opt.Reuse.Close()
			mem.AssertSize(t, 0)
		})
	}
}

// TestMemosHoldAtMostMemoRows: a source's memos hold at most their bound
// of rows (2*memoRows; 1,000 here), however its snapshots are split into
// records (records of one row, then one record, then of two rows, then
// one: the earlier memos go past the bound, not stay beside the new
// ones); and each Finish gives both of its event batches back.
func TestMemosHoldAtMostMemoRows(t *testing.T) {
	const bound = 1000
	rows := memoListing(bound)
	opt := withReuse(Options{}, false)
	opt.Reuse.maxHeld = bound
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	memoChain(t, [][]row{rows}, []int{1}, false, opt, mem)
	memoChain(t, [][]row{rows}, []int{0}, false, opt, mem)
	memoChain(t, [][]row{rows}, []int{2}, false, opt, mem)
	memoChain(t, [][]row{rows, rows}, []int{0}, false, opt, mem)
	re := opt.Reuse
	re.mu.Lock()
	total := 0
	for _, m := range re.memos {
		total += m.n
	}
	memos, batches := len(re.memos), len(re.batches)
	re.mu.Unlock()
	held := 0
	for _, n := range re.held {
		held += n
	}
	if total > bound || held != total {
		t.Errorf("%d memos remember %d rows (counted %d), bound %d", memos, total, held, bound)
	}
	if batches != 2 {
		t.Errorf("%d event batches kept after the comparisons, want both of the last Finish", batches)
	}
	re.Close()
	mem.AssertSize(t, 0)
}

// poisonAllocator overwrites the memory it frees (the Go allocator leaves
// it readable as it was).
type poisonAllocator struct{ memory.Allocator }

func (p poisonAllocator) Free(b []byte) {
	for i := range b {
		b[i] = 0xa5
	}
	p.Allocator.Free(b)
}

func withReuse(opt Options, noMemo bool) Options {
	opt.Reuse, opt.noMemo = NewReuse(), noMemo
	return opt
}

// memoChain compares the snapshots one after the other from an empty
// state (records of batch[i % len] rows, sliced out of larger ones when
// slice) and returns every event and each snapshot's state file.
func memoChain(t *testing.T, snaps [][]row, batch []int, slice bool, opt Options, mem memory.Allocator) ([]string, [][]byte) {
	t.Helper()
	if mem == nil {
		mem = memory.NewGoAllocator()
	}
	opt.TempDir = t.TempDir()
	var all []string
	var files [][]byte
	prev := NewState("src")
	for i, rows := range snaps {
		snap := at(i + 1)
		d, err := NewDiffer(prev, sinks.Snapshot{Time: snap, RunID: "run", Source: "src"}, opt)
		if err != nil {
			t.Fatal(err)
		}
		n := batch[i%len(batch)]
		if n <= 0 {
			n = len(rows)
		}
		for lo := 0; lo < len(rows); lo += n {
			part := rows[lo:min(len(rows), lo+n)]
			var rec arrow.Record
			if slice {
				pad := 1 + i%5 // rows before the slice: bit offsets that vary
				whole := record(t, mem, "src", snap, append(slices.Repeat([]row{inst("PAD")}, pad), part...))
				rec = whole.NewSlice(int64(pad), whole.NumRows())
				whole.Release()
			} else {
				rec = record(t, mem, "src", snap, part)
			}
			err := d.Observe(rec)
			rec.Release()
			if err != nil {
				t.Fatal(err)
			}
		}
		evs, _, next := finish(t, d)
		prev.Close()
		all = append(all, fmt.Sprintf("snapshot %d", i))
		all = append(all, shorts(evs)...)
		files = append(files, savedState(t, next))
		prev = next
	}
	prev.Close()
	return all, files
}
