package schema_test

import (
	"context"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/schema"
)

// runScript runs statements in one chDB session call.
func runScript(t *testing.T, ch *testenv.ChDB, stmts []string, tail string) string {
	t.Helper()
	out, err := ch.Query(context.Background(), strings.Join(stmts, ";\n")+";\n"+tail)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return out
}

// Migration 5's DDL runs on the newest ClickHouse (chDB): for the newest
// version's own features it rebuilds nothing (DateTime64 keeps the
// milliseconds, and two snapshots 300 ms apart stay two); rendered for
// 18.16's features (DateTime columns, which every release still has), the
// whole script — tables at migration 1's layout, then the rebuild with
// snapshot_ms — runs, keeps the rows copied into the rebuilt tables and
// keeps two snapshots of one second apart, also in instruments_latest and
// index_price_history.
func TestMillisecondKeyOnChDB(t *testing.T) {
	newest, err := schema.ParseVersion(schema.NewestKnownVersion)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("newest", func(t *testing.T) {
		ch := testenv.NewChDB(t)
		tg := schema.Target{DB: "optlake", Features: newest}
		if n := len(schema.Migrations()[4].Render(tg)); n != 0 {
			t.Errorf("migration 5 renders %d statements where time columns are DateTime64", n)
		}
		got := runScript(t, ch, schema.Script(tg), `INSERT INTO optlake.instruments (snapshot_time, run_id, source, instrument_name) VALUES ('2026-11-20 08:00:00.100', 'a', 's', 'X'), ('2026-11-20 08:00:00.400', 'b', 's', 'X');
SELECT count() FROM optlake.instruments FINAL;
SELECT run_id FROM optlake.instruments_latest;`)
		if got != "2\nb" {
			t.Errorf("two snapshots 300 ms apart (count FINAL, latest run): %q", got)
		}
	})
	t.Run("second precision", func(t *testing.T) {
		ch := testenv.NewChDB(t)
		tg := schema.Target{DB: "optlake", Features: schema.FeaturesFor(18, 16)}
		// Up to migration 4, with a row in each table to be copied.
		var upTo4 []string
		upTo4 = append(upTo4, schema.CreateDatabaseDDL(tg), schema.MigrationsTableDDL(tg.DB))
		for _, m := range schema.Migrations()[:4] {
			upTo4 = append(upTo4, m.Render(tg)...)
		}
		upTo4 = append(upTo4,
			"INSERT INTO optlake.instruments (snapshot_time, run_id, source, instrument_name, index_price, base_currency) VALUES ('2026-11-20 07:00:00', 'old', 's', 'X', 1, 'BTC')",
			"INSERT INTO optlake.runs (snapshot_time, run_id, source, endpoint, status, rows, rejects, bytes, duration_ms) VALUES ('2026-11-20 07:00:00', 'old', 's', 'instruments', 'ok', 1, 0, 1, 1)")
		var m5 []string
		for _, r := range schema.Migrations()[4:] {
			m5 = append(m5, r.Render(tg)...)
		}
		if len(m5) == 0 {
			t.Fatal("migration 5 renders nothing for 18.16")
		}
		got := runScript(t, ch, append(upTo4, m5...), `INSERT INTO optlake.instruments (snapshot_time, snapshot_ms, run_id, source, instrument_name, index_price, base_currency) VALUES ('2026-11-20 08:00:00', 100, 'a', 's', 'X', 2, 'BTC'), ('2026-11-20 08:00:00', 400, 'b', 's', 'X', 3, 'BTC');
SELECT count(), countIf(run_id = 'old') FROM optlake.instruments FINAL;
SELECT count() FROM optlake.runs FINAL;
SELECT run_id FROM optlake.instruments_latest;
SELECT count() FROM optlake.index_price_history;
SELECT sorting_key FROM system.tables WHERE database = 'optlake' AND name = 'instruments';
SELECT count() FROM system.tables WHERE database = 'optlake' AND (name LIKE '%__v4' OR name LIKE '%__v5');`)
		want := "3\t1\n1\nb\n3\nsource, instrument_name, snapshot_time, snapshot_ms\n0"
		if got != want {
			t.Errorf("after migration 5:\n%s\nwant\n%s", got, want)
		}
	})
}

// The key gains snapshot_ms right after snapshot_time, only where time
// columns have second precision and only in tables keyed by snapshot_time.
func TestClickHouseKey(t *testing.T) {
	old, cur := schema.FeaturesFor(18, 16), schema.FeaturesFor(24, 8)
	for _, c := range []struct {
		tb       *schema.Table
		old, cur string
	}{
		{schema.Instruments, "source,instrument_name,snapshot_time,snapshot_ms", "source,instrument_name,snapshot_time"},
		{schema.Runs, "source,endpoint,snapshot_time,snapshot_ms,run_id", "source,endpoint,snapshot_time,run_id"},
		{schema.AccountTable("positions"), "source,account,snapshot_time,snapshot_ms,row_index", "source,account,snapshot_time,row_index"},
		{schema.InferredColumns, "table_name,column_name", "table_name,column_name"},
	} {
		if got := strings.Join(c.tb.ClickHouseKey(old), ","); got != c.old {
			t.Errorf("%s on 18.16: %s", c.tb.Name, got)
		}
		if got := strings.Join(c.tb.ClickHouseKey(cur), ","); got != c.cur {
			t.Errorf("%s on 24.8: %s", c.tb.Name, got)
		}
		if c.tb.Columns == nil {
			continue
		}
		cols := c.tb.ClickHouseColumns(old)
		if c.tb.HasSnapshotMs(old) != (len(cols) == len(c.tb.Columns)+1) || c.tb.HasSnapshotMs(cur) {
			t.Errorf("%s: HasSnapshotMs %v/%v, %d of %d columns", c.tb.Name, c.tb.HasSnapshotMs(old), c.tb.HasSnapshotMs(cur), len(cols), len(c.tb.Columns))
		}
		if i := c.tb.Index("snapshot_time"); i >= 0 && c.tb.HasSnapshotMs(old) && cols[i+1].Name != schema.SnapshotMs {
			t.Errorf("%s: snapshot_ms not after snapshot_time: %v", c.tb.Name, cols)
		}
	}
	// New account tables get the key at once.
	acc := schema.AccountTable("positions")
	acc.Columns = schema.AccountMetaColumns("")
	if ddl := acc.ClickHouseDDL("db", old); !strings.Contains(ddl, "`snapshot_ms` UInt16") || !strings.HasSuffix(ddl, "ORDER BY (`source`, `account`, `snapshot_time`, `snapshot_ms`, `row_index`)") {
		t.Errorf("account table on 18.16:\n%s", ddl)
	}
}

// A rebuild's groups: Copy starts by dropping a leftover copy, Swap is one
// RENAME, and on a cluster the Distributed table is made anew over the new
// local table.
func TestRekeyStatements(t *testing.T) {
	f := schema.FeaturesFor(18, 16)
	r := schema.Rekey(schema.Target{DB: "db", Features: f}, schema.Runs, nil)
	if r.Copy[0] != "DROP TABLE IF EXISTS `db`.`runs__v5`" || len(r.Swap) != 1 ||
		r.Swap[0] != "RENAME TABLE `db`.`runs` TO `db`.`runs__v4`, `db`.`runs__v5` TO `db`.`runs`" ||
		r.Rename[0] != "RENAME TABLE `db`.`runs__v5` TO `db`.`runs`" || len(r.Redistribute) != 0 ||
		r.Cleanup[0] != "DROP TABLE IF EXISTS `db`.`runs__v4`" {
		t.Errorf("single server: %#v", r)
	}
	if !strings.HasPrefix(r.Copy[2], "INSERT INTO `db`.`runs__v5` (`snapshot_time`, `run_id`,") || strings.Contains(r.Copy[2], "snapshot_ms") {
		t.Errorf("copy: %s", r.Copy[2])
	}
	rc := schema.Rekey(schema.Target{DB: "db", Cluster: "c", Features: f}, schema.Runs, nil)
	if rc.Swap[0] != "RENAME TABLE `db`.`runs_local` TO `db`.`runs__v4_local`, `db`.`runs__v5_local` TO `db`.`runs_local` ON CLUSTER `c`" ||
		len(rc.Redistribute) != 2 || !strings.Contains(rc.Redistribute[1], "Distributed('c', 'db', 'runs_local', cityHash64(`source`, `endpoint`))") ||
		!strings.Contains(rc.Redistribute[1], "`snapshot_ms` UInt16") {
		t.Errorf("cluster: %#v", rc)
	}
	for _, st := range rc.All() {
		if !strings.Contains(st, "ON CLUSTER `c`") && !strings.HasPrefix(st, "INSERT") {
			t.Errorf("cluster statement not ON CLUSTER: %s", st)
		}
	}
}
