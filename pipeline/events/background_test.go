package events

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// Encoding the records in the background (Options.Background) gives the
// same events and states as encoding them in Observe, spilled or not, and
// mixed (records of 1000 rows, small ones encoded in Observe when the
// encoder is idle); every record is released (runSim's checked allocator).
func TestBackgroundEncoding(t *testing.T) {
	const ticks = 6
	want, _, wantState := runSim(t, ticks, "", Options{})
	for _, c := range []struct{ memBytes, min int }{{4 << 10, 1}, {256 << 10, 1}, {0, 1}, {4 << 10, 0}, {4 << 10, 999}} {
		memBytes := c.memBytes
		t.Run(fmt.Sprintf("buffer %d min %d", memBytes, c.min), func(t *testing.T) {
			got, _, st := runSim(t, ticks, "", Options{Background: true, MemBytes: memBytes, TempDir: t.TempDir(), backgroundMin: c.min})
			if d := diffStrings(got, want); d != "" {
				t.Fatal(d)
			}
			if d := diffStrings(st, wantState); d != "" {
				t.Fatalf("final state: %s", d)
			}
		})
	}
}

// A failure of the background encoder (here: its spill cannot create a
// file) fails the next Observe and Finish, and the records it still held
// are released. The closeEarly case checks only that a Differ closed
// after its first record (whose encoding may or may not have failed yet)
// releases the records it holds.
func TestBackgroundFailure(t *testing.T) {
	var rows []row
	for i := range 3000 {
		rows = append(rows, inst(fmt.Sprintf("I-%05d", i)))
	}
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, closeEarly := range []bool{false, true} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		d, err := NewDiffer(NewState("s"), sinks.Snapshot{Source: "s", Time: at(1)},
			Options{Mem: mem, Background: true, MemBytes: 64 << 10, TempDir: filepath.Join(notDir, "tmp"), backgroundMin: 1})
		if err != nil {
			t.Fatal(err)
		}
		var failed error
		for i := 0; i < len(rows) && failed == nil; i += 500 {
			rec := record(t, mem, "s", at(1), rows[i:i+500])
			failed = d.Observe(rec)
			rec.Release()
			if closeEarly {
				break
			}
		}
		if closeEarly {
			d.Close()
			mem.AssertSize(t, 0)
			continue
		}
		_, st, err := d.Finish(func(*schema.Table, arrow.Record) error { t.Fatal("emitted"); return nil })
		if err == nil || st != nil || !strings.Contains(err.Error(), "spill") {
			t.Fatalf("Finish after a failed background spill: %v, %v (Observe: %v)", st, err, failed)
		}
		mem.AssertSize(t, 0)
	}
}

// A small record observed while the encoder still holds a large one goes
// after it, not around it: of a name repeated in both, the later row wins.
// The encoder is held before its first record until both are observed, so
// the small one surely arrives while the large one is pending.
func TestBackgroundKeepsOrder(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var rows []row
	for i := range 100 {
		rows = append(rows, inst(fmt.Sprintf("I-%05d", i)))
	}
	rows = append(rows, inst("X", "tick_size", 1.0))
	big := record(t, mem, "s", at(1), rows)
	defer big.Release()
	small := record(t, mem, "s", at(1), []row{inst("X", "tick_size", 2.0)})
	defer small.Release()
	ref, err := Rebuild("s", at(1), []arrow.Record{small})
	if err != nil {
		t.Fatal(err)
	}
	want := entriesOf(t, ref)[0]
	ref.Close()
	gate := make(chan struct{})
	d, err := NewDiffer(NewState("s"), sinks.Snapshot{Source: "s", Time: at(1)},
		Options{Mem: mem, Background: true, backgroundMin: 10, TempDir: t.TempDir(), encoderGate: gate})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Observe(big); err != nil {
		t.Fatal(err)
	}
	if err := d.Observe(small); err != nil {
		t.Fatal(err)
	}
	close(gate)
	_, next, err := d.Finish(func(*schema.Table, arrow.Record) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	got := entriesOf(t, next)
	next.Close()
	if last := got[len(got)-1]; last != want {
		t.Fatalf("X's row: %q, want the later one (tick_size 2): %q", last, want)
	}
}
