package iceberg_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/sinktest"
	"github.com/optlake/optlake/storage"
)

// load writes the snapshots at ticks into st through the Iceberg sink.
func load(t *testing.T, st storage.Store, ticks ...int) *iceberg.Lake {
	t.Helper()
	pq, err := parquet.New(parquet.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	lake := iceberg.New(st, nil)
	s := iceberg.NewSink(pq, lake)
	for _, tick := range ticks {
		d := sinktest.Snapshot(t, tick, 250)
		for _, tb := range sinktest.Tables {
			sinktest.Load(t, s, tb, d.Snap, d.Records(tb))
		}
		d.Release()
	}
	return lake
}

// digest is a table's row count and an order-free hash of every row, as
// ClickHouse computes it over from.
func digest(t *testing.T, ch *testenv.ChDB, from string, where string) string {
	t.Helper()
	q := fmt.Sprintf("SELECT count(), sum(cityHash64(*)) FROM %s %s FORMAT TSV;", from, where)
	out, err := ch.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// TestReadWithClickHouse: ClickHouse 26.7 (chDB) reads every table of the
// Iceberg lake with icebergLocal, and sees the rows of the Parquet files,
// by count and hash; a filter on the snapshot time (pruned by the day
// partition and the column bounds) keeps them.
func TestReadWithClickHouse(t *testing.T) {
	dir := t.TempDir()
	st := storage.NewLocal(dir)
	load(t, st, 1, 2, 3)
	ch := testenv.NewChDB(t)
	for _, tb := range sinktest.Tables {
		files := fmt.Sprintf("file('%s/%s/date=*/*.parquet', Parquet)", dir, tb.Name)
		ice := fmt.Sprintf("icebergLocal('%s/%s')", dir, tb.Name)
		want := digest(t, ch, files, "")
		if !strings.HasPrefix(want, "3") && tb == schema.Runs {
			t.Fatalf("%s: want 3 rows in the Parquet files, got %s", tb.Name, want)
		}
		if got := digest(t, ch, ice, ""); got != want {
			t.Errorf("%s: icebergLocal %s, Parquet files %s", tb.Name, got, want)
		}
		day := "WHERE snapshot_time >= '2026-11-22 00:00:00' AND snapshot_time < '2026-11-23 00:00:00'"
		if got := digest(t, ch, ice, day); got != want {
			t.Errorf("%s: icebergLocal on the snapshots' day: %s, want %s", tb.Name, got, want)
		}
	}
}

// TestAppendIsOneSnapshot: each snapshot's file of a table is one Iceberg
// snapshot, summarized with the optlake run id.
func TestAppendIsOneSnapshot(t *testing.T) {
	st := storage.NewLocal(t.TempDir())
	lake := load(t, st, 1, 2)
	tbl, ok, err := lake.Table(context.Background(), schema.Instruments.Name)
	if err != nil || !ok {
		t.Fatalf("table: %v %v", ok, err)
	}
	snaps := tbl.Metadata().Snapshots()
	if len(snaps) != 2 {
		t.Fatalf("%d Iceberg snapshots, want 2", len(snaps))
	}
	cur := tbl.CurrentSnapshot()
	if got := cur.Summary.Properties["optlake.run-id"]; got != sinktest.Snapshot(t, 2, 250).Snap.RunID {
		t.Errorf("current snapshot's optlake.run-id = %q", got)
	}
	if got := cur.Summary.Properties["added-data-files"]; got != "1" {
		t.Errorf("added-data-files = %q, want 1", got)
	}
	_ = sinks.Snapshot{}
	_ = time.Second
}
