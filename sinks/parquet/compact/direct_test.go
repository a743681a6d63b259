package compact

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/schema"
	pq "github.com/optlake/optlake/sinks/parquet"
)

// daySnap is one replayed snapshot of a test day: snapshot k of day1, n
// instruments rows whose names are drawn from names (so that some rows
// share the whole key: same name, same snapshot), values from seed.
type daySnap struct {
	k, n, names int
	seed        uint64
}

// daySnaps are count snapshots of varying sizes, committed out of their
// time order.
func daySnaps(count, rows, names int, seed uint64) []daySnap {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]daySnap, count)
	for i, k := range r.Perm(count) {
		out[i] = daySnap{k: k, n: rows/2 + r.IntN(rows), names: names, seed: seed + uint64(i)}
	}
	return out
}

// dayRun is what replayDay saw of the day before its publish.
type dayStats struct {
	packed, spilled, inMemory int // runs
	direct                    bool
	packFiles                 []string // left in the spill folder after the publish
}

// replayDay replays snaps into a fresh lake through a DaySink of opt and
// writerBytes and returns the day's one file, its manifest's ID blanked
// (random per compaction), and what the day's runs were.
func replayDay(t *testing.T, opt Options, writerBytes int64, snaps []daySnap) ([]byte, dayStats) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	lake := localLake(dir)
	fb, err := pq.New(pq.Options{Store: lake.St})
	if err != nil {
		t.Fatal(err)
	}
	opt.Lake = lake
	ds, err := NewDaySink(DayOptions{Fallback: fb, WriterBytes: writerBytes, Compact: opt})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		snap := snapAt(day1, s.k)
		w, err := ds.Open(ctx, schema.Instruments, snap)
		if err != nil {
			t.Fatal(err)
		}
		rec := genRecordNamed(schema.Instruments, snap, s.n, s.seed, func(r *rand.Rand, _ int) string { return fmt.Sprintf("ETH-%04d-P", r.IntN(s.names)) })
		err = w.Write(ctx, rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var st dayStats
	p := Partition{Table: "instruments", Date: day1.Format(time.DateOnly)}
	d := ds.days[p]
	d.mu.Lock()
	d.wait()
	for _, r := range d.runs {
		switch {
		case r.packed != nil:
			st.packed++
		case r.Path != "":
			st.spilled++
		default:
			st.inMemory++
		}
	}
	d.mu.Unlock()
	r, err := d.replayed()
	if err != nil {
		t.Fatal(err)
	}
	pr, err := PublishDay(ctx, ds.opt.Compact, p, r)
	if err != nil {
		t.Fatal(err)
	}
	st.direct = pr.direct
	st.packFiles = packFiles(t, dir)
	if err := ds.Close(ctx); err != nil {
		t.Fatal(err)
	}
	part := onlyCompacted(t, partDir(dir, "instruments", day1))
	b, err := os.ReadFile(part)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(part), "compacted-"), "-000.parquet")
	if len(id) != 16 || !bytes.Contains(b, []byte(id)) {
		t.Fatalf("no manifest ID %q in %s", id, part)
	}
	return bytes.ReplaceAll(b, []byte(id), []byte("0123456789abcdef")), st
}

// packFiles are the pack files under dir.
func packFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".pack") {
			out = append(out, path)
		}
		return nil
	})
	return out
}

// A replayed day packed past its budget and written without a merge
// (direct.go) is byte for byte the file the merges write: the same rows
// in the same order (rows sharing the whole key in the merge's order),
// the same pages, row groups and statistics; and so is a packed day
// merged after all (unpacked). No pack file is left.
func TestReplayedDayWrittenWithoutMergeIsTheMergedFile(t *testing.T) {
	cases := []struct {
		name       string
		opt        Options
		snaps      []daySnap
		wantPacked bool
		wantMix    bool // packed runs and runs in memory
	}{
		{"many packs, row groups of 1000 rows", Options{ChunkBytes: 96 << 10, RowGroupRows: 1000}, daySnaps(24, 160, 90, 1), true, false},
		{"packed and in memory", Options{ChunkBytes: 600 << 10, RowGroupRows: 1000}, daySnaps(29, 160, 90, 6), true, true},
		{"packs, small pages, many duplicates", Options{ChunkBytes: 128 << 10, RowGroupRows: 700, PageBytes: 2 << 10}, daySnaps(20, 200, 15, 2), true, false},
		{"all in memory", Options{ChunkBytes: 1 << 30, RowGroupRows: 1000}, daySnaps(10, 200, 300, 3), false, false},
		{"batches cut by row groups", Options{ChunkBytes: 2 << 20, RowGroupRows: 10000}, daySnaps(40, 700, 500, 4), true, false},
		{"one snapshot", Options{ChunkBytes: 1 << 30}, daySnaps(1, 300, 100, 5), false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			merged := c.opt
			merged.noPack, merged.noDirect = true, true
			want, st := replayDay(t, merged, 64<<20, c.snaps)
			if st.packed > 0 || st.direct {
				t.Fatalf("the reference packed %d runs, direct %v", st.packed, st.direct)
			}
			unpacked := c.opt
			unpacked.noDirect = true
			got, st := replayDay(t, unpacked, 64<<20, c.snaps)
			if (st.packed > 0) != c.wantPacked || st.direct {
				t.Fatalf("packed %d runs, direct %v: the case does not exercise its path", st.packed, st.direct)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("packed and merged: a file of %d bytes, the merge's %d bytes differs", len(got), len(want))
			}
			if len(st.packFiles) > 0 {
				t.Fatalf("left behind: %v", st.packFiles)
			}
			got, st = replayDay(t, c.opt, 64<<20, c.snaps)
			if (st.packed > 0) != c.wantPacked || !st.direct || c.wantMix && st.inMemory == 0 {
				t.Fatalf("packed %d runs (%d in memory), direct %v: the case does not exercise its path", st.packed, st.inMemory, st.direct)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("written directly: a file of %d bytes, the merge's %d bytes differs", len(got), len(want))
			}
			if len(st.packFiles) > 0 {
				t.Fatalf("left behind: %v", st.packFiles)
			}
		})
	}
}
