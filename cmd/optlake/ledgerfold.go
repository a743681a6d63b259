package main

import (
	"context"
	"time"

	"github.com/optlake/optlake/pipeline/ledger"
)

// foldLedger keeps the load ledger's done/ flat: each run folds the done
// records of the closed days into one object a day (ledger.Fold; none is
// lost on a crash), the oldest first and at most ledger.FoldMax objects a
// run, so an upgraded lake with a year unfolded is folded over the next
// runs. Once caught up it reads one small object. A failure is logged; the
// snapshot's outcome stands, and the next run tries again.
func (b *built) foldLedger(ctx context.Context, j *job) {
	if ctx.Err() != nil {
		return
	}
	now := j.host.now().UTC()
	rep, err := ledger.New(b.store, j.host.now).Fold(ctx, now.Format(time.DateOnly), ledger.FoldMax)
	if err != nil {
		b.log.Error("ledger: folding the done records failed; the next run tries again", "err", err)
		return
	}
	if rep.Records > 0 {
		b.log.Info("ledger: folded the done records of closed days", "days", rep.Days, "records", rep.Records, "more", rep.More)
	}
}
