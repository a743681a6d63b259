package hive

import (
	"context"
	"strings"
	"time"

	"github.com/optlake/optlake/lake/layout"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/storage"
)

// compaction is the parquet format's compaction: the day folders
// (compact.Folders), from the compacted days' mark on.
type compaction struct {
	compact.Target
	st storage.Store
}

// ClosedFrom implements tableformat.Compaction: the mark's day, or the
// oldest day with parked files when older ("" without a mark: every day).
// A Parquet lake's days before it are not looked at: each run compacts
// from that day on (yesterday, once every day before it is compacted),
// not every day of the history again.
func (c compaction) ClosedFrom(ctx context.Context) string {
	data, err := storage.ReadAll(ctx, c.st, layout.CompactedBefore)
	from := strings.TrimSpace(string(data))
	if _, perr := time.Parse(time.DateOnly, from); err != nil || perr != nil {
		return ""
	}
	objs, err := c.st.List(ctx, layout.ParkedDir)
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

// Closed implements tableformat.Compaction: every day before to is
// compacted now.
func (c compaction) Closed(ctx context.Context, to string) error {
	return c.st.Put(ctx, layout.CompactedBefore, []byte(to+"\n"))
}

// Reopen implements tableformat.Compaction: the compacted days' mark
// moves back to day when it is later.
func (c compaction) Reopen(ctx context.Context, day string) error {
	st := c.st
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
