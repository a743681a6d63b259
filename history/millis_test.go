package history

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/clickhouse"
)

// pointRecord is one instruments row: the instrument at time at with an
// index price; every other venue field null.
func pointRecord(name string, at time.Time, price float64) arrow.Record {
	t := schema.Instruments
	b := array.NewRecordBuilder(memory.DefaultAllocator, t.ArrowSchema())
	defer b.Release()
	for i, c := range t.Columns {
		switch c.Name {
		case "snapshot_time":
			b.Field(i).(*array.TimestampBuilder).Append(arrow.Timestamp(at.UnixMilli()))
		case "run_id", "source":
			b.Field(i).(*array.StringBuilder).Append("sim")
		case "instrument_name":
			b.Field(i).(*array.StringBuilder).Append(name)
		case "index_price":
			b.Field(i).(*array.Float64Builder).Append(price)
		default:
			b.Field(i).AppendNull()
		}
	}
	return b.NewRecord()
}

// Three snapshots, two of them 300 ms apart within one second, loaded
// into 18.16 (time columns of whole seconds) in the wrong order: the
// timeline from ClickHouse has three points, in order, at their exact
// milliseconds.
func TestFromClickHouseMillisecondsApart(t *testing.T) {
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	ctx := context.Background()
	s, err := clickhouse.New(clickhouse.Options{DSN: c.DSN(db), Migrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	base := time.Date(2026, 11, 22, 10, 0, 0, 200e6, time.UTC)
	times := []time.Time{base.Add(300 * time.Millisecond), base, base.Add(-time.Minute)}
	for i, at := range times {
		rec := pointRecord("BTC-X", at, float64(100+i))
		w, err := s.Open(ctx, schema.Instruments, sinks.Snapshot{Time: at, RunID: "sim", Source: "sim", Endpoint: "instruments"})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		if _, err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	tl, err := FromClickHouse(ctx, c.DSN(db), "BTC-X")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		at    time.Time
		price float64
	}{{times[2], 102}, {times[1], 101}, {times[0], 100}}
	if len(tl.Points) != len(want) {
		t.Fatalf("%d points, want %d: %+v", len(tl.Points), len(want), tl.Points)
	}
	for i, w := range want {
		p := tl.Points[i]
		if !p.Time.Equal(w.at) || p.IndexPrice == nil || *p.IndexPrice != w.price {
			t.Errorf("point %d: %s %v, want %s %v", i, p.Time.Format(time.RFC3339Nano), p.IndexPrice, w.at.Format(time.RFC3339Nano), w.price)
		}
	}
}
