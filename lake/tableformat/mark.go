package tableformat

import (
	"context"
	"strings"
	"time"

	"github.com/optlake/optlake/lake/layout"
	"github.com/optlake/optlake/storage"
)

// Mark is the compacted days' mark (layout.CompactedBefore): where run
// --compact starts, for every format whose days are compacted by day
// (Compaction's ClosedFrom, Closed and Reopen).
type Mark struct{ St storage.Store }

// ClosedFrom implements Compaction: the mark's day, or the
// oldest day with parked files when older ("" without a mark: every day).
// A lake's days before it are not looked at: each run compacts
// from that day on (yesterday, once every day before it is compacted),
// not every day of the history again.
func (c Mark) ClosedFrom(ctx context.Context) string {
	data, err := storage.ReadAll(ctx, c.St, layout.CompactedBefore)
	from := strings.TrimSpace(string(data))
	if _, perr := time.Parse(time.DateOnly, from); err != nil || perr != nil {
		return ""
	}
	objs, err := c.St.List(ctx, layout.ParkedDir)
	if err != nil {
		return ""
	}
	for _, o := range objs {
		if _, day, _, ok := layout.SplitFile(strings.TrimPrefix(o.Name, layout.ParkedDir)); ok && day < from {
			from = day
		}
	}
	return from
}

// Closed implements Compaction: every day before to is
// compacted now.
func (c Mark) Closed(ctx context.Context, to string) error {
	return c.St.Put(ctx, layout.CompactedBefore, []byte(to+"\n"))
}

// Reopen implements Compaction: the compacted days' mark
// moves back to day when it is later.
func (c Mark) Reopen(ctx context.Context, day string) error {
	st := c.St
	data, err := storage.ReadAll(ctx, st, layout.CompactedBefore)
	if err != nil {
		return nil // no mark: every day is looked at
	}
	if mark := strings.TrimSpace(string(data)); day >= mark {
		return nil
	}
	if err := st.Put(ctx, layout.CompactedBefore, []byte(day+"\n")); err != nil {
		// The mark would hide the day from compaction: drop it.
		return st.Delete(ctx, layout.CompactedBefore)
	}
	return nil
}
