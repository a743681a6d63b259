package pipeline_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/extract/paginate"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/memsink"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// A run's temporary files (each page while it is judged, the staged
// records of a sink that does not commit atomically) go to Config.Scratch,
// never to the system's temp folder: here TMPDIR names a folder that does
// not exist, so any file made there fails the run.
func TestScratchHoldsTheRunsTempFiles(t *testing.T) {
	dir, scratch := t.TempDir(), t.TempDir()
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "absent"))

	sim := venuesim.New(venuesim.Config{Seed: 21, Instruments: 230, Real: venuesim.RealVenue{Paginate: venuesim.PageOffset}})
	client, eps := simClient(t, sim.Handler())
	eps[0].Records = "data"
	eps[0].Pagination = &paginate.Spec{Type: paginate.Offset, OffsetParam: "offset", LimitParam: "limit", Limit: 50, TotalPath: "total"}

	// The in-memory sink is not atomic, so the paged listing is staged: it
	// sees the rows only at the commit, while the staged file still exists.
	var mu sync.Mutex
	seen := map[string]bool{}
	sink := &flaky{Sink: memsink.New("mem")}
	sink.onWrite = func() {
		ents, _ := os.ReadDir(scratch)
		mu.Lock()
		defer mu.Unlock()
		for _, e := range ents {
			seen[strings.SplitN(e.Name(), "-", 3)[1]] = true
		}
	}
	r, err := pipeline.New(pipeline.Config{
		Client: client, Store: storage.NewLocal(dir), Scratch: scratch, Sinks: []sinks.Sink{sink},
		Endpoints: eps[:1], Source: "sim", Events: true, Ledger: true, BatchRows: 64,
		Now:      func() time.Time { return memT0 },
		NewRunID: func() string { return "run-1" },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sum := r.Run(context.Background())
	if !sum.OK {
		t.Fatalf("run: %s", sum.Error)
	}
	if got := len(names(sink.Sink)); got != 230 {
		t.Fatalf("loaded %d rows, want 230", got)
	}
	if !seen["stage"] {
		t.Errorf("no staged file in the scratch folder while the sink took the rows (saw %v)", seen)
	}
	if ents, _ := os.ReadDir(scratch); len(ents) != 0 {
		t.Errorf("the run left %d files in the scratch folder", len(ents))
	}
}
