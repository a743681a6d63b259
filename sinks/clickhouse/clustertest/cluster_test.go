package clustertest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/clickhouse"
	"github.com/optlake/optlake/venuesim"
)

// Migrate on a cluster creates every table (local and Distributed) and view
// on all four nodes; re-running it is a no-op; migrations are recorded once
// for the cluster; a sink of the other mode is refused.
func TestMigrateOnCluster(t *testing.T) {
	c := testenv.SharedCluster(t)
	t.Logf("cluster %s: %d shards × %d replicas, clickhouse %s, zookeeper %s", c.Name(), c.Shards(), c.Replicas(), c.Node(0, 0).Version(), c.ZooKeeper().Addr())
	ctx := bg(t)
	db := clusterDB(t, c)
	s := newSink(t, c.DSN(db), c.Name(), false)

	began := time.Now()
	applied, v, err := s.Migrate(ctx)
	if err != nil || len(applied) != len(schema.Migrations()) || v != schema.LatestVersion() {
		t.Fatalf("fresh migrate: applied=%v v=%d err=%v", applied, v, err)
	}
	t.Logf("migrate on the cluster took %s", time.Since(began).Round(time.Millisecond))

	var want []string
	for _, tb := range schema.Tables() {
		want = append(want, tb.Name+"\tDistributed", tb.LocalName()+"\tReplicatedReplacingMergeTree")
	}
	want = append(want, "index_price_history\tView", "instruments_latest\tView",
		"optlake_migrations\tDistributed", "optlake_migrations_local\tReplicatedReplacingMergeTree")
	slices.Sort(want)
	for _, n := range c.Nodes() {
		got := query(t, n, fmt.Sprintf("SELECT name, engine FROM system.tables WHERE database = '%s' ORDER BY name", db))
		if got != strings.Join(want, "\n") {
			t.Errorf("%s: tables\n%s\nwant\n%s", n.Addr(), got, strings.Join(want, "\n"))
		}
		// Columns of both tables are exactly schema's, in order (with
		// snapshot_ms where time columns have seconds).
		f, err := schema.ParseVersion(n.Version())
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range schema.Tables() {
			for _, name := range []string{tb.Name, tb.LocalName()} {
				got := query(t, n, fmt.Sprintf("SELECT arrayStringConcat(groupArray(name), ',') FROM (SELECT name FROM system.columns WHERE database = '%s' AND table = '%s')", db, name))
				if got != strings.Join(chNames(tb, f), ",") {
					t.Errorf("%s: %s columns = %s", n.Addr(), name, got)
				}
			}
		}
		// Migration 4's instruments_latest (ALL INNER JOIN) replaced
		// migration 1's on every node.
		if def := query(t, n, fmt.Sprintf("SELECT create_table_query FROM system.tables WHERE database = '%s' AND name = 'instruments_latest'", db)); !strings.Contains(def, "ALL INNER JOIN") {
			t.Errorf("%s: instruments_latest %s", n.Addr(), def)
		}
		// The replicas of a shard share a ZooKeeper path, shards do not.
		// Where migration 5 rebuilt the table (18.16) it replicates under
		// the path of the copy it was built as.
		path := "instruments_local"
		if schema.Instruments.HasSnapshotMs(f) {
			path = "instruments__v5_local"
		}
		got = query(t, n, fmt.Sprintf("SELECT zookeeper_path, replica_name FROM system.replicas WHERE database = '%s' AND table = 'instruments_local'", db))
		if !strings.HasPrefix(got, "/clickhouse/tables/0") || !strings.Contains(got, "/"+db+"/"+path+"\tr") {
			t.Errorf("%s: replica %s", n.Addr(), got)
		}
	}

	applied, _, err = s.Migrate(ctx)
	if err != nil || len(applied) != 0 {
		t.Fatalf("re-run: applied=%v err=%v", applied, err)
	}
	// Recorded once for the whole cluster: one row per version over the
	// shards' local tables (first replica of each), and through Distributed.
	total := 0
	for sh := range c.Shards() {
		var n int
		fmt.Sscan(query(t, c.Node(sh, 0), fmt.Sprintf("SELECT count() FROM %s.optlake_migrations_local FINAL", db)), &n)
		total += n
	}
	if total != len(schema.Migrations()) {
		t.Errorf("migrations recorded %d times over the shards, want %d", total, len(schema.Migrations()))
	}
	if got := query(t, c.Node(1, 1), fmt.Sprintf("SELECT count(), max(version) FROM %s.optlake_migrations FINAL", db)); got != fmt.Sprintf("%d\t%d", len(schema.Migrations()), schema.LatestVersion()) {
		t.Errorf("optlake_migrations through Distributed: %s", got)
	}

	// A sink without --cluster refuses the cluster's database, and a cluster
	// sink a single-server database (even on a cluster node).
	_, err = newSink(t, c.DSN(db), "", true).Open(ctx, schema.Instruments, sinks.Snapshot{})
	if err == nil || !strings.Contains(err.Error(), "is set up on a cluster") {
		t.Errorf("single-server sink on a cluster database: %v", err)
	}
	single := clusterDB(t, c)
	if _, _, err := newSink(t, c.Node(0, 1).DSN(single), "", false).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Node(0, 1).Exec(context.Background(), "DROP DATABASE IF EXISTS "+single) })
	_, _, err = newSink(t, c.Node(0, 1).DSN(single), c.Name(), false).Migrate(ctx)
	if err == nil || !strings.Contains(err.Error(), "set up for a single server") {
		t.Errorf("cluster migrate on a single-server database: %v", err)
	}
	_, _, err = newSink(t, c.DSN(db), "no_such_cluster", false).Migrate(ctx)
	if err == nil || !strings.Contains(err.Error(), "cluster no_such_cluster is not defined") {
		t.Errorf("unknown cluster: %v", err)
	}
}

// A simulator listing loads exactly its rows through the Distributed table;
// each shard holds only the instruments its sharding key sends it; the same
// snapshot loaded again changes nothing.
func TestLoadShardsAndIdempotency(t *testing.T) {
	c := testenv.SharedCluster(t)
	db := clusterDB(t, c)
	s := newSink(t, c.DSN(db), c.Name(), true)
	sim := venuesim.New(venuesim.Config{Seed: 1})
	snap := sinks.Snapshot{Time: time.Date(2026, 11, 22, 9, 30, 0, 0, time.UTC), RunID: "run-1", Source: "sim", Endpoint: "instruments"}
	l := decodeListing(t, sim, snap, 700)
	if want := int64(len(sim.Instruments())); l.rows != want || want == 0 {
		t.Fatalf("decoded %d rows, the listing has %d", l.rows, want)
	}
	began := time.Now()
	load(t, s, l, nil)
	t.Logf("loaded %d rows in %d blocks through the Distributed table in %s", l.rows, len(l.recs[schema.Instruments]), time.Since(began).Round(time.Millisecond))

	// insert_distributed_sync: the rows are on a replica of each shard when
	// Write returns; the other replicas fetch them right after.
	n0 := c.Node(0, 0)
	want := fmt.Sprint(l.rows)
	perShard := waitReplicated(t, c, db, "instruments")
	if got := query(t, n0, fmt.Sprintf("SELECT count(), uniqExact(instrument_name) FROM %s.instruments", db)); got != want+"\t"+want {
		t.Fatalf("count through Distributed = %s, want %s", got, want)
	}
	sum := 0
	for sh := range c.Shards() {
		var n int
		fmt.Sscan(perShard[sh], &n)
		sum += n
		if n == 0 {
			t.Errorf("shard %d holds no rows", sh+1)
		}
		// Shards have weight 1, in remote_servers order: shard index i
		// (0-based) gets the rows whose key modulo the total weight is i.
		for r := range c.Replicas() {
			got := query(t, c.Node(sh, r), fmt.Sprintf("SELECT countIf(cityHash64(source, instrument_name) %% %d != %d) FROM %s.instruments_local", c.Shards(), sh, db))
			if got != "0" {
				t.Errorf("shard %d replica %d holds %s rows of other shards", sh+1, r+1, got)
			}
		}
	}
	if sum != int(l.rows) {
		t.Errorf("shards hold %d rows (%v), want %d", sum, perShard, l.rows)
	}
	t.Logf("rows per shard: %v", perShard)

	// The same snapshot again (a retry, a replay): every block is a
	// duplicate for the Replicated tables, so even count() without FINAL
	// stays; FINAL certainly does.
	load(t, s, l, nil)
	if got := query(t, n0, fmt.Sprintf("SELECT count() FROM %s.instruments FINAL", db)); got != want {
		t.Errorf("count() FINAL after a second load = %s, want %s", got, want)
	}
	if got := query(t, n0, fmt.Sprintf("SELECT count() FROM %s.instruments", db)); got != want {
		t.Errorf("count() after a second load = %s, want %s (block deduplication)", got, want)
	}
	// Through the views too, from another node.
	if got := query(t, c.Node(1, 1), fmt.Sprintf("SELECT count() FROM %s.instruments_latest", db)); got != want {
		t.Errorf("instruments_latest = %s rows, want %s", got, want)
	}
	if got := query(t, c.Node(1, 1), fmt.Sprintf("SELECT count() FROM %s.index_price_history", db)); got != "3" {
		t.Errorf("index_price_history rows = %s, want 3 (BTC, ETH, SOL)", got)
	}
}

// One replica stopped during a load: the load still succeeds (the
// Distributed table writes to the shard's other replica), and when the
// replica is back it catches up to the same rows.
func TestReplicaDownDuringLoad(t *testing.T) {
	c := testenv.SharedCluster(t)
	db := clusterDB(t, c)
	s := newSink(t, c.DSN(db), c.Name(), true)
	ctx := bg(t)
	if _, _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	sim := venuesim.New(venuesim.Config{Seed: 2})
	snap := sinks.Snapshot{Time: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), RunID: "run-down", Source: "sim", Endpoint: "instruments"}
	l := decodeListing(t, sim, snap, 400)
	if len(l.recs[schema.Instruments]) < 3 {
		t.Fatalf("want several blocks, got %d", len(l.recs[schema.Instruments]))
	}
	// The first replica of the second shard: not the node the sink talks to.
	down := c.Node(1, 0)
	restarted := false
	t.Cleanup(func() {
		if !restarted && !down.Running() {
			if err := down.Restart(context.Background()); err != nil {
				t.Errorf("restarting %s: %v", down.Addr(), err)
			}
		}
	})
	load(t, s, l, func() {
		// The first block reached both replicas first: a part only the
		// stopped replica held could not be fetched by its peer until it
		// is back, and the "running replicas agree" check below would
		// wait for it (a race that depends on how fast replication is).
		waitReplicated(t, c, db, "instruments")
		if err := down.Stop(); err != nil {
			t.Fatalf("stopping %s: %v", down.Addr(), err)
		}
		t.Logf("stopped shard 2 replica 1 (%s) after the first block", down.Addr())
	})
	want := fmt.Sprint(l.rows)
	waitReplicated(t, c, db, "instruments") // the running replicas
	// FINAL: the INSERT the stopped replica broke is re-sent on its peer,
	// which may then hold that block twice until a merge (3207 of 3000
	// rows once, on a loaded machine); the keys collapse it.
	if got := query(t, c.Node(0, 1), fmt.Sprintf("SELECT count() FROM %s.instruments FINAL", db)); got != want {
		t.Errorf("with a replica down: count() FINAL through Distributed = %s, want %s", got, want)
	}

	began := time.Now()
	if err := down.Restart(ctx); err != nil {
		t.Fatalf("restarting %s: %v\n%s", down.Addr(), err, down.LogTail(30))
	}
	restarted = true
	perShard := waitReplicated(t, c, db, "instruments")
	t.Logf("replica back in %s, caught up in %s: rows per shard %v", down.StartupTime().Round(time.Millisecond), time.Since(began).Round(time.Millisecond), perShard)
	// The same rows as its peer (FINAL: an insert retried on the peer
	// while the replica went down may leave a duplicate part, which
	// replication brings back with the replica and a merge collapses).
	local := fmt.Sprintf("SELECT count() FROM %s.instruments_local FINAL", db)
	if got, peer := query(t, down, local), query(t, c.Node(1, 1), local); got != peer || got == "0" {
		t.Errorf("restarted replica holds %s rows, its peer %s", got, peer)
	}
	// And the whole cluster answers the same from the restarted node.
	if got := query(t, down, fmt.Sprintf("SELECT count() FROM %s.instruments FINAL", db)); got != want {
		t.Errorf("after catch-up: count() FINAL = %s, want %s", got, want)
	}
}

// The README's history queries answer the same on the cluster as on one
// server loaded with the same snapshots (six, with their instrument events).
func TestReadmeQueriesSameAsSingleServer(t *testing.T) {
	queries := readmeQueries(t)
	if len(queries) < 4 {
		t.Fatalf("found %d SQL examples in the README", len(queries))
	}
	c := testenv.SharedCluster(t)
	one := testenv.SharedClickHouse(t)
	cdb := clusterDB(t, c)
	sdb := testenv.FreshDatabase(t, one)
	onCluster := newSink(t, c.DSN(cdb), c.Name(), true)
	single := newSink(t, one.DSN(sdb), "", true)

	snaps := history(t, 9, 6)
	var events int
	for _, s := range snaps {
		load(t, single, s, nil)
		load(t, onCluster, s, nil)
		for _, r := range s.recs[schema.InstrumentEvents] {
			events += int(r.NumRows())
		}
	}
	t.Logf("loaded %d snapshots (%d instrument rows each, %d events) into both", len(snaps), snaps[0].rows, events)
	// Reads may go to either replica of a shard: let them converge first.
	for _, tb := range []string{"instruments", "instrument_events", "rejects"} {
		waitReplicated(t, c, cdb, tb)
	}

	for i, q := range queries {
		s := query(t, one, "USE "+sdb+";\n"+q)
		// Ask a different node each time: every node answers for the cluster.
		n := c.Nodes()[i%len(c.Nodes())]
		got := query(t, n, "USE "+cdb+";\n"+q)
		if s == "" {
			t.Errorf("README query %d returned no rows on one server:\n%s", i+1, q)
		}
		// Rows tied on the ORDER BY may come in another order; LIMITed
		// queries order by unique columns.
		sl, cl := strings.Split(s, "\n"), strings.Split(got, "\n")
		slices.Sort(sl)
		slices.Sort(cl)
		if !slices.Equal(sl, cl) {
			t.Errorf("README query %d answers differently on the cluster (%s):\n%s\none server (%d rows):\n%s\ncluster (%d rows):\n%s",
				i+1, n.Addr(), q, len(sl), head(s, 10), len(cl), head(got, 10))
		}
	}
}

func head(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, "\n")
}

// An account table inferred at run time is created on the cluster when
// first opened (local + Distributed, sharded by account) and evolves: a new
// column reaches every node's local and Distributed table, and loads go on.
// Where the servers have no ADD COLUMN IF NOT EXISTS (18.16) the column is
// added once per shard, never through the DDL queue, whose ALTER of a
// Replicated table each replica runs in turn and which hung on a busy
// machine.
func TestInferredTableEvolves(t *testing.T) {
	c := testenv.SharedCluster(t)
	db := clusterDB(t, c)
	s := newSink(t, c.DSN(db), c.Name(), true)
	v1, v2 := positionsTables()
	write := func(tb *schema.Table, at time.Time, accounts int) { writeAccounts(t, s, tb, at, accounts) }
	t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	write(v1, t0, 40)
	write(v2, t0.Add(time.Hour), 40)

	f, err := schema.ParseVersion(c.Node(0, 0).Version())
	if err != nil {
		t.Fatal(err)
	}
	if (schema.Target{Cluster: c.Name(), Features: f}).AlterPerShard() {
		got := query(t, c.Node(0, 0), fmt.Sprintf("SELECT count() FROM system.zookeeper WHERE path = '/clickhouse/task_queue/ddl' AND value LIKE '%%ALTER TABLE %s.positions_local%%'", db))
		if got != "0" {
			t.Errorf("%s ALTER(s) of positions_local went through the DDL queue (ON CLUSTER); want none", got)
		}
	}
	for _, n := range c.Nodes() {
		for _, name := range []string{"positions", "positions_local"} {
			got := query(t, n, fmt.Sprintf("SELECT arrayStringConcat(groupArray(name), ',') FROM (SELECT name FROM system.columns WHERE database = '%s' AND table = '%s')", db, name))
			f, err := schema.ParseVersion(n.Version())
			if err != nil {
				t.Fatal(err)
			}
			if got != strings.Join(chNames(v2, f), ",") {
				t.Errorf("%s: %s columns = %s", n.Addr(), name, got)
			}
		}
	}
	if got := query(t, c.Node(1, 1), fmt.Sprintf("SELECT count(), countIf(direction IS NOT NULL), uniqExact(account) FROM %s.positions FINAL", db)); got != "80\t40\t40" {
		t.Errorf("positions: %s", got)
	}
	waitReplicated(t, c, db, "positions")
	for sh := range c.Shards() {
		got := query(t, c.Node(sh, 1), fmt.Sprintf("SELECT countIf(cityHash64(source, account) %% %d != %d), count() > 0 FROM %s.positions_local", c.Shards(), sh, db))
		if got != "0\t1" {
			t.Errorf("shard %d: rows of other shards, any rows: %s", sh+1, got)
		}
	}

	// The next run, with a replica down: the tables are complete, so Open
	// runs no ON CLUSTER DDL (which would wait for the missing node) and
	// the load goes on.
	down := c.Node(1, 1)
	if err := down.Stop(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := down.Restart(context.Background()); err != nil {
			t.Errorf("restarting %s: %v", down.Addr(), err)
		}
	}()
	s = newSink(t, c.DSN(db), c.Name(), true)
	began := time.Now()
	write(v2, t0.Add(2*time.Hour), 40)
	if d := time.Since(began); d > 20*time.Second {
		t.Errorf("a run with a replica down took %s", d)
	}
	if got := query(t, c.Node(0, 0), fmt.Sprintf("SELECT count() FROM %s.positions FINAL", db)); got != "120" {
		t.Errorf("positions after the third run: %s", got)
	}
}

// chNames are the names of tb's columns in ClickHouse on a server with f.
func chNames(tb *schema.Table, f schema.Features) []string {
	var out []string
	for _, c := range tb.ClickHouseColumns(f) {
		out = append(out, c.Name)
	}
	return out
}

// positionsTables are the two versions of an inferred account table: v2
// gains a column.
func positionsTables() (v1, v2 *schema.Table) {
	meta := []schema.Column{
		{Name: "snapshot_time", Type: schema.TimestampMs},
		{Name: "run_id", Type: schema.String},
		{Name: "source", Type: schema.String, LowCardinality: true},
		{Name: "account", Type: schema.String, LowCardinality: true},
		{Name: "row_index", Type: schema.Int64},
	}
	v1 = &schema.Table{Name: "positions", Columns: append(slices.Clone(meta), schema.Column{Name: "size", Type: schema.Float64, Nullable: true}),
		Key: []string{"source", "account", "snapshot_time", "row_index"}, PartitionTime: "snapshot_time"}
	v2 = &schema.Table{Name: v1.Name, Columns: append(slices.Clone(v1.Columns), schema.Column{Name: "direction", Type: schema.String, Nullable: true}),
		Key: v1.Key, PartitionTime: v1.PartitionTime}
	return v1, v2
}

// writeAccounts loads one record of tb (one row per account) through s.
func writeAccounts(t *testing.T, s *clickhouse.Sink, tb *schema.Table, at time.Time, accounts int) {
	t.Helper()
	ctx := bg(t)
	rec := accountRecord(tb, at, accounts)
	defer rec.Release()
	w, err := s.Open(ctx, tb, sinks.Snapshot{Time: at, RunID: "r", Source: "sim", Endpoint: tb.Name})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// A column an earlier, interrupted evolution added on some shards only (a
// run that died, or an ON CLUSTER ALTER one replica failed): the next run
// adds it where it is missing — once per shard — and loads go on, whichever
// shard had it.
func TestColumnAddedOnSomeShardsOnly(t *testing.T) {
	c := testenv.SharedCluster(t)
	for sh := range c.Shards() {
		t.Run(fmt.Sprintf("on shard %d only", sh+1), func(t *testing.T) {
			db := clusterDB(t, c)
			v1, v2 := positionsTables()
			t0 := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
			writeAccounts(t, newSink(t, c.DSN(db), c.Name(), true), v1, t0, 40)
			// The earlier attempt: the column on one shard (its first
			// replica, replicated to the second), not on the others.
			f, err := schema.ParseVersion(c.Node(sh, 0).Version())
			if err != nil {
				t.Fatal(err)
			}
			col := v2.Columns[len(v2.Columns)-1]
			if err := c.Node(sh, 0).Exec(bg(t), fmt.Sprintf("ALTER TABLE %s.positions_local ADD COLUMN %s %s", db, col.Name, col.ClickHouseType(f))); err != nil {
				t.Fatal(err)
			}
			waitColumns(t, c, db, "positions_local", func(n *testenv.ClickHouse) bool { return n == c.Node(sh, 0) || n == c.Node(sh, 1) })

			writeAccounts(t, newSink(t, c.DSN(db), c.Name(), true), v2, t0.Add(time.Hour), 40)
			for _, n := range c.Nodes() {
				for _, name := range []string{"positions", "positions_local"} {
					got := query(t, n, fmt.Sprintf("SELECT arrayStringConcat(groupArray(name), ',') FROM (SELECT name FROM system.columns WHERE database = '%s' AND table = '%s')", db, name))
					if got != strings.Join(chNames(v2, f), ",") {
						t.Errorf("%s: %s columns = %s", n.Addr(), name, got)
					}
				}
			}
			if got := query(t, c.Node(1, 1), fmt.Sprintf("SELECT count(), countIf(direction IS NOT NULL), uniqExact(account) FROM %s.positions FINAL", db)); got != "80\t40\t40" {
				t.Errorf("positions: %s", got)
			}
		})
	}
}

// waitColumns waits until the columns of db.table settle after a plain
// (replicated, one shard's) ALTER: the nodes has picks have one column more
// than the others.
func waitColumns(t *testing.T, c *testenv.Cluster, db, table string, has func(*testenv.ClickHouse) bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		counts := map[bool]map[string]bool{true: {}, false: {}}
		for _, n := range c.Nodes() {
			counts[has(n)][query(t, n, fmt.Sprintf("SELECT count() FROM system.columns WHERE database = '%s' AND table = '%s'", db, table))] = true
		}
		if len(counts[true]) == 1 && len(counts[false]) == 1 {
			var a, b int
			for k := range counts[true] {
				fmt.Sscan(k, &a)
			}
			for k := range counts[false] {
				fmt.Sscan(k, &b)
			}
			if a == b+1 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("columns of %s.%s did not settle within 60s: %v", db, table, counts)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
