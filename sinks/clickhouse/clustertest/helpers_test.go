package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/pipeline/events"
	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/clickhouse"
	"github.com/optlake/optlake/venuesim"
)

// One cluster for the whole package, started by the first test that asks
// and stopped by testenv.Main.
func TestMain(m *testing.M) { testenv.Main(m) }

func bg(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// query runs sql on one server with clickhouse-client (independent of the
// sink's Go client) and returns its trimmed output.
func query(t *testing.T, n *testenv.ClickHouse, sql string) string {
	t.Helper()
	out, err := n.Query(bg(t), sql)
	if err != nil {
		t.Fatalf("%s: %s: %v", n.Addr(), sql, err)
	}
	return strings.TrimSpace(out)
}

var dbCounter atomic.Int64

// clusterDB returns a database name unique to the test; the database is
// dropped ON CLUSTER when the test ends (kept when it failed).
func clusterDB(t *testing.T, c *testenv.Cluster) string {
	t.Helper()
	name := fmt.Sprintf("c_%s_%d", strings.ToLower(strings.NewReplacer("/", "_", "#", "_").Replace(t.Name())), dbCounter.Add(1))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("database %s kept on the cluster in %s", name, c.Dir())
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Node(0, 0).Exec(ctx, "DROP DATABASE IF EXISTS "+name+" ON CLUSTER "+c.Name()); err != nil {
			t.Logf("dropping %s: %v", name, err)
		}
	})
	return name
}

// newSink returns a sink for db on the cluster (cluster "" for one server).
func newSink(t *testing.T, dsn, cluster string, migrate bool) *clickhouse.Sink {
	t.Helper()
	s, err := clickhouse.New(clickhouse.Options{DSN: dsn, Cluster: cluster, Migrate: migrate, Backoff: 50 * time.Millisecond, MaxAttempts: 6})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// snapshot is one decoded simulator listing: its records per table.
type snapshot struct {
	snap sinks.Snapshot
	recs map[*schema.Table][]arrow.Record
	rows int64 // instrument rows
}

func (s *snapshot) release() {
	for _, rs := range s.recs {
		for _, r := range rs {
			r.Release()
		}
	}
}

// decodeListing decodes the simulator's current listing into instrument
// (and reject) records of at most batch rows, as a run would.
func decodeListing(t *testing.T, sim *venuesim.Sim, snap sinks.Snapshot, batch int) *snapshot {
	t.Helper()
	var body bytes.Buffer
	if err := sim.WriteInstruments(&body); err != nil {
		t.Fatal(err)
	}
	d := transform.NewInstrumentDecoder(transform.Options{BatchRows: batch})
	defer d.Release()
	out := &snapshot{snap: snap, recs: map[*schema.Table][]arrow.Record{}}
	_, err := d.Decode(context.Background(), &body, snap, func(tb *schema.Table, rec arrow.Record) error {
		rec.Retain()
		out.recs[tb] = append(out.recs[tb], rec)
		if tb == schema.Instruments {
			out.rows += rec.NumRows()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(out.release)
	return out
}

// history decodes n consecutive simulator snapshots (one tick apart) and
// derives their instrument events, like n runs would.
func history(t *testing.T, seed int64, n int) []*snapshot {
	t.Helper()
	sim := venuesim.New(venuesim.Config{Seed: seed})
	var prev *events.State
	var out []*snapshot
	for i := range n {
		if i > 0 {
			sim.Advance(1)
		}
		snap := sinks.Snapshot{Time: sim.Now().UTC(), RunID: fmt.Sprintf("run-%02d", i), Source: "sim", Endpoint: "instruments"}
		s := decodeListing(t, sim, snap, 1000)
		d, err := events.NewDiffer(prev, snap, events.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range s.recs[schema.Instruments] {
			if err := d.Observe(r); err != nil {
				t.Fatal(err)
			}
		}
		_, st, err := d.Finish(func(tb *schema.Table, rec arrow.Record) error {
			rec.Retain()
			s.recs[tb] = append(s.recs[tb], rec)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		prev = st
		out = append(out, s)
	}
	return out
}

// load writes every table of s through the sink: Open, Write each record,
// Commit. between, if set, runs after the first record of the instruments
// table (to break something during a load).
func load(t *testing.T, sk *clickhouse.Sink, s *snapshot, between func()) {
	t.Helper()
	ctx := bg(t)
	for _, tb := range []*schema.Table{schema.Instruments, schema.Rejects, schema.InstrumentEvents} {
		recs := s.recs[tb]
		if len(recs) == 0 {
			continue
		}
		w, err := sk.Open(ctx, tb, s.snap)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			if err := w.Write(ctx, r); err != nil {
				t.Fatalf("write %s record %d: %v", tb.Name, i, err)
			}
			if i == 0 && tb == schema.Instruments && between != nil {
				between()
			}
		}
		if _, err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// waitReplicated waits until every running replica of every shard holds
// the same rows of db.<table>_local (and has nothing left in its
// replication queue), and returns the row count per shard. A load returns
// once one replica per shard has the rows; the others fetch them shortly
// after, and a read through the Distributed table may pick either.
func waitReplicated(t *testing.T, c *testenv.Cluster, db, table string) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var counts []string
		same := true
		for s := range c.Shards() {
			first := ""
			// With a replica of the shard stopped, the running one's
			// replication queue may hold entries only the stopped one can
			// serve (a merged part it produced): the rows are what counts
			// then; the queue must drain once every replica runs.
			degraded := false
			for r := range c.Replicas() {
				degraded = degraded || !c.Node(s, r).Running()
			}
			for r := range c.Replicas() {
				if !c.Node(s, r).Running() {
					continue
				}
				got := query(t, c.Node(s, r), fmt.Sprintf(
					"SELECT count(), (SELECT queue_size FROM system.replicas WHERE database = '%s' AND table = '%s_local') FROM %s.%s_local", db, table, db, table))
				f := strings.Split(got, "\t")
				if f[1] != "0" && !degraded {
					same = false
				}
				if first == "" {
					first = f[0]
				} else if f[0] != first {
					same = false
				}
			}
			counts = append(counts, first)
		}
		if same {
			return counts
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas of %s.%s_local did not converge within 60s: %v", db, table, counts)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readmeQueries returns the SQL blocks of README.md's "Query the history in
// SQL" section.
func readmeQueries(t *testing.T) []string {
	return testenv.DocSQL(t, testenv.SQLDoc, "Query the history in SQL")
}

// accountRecord builds one record of an inferred account table: one row per
// account, value columns filled with something.
func accountRecord(tb *schema.Table, at time.Time, accounts int) arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, tb.ArrowSchema())
	defer b.Release()
	for i := range accounts {
		for j, c := range tb.Columns {
			switch f := b.Field(j).(type) {
			case *array.TimestampBuilder:
				f.Append(arrow.Timestamp(at.UnixMilli()))
			case *array.StringBuilder:
				switch c.Name {
				case "source":
					f.Append("sim")
				case "account":
					f.Append(fmt.Sprintf("acct-%03d", i))
				default:
					f.Append(fmt.Sprintf("%s-%d", c.Name, i))
				}
			case *array.Int64Builder:
				f.Append(0)
			case *array.Float64Builder:
				f.Append(float64(i) / 4)
			default:
				panic(fmt.Sprintf("column %s: unexpected builder %T", c.Name, f))
			}
		}
	}
	return b.NewRecord()
}
