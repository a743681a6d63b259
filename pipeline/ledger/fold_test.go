package ledger

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/storage"
)

// killedAfter is a store whose process dies after n more writes (Put,
// Delete): every later call fails, as nothing runs after a kill -9.
type killedAfter struct {
	storage.Store
	n int
}

var errKilled = errors.New("killed")

func (k *killedAfter) write() error {
	if k.n <= 0 {
		return errKilled
	}
	k.n--
	return nil
}

func (k *killedAfter) Put(ctx context.Context, name string, data []byte) error {
	if err := k.write(); err != nil {
		return err
	}
	return k.Store.Put(ctx, name, data)
}

func (k *killedAfter) Delete(ctx context.Context, name string) error {
	if err := k.write(); err != nil {
		return err
	}
	return k.Store.Delete(ctx, name)
}

// settleDays records snaps snapshots, three a day from 2026-11-23 01:00
// UTC, 8 hours apart, each committed to parquet, and returns their keys.
func settleDays(t *testing.T, l *Ledger, snaps int) []Key {
	t.Helper()
	var keys []Key
	for i := range snaps {
		k := Key{day0.AddDate(0, 0, i/3).Add(time.Duration(i%3) * 8 * time.Hour), fmt.Sprintf("run-%02d", i)}
		if err := l.Begin(ctx, k.Time, k.RunID, "sim", []string{"instruments"}, []string{"parquet"}); err != nil {
			t.Fatal(err)
		}
		if err := l.Settle(ctx, k, "instruments", map[string]Outcome{"parquet": {State: Committed}}); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	return keys
}

var day0 = time.Date(2026, 11, 23, 1, 0, 0, 250_000_000, time.UTC)

// doneObjects lists the ledger's done/ objects of st.
func doneObjects(t *testing.T, st storage.Store) []string {
	t.Helper()
	infos, err := st.List(ctx, Dir+"/done/")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range infos {
		out = append(out, strings.TrimPrefix(i.Name, Dir+"/done/"))
	}
	return out
}

// Fold leaves one object per closed day in done/ (today's records stay
// single), and every snapshot is still known done; killed after each of
// its writes in turn, no snapshot is ever unknown, and the next Fold
// finishes the job with each snapshot folded once.
func TestFoldKilledBetweenSteps(t *testing.T) {
	const snaps = 12 // 4 days of 3
	before := day0.AddDate(0, 0, 3).Format(time.DateOnly)
	for kill := 0; ; kill++ {
		dir := t.TempDir()
		st := storage.NewLocal(dir)
		keys := settleDays(t, New(st, clock()), snaps)
		singles := len(doneObjects(t, st))
		if singles != snaps {
			t.Fatalf("%d done objects before folding, want %d", singles, snaps)
		}
		_, err := New(&killedAfter{Store: st, n: kill}, nil).Fold(ctx, before, 0)
		if err != nil && !errors.Is(err, errKilled) {
			t.Fatalf("kill after %d writes: %v", kill, err)
		}
		reader := New(st, nil)
		for _, k := range keys {
			if ok, err := reader.Committed(ctx, k, "instruments"); err != nil || !ok {
				t.Fatalf("kill after %d writes: %s committed %v, %v", kill, k.RunID, ok, err)
			}
		}
		rep, err := New(st, nil).Fold(ctx, before, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := doneObjects(t, st)
		want := []string{"date=2026-11-23/folded.json", "date=2026-11-24/folded.json", "date=2026-11-25/folded.json"}
		for _, k := range keys[9:] { // the fourth day, not before `before`
			want = append(want, path.Join("date=2026-11-26", baseName(k)))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("kill after %d writes: done/ holds %v, want %v", kill, got, want)
		}
		seen := map[Key]int{}
		for _, day := range want[:3] {
			recs, err := reader.readFolded(ctx, path.Join("done", day))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				seen[r.Key()]++
			}
		}
		for _, k := range keys[:9] {
			if seen[k] != 1 {
				t.Errorf("kill after %d writes: %s folded %d times", kill, k.RunID, seen[k])
			}
			if ok, err := reader.Committed(ctx, k, "instruments"); err != nil || !ok {
				t.Errorf("after folding: %s committed %v, %v", k.RunID, ok, err)
			}
		}
		if err == nil && kill > 0 && rep.Records == 0 && kill < 12 {
			t.Errorf("kill after %d writes: the second fold moved nothing", kill)
		}
		if kill > 3*4 { // a day's put and its three deletes, three days: every step killed once
			break
		}
	}
}

// A record settled for a day already folded (catch-up of an old
// snapshot) is a single record again, found by Committed, and the next
// Fold adds it to the day's folded object.
func TestFoldLateRecord(t *testing.T) {
	st := storage.NewLocal(t.TempDir())
	l := New(st, clock())
	keys := settleDays(t, l, 3)
	before := day0.AddDate(0, 0, 1).Format(time.DateOnly)
	if _, err := l.Fold(ctx, before, 0); err != nil {
		t.Fatal(err)
	}
	late := Key{day0.Add(time.Hour), "run-late"}
	l = New(st, func() time.Time { return day0.AddDate(0, 0, 1) }) // settled the next day
	if err := l.Begin(ctx, late.Time, late.RunID, "sim", []string{"instruments"}, []string{"parquet"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(ctx, late, "instruments", map[string]Outcome{"parquet": {State: Committed}}); err != nil {
		t.Fatal(err)
	}
	for _, k := range append(keys, late) {
		if ok, err := New(st, nil).Committed(ctx, k, "instruments"); err != nil || !ok {
			t.Fatalf("%s committed %v, %v", k.RunID, ok, err)
		}
	}
	rep, err := l.Fold(ctx, before, 0)
	if err != nil || rep.Records != 1 || rep.Days != 1 {
		t.Fatalf("second fold: %+v, %v", rep, err)
	}
	recs, err := l.readFolded(ctx, "done/date=2026-11-23/folded.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 || recs[1].RunID != "run-late" {
		t.Fatalf("folded day: %d records %+v", len(recs), recs)
	}
	if ok, err := New(st, nil).Committed(ctx, Key{day0.Add(2 * time.Hour), "run-none"}, "instruments"); err != nil || ok {
		t.Fatalf("a snapshot never recorded: committed %v, %v", ok, err)
	}
}

// counting is a store that counts what the ledger asks of it: listings
// (and the objects they return) and objects read, written and deleted.
type counting struct {
	storage.Store
	mu                          sync.Mutex
	prefixes                    []string // List and ListDir prefixes, in order
	listed, reads, puts, delets int
}

func (c *counting) List(ctx context.Context, prefix string) ([]storage.Info, error) {
	infos, err := c.Store.List(ctx, prefix)
	c.mu.Lock()
	c.prefixes = append(c.prefixes, prefix)
	c.listed += len(infos)
	c.mu.Unlock()
	return infos, err
}

func (c *counting) ListDir(ctx context.Context, dir string) ([]storage.Info, error) {
	infos, err := c.Store.ListDir(ctx, dir)
	c.mu.Lock()
	c.prefixes = append(c.prefixes, "dir:"+dir)
	c.mu.Unlock()
	return infos, err
}

func (c *counting) Open(ctx context.Context, name string) (storage.Reader, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.Store.Open(ctx, name)
}

func (c *counting) Put(ctx context.Context, name string, data []byte) error {
	c.mu.Lock()
	c.puts++
	c.mu.Unlock()
	return c.Store.Put(ctx, name, data)
}

func (c *counting) Delete(ctx context.Context, name string) error {
	c.mu.Lock()
	c.delets++
	c.mu.Unlock()
	return c.Store.Delete(ctx, name)
}

func (c *counting) reset() {
	c.prefixes, c.listed, c.reads, c.puts, c.delets = nil, 0, 0, 0, 0
}

// A lake with many closed days unfolded (an upgraded lake) is folded over
// several runs, each bounded: no run lists done/ whole, each touches at
// most about max objects (records listed, read and deleted), the oldest
// days go first, and once caught up a Fold reads the mark and lists
// nothing. On a local folder and on a bucket (versitygw) alike.
func TestFoldBoundedPerRun(t *testing.T) {
	const (
		days   = 20
		perDay = 3 // settleDays' cadence
		max    = 12
	)
	stores := map[string]func(t *testing.T) storage.Store{
		"local": func(t *testing.T) storage.Store { return storage.NewLocal(t.TempDir()) },
		"bucket": func(t *testing.T) storage.Store {
			g := testenv.StartVersityGW(t, "lake")
			g.SetCredentials(t)
			st, err := storage.Open(ctx, g.URL("lake", "fold"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			keys := settleDays(t, New(st, clock()), (days+1)*perDay)
			before := day0.AddDate(0, 0, days).Format(time.DateOnly)
			c := &counting{Store: st}
			runs, folded := 0, 0
			lastDay := ""
			for {
				c.reset()
				rep, err := New(c, nil).Fold(ctx, before, max)
				if err != nil {
					t.Fatal(err)
				}
				runs++
				for _, p := range c.prefixes {
					if p == Dir+"/done/" {
						t.Fatalf("run %d listed done/ whole", runs)
					}
				}
				if touched := c.listed + c.reads + c.delets; touched > 2*max {
					t.Fatalf("run %d touched %d objects (listed %d, read %d, deleted %d), want at most %d",
						runs, touched, c.listed, c.reads, c.delets, 2*max)
				}
				// The oldest days first: the days a run lists come after
				// the previous run's last.
				for _, p := range c.prefixes {
					if day, ok := strings.CutPrefix(p, Dir+"/done/date="); ok {
						if day < lastDay {
							t.Fatalf("run %d folded %s after %s", runs, day, lastDay)
						}
						lastDay = day
					}
				}
				folded += rep.Records
				if !rep.More {
					break
				}
				if runs > days*perDay {
					t.Fatalf("not caught up after %d runs", runs)
				}
			}
			if folded != days*perDay || runs < days*perDay*2/max {
				t.Fatalf("%d runs folded %d records, want %d in at least %d runs", runs, folded, days*perDay, days*perDay*2/max)
			}
			got := doneObjects(t, st)
			if len(got) != days+perDay {
				t.Fatalf("done/ holds %d objects after folding, want %d: %v", len(got), days+perDay, got)
			}
			c.reset()
			if rep, err := New(c, nil).Fold(ctx, before, max); err != nil || rep.Records != 0 || rep.More {
				t.Fatalf("caught-up fold: %+v, %v", rep, err)
			}
			if len(c.prefixes) != 0 || c.reads != 1 || c.puts+c.delets != 0 {
				t.Fatalf("caught-up fold listed %v, read %d, wrote %d, deleted %d: want one read", c.prefixes, c.reads, c.puts, c.delets)
			}
			reader := New(st, nil)
			for _, k := range keys {
				if ok, err := reader.Committed(ctx, k, "instruments"); err != nil || !ok {
					t.Fatalf("%s committed %v, %v", k.RunID, ok, err)
				}
			}
		})
	}
}
