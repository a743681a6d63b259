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
// same events and states as encoding them in Observe, spilled or not; every
// record is released (runSim's checked allocator).
func TestBackgroundEncoding(t *testing.T) {
	const ticks = 6
	want, _, wantState := runSim(t, ticks, "", Options{})
	for _, memBytes := range []int{4 << 10, 256 << 10, 0} {
		t.Run(fmt.Sprintf("buffer %d", memBytes), func(t *testing.T) {
			got, _, st := runSim(t, ticks, "", Options{Background: true, MemBytes: memBytes, TempDir: t.TempDir()})
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
// are released; a Differ closed with records pending releases them too.
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
			Options{Mem: mem, Background: true, MemBytes: 64 << 10, TempDir: filepath.Join(notDir, "tmp")})
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
