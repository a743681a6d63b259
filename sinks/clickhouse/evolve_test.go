package clickhouse

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// An inferred table is created when first opened and gains columns with
// ALTER TABLE ... ADD COLUMN (without IF NOT EXISTS on 18.16, whose parser
// rejects it).
func TestInferredTableEvolvesSingleServer(t *testing.T) {
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	s := newSink(t, c.DSN(db), true)
	ctx := context.Background()
	v1 := &schema.Table{Name: "balances", Columns: []schema.Column{
		{Name: "snapshot_time", Type: schema.TimestampMs},
		{Name: "source", Type: schema.String},
		{Name: "account", Type: schema.String},
		{Name: "total", Type: schema.Float64, Nullable: true},
	}, Key: []string{"source", "account", "snapshot_time"}, PartitionTime: "snapshot_time"}
	v2 := &schema.Table{Name: v1.Name, Columns: append(slices.Clone(v1.Columns), schema.Column{Name: "currency", Type: schema.String, Nullable: true}),
		Key: v1.Key, PartitionTime: v1.PartitionTime}
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for i, tb := range []*schema.Table{v1, v2, v2} {
		rec := simpleRecord(tb, at.Add(time.Duration(i)*time.Hour))
		w, err := s.Open(ctx, tb, sinks.Snapshot{Time: at})
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
	got := query(t, c, fmt.Sprintf("SELECT arrayStringConcat(groupArray(name), ',') FROM (SELECT name FROM system.columns WHERE database = '%s' AND table = 'balances')", db))
	f, err := schema.ParseVersion(c.Version())
	if err != nil {
		t.Fatal(err)
	}
	if got != strings.Join(chNames(v2, f), ",") {
		t.Errorf("columns = %s", got)
	}
	if got := query(t, c, fmt.Sprintf("SELECT count(), countIf(currency IS NOT NULL) FROM %s.balances FINAL", db)); got != "3\t2" {
		t.Errorf("rows = %s", got)
	}
}

// simpleRecord is one row of tb: strings are the column's name, floats 1,
// integers 0.
func simpleRecord(tb *schema.Table, at time.Time) arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, tb.ArrowSchema())
	defer b.Release()
	for j, c := range tb.Columns {
		switch f := b.Field(j).(type) {
		case *array.TimestampBuilder:
			f.Append(arrow.Timestamp(at.UnixMilli()))
		case *array.StringBuilder:
			f.Append(c.Name)
		case *array.Float64Builder:
			f.Append(1)
		case *array.Int64Builder:
			f.Append(0)
		}
	}
	return b.NewRecord()
}
