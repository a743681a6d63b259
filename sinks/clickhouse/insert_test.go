package clickhouse

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/venuesim"
)

// A connection lost in the middle of the writer's INSERT (between flushed
// records, or just before it is sent at Commit) is retried on a new
// connection with every record the INSERT had received: nothing is lost.
// With a budget of one byte every record is its own INSERT.
func TestInsertResentAfterConnectionLoss(t *testing.T) {
	c := testenv.SharedClickHouse(t)
	for _, tc := range []struct {
		name   string
		budget int64
		cutAt  int  // cut before writing this record; -1: before Commit
		resend bool // the cut hits an open INSERT
	}{
		{"mid-insert", insertBudget, 2, true},
		{"before-commit", insertBudget, -1, true},
		{"insert-per-record", 1, 2, false}, // the cut hits an idle pooled connection
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(b int64) { insertBudget = b }(insertBudget)
			insertBudget = tc.budget
			db := testenv.FreshDatabase(t, c)
			p := testenv.NewProxy(t, c.Addr())
			var logs syncBuffer
			s, err := New(Options{DSN: fmt.Sprintf("clickhouse://default@%s/%s", p.Addr(), db), Migrate: true, Backoff: 10 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			sim := venuesim.New(venuesim.Config{Seed: 5})
			snap := sinks.Snapshot{Time: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), RunID: "run-" + tc.name, Source: "sim", Endpoint: "instruments"}
			recs := listing(t, sim, snap, 40)
			defer func() {
				for _, r := range recs {
					r.Release()
				}
			}()
			if len(recs) < 4 {
				t.Fatalf("want several records, got %d", len(recs))
			}
			var n int64
			for _, r := range recs {
				n += r.NumRows()
			}
			ctx := context.Background()
			w, err := s.Open(ctx, schema.Instruments, snap)
			if err != nil {
				t.Fatal(err)
			}
			cutAt := tc.cutAt
			if cutAt < 0 {
				cutAt = len(recs)
			}
			for i, r := range recs {
				if i == cutAt && p.Cut() == 0 {
					t.Fatal("no connection to cut")
				}
				if err := w.Write(ctx, r); err != nil {
					t.Fatalf("write %d: %v", i, err)
				}
			}
			if cutAt == len(recs) && p.Cut() == 0 {
				t.Fatal("no connection to cut")
			}
			got, err := w.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got.Rows != n {
				t.Errorf("committed %d rows, want %d", got.Rows, n)
			}
			if tc.resend && !strings.Contains(logs.String(), "insert failed, re-sending its records") {
				t.Error("the cut connection did not make the writer re-send (the test proves nothing)")
			}
			if q := query(t, c, fmt.Sprintf("SELECT count() FROM %s.instruments FINAL WHERE run_id = '%s'", db, snap.RunID)); q != fmt.Sprint(n) {
				t.Errorf("count() FINAL = %s, want %d", q, n)
			}
			if ww := w.(*writer); ww.batch != nil || len(ww.held) != 0 {
				t.Errorf("after Commit: batch %v, %d records held", ww.batch, len(ww.held))
			}
		})
	}
}

// Abort ends the open INSERT: the writer refuses further writes and
// releases what it held.
func TestAbortOpenInsert(t *testing.T) {
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	s := newSink(t, c.DSN(db), true)
	snap := sinks.Snapshot{Time: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), RunID: "run-abort", Source: "sim", Endpoint: "instruments"}
	recs := listing(t, venuesim.New(venuesim.Config{Seed: 6}), snap, 100)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	ctx := context.Background()
	w, err := s.Open(ctx, schema.Instruments, snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, recs[0]); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if ww := w.(*writer); ww.batch != nil || len(ww.held) != 0 {
		t.Errorf("after Abort: batch %v, %d records held", ww.batch, len(ww.held))
	}
	if err := w.Write(ctx, recs[0]); err == nil {
		t.Error("write after abort succeeded")
	}
	if err := w.Abort(); err != nil {
		t.Error(err)
	}
	// The connection pool still works for the next writer.
	load(t, s, snap, recs)
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
