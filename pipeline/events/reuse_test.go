package events

import (
	"bytes"
	"os"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/venuesim"
)

// A chain of comparisons sharing a Reuse (each state closed once the next
// comparison is done with it, as a replay does, so that its memory goes to
// the one after) gives exactly the events and the state files of
// comparisons that share nothing: in memory and spilled, encoded inline
// and in the background.
func TestReuseSameEventsAndStates(t *testing.T) {
	sim := venuesim.New(venuesim.Config{Seed: 7, Instruments: 3000})
	var snaps []simSnap
	for range 6 {
		snap, recs, err := decodeSim(sim)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			for _, r := range recs {
				r.Release()
			}
		}()
		snaps = append(snaps, simSnap{meta: sinks.Snapshot{Time: snap, RunID: "r" + snap.Format("150405"), Source: "venue-sim"}, recs: recs})
		sim.Advance(1)
	}
	for _, tc := range []struct {
		name string
		opt  Options
	}{
		{"memory", Options{}},
		{"spilled", Options{MemBytes: 96 << 10, backgroundMin: 64}},
		{"background", Options{Background: true, backgroundMin: 64, BatchRows: 500}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, wantStates := chainEvents(t, snaps, tc.opt)
			opt := tc.opt
			opt.Reuse = NewReuse()
			for round := range 2 { // the second round starts with memory to reuse
				got, gotStates := chainEvents(t, snaps, opt)
				if d := diffStrings(got, want); d != "" {
					t.Fatalf("round %d: events with Reuse differ:\n%s", round, d)
				}
				for i := range gotStates {
					if !bytes.Equal(gotStates[i], wantStates[i]) {
						t.Fatalf("round %d: state file after snapshot %d differs with Reuse", round, i)
					}
				}
			}
		})
	}
}

type simSnap struct {
	meta sinks.Snapshot
	recs []arrow.Record
}

// chainEvents compares the snapshots one after the other from an empty
// state and returns every event and each snapshot's state file.
func chainEvents(t *testing.T, snaps []simSnap, opt Options) ([]string, [][]byte) {
	t.Helper()
	opt.TempDir = t.TempDir()
	var all []string
	var files [][]byte
	prev := NewState("venue-sim")
	for _, s := range snaps {
		d, err := NewDiffer(prev, s.meta, opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range s.recs {
			if err := d.Observe(r); err != nil {
				t.Fatal(err)
			}
		}
		evs, _, next := finish(t, d)
		prev.Close() // its memory may go to the next comparison
		all = append(all, shorts(evs)...)
		files = append(files, savedState(t, next))
		prev = next
	}
	prev.Close()
	return all, files
}

// savedState saves st in a new data directory and returns its file.
func savedState(t *testing.T, st *State) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := st.Save(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(StatePath(dir, st.Source()))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReuseDropsLargeSlices: a Reuse keeps small slices for the next
// comparison but lets a slice past reuseSliceBytes go, so one huge
// snapshot does not leave its memory held for the rest of a replay.
func TestReuseDropsLargeSlices(t *testing.T) {
	re := NewReuse()
	small := make([]sortKey, 0, 1024)
	re.putSortKeys(small)
	if got := re.sortKeys(); cap(got) != cap(small) {
		t.Fatalf("small slice not reused: cap %d, want %d", cap(got), cap(small))
	}
	var k sortKey
	huge := make([]sortKey, 0, reuseSliceBytes/int(unsafe.Sizeof(k))+1)
	re.putSortKeys(huge)
	if got := re.sortKeys(); got != nil {
		t.Fatalf("a %d-byte slice was kept (cap %d)", cap(huge)*int(unsafe.Sizeof(k)), cap(got))
	}
	ents := make([]entry, 0, reuseSliceBytes/int(unsafe.Sizeof(entry{}))+1)
	re.putEntries(ents)
	if got := re.entries(); got != nil {
		t.Fatalf("a large entries slice was kept (cap %d)", cap(got))
	}
}

// TestPinnedChunks: a chunk a memo shares is not handed out again when
// its arena lets it go (putChunks, or the spill's arena.reset), and comes
// back to the free list with the memo's last unpin.
func TestPinnedChunks(t *testing.T) {
	for _, how := range []string{"putChunks", "reset"} {
		t.Run(how, func(t *testing.T) {
			re := NewReuse()
			a := arena{re: re}
			_, _, buf := a.alloc(100)
			c := a.chunks[0][:chunkSize]
			re.pin(c)
			re.pin(c) // two memos
			if how == "reset" {
				a.reset()
				if len(a.chunks) != 0 {
					t.Fatalf("reset kept %d pinned chunks for writing", len(a.chunks))
				}
			}
			a.release()
			if got := re.chunk(); unsafe.SliceData(got[:1]) == unsafe.SliceData(buf) {
				t.Fatal("a pinned chunk was handed out again")
			}
			for i := range 2 {
				re.mu.Lock()
				re.unpin([][]byte{c})
				re.mu.Unlock()
				back := re.chunks.get()
				if i == 0 && back != nil {
					t.Fatal("the chunk came back while a memo still shares it")
				}
				if i == 1 && (back == nil || unsafe.SliceData(back[:1]) != unsafe.SliceData(buf)) {
					t.Fatal("the chunk did not come back with the last unpin")
				}
			}
		})
	}
}
