package events

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/venuesim"
)

// assertNoTemp fails when dir holds a temporary file (a crash leftover
// pattern ".….tmp-*", or anything else that is not a saved state).
func assertNoTemp(t testing.TB, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".state.zst") || strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left in %s: %s", dir, e.Name())
		}
	}
}

// TestDuplicatesAcrossRuns: the last row of an instrument wins also when
// its earlier rows were spilled in other runs, whatever the buffer size.
func TestDuplicatesAcrossRuns(t *testing.T) {
	rows := []row{
		inst("A", "tick_size", 1.0), inst("B"), inst("A", "tick_size", 2.0), inst("C"),
		inst("D", "strike", nil), inst("A", "tick_size", 3.0), inst("D"), inst("B", "kind", "future"),
	}
	for _, memBytes := range []int{0, 1, 300, 700, 2000} {
		for _, batch := range []int{0, 1, 3} {
			t.Run(fmt.Sprintf("buffer %d batch %d", memBytes, batch), func(t *testing.T) {
				tmp := t.TempDir()
				opt := Options{MemBytes: memBytes, TempDir: tmp}
				evs, stats, st := diff(t, NewState("s"), "s", at(1), rows, batch, opt)
				if stats.Rows != 8 || stats.Duplicates != 4 || stats.Instruments != 4 || len(evs) != 4 {
					t.Fatalf("stats %+v, %d events", stats, len(evs))
				}
				want := []row{inst("A", "tick_size", 3.0), inst("B", "kind", "future"), inst("C"), inst("D")}
				_, _, ref := diff(t, NewState("s"), "s", at(1), want, 0, Options{})
				assertSameState(t, st, ref)
				evs, _, next := diff(t, st, "s", at(2), want, 0, opt)
				next.Close()
				st.Close()
				if len(evs) != 0 {
					t.Fatalf("the last row did not win: %v", shorts(evs))
				}
				assertNoTemp(t, tmp)
			})
		}
	}
}

// TestTempFiles: spilled runs never show in the folder (unlinked at once);
// the next state is one hidden temporary file until Save renames it or
// Close removes it; a failed or abandoned comparison leaves nothing.
func TestTempFiles(t *testing.T) {
	const src = "s"
	var rows []row
	for i := 0; i < 300; i++ {
		rows = append(rows, inst(fmt.Sprintf("I-%03d", (i*7)%300)))
	}
	dir := t.TempDir()
	tmp := StateDir(dir)
	opt := Options{MemBytes: 4 << 10, TempDir: tmp}
	ls := func() []string {
		ents, _ := os.ReadDir(tmp)
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}

	// Observing spills, but leaves no visible file.
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	d, err := NewDiffer(NewState(src), sinks.Snapshot{Time: at(1), Source: src}, opt)
	if err != nil {
		t.Fatal(err)
	}
	rec := record(t, mem, src, at(1), rows)
	err = d.Observe(rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	if !d.b.srt.spilled() {
		t.Fatal("did not spill")
	}
	if got := ls(); len(got) != 0 {
		t.Fatalf("after Observe: %v", got)
	}
	_, next, err := d.Finish(func(*schema.Table, arrow.Record) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	got := ls()
	if len(got) != 1 || !strings.HasPrefix(got[0], "."+src+".state.zst.tmp-") {
		t.Fatalf("after Finish: %v", got)
	}
	if err := next.Save(dir); err != nil {
		t.Fatal(err)
	}
	if got := ls(); len(got) != 1 || got[0] != src+".state.zst" {
		t.Fatalf("after Save: %v", got)
	}
	if err := next.Close(); err != nil {
		t.Fatal(err)
	}
	if got := ls(); len(got) != 1 {
		t.Fatalf("after Close: %v", got) // Close keeps a saved state
	}
	prev, err := Load(dir, src)
	if err != nil {
		t.Fatal(err)
	}
	defer prev.Close()

	// Not saved: Close removes it.
	_, _, next = diff(t, prev, src, at(2), rows[:200], 0, opt)
	if len(ls()) != 2 {
		t.Fatalf("after Finish: %v", ls())
	}
	next.Close()
	if got := ls(); len(got) != 1 {
		t.Fatalf("after Close: %v", got)
	}

	// A failed emit and an abandoned Differ leave nothing either.
	for _, finish := range []bool{true, false} {
		d, err := NewDiffer(prev, sinks.Snapshot{Time: at(3), Source: src}, opt)
		if err != nil {
			t.Fatal(err)
		}
		rec := record(t, mem, src, at(3), rows[50:])
		err = d.Observe(rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if finish {
			if _, st, err := d.Finish(func(*schema.Table, arrow.Record) error { return errors.New("sink down") }); err == nil || st != nil {
				t.Fatalf("Finish: %v %v", st, err)
			}
		} else {
			d.Close()
		}
		if got := ls(); len(got) != 1 {
			t.Fatalf("finish %v: %v", finish, got)
		}
	}
	// The previous state is intact.
	_, _, ref := diff(t, NewState(src), src, at(1), rows, 0, Options{})
	defer ref.Close()
	assertSameState(t, prev, ref)
}

// writeV1 writes st as a version 1 state file (count first, entries in
// the given order).
func writeV1(t *testing.T, dir string, st *State, order []int) {
	t.Helper()
	var raw bytes.Buffer
	w := &fileWriter{w: &raw}
	w.bytes([]byte(fileMagic))
	w.uvarint(fileVersionV1)
	w.str(st.source)
	w.str(fieldSignature)
	w.buf = append(w.buf, 1)
	w.buf = binary.AppendVarint(w.buf, st.snapMs)
	w.uvarint(uint64(len(order)))
	for _, e := range order {
		w.uvarint(uint64(len(st.name(e))))
		w.bytes(st.name(e))
		w.uvarint(uint64(len(st.payload(e))))
		w.bytes(st.payload(e))
	}
	w.flush()
	raw.Write(binary.LittleEndian.AppendUint32([]byte(fileEnd), w.crc))
	path := StatePath(dir, st.source)
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, compressZstd(t, raw.Bytes()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLoadV1: a version 1 file (unsorted) loads as the same state, and the
// next Save writes version 2; a version 1 file with a duplicate is corrupt.
func TestLoadV1(t *testing.T) {
	const src = "s"
	var rows []row
	for i := 0; i < 500; i++ {
		rows = append(rows, inst(fmt.Sprintf("I-%03d", i), "strike", float64(i)))
	}
	_, _, st := diff(t, NewState(src), src, at(1), rows, 0, Options{})
	order := make([]int, st.Len())
	for i := range order {
		order[i] = (i * 7) % len(order) // unsorted
	}
	dir := t.TempDir()
	writeV1(t, dir, st, order)
	loaded, err := Load(dir, src)
	if err != nil {
		t.Fatal(err)
	}
	assertSameState(t, loaded, st)
	if err := loaded.Save(dir); err != nil {
		t.Fatal(err)
	}
	loaded.Close()
	if raw := decompress(t, mustRead(t, StatePath(dir, src))); raw[len(fileMagic)] != fileVersion {
		t.Fatalf("saved version %d", raw[len(fileMagic)])
	}
	again, err := Load(dir, src)
	if err != nil {
		t.Fatal(err)
	}
	assertSameState(t, again, st)
	again.Close()
	assertNoTemp(t, StateDir(dir))

	writeV1(t, dir, st, append(order, order[3]))
	if _, err := Load(dir, src); !errors.Is(err, ErrCorruptState) {
		t.Fatalf("duplicate in v1: %v", err)
	}
	assertNoTemp(t, StateDir(dir))
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestClosedState: a closed state cannot be compared or saved.
func TestClosedState(t *testing.T) {
	_, _, st := diff(t, NewState("s"), "s", at(1), []row{inst("A")}, 0, Options{})
	st.Close()
	if err := st.Save(t.TempDir()); err == nil {
		t.Error("saved a closed state")
	}
	d, err := NewDiffer(st, sinks.Snapshot{Time: at(2), Source: "s"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Finish(func(*schema.Table, arrow.Record) error { return nil }); err == nil || errors.Is(err, ErrCorruptState) {
		t.Errorf("compared with a closed state: %v", err)
	}
	// The same for a state in a file.
	dir := t.TempDir()
	_, _, st = diff(t, NewState("s"), "s", at(1), []row{inst("A"), inst("B")}, 0, Options{MemBytes: 1, TempDir: dir})
	st.Close()
	d, err = NewDiffer(st, sinks.Snapshot{Time: at(2), Source: "s"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.Finish(func(*schema.Table, arrow.Record) error { return nil }); err == nil || errors.Is(err, ErrCorruptState) {
		t.Errorf("compared with a closed state file: %v", err)
	}
	assertNoTemp(t, dir)
}

// TestBoundedMemory: the heap a comparison holds does not grow with the
// listing. Two simulator listings, 25,000 and 100,000 instruments, are
// compared twice each (first snapshot, then the next one against the saved
// state) with a 256 KiB buffer; the live heap after Observe and while Finish
// emits is measured (after a GC) and must stay within 1.5x between the two
// sizes (it would be 4x if the comparison held the listing), plus the read
// buffers of the sorted runs, which grow with the listing up to maxRuns.
func TestBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 250,000 instruments")
	}
	peak := func(n int) uint64 {
		dir := t.TempDir()
		sim := venuesim.New(venuesim.Config{Seed: 4, Instruments: n})
		dec := transform.NewInstrumentDecoder(transform.Options{BatchRows: 4096})
		defer dec.Release()
		var max uint64
		sample := func(base uint64) {
			if h := heapInUse(); h > base && h-base > max {
				max = h - base
			}
		}
		for tick := 0; tick < 2; tick++ {
			sim.Advance(tick)
			var body bytes.Buffer
			if err := sim.WriteInstruments(&body); err != nil {
				t.Fatal(err)
			}
			prev, err := Load(dir, "sim")
			if err != nil {
				t.Fatal(err)
			}
			base := heapInUse()
			d, err := NewDiffer(prev, sinks.Snapshot{Time: sim.Now(), Source: "sim"}, Options{MemBytes: 256 << 10, TempDir: StateDir(dir), BatchRows: 1024})
			if err != nil {
				t.Fatal(err)
			}
			_, err = dec.Decode(context.Background(), &body, sinks.Snapshot{Time: sim.Now(), Source: "sim", Endpoint: "instruments"},
				func(_ *schema.Table, rec arrow.Record) error { return d.Observe(rec) })
			if err != nil {
				t.Fatal(err)
			}
			sample(base)
			rows, every := 0, n/4
			_, next, err := d.Finish(func(_ *schema.Table, rec arrow.Record) error {
				if rows += int(rec.NumRows()); rows >= every {
					sample(base)
					every += n / 4
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			sample(base)
			if err := next.Save(dir); err != nil {
				t.Fatal(err)
			}
			next.Close()
			prev.Close()
			runtime.KeepAlive(body)
		}
		return max
	}
	small, large := peak(25_000), peak(100_000)
	t.Logf("live heap of a comparison: %d KiB at 25k, %d KiB at 100k (%.2fx)", small>>10, large>>10, float64(large)/float64(small))
	if float64(large) > 1.5*float64(small)+maxRuns*runReadBuf {
		t.Errorf("heap grows with the listing: %d at 25k, %d at 100k", small, large)
	}
}

// TestDroppedState: a temporary next state dropped without Close is
// removed once collected.
func TestDroppedState(t *testing.T) {
	tmp := t.TempDir()
	var rows []row
	for i := 0; i < 100; i++ {
		rows = append(rows, inst(fmt.Sprintf("I-%03d", i)))
	}
	func() {
		_, _, st := diff(t, NewState("s"), "s", at(1), rows, 10, Options{MemBytes: 2 << 10, TempDir: tmp})
		if ents, _ := os.ReadDir(tmp); len(ents) != 1 || st.Len() != 100 {
			t.Fatalf("next state: %v", ents)
		}
	}()
	for i := 0; i < 10; i++ {
		runtime.GC()
		if ents, _ := os.ReadDir(tmp); len(ents) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	ents, _ := os.ReadDir(tmp)
	t.Fatalf("left after GC: %v", ents)
}
