package iceberg_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/sinktest"
	"github.com/optlake/optlake/storage"
)

// listCounter counts the listings of the store under a table's day
// folders.
type listCounter struct {
	storage.Store
	mu    sync.Mutex
	lists int
}

func (s *listCounter) List(ctx context.Context, prefix string) ([]storage.Info, error) {
	if strings.Contains(prefix, "/date=") {
		s.mu.Lock()
		s.lists++
		s.mu.Unlock()
	}
	return s.Store.List(ctx, prefix)
}

func (s *listCounter) LocalDir() string { return storage.LocalDir(s.Store) }

func (s *listCounter) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists
}

// TestReplayListsADayOnce: a replay through ReplaySink lists a table's day
// folder once, not once per snapshot (each listing reads every file the
// day holds so far: a day's opens cost the square of its snapshots), and
// still sees the files already there: replaying a day again replaces its
// files instead of adding them twice.
func TestReplayListsADayOnce(t *testing.T) {
	ctx := context.Background()
	st := &listCounter{Store: storage.NewLocal(t.TempDir())}
	lake := iceberg.New(st, nil)
	pq, err := parquet.New(parquet.Options{Store: st, Iceberg: true})
	if err != nil {
		t.Fatal(err)
	}
	d := sinktest.Snapshot(t, 1, 50)
	defer d.Release()
	recs := d.Records(schema.Instruments)
	const perDay = 20
	date := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	replayDay := func() {
		r := iceberg.NewReplaySink(iceberg.NewSink(pq, lake))
		for i := range perDay {
			snap := d.Snap
			snap.Time = date.Add(time.Duration(i) * 5 * time.Minute)
			snap.RunID = fmt.Sprintf("run-%04d", i)
			sinktest.Load(t, r, schema.Instruments, snap, recs)
		}
		if err := r.FlushDay(ctx, date.Format(time.DateOnly)); err != nil {
			t.Fatal(err)
		}
	}
	for pass := 1; pass <= 2; pass++ {
		before := st.count()
		replayDay()
		if n := st.count() - before; n > 1 {
			t.Errorf("replay %d of a day of %d snapshots listed its day folder %d times, want once", pass, perDay, n)
		}
		tbl, _, err := lake.Table(ctx, schema.Instruments.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got := tbl.CurrentSnapshot().Summary.Properties["total-data-files"]; got != fmt.Sprint(perDay) {
			t.Errorf("after replay %d of the day: total-data-files = %s, want %d (each snapshot's file once)", pass, got, perDay)
		}
	}
}
