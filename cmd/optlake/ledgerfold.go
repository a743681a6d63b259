package main

import (
	"context"
	"path"
	"time"

	"github.com/optlake/optlake/pipeline/ledger"
)

// foldLedger keeps the load ledger's done/ flat: the first run of each
// UTC day folds the done records of the days before it into one object a
// day (ledger.Fold; none is lost on a crash). A failure is logged; the
// snapshot's outcome stands, and the next run tries again.
func (b *built) foldLedger(ctx context.Context, j *job) {
	if ctx.Err() != nil {
		return
	}
	now := j.host.now().UTC()
	marker := path.Join(ledger.Dir, foldMarker)
	if fi, err := b.store.Stat(ctx, marker); err == nil && fi.ModTime.UTC().Truncate(24*time.Hour).Equal(now.Truncate(24*time.Hour)) {
		return // folded today
	}
	rep, err := ledger.New(b.store, j.host.now).Fold(ctx, now.Format(time.DateOnly))
	if err != nil {
		b.log.Error("ledger: folding the done records failed; the next run tries again", "err", err)
		return
	}
	if rep.Records > 0 {
		b.log.Info("ledger: folded the done records of closed days", "days", rep.Days, "records", rep.Records)
	}
	if err := b.store.Put(ctx, marker, []byte(now.Format(time.RFC3339)+"\n")); err != nil {
		b.log.Warn("ledger: fold marker not written (folding again next run)", "err", err)
	}
}

// foldMarker, in the ledger's folder, is the time of the last fold (one a
// UTC day).
const foldMarker = "done-folded.last"
