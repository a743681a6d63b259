package transform

import (
	"fmt"
	"math/rand/v2"
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
