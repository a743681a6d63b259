package clickhouse

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/venuesim"
)

// Two snapshots 300 ms apart, within one second, are two snapshots on
// 18.16 (time columns of second precision): snapshot_ms keeps their keys
// apart, in the instruments table, in an account table, in
// instruments_latest (the later one is the latest) and in
// index_price_history.
func TestSnapshotsMillisecondsApart(t *testing.T) {
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	s := newSink(t, c.DSN(db), true)
	ctx := context.Background()
	sim := venuesim.New(venuesim.Config{Seed: 3})
	first := time.Date(2026, 11, 22, 9, 30, 0, 100e6, time.UTC)
	second := first.Add(300 * time.Millisecond)
	account := schema.AccountTable("balances")
	account.Columns = append(schema.AccountMetaColumns(""), schema.Column{Name: "total", Type: schema.Float64, Nullable: true})
	for _, at := range []time.Time{first, second} {
		snap := sinks.Snapshot{Time: at, RunID: "run-" + at.Format("05.000"), Source: "sim", Endpoint: "instruments"}
		recs := listing(t, sim, snap, 1000)
		load(t, s, snap, recs)
		for _, r := range recs {
			r.Release()
		}
		rec := simpleRecord(account, at)
		w, err := s.Open(ctx, account, snap)
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
	n := len(sim.Instruments())
	f, err := s.Features(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f.DateTime64 {
		// A newer server: snapshot_time itself keeps the milliseconds.
		if got := query(t, c, fmt.Sprintf("SELECT count(), uniqExact(snapshot_time) FROM %s.instruments FINAL", db)); got != fmt.Sprintf("%d\t2", 2*n) {
			t.Errorf("instruments FINAL: %s, want %d rows of 2 snapshots", got, 2*n)
		}
		return
	}
	if got := query(t, c, fmt.Sprintf("SELECT count(), uniqExact(snapshot_time), groupUniqArray(snapshot_ms) FROM %s.instruments FINAL", db)); got != fmt.Sprintf("%d\t1\t[400,100]", 2*n) && got != fmt.Sprintf("%d\t1\t[100,400]", 2*n) {
		t.Errorf("instruments FINAL (count, seconds, ms): %s, want %d rows of one second, ms 100 and 400", got, 2*n)
	}
	if got := query(t, c, fmt.Sprintf("SELECT count() FROM %s.balances FINAL", db)); got != "2" {
		t.Errorf("balances FINAL: %s rows, want 2", got)
	}
	if got := query(t, c, fmt.Sprintf("SELECT count(), min(run_id), max(run_id) FROM %s.instruments_latest", db)); got != fmt.Sprintf("%d\trun-00.400\trun-00.400", n) {
		t.Errorf("instruments_latest: %s, want %d rows of the later snapshot", got, n)
	}
	if got := query(t, c, fmt.Sprintf("SELECT count() FROM %s.index_price_history", db)); got != "6" {
		t.Errorf("index_price_history rows = %s, want 6 (3 currencies x 2 snapshots)", got)
	}
	// Loading the first snapshot again (a retry) adds nothing.
	recs := listing(t, sim, sinks.Snapshot{Time: first, RunID: "run-00.100", Source: "sim"}, 1000)
	load(t, s, sinks.Snapshot{Time: first, RunID: "run-00.100", Source: "sim", Endpoint: "instruments"}, recs)
	releaseAll(recs)
	if got := query(t, c, fmt.Sprintf("SELECT count() FROM %s.instruments FINAL", db)); got != fmt.Sprint(2*n) {
		t.Errorf("after reloading the first snapshot: %s rows, want %d", got, 2*n)
	}
}

func releaseAll(recs []arrow.Record) {
	for _, r := range recs {
		r.Release()
	}
}

// schema4 creates database db at schema version 4, as optlake made it
// before the millisecond key: migrations 1 to 4 and their records.
func schema4(t *testing.T, c *testenv.ClickHouse, db string) {
	t.Helper()
	ctx := context.Background()
	v, err := schema.ParseVersion(c.Version())
	if err != nil {
		t.Fatal(err)
	}
	tg := schema.Target{DB: db, Features: v}
	stmts := []string{schema.CreateDatabaseDDL(tg), schema.MigrationsTableDDL(db)}
	for _, m := range schema.Migrations()[:4] {
		stmts = append(stmts, m.Render(tg)...)
		stmts = append(stmts, m.RecordStatement(tg))
	}
	for _, st := range stmts {
		if err := c.Exec(ctx, st); err != nil {
			t.Fatalf("%s: %v", st, err)
		}
	}
}

// A database at schema 4 holding data: migrate rebuilds its tables with
// the millisecond key (fixed tables and an account table), every row is
// still there, nothing is left behind, and the new key keeps snapshots
// 300 ms apart. Interrupted rebuilds are resumed: a half-filled copy of
// rejects (dropped and made again) and runs renamed away between the
// swap's two renames (finished).
func TestMigration5FromSchema4(t *testing.T) {
	c := testenv.SharedClickHouse(t)
	f, err := schema.ParseVersion(c.Version())
	if err != nil {
		t.Fatal(err)
	}
	if f.DateTime64 {
		t.Skip("migration 5 rebuilds nothing where time columns are DateTime64")
	}
	ctx := context.Background()
	db := testenv.FreshDatabase(t, c)
	schema4(t, c, db)
	tg := schema.Target{DB: db, Features: f}
	// An account table as the sink created it at schema 4 (no snapshot_ms).
	balances := schema.AccountTable("balances")
	balances.Columns = append(schema.AccountMetaColumns(""), schema.Column{Name: "total", Type: schema.Float64, Nullable: true, Doc: "it's the total"})
	if err := c.Exec(ctx, fmt.Sprintf("CREATE TABLE %s.balances (snapshot_time DateTime('UTC'), run_id String, source String, account String, row_index Int64, total Nullable(Float64) COMMENT 'it\\'s the total') ENGINE = ReplacingMergeTree PARTITION BY toYYYYMM(snapshot_time) ORDER BY (source, account, snapshot_time, row_index)", db)); err != nil {
		t.Fatal(err)
	}
	if got := query(t, c, fmt.Sprintf("SELECT sorting_key FROM system.tables WHERE database = '%s' AND name = 'balances'", db)); got != "source, account, snapshot_time, row_index" {
		t.Fatalf("old balances key: %s", got)
	}
	inserts := []string{
		"INSERT INTO %s.instruments (snapshot_time, run_id, source, instrument_name, strike) VALUES ('2026-11-20 08:00:00', 'r1', 'sim', 'BTC-A', 1), ('2026-11-20 08:00:00', 'r1', 'sim', 'BTC-B', 2), ('2026-11-20 09:00:00', 'r2', 'sim', 'BTC-A', 3)",
		"INSERT INTO %s.rejects (snapshot_time, run_id, source, endpoint, row_index, reason, raw) VALUES ('2026-11-20 08:00:00', 'r1', 'sim', 'instruments', 7, 'bad', '{}')",
		"INSERT INTO %s.runs (snapshot_time, run_id, source, endpoint, status, rows, rejects, bytes, duration_ms) VALUES ('2026-11-20 08:00:00', 'r1', 'sim', 'instruments', 'ok', 2, 1, 100, 5), ('2026-11-20 09:00:00', 'r2', 'sim', 'instruments', 'ok', 1, 0, 50, 4)",
		"INSERT INTO %s.instrument_events (snapshot_time, run_id, source, instrument_name, event, field, initial) VALUES ('2026-11-20 09:00:00', 'r2', 'sim', 'BTC-B', 'delisted', '', 0)",
		"INSERT INTO %s.balances (snapshot_time, run_id, source, account, row_index, total) VALUES ('2026-11-20 08:00:00', 'r1', 'sim', 'main', 0, 10.5), ('2026-11-20 09:00:00', 'r2', 'sim', 'main', 0, 11.5)",
	}
	for _, ins := range inserts {
		if err := c.Exec(ctx, fmt.Sprintf(ins, db)); err != nil {
			t.Fatal(err)
		}
	}
	counts := func() string {
		return query(t, c, fmt.Sprintf(`SELECT (SELECT count() FROM %[1]s.instruments FINAL), (SELECT count() FROM %[1]s.rejects FINAL), (SELECT count() FROM %[1]s.runs FINAL),
			(SELECT count() FROM %[1]s.instrument_events FINAL), (SELECT count() FROM %[1]s.balances FINAL), (SELECT sum(strike) FROM %[1]s.instruments), (SELECT sum(total) FROM %[1]s.balances FINAL)`, db))
	}
	before := counts()
	if before != "3\t1\t2\t1\t2\t6\t22" {
		t.Fatalf("before: %s", before)
	}
	// Interrupted attempts: rejects' copy made and half filled with a row
	// that is not the table's; runs copied, then renamed away and the
	// process gone before the copy took its name.
	rj := schema.Rekey(tg, schema.Rejects, nil)
	for _, st := range rj.Copy[:2] {
		if err := c.Exec(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Exec(ctx, fmt.Sprintf("INSERT INTO %s.rejects__v5 (snapshot_time, run_id, source, endpoint, row_index, reason, raw) VALUES ('2026-11-21 08:00:00', 'x', 'x', 'x', 1, 'x', 'x')", db)); err != nil {
		t.Fatal(err)
	}
	rn := schema.Rekey(tg, schema.Runs, nil)
	for _, st := range append(rn.Copy, fmt.Sprintf("RENAME TABLE %s.runs TO %s.runs__v4", db, db)) {
		if err := c.Exec(ctx, st); err != nil {
			t.Fatal(err)
		}
	}

	s := newSink(t, c.DSN(db), false)
	applied, v, err := s.Migrate(ctx)
	if err != nil || len(applied) != 1 || applied[0].Version != 5 || v != 5 {
		t.Fatalf("migrate: %v %d %v", applied, v, err)
	}
	if got := counts(); got != before {
		t.Errorf("after migrate: %s, want %s", got, before)
	}
	for _, tb := range []string{"instruments", "rejects", "runs", "instrument_events", "balances"} {
		key := query(t, c, fmt.Sprintf("SELECT sorting_key FROM system.tables WHERE database = '%s' AND name = '%s'", db, tb))
		if !strings.Contains(key, "snapshot_time, snapshot_ms") {
			t.Errorf("%s key after migrate: %s", tb, key)
		}
	}
	if got := query(t, c, fmt.Sprintf("SELECT groupArray(name) FROM system.tables WHERE database = '%s' AND (name LIKE '%%__v4' OR name LIKE '%%__v5')", db)); got != "[]" {
		t.Errorf("left behind: %s", got)
	}
	// Comments survive the rebuild (the account table's come from the server).
	if got := query(t, c, fmt.Sprintf("SELECT comment FROM system.columns WHERE database = '%s' AND table = 'balances' AND name = 'total'", db)); got != "it\\'s the total" && got != "it's the total" {
		t.Errorf("balances.total comment: %q", got)
	}
	// Migrating again changes nothing.
	if applied, _, err := s.Migrate(ctx); err != nil || len(applied) != 0 {
		t.Fatalf("second migrate: %v %v", applied, err)
	}

	// The new key: a snapshot 300 ms after an old one (old rows have ms 0)
	// in the same second adds its rows beside the old ones.
	at := time.Date(2026, 11, 20, 9, 0, 0, 300e6, time.UTC)
	rec := simpleRecord(balances, at)
	w, err := s.Open(ctx, balances, sinks.Snapshot{Time: at, RunID: "r3", Source: "sim"})
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
	if got := query(t, c, fmt.Sprintf("SELECT count(), uniqExact(snapshot_time), groupArray(snapshot_ms) FROM (SELECT * FROM %s.balances FINAL WHERE snapshot_time = '2026-11-20 09:00:00' ORDER BY snapshot_ms)", db)); got != "2\t1\t[0,300]" {
		t.Errorf("balances at 09:00:00: %s", got)
	}
	if got := query(t, c, fmt.Sprintf("SELECT count(), max(strike) FROM %s.instruments_latest", db)); got != "2\t3" {
		t.Errorf("instruments_latest after migrate: %s", got)
	}
}
