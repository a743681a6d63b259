// Package retention prunes what a long history keeps without a run needing
// it: the raw archive's days and the load ledger's done records older than
// a retention (--raw-retention; zero keeps everything).
//
// What a run needs of them: catch-up loads a pending snapshot from its raw
// bodies, so no day at or after the oldest snapshot the ledger holds open
// is pruned; nothing reads a done record (it is the history of the loads,
// for jq or DuckDB). What pruning gives up: a replay rebuilds only the days
// kept (a replay starting after the cut seeds its instrument events from
// the first kept snapshot), and the done records of the days pruned (which
// snapshot reached which sink) are gone; the tables keep every row, and the
// runs table every run.
package retention

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/storage"
)

// Report says what Prune removed and what it kept.
type Report struct {
	// Cut is the first day kept (YYYY-MM-DD): days before it were pruned.
	Cut string
	// HeldBy, when not zero, is the oldest pending snapshot, which moved
	// the cut back to its day.
	HeldBy time.Time
	// Folders are the day folders removed (raw/<endpoint>/date=…,
	// _ledger/done/date=…), Objects the objects in them.
	Folders []string
	Objects int
}

// rawDir is the raw archive's folder in the data directory.
const rawDir = "raw/"

// Prune removes from st the raw archive's and the ledger's done day
// folders of days wholly older than now-keep (a day is pruned once its
// last snapshot is older than keep), but none at or after the day of the
// oldest snapshot with a load pending or failed (l.Open). keep <= 0 prunes
// nothing. It lists one level of each folder: its cost is the days kept
// and those pruned now, not the history's objects.
func Prune(ctx context.Context, st storage.Store, l *ledger.Ledger, now time.Time, keep time.Duration) (Report, error) {
	var rep Report
	if keep <= 0 {
		return rep, nil
	}
	cut := now.UTC().Add(-keep).Truncate(24 * time.Hour)
	open, err := l.Open(ctx)
	if err != nil {
		return rep, err
	}
	for _, r := range open {
		if day := r.SnapshotTime.UTC().Truncate(24 * time.Hour); day.Before(cut) {
			cut, rep.HeldBy = day, r.SnapshotTime.UTC()
		}
	}
	rep.Cut = cut.Format(time.DateOnly)
	dirs := []string{path.Join(ledger.Dir, "done") + "/"}
	eps, err := st.ListDir(ctx, rawDir)
	if err != nil {
		return rep, fmt.Errorf("raw retention: %w", err)
	}
	for _, e := range eps {
		if strings.HasSuffix(e.Name, "/") {
			dirs = append(dirs, e.Name)
		}
	}
	for _, dir := range dirs {
		days, err := st.ListDir(ctx, dir)
		if err != nil {
			return rep, fmt.Errorf("raw retention: %w", err)
		}
		for _, d := range days {
			day, ok := strings.CutPrefix(path.Base(strings.TrimSuffix(d.Name, "/")), "date=")
			if !ok || !strings.HasSuffix(d.Name, "/") {
				continue
			}
			if t, err := time.Parse(time.DateOnly, day); err != nil || !t.Before(cut) {
				continue
			}
			n, err := removeAll(ctx, st, d.Name)
			rep.Objects += n
			if err != nil {
				return rep, fmt.Errorf("raw retention: remove %s: %w", d.Name, err)
			}
			rep.Folders = append(rep.Folders, strings.TrimSuffix(d.Name, "/"))
		}
	}
	return rep, nil
}

// removeAll deletes the folder dir (ending in '/') and returns how many
// objects it held: in one call where the store can remove a folder.
func removeAll(ctx context.Context, st storage.Store, dir string) (int, error) {
	objs, err := st.List(ctx, dir)
	if err != nil {
		return 0, err
	}
	if sw, ok := st.(storage.Swapper); ok {
		return len(objs), sw.RemoveAll(ctx, strings.TrimSuffix(dir, "/"))
	}
	for i, o := range objs {
		if err := st.Delete(ctx, o.Name); err != nil {
			return i, err
		}
	}
	return len(objs), nil
}
