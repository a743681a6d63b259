package pipeline_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/extract"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// A catch-up bounded by its time budget (measured on a pinned clock, not by
// sleeping) loads what fits, leaves the rest pending, and the run's own
// snapshot is then taken as usual.
func TestCatchUpTimeBudget(t *testing.T) {
	srv := httptest.NewServer(venuesim.New(venuesim.Config{Seed: 2, Instruments: 50}).Handler())
	defer srv.Close()
	dir := t.TempDir()
	client, err := extract.New(extract.Options{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	pq, err := parquet.New(parquet.Options{Store: storage.NewLocal(dir)})
	if err != nil {
		t.Fatal(err)
	}
	eps, _ := pipeline.SelectEndpoints([]string{"instruments"}, nil)
	snap := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	r, err := pipeline.New(pipeline.Config{
		Client: client, Store: storage.NewLocal(dir), Sinks: []sinks.Sink{pq}, Endpoints: eps, Source: "sim",
		Events: true, Ledger: true,
		Now: func() time.Time { snap = snap.Add(time.Minute); return snap },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	block := filepath.Join(dir, "instruments")
	if err := os.WriteFile(block, []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if sum := r.Run(ctx); sum.OK {
			t.Fatalf("run %d loaded into an unwritable lake", i)
		}
	}
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	// Each look at the clock finds 40 minutes gone: the first snapshot
	// starts within the 1h budget, the second would not.
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { now = now.Add(40 * time.Minute); return now }
	res, err := r.CatchUp(ctx, pipeline.CatchUpOptions{Budget: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stopped != "budget" || len(res.Snapshots) != 1 || !res.Snapshots[0].OK || res.Loaded != 1 {
		t.Fatalf("bounded catch-up: %+v", res)
	}
	if sum := r.Run(ctx); !sum.OK {
		t.Fatalf("the run's own snapshot: %s", sum.Error)
	}
	st, err := r.Pending(context.Background())
	if err != nil || len(st) != 1 || st[0].Pending != 2 || !st[0].Oldest.Equal(time.Date(2026, 11, 23, 9, 2, 0, 0, time.UTC)) {
		t.Fatalf("pending after: %+v %v", st, err)
	}
	// Without a bound the rest goes through.
	if res, err := r.CatchUp(ctx, pipeline.CatchUpOptions{}); err != nil || len(res.Snapshots) != 2 || res.Stopped != "" {
		t.Fatalf("unbounded catch-up: %+v %v", res, err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "instruments", "*", "*.parquet"))
	if len(files) != 4 {
		t.Errorf("parquet files: %v", files)
	}
}
