package pipeline_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/extract"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// listCounter is a store that keeps the names its listings return.
type listCounter struct {
	storage.Store
	mu     sync.Mutex
	listed []string
}

func (c *listCounter) List(ctx context.Context, prefix string) ([]storage.Info, error) {
	infos, err := c.Store.List(ctx, prefix)
	c.mu.Lock()
	for _, in := range infos {
		c.listed = append(c.listed, in.Name)
	}
	c.mu.Unlock()
	return infos, err
}

// A catch-up after a long history plans from what is pending: it reads
// the raw archive's names of the pending snapshots' days (and of the day
// before, where the instrument events' previous listing is), never those
// of the days behind them. Ten days of history, three snapshots pending on
// the last.
func TestCatchUpPlanningReadsThePendingDays(t *testing.T) {
	dir := t.TempDir()
	st := &listCounter{Store: storage.NewLocal(dir)}
	first := time.Date(2026, 11, 13, 1, 0, 0, 0, time.UTC)
	snap := first
	r := instrumentsRunner(t, venuesim.Config{Seed: 3, Instruments: 20}, dir, st, func() time.Time { return snap })
	ctx := context.Background()
	const days = 10
	for d := range days {
		for i := range 3 {
			snap = first.AddDate(0, 0, d).Add(time.Duration(i) * 7 * time.Hour)
			if d == days-1 && i == 0 {
				// The last day's snapshots reach no sink.
				if err := os.Rename(filepath.Join(dir, "instruments"), filepath.Join(dir, "instruments.kept")); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "instruments"), []byte("in the way"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			sum := r.Run(ctx)
			if ok := d < days-1; sum.OK != ok {
				t.Fatalf("day %d run %d: ok %v (%s)", d, i, sum.OK, sum.Error)
			}
		}
	}
	if err := os.Remove(filepath.Join(dir, "instruments")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "instruments.kept"), filepath.Join(dir, "instruments")); err != nil {
		t.Fatal(err)
	}
	st.listed = nil
	res, err := r.CatchUp(ctx, pipeline.CatchUpOptions{})
	if err != nil || len(res.Snapshots) != 3 || res.Loaded != 3 {
		t.Fatalf("catch-up: %+v, %v", res, err)
	}
	lastDay := first.AddDate(0, 0, days-1).Truncate(24 * time.Hour)
	var raw, behind int
	for _, name := range st.listed {
		rest, ok := strings.CutPrefix(name, "raw/instruments/date=")
		if !ok {
			continue
		}
		raw++
		if day, _ := time.Parse(time.DateOnly, rest[:len(time.DateOnly)]); day.Before(lastDay.AddDate(0, 0, -1)) {
			behind++
		}
	}
	if raw == 0 || behind > 0 {
		t.Fatalf("catch-up of the last day listed %d raw names, %d of them of the %d days before the pending ones", raw, behind, days-2)
	}
}

// instrumentsRunner is a runner of the simulator's instruments listing
// (events on, ledger on) into a Parquet lake in dir; st is its data
// directory's store (the lake's, or a wrapper of it).
func instrumentsRunner(t *testing.T, sim venuesim.Config, dir string, st storage.Store, now func() time.Time) *pipeline.Runner {
	t.Helper()
	srv := httptest.NewServer(venuesim.New(sim).Handler())
	t.Cleanup(srv.Close)
	client, err := extract.New(extract.Options{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	pq, err := parquet.New(parquet.Options{Store: storage.NewLocal(dir)})
	if err != nil {
		t.Fatal(err)
	}
	eps, _ := pipeline.SelectEndpoints([]string{"instruments"}, nil)
	r, err := pipeline.New(pipeline.Config{
		Client: client, Store: st, Sinks: []sinks.Sink{pq}, Endpoints: eps, Source: "sim",
		Events: true, Ledger: true, Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
