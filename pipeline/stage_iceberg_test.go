package pipeline_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/extract/paginate"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// notAtomic is the Parquet sink without its sinks.Atomic (a wrapper that
// hides it), still versioned for the Iceberg sink.
type notAtomic struct{ pq *parquet.Sink }

func (s notAtomic) Name() string                    { return s.pq.Name() }
func (s notAtomic) Close(ctx context.Context) error { return s.pq.Close(ctx) }
func (s notAtomic) Open(ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
	return s.pq.Open(ctx, t, snap)
}
func (s notAtomic) OpenVersion(ctx context.Context, t *schema.Table, snap sinks.Snapshot, version string) (sinks.Writer, error) {
	return s.pq.OpenVersion(ctx, t, snap, version)
}

// icebergPagedRun runs one paginated listing of instruments instruments
// into an Iceberg lake over inner (the lake's Parquet sink) and returns
// how many appends of the instruments table there were and how many
// staging files existed at them.
func icebergPagedRun(t testing.TB, instruments int, inner func(*parquet.Sink) sinks.Sink) (appends, staged int) {
	dir, tmp := t.TempDir(), t.TempDir()
	sim := venuesim.New(venuesim.Config{Seed: 21, Instruments: instruments, Real: venuesim.RealVenue{Paginate: venuesim.PageOffset}})
	client, eps := simClient(t, sim.Handler())
	eps[0].Records = "data"
	eps[0].Pagination = &paginate.Spec{Type: paginate.Offset, OffsetParam: "offset", LimitParam: "limit", Limit: 50, TotalPath: "total"}
	st := storage.NewLocal(dir)
	pq, err := parquet.New(parquet.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	lk := iceberg.New(st, nil)
	var mu sync.Mutex
	lk.SetCrash(func(table, step string) {
		if table != schema.Instruments.Name || step != "file" {
			return
		}
		m, _ := filepath.Glob(filepath.Join(tmp, "optlake-stage-*"))
		mu.Lock()
		defer mu.Unlock()
		appends++
		staged += len(m)
	})
	r, err := pipeline.New(pipeline.Config{
		Client: client, Store: st, Sinks: []sinks.Sink{iceberg.NewSink(inner(pq), lk)}, Endpoints: eps, Source: "sim",
		Events: true, Ledger: true, BatchRows: 64, Scratch: tmp,
		Now:      func() time.Time { return memT0 },
		NewRunID: func() string { return "run-1" },
	})
	if err != nil {
		t.Fatal(err)
	}
	if sum := r.Run(context.Background()); !sum.OK {
		t.Fatalf("run: %s", sum.Error)
	}
	return appends, staged
}

// An Iceberg lake's paginated listing loads straight into its Parquet
// files: the Iceberg sink is as atomic as the Parquet sink it wraps, so
// the pipeline does not copy the pages' rows through a staging file first.
// The staging file is seen when it exists at the append (the lake's crash
// hook): it does with a Parquet sink that hides its atomicity.
func TestIcebergPagedLoadNotStaged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		staged bool
		inner  func(*parquet.Sink) sinks.Sink
	}{
		{"parquet", false, func(pq *parquet.Sink) sinks.Sink { return pq }},
		{"parquet hiding its atomicity", true, func(pq *parquet.Sink) sinks.Sink { return notAtomic{pq} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			appends, staged := icebergPagedRun(t, 230, tc.inner)
			if appends != 1 {
				t.Fatalf("%d appends of the instruments table, want 1", appends)
			}
			if got := staged > 0; got != tc.staged {
				t.Errorf("staging files at the append: %d, want staged %v", staged, tc.staged)
			}
		})
	}
}

// BenchmarkIcebergPagedLoad is a paginated listing of 5,000 instruments
// loaded into an Iceberg lake, straight (the Iceberg sink's atomicity
// seen) and staged (hidden, as before the sink forwarded it).
func BenchmarkIcebergPagedLoad(b *testing.B) {
	for _, bc := range []struct {
		name  string
		inner func(*parquet.Sink) sinks.Sink
	}{
		{"straight", func(pq *parquet.Sink) sinks.Sink { return pq }},
		{"staged", func(pq *parquet.Sink) sinks.Sink { return notAtomic{pq} }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				icebergPagedRun(b, 5000, bc.inner)
			}
		})
	}
}
