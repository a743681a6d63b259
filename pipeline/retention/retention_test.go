package retention

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/storage"
)

// Prune deletes the raw archive's and the done records' days wholly older
// than the retention, keeps every day from a pending snapshot's on (catch-
// up needs its raw bodies), and touches nothing else of the lake.
func TestPruneKeepsWhatRunsNeed(t *testing.T) {
	ctx := context.Background()
	day := func(d int) time.Time { return time.Date(2026, 3, d, 0, 0, 0, 0, time.UTC) }
	now := day(10).Add(12 * time.Hour)
	for _, c := range []struct {
		name    string
		keep    time.Duration
		pending int // day of a pending snapshot (0: none)
		cut     int // first day kept (0: nothing pruned)
	}{
		{"keep everything", 0, 0, 0},
		{"three days", 3 * 24 * time.Hour, 0, 7},
		{"held by a pending snapshot", 3 * 24 * time.Hour, 5, 5},
		{"a pending snapshot inside the retention", 3 * 24 * time.Hour, 9, 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			st := storage.NewLocal(dir)
			var all []string
			for d := 1; d <= 10; d++ {
				for _, f := range []string{
					"raw/instruments/date=%s/a.json.zst", "raw/instruments/date=%s/a.meta.json",
					"raw/account_balance/date=%s/b.json.zst", "_ledger/done/date=%s/s.json",
					"instruments/date=%s/compacted-x-000.parquet",
				} {
					name := filepath.Join(dir, filepath.FromSlash(fmt.Sprintf(f, day(d).Format(time.DateOnly))))
					os.MkdirAll(filepath.Dir(name), 0o755)
					os.WriteFile(name, []byte("x"), 0o644)
					all = append(all, name)
				}
			}
			l := ledger.New(st, func() time.Time { return now })
			if c.pending > 0 {
				if err := l.Begin(ctx, day(c.pending).Add(time.Hour), "run-1", "venue", []string{"instruments"}, []string{"parquet"}); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := Prune(ctx, st, l, now, c.keep)
			if err != nil {
				t.Fatal(err)
			}
			removed := 0
			for _, name := range all {
				_, err := os.Stat(name)
				gone := err != nil
				rel, _ := filepath.Rel(dir, name)
				rel = filepath.ToSlash(rel)
				// Only raw/ and _ledger/done/ days before the cut go.
				wantGone := c.cut > 0 && !strings.HasPrefix(rel, "instruments/") && dayOf(rel) < day(c.cut).Format(time.DateOnly)
				if gone != wantGone {
					t.Errorf("%s: removed %v, want %v", rel, gone, wantGone)
				}
				if gone {
					removed++
				}
			}
			if c.cut > 0 {
				if rep.Cut != day(c.cut).Format(time.DateOnly) || rep.Objects != removed || len(rep.Folders) != 3*(c.cut-1) {
					t.Errorf("report %+v; removed %d objects", rep, removed)
				}
				if held := c.pending > 0 && c.pending < 7; held != !rep.HeldBy.IsZero() {
					t.Errorf("held by %v, pending day %d", rep.HeldBy, c.pending)
				}
			}
		})
	}
}

// dayOf is the YYYY-MM-DD of the date= folder in name.
func dayOf(name string) string {
	_, rest, _ := strings.Cut(name, "date=")
	return rest[:len(time.DateOnly)]
}
