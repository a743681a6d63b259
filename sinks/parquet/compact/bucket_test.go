package compact

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/storage"
)

// bucketLake is a lake prefix on a real S3-compatible server (versitygw),
// whose objects DuckDB reads from the server's folder.
type bucketLake struct {
	st  storage.Store
	dir string // the prefix's folder on the server's disk
}

func newBucketLake(t *testing.T, g *testenv.VersityGW, prefix string) *bucketLake {
	t.Helper()
	st, err := storage.Open(context.Background(), g.URL("lake", prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &bucketLake{st: st, dir: filepath.Join(g.Dir(), "lake", prefix)}
}

func (l *bucketLake) write(t *testing.T, tbl *schema.Table, snap sinks.Snapshot, n int, seed uint64) {
	t.Helper()
	s, err := pq.New(pq.Options{Store: l.st, Park: Parking(l.st)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w, err := s.Open(ctx, tbl, snap)
	if err != nil {
		t.Fatal(err)
	}
	rec := genRecord(tbl, snap, n, seed)
	defer rec.Release()
	if err := w.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// objects lists the names under prefix (relative to the lake).
func (l *bucketLake) objects(t *testing.T, prefix string) []string {
	t.Helper()
	infos, err := l.st.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range infos {
		out = append(out, strings.TrimPrefix(i.Name, prefix))
	}
	return out
}

// onlyCompactedObject checks the partition holds one compacted object and
// nothing else.
func (l *bucketLake) onlyCompactedObject(t *testing.T, part string) {
	t.Helper()
	got := l.objects(t, part+"/")
	if len(got) != 1 || !pq.IsCompacted(got[0]) {
		t.Fatalf("%s holds %v, want one compacted object", part, got)
	}
}

// A lake on a bucket compacts like a local one: the day's rows exactly,
// sorted, one object; a replay of a compacted snapshot is parked and
// replaces the snapshot's rows at the next compaction; a new snapshot is
// merged in; nothing is left in the journal.
func TestBucketCompaction(t *testing.T) {
	t.Parallel()
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	l := newBucketLake(t, g, "hist")
	acct := accountTable()
	for k := range 5 {
		l.write(t, schema.Instruments, snapAt(day1, k), 150, 1)
		s := snapAt(day1, k)
		s.Endpoint = "position"
		l.write(t, acct, s, 7, 2)
	}
	day2 := day1.AddDate(0, 0, 1)
	l.write(t, schema.Instruments, snapAt(day2, 0), 20, 1)
	instGlob := filepath.Join(l.dir, "instruments", "date=2026-11-20", "*.parquet")
	acctGlob := filepath.Join(l.dir, acct.Name, "date=2026-11-20", "*.parquet")
	before, beforeAcct := rows(t, instGlob), rows(t, acctGlob)

	now := func() time.Time { return day2.Add(time.Hour) }
	bs := &Folders{St: l.st}
	defer bs.Close()
	rep, err := Compact(context.Background(), Options{Target: bs, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Partitions) != 2 {
		t.Fatalf("compacted %d partitions, want 2: %+v", len(rep.Partitions), rep)
	}
	l.onlyCompactedObject(t, "instruments/date=2026-11-20")
	l.onlyCompactedObject(t, acct.Name+"/date=2026-11-20")
	sameRows(t, "instruments", rows(t, instGlob), before)
	sameRows(t, acct.Name, rows(t, acctGlob), beforeAcct)
	checkSorted(t, filepath.Join(l.dir, "instruments", "date=2026-11-20"), "instruments")
	checkSorted(t, filepath.Join(l.dir, acct.Name, "date=2026-11-20"), acct.Name)
	if got := l.objects(t, "instruments/date=2026-11-21/"); len(got) != 1 || pq.IsCompacted(got[0]) {
		t.Fatalf("today's partition changed: %v", got)
	}
	if j := l.objects(t, ".compact/"); len(j) != 0 {
		t.Fatalf("left behind: %v", j)
	}

	// Nothing new: nothing rewritten.
	rep, err = Compact(context.Background(), Options{Target: bs, Now: now})
	if err != nil || len(rep.Partitions) != 0 {
		t.Fatalf("second compaction: %+v %v", rep, err)
	}

	// A replay of snapshot 2 with other values is parked (readers keep the
	// day's rows once); a late new snapshot lands in the partition.
	l.write(t, schema.Instruments, snapAt(day1, 2), 150, 99)
	if got := l.objects(t, ".compact/pending/instruments/date=2026-11-20/"); len(got) != 1 {
		t.Fatalf("parked: %v", got)
	}
	sameRows(t, "after the replay, before compaction", rows(t, instGlob), before)
	late := snapAt(day1, 7)
	l.write(t, schema.Instruments, late, 40, 5)

	// What the day should hold: the live rows of 0,1,3,4, the replayed 2, the late 7.
	ref := t.TempDir()
	for k := range 5 {
		seed := uint64(1)
		if k == 2 {
			seed = 99
		}
		writeSnap(t, ref, schema.Instruments, snapAt(day1, k), 150, seed)
	}
	writeSnap(t, ref, schema.Instruments, late, 40, 5)
	want := rows(t, filepath.Join(ref, "instruments", "date=2026-11-20", "*.parquet"))

	rep, err = Compact(context.Background(), Options{Target: bs, Now: now, Tables: []string{"instruments"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Partitions) != 1 || rep.Partitions[0].Replaced != 150 {
		t.Fatalf("recompaction: %+v", rep)
	}
	l.onlyCompactedObject(t, "instruments/date=2026-11-20")
	sameRows(t, "recompacted", rows(t, instGlob), want)
	if got := l.objects(t, ".compact/"); len(got) != 0 {
		t.Fatalf("left behind: %v", got)
	}
}

// A bucket compaction stopped at every step of its publish: readers never
// miss a row (between the first compacted object and the inputs' deletion
// they may see rows twice: the documented window), and the next compaction
// finishes or undoes it, leaving the day's rows exactly once.
func TestBucketCompactionCrashAtEveryStep(t *testing.T) {
	t.Parallel()
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	now := func() time.Time { return day1.AddDate(0, 0, 1) }
	// What the day holds once compacted: snapshot 1 is the replay's.
	ref := t.TempDir()
	for k := range 4 {
		seed := uint64(k)
		if k == 1 {
			seed = 77
		}
		writeSnap(t, ref, schema.Instruments, snapAt(day1, k), 100, seed)
	}
	writeSnap(t, ref, schema.Instruments, snapAt(day1, 9), 30, 9)
	want := rows(t, filepath.Join(ref, "instruments", "date=2026-11-20", "*.parquet"))
	for _, step := range append(slices.Clone(MergeSteps), BucketSteps...) {
		t.Run(step, func(t *testing.T) {
			t.Parallel() // each step on its own prefix of the one server
			l := newBucketLake(t, g, "crash-"+step)
			for k := range 4 {
				l.write(t, schema.Instruments, snapAt(day1, k), 100, uint64(k))
			}
			// A second compaction's publish is the one cut (it replaces a
			// compacted file and consumes a parked one).
			bs := &Folders{St: l.st}
			if _, err := Compact(context.Background(), Options{Target: bs, Now: now}); err != nil {
				t.Fatal(err)
			}
			l.write(t, schema.Instruments, snapAt(day1, 1), 100, 77) // parked
			l.write(t, schema.Instruments, snapAt(day1, 9), 30, 9)   // new
			glob := filepath.Join(l.dir, "instruments", "date=2026-11-20", "*.parquet")
			visible := rows(t, glob)

			crash := &Folders{St: l.st, Crash: crashAt(step)}
			if !compactCrashing(t, Options{Target: crash, Now: now, Crash: crashAt(step)}) {
				t.Fatalf("never reached step %s", step)
			}
			crash.Close()
			// A row readers saw that the day keeps is never missing (the
			// replaced snapshot's old rows may go, as they should).
			after := rows(t, glob)
			kept := 0
			for _, r := range visible {
				if _, ok := slices.BinarySearch(want, r); !ok {
					continue
				}
				kept++
				if _, ok := slices.BinarySearch(after, r); !ok {
					t.Fatalf("crash at %s: a row went missing: %s", step, r)
				}
			}
			if kept != 3*100+30 { // snapshots 0, 2, 3 and 9
				t.Fatalf("%d rows both before and after, want 330", kept)
			}

			bs2 := &Folders{St: l.st}
			defer bs2.Close()
			if _, err := Compact(context.Background(), Options{Target: bs2, Now: now}); err != nil {
				t.Fatal(err)
			}
			sameRows(t, "after recovery", rows(t, glob), want)
			l.onlyCompactedObject(t, "instruments/date=2026-11-20")
			if got := l.objects(t, ".compact/"); len(got) != 0 {
				t.Fatalf("left behind: %v", got)
			}
		})
	}
}

// On a bucket, compacting a day sends no HEAD an input file: the listing
// gave each file's size, and a delete is one request. The HEADs of a day
// of 12 snapshots are those of a day of 3.
func TestBucketCompactionSendsNoHEADAnInput(t *testing.T) {
	t.Parallel()
	g, reqs := testenv.StartVersityGWCounted(t, "lake")
	heads := map[int]int64{}
	for _, n := range []int{3, 12} {
		st, err := storage.Open(context.Background(), reqs.URL("lake", fmt.Sprintf("n%d", n)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		l := &bucketLake{st: st, dir: filepath.Join(g.Dir(), "lake", fmt.Sprintf("n%d", n))}
		for k := range n {
			l.write(t, schema.Instruments, snapAt(day1, k), 50, 1)
		}
		bs := &Folders{St: st}
		reqs.Reset()
		rep, err := Compact(context.Background(), Options{Target: bs, Now: func() time.Time { return day1.AddDate(0, 0, 1) }})
		bs.Close()
		if err != nil {
			t.Fatal(err)
		}
		heads[n] = reqs.Reset()["HEAD"]
		if len(rep.Partitions) != 1 || rep.Partitions[0].InputFiles != n {
			t.Fatalf("%d snapshots: %+v", n, rep)
		}
		l.onlyCompactedObject(t, "instruments/date=2026-11-20")
	}
	if heads[12] != heads[3] {
		t.Errorf("HEAD requests: %d compacting 3 files, %d compacting 12: one an input file", heads[3], heads[12])
	}
}
