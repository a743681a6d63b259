package clickhouse

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/internal/arrowpool"
	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/venuesim"
)

// A replay's records come from a pool that recycles (and here poisons) a
// record's buffers once its last holder releases it; the caller releases
// each record as soon as Write returns, as the fan-out does. The writer's
// re-send after a cut connection must still send the rows it was given:
// it holds its own reference to every record of the open INSERT.
func TestInsertResentFromRecycledBuffers(t *testing.T) {
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	p := testenv.NewProxy(t, c.Addr())
	var logs syncBuffer
	s, err := New(Options{DSN: fmt.Sprintf("clickhouse://default@%s/%s", p.Addr(), db), Migrate: true, Backoff: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	var body bytes.Buffer
	if err := venuesim.New(venuesim.Config{Seed: 5}).WriteInstruments(&body); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	load := func(runID string, minute int, pooled bool) {
		snap := sinks.Snapshot{Time: time.Date(2026, 3, 1, 12, minute, 0, 0, time.UTC), RunID: runID, Source: "sim", Endpoint: "instruments"}
		w, err := s.Open(ctx, schema.Instruments, snap)
		if err != nil {
			t.Fatal(err)
		}
		d := transform.NewInstrumentDecoder(transform.Options{BatchRows: 40})
		defer d.Release()
		if pooled {
			d.UseColumns(arrowpool.NewPoisoned(32 << 20))
		}
		i := 0
		_, err = d.Decode(ctx, bytes.NewReader(body.Bytes()), snap, func(tb *schema.Table, rec arrow.Record) error {
			if tb != schema.Instruments {
				return nil
			}
			if pooled && i == 2 && p.Cut() == 0 {
				t.Fatal("no connection to cut")
			}
			i++
			return w.Write(ctx, rec) // released by the decoder when this returns
		})
		if err != nil {
			t.Fatal(err)
		}
		if i < 4 {
			t.Fatalf("want several records, got %d", i)
		}
		if _, err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	load("run-go-memory", 0, false) // its own snapshot: FINAL keeps both
	load("run-pooled", 1, true)
	if !strings.Contains(logs.String(), "insert failed, re-sending its records") {
		t.Error("the cut connection did not make the writer re-send (the test proves nothing)")
	}
	sum := func(runID string) string {
		return query(t, c, fmt.Sprintf("SELECT count(), sum(cityHash64(instrument_name, instrument_id, base_currency, strike, tick_size, creation_time)) FROM %s.instruments FINAL WHERE run_id = '%s'", db, runID))
	}
	if want, got := sum("run-go-memory"), sum("run-pooled"); got != want {
		t.Errorf("rows from recycled buffers: %s, from Go memory: %s", got, want)
	}
}
