package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/internal/arrowpool"
	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/extract"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// The decoder's column buffers come back to Config.ColumnMem when the
// last holder of their record releases it, and a replay recycles them.
// A holder that kept a record, or a view of its buffers, without
// Retain would read buffers already reused. Here freed buffers are
// poisoned before reuse (arrowpool.NewPoisoned) under a CheckedAllocator:
// live runs and a replay over two days (the day writer holding and
// spilling records across snapshots; events remembering them; rejects;
// several records a snapshot) write byte for byte the lake of Go memory,
// and leave nothing allocated (no leak). An early Release shows only as
// different bytes: Arrow frees a buffer once, when its count reaches 0.
func TestColumnMemPoisonedSameLake(t *testing.T) {
	if testing.Short() {
		t.Skip("live runs and replays")
	}
	// 400 instruments in records of 64 rows; each snapshot's rows spilled.
	poisonedSameLake(t, lakeShape{instruments: 400, batchRows: 64, writerBytes: 48 << 10, chunkBytes: 512 << 10})
}

// The same as `optlake replay` holds records: a snapshot's rows stay in
// memory (no spill) until the day's goroutine packs them while the next
// snapshots decode, and each listing is one record of 5,000 rows, which
// the events' background encoder takes (4,096 rows or more). Without it
// neither pack.go nor the encoder ever held a pooled record here.
func TestColumnMemPoisonedPacked(t *testing.T) {
	if testing.Short() {
		t.Skip("live runs and replays")
	}
	poisonedSameLake(t, lakeShape{instruments: 5000, batchRows: 8192, writerBytes: 64 << 20, chunkBytes: 1 << 20})
}

// lakeShape is what columnMemLake takes and how its replay's day writer
// holds the rows.
type lakeShape struct {
	instruments, batchRows  int
	writerBytes, chunkBytes int64 // compact.DayOptions.WriterBytes, Compact.ChunkBytes
}

func poisonedSameLake(t *testing.T, sh lakeShape) {
	t.Helper()
	goDir, goRes := columnMemLake(t, memory.DefaultAllocator, sh)
	checked := memory.NewCheckedAllocator(arrowpool.NewPoisoned(32 << 20))
	poDir, poRes := columnMemLake(t, checked, sh)
	if n := checked.CurrentAlloc(); n != 0 {
		t.Errorf("%d bytes of column buffers still allocated after the runs and the replay (leaked, or freed twice if below 0)", n)
	}
	if goRes != poRes {
		t.Errorf("replay with poisoned buffers: %s, with Go memory: %s", poRes, goRes)
	}
	want, got := lakeFiles(t, goDir), lakeFiles(t, poDir)
	for name, b := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s: missing with poisoned buffers", name)
		} else if !bytes.Equal(g, b) {
			t.Errorf("%s: %d bytes with poisoned buffers, %d with Go memory: not the same", name, len(g), len(b))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: only with poisoned buffers", name)
		}
	}
	for _, table := range []string{"instruments", "instrument_events", "rejects"} {
		if !slices.ContainsFunc(slices.Collect(mapKeys(want)), func(n string) bool { return strings.HasPrefix(n, table+"/") }) {
			t.Errorf("no %s files in the lake: the test compares nothing of it", table)
		}
	}
}

func mapKeys(m map[string][]byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// columnMemLake takes live snapshots of a simulated venue over two days
// (rejects, unknown fields, index prices as numbers) into a Parquet lake
// with mem as Config.ColumnMem, then replays them into the compacted
// layout (compact.DaySink, as `optlake replay` does) with mem, both in the
// same folder. It returns the folder and the replay's counts.
func columnMemLake(t *testing.T, mem memory.Allocator, sh lakeShape) (string, string) {
	t.Helper()
	sim := venuesim.New(venuesim.Config{Seed: 9, Instruments: sh.instruments, GroupSize: 50,
		Faults: venuesim.Faults{WrongTypes: true, ExtraFields: true, IndexPriceVariants: true}})
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "data")
	st := storage.NewLocal(dir)
	client, err := extract.New(extract.Options{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	eps, err := pipeline.SelectEndpoints([]string{"instruments"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 23, 21, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	n := 0
	cfg := pipeline.Config{
		Client: client, Store: st, Endpoints: eps, Source: "sim", Events: true, Ledger: true,
		Now: clock, NewRunID: func() string { n++; return fmt.Sprintf("run-%03d", n) },
		BatchRows: sh.batchRows,
		ColumnMem: mem,
	}
	ctx := context.Background()
	pq, err := parquet.New(parquet.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Sinks = []sinks.Sink{pq}
	r, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 { // 21:00 to 04:00: two days
		if sum := r.Run(ctx); !sum.OK {
			t.Fatalf("live run %d: %s", i, sum.Error)
		}
		sim.Advance(1)
		now = now.Add(time.Hour)
	}
	r.Close()
	pq.Close(ctx)
	if c, ok := mem.(*memory.CheckedAllocator); ok && c.CurrentAlloc() != 0 {
		t.Errorf("%d bytes of column buffers still allocated after the live runs", c.CurrentAlloc())
	}

	fallback, err := parquet.New(parquet.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := compact.NewDaySink(compact.DayOptions{Fallback: fallback, WriterBytes: sh.writerBytes, Compact: compact.Options{
		Target: compact.For(st, nil, clock), CompressionLevel: 3,
		ChunkBytes: sh.chunkBytes,
	}})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Client, cfg.Sinks = nil, []sinks.Sink{ds}
	r, err = pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	res, err := r.Replay(ctx, pipeline.ReplayOptions{})
	if err != nil || !res.OK() || len(res.Snapshots) != 8 || res.Rejects == 0 || res.Events == 0 {
		t.Fatalf("replay: %v, %+v", err, res)
	}
	if err := ds.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return dir, fmt.Sprintf("%d rows, %d rejects, %d events", res.Rows, res.Rejects, res.Events)
}

// compactionID is the 16-character id a compacted file's name and bytes
// carry (a new one every publish).
var compactionID = regexp.MustCompile(`compacted-([0-9a-zA-Z]{16})`)

// lakeFiles reads the lake's table files and events state (not the raw
// archive, the runs table, the ledger or compaction's bookkeeping), by
// path, a compacted file's id replaced.
func lakeFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			// The runs table and the ledger hold the runs' durations.
			if rel == "raw" || rel == "runs" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") {
				return filepath.SkipDir
			}
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if m := compactionID.FindStringSubmatch(rel); m != nil {
			b = bytes.ReplaceAll(b, []byte(m[1]), []byte("0123456789abcdef"))
			rel = strings.ReplaceAll(rel, m[1], "0123456789abcdef")
		}
		out[rel] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		out, _ := exec.Command("find", dir).CombinedOutput()
		t.Fatalf("no lake files in %s:\n%s", dir, out)
	}
	return out
}
