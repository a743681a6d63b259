package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/venuesim"
)

// TestMain doubles as the optlake binary: with OPTLAKE_TEST_AS_CLI set the
// test executable runs the CLI, so process tests (signals, locks, kill -9)
// exercise the real main without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv("OPTLAKE_TEST_AS_CLI") == "1" {
		os.Exit(run(processHost(), os.Args, os.Stdout, os.Stderr))
	}
	testenv.Main(m)
}

func chQuery(t *testing.T, c *testenv.ClickHouse, db, sql string) string {
	t.Helper()
	out, err := c.Query(context.Background(), "USE "+db+";\n"+sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return strings.TrimSpace(out)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// simulator → run --sink clickhouse --sink parquet → equal rows and values
// in both stores.
func TestRunBothSinksRoundTrip(t *testing.T) {
	t.Parallel()
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	_, url := startSim(t, venuesim.Config{Seed: 21, Faults: venuesim.Faults{IndexPriceVariants: true, ExtraFields: true, WrongTypes: true}})
	dir := t.TempDir()
	if res := optlake(t, "migrate", "--clickhouse-dsn", c.DSN(db)); res.code != 0 || !strings.Contains(res.stdout, "applied migration 1") {
		t.Fatalf("migrate: %d %s %s", res.code, res.stdout, res.stderr)
	}
	if res := optlake(t, "migrate", "--clickhouse-dsn", c.DSN(db)); res.code != 0 || !strings.Contains(res.stdout, "up to date") {
		t.Fatalf("second migrate: %d %s %s", res.code, res.stdout, res.stderr)
	}
	res := optlake(t, "run", "--api-url", url, "--data-dir", dir, "--sink", "parquet", "--sink", "clickhouse", "--clickhouse-dsn", c.DSN(db))
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}

	// Per instrument: index_price, expiration (epoch seconds), is_active, deployed.
	type row struct {
		price           *float64
		exp             *int64
		active, deploy  string
		rfq, extra, raw string
	}
	parse := func(s string) *float64 {
		if s == "" || s == `\N` || s == "<nil>" {
			return nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("parse %q: %v", s, err)
		}
		return &f
	}
	parseInt := func(s string) *int64 {
		if s == "" || s == `\N` || s == "<nil>" {
			return nil
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("parse %q: %v", s, err)
		}
		return &v
	}
	chRows := map[string]row{}
	out := chQuery(t, c, db, `SELECT instrument_name, index_price, toUnixTimestamp(expiration_time), is_active, deployed, rfq, extra, index_price_raw FROM instruments FINAL`)
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "\t")
		chRows[f[0]] = row{parse(f[1]), parseInt(f[2]), f[3], f[4], f[5], f[6], f[7]}
	}
	glob := filepath.Join(dir, "instruments", "*", "*.parquet")
	pq := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT instrument_name, index_price, epoch(expiration_time)::BIGINT, is_active::INT, deployed::INT, rfq::INT, extra, index_price_raw
		FROM read_parquet('%s')`, glob))
	if len(pq.Rows) != len(chRows) || len(pq.Rows) < 1000 {
		t.Fatalf("parquet %d rows, clickhouse %d", len(pq.Rows), len(chRows))
	}
	str := func(v any) string {
		if v == nil {
			return `\N`
		}
		return fmt.Sprint(v)
	}
	var perpetual, nullPrices int
	for _, r := range pq.Rows {
		name := r[0].(string)
		ch, ok := chRows[name]
		if !ok {
			t.Fatalf("%s in Parquet, not in ClickHouse", name)
		}
		p := parse(str(r[1]))
		if (p == nil) != (ch.price == nil) || (p != nil && *p != *ch.price) {
			t.Errorf("%s index_price: parquet %v, clickhouse %v", name, str(r[1]), ch.price)
		}
		if p == nil {
			nullPrices++
		}
		exp := parseInt(str(r[2]))
		switch {
		case exp != nil && *exp > math.MaxUint32:
			// Beyond DateTime's range (the perpetual, year 3000): null, not clamped.
			perpetual++
			if ch.exp != nil {
				t.Errorf("%s expiration %d loaded as %d, want null", name, *exp, *ch.exp)
			}
		case (exp == nil) != (ch.exp == nil) || (exp != nil && *exp != *ch.exp):
			t.Errorf("%s expiration: parquet %v, clickhouse %v", name, str(r[2]), ch.exp)
		}
		if str(r[3]) != ch.active || str(r[4]) != ch.deploy || str(r[5]) != ch.rfq {
			t.Errorf("%s booleans: parquet %v/%v/%v, clickhouse %s/%s/%s", name, r[3], r[4], r[5], ch.active, ch.deploy, ch.rfq)
		}
		if str(r[6]) != ch.extra || str(r[7]) != ch.raw {
			t.Errorf("%s extra/raw: parquet %v %v, clickhouse %s %s", name, r[6], r[7], ch.extra, ch.raw)
		}
	}
	if perpetual == 0 || nullPrices == 0 {
		t.Errorf("no perpetual (%d) or null price (%d) in the listing: the comparison proved less", perpetual, nullPrices)
	}
	// Rejects and runs made it too.
	if got := chQuery(t, c, db, "SELECT count() > 0, countIf(reason = '') FROM rejects FINAL"); got != "1\t0" {
		t.Errorf("rejects: %s", got)
	}
	if got := chQuery(t, c, db, "SELECT endpoint, status, rows FROM runs FINAL WHERE endpoint = 'instruments'"); got != fmt.Sprintf("instruments\tok\t%d", len(pq.Rows)) {
		t.Errorf("runs: %s", got)
	}
}

// An out-of-date schema is refused with a clear message; --migrate fixes it.
func TestRunRefusesUnmigratedDatabase(t *testing.T) {
	t.Parallel()
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	_, url := startSim(t, venuesim.Config{Seed: 4})
	args := []string{"run", "--api-url", url, "--data-dir", t.TempDir(), "--sink", "clickhouse", "--clickhouse-dsn", c.DSN(db)}
	res := optlake(t, args...)
	// The snapshot was fetched and archived: it stays pending for ClickHouse
	// (exit 3) until a run with a migrated schema catches it up.
	if res.code != exitPartial || !strings.Contains(lastLine(res.stderr), "run `optlake migrate` first (or pass --migrate)") {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	res = optlake(t, append(args, "--migrate")...)
	if res.code != 0 {
		t.Fatalf("with --migrate: exit %d %s", res.code, res.stderr)
	}
	if !strings.Contains(res.stdout, "caught up 1 of 1 snapshots") {
		t.Errorf("the migrated run did not catch up the pending snapshot: %s", res.stdout)
	}
}

// readmeQueries returns the SQL blocks of README.md's "Query the history in
// SQL" section.
func readmeQueries(t *testing.T) []string {
	return testenv.DocSQL(t, testenv.SQLDoc, "Query the history in SQL")
}

// Every README query runs against a server loaded from the simulator over
// several snapshots, and answers something — the same on 18.16 and on the
// newest ClickHouse (readme_versions_test.go).
func TestReadmeQueries(t *testing.T) {
	t.Parallel()
	queries := readmeQueries(t)
	if len(queries) < 4 {
		t.Fatalf("found %d SQL examples in the README", len(queries))
	}
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	sim, url := startSim(t, venuesim.Config{Seed: 9})
	dir := t.TempDir()
	// Snapshots a minute apart on a pinned clock, not in real time: the
	// README's queries group by snapshot_time, which is whole seconds on
	// 18.16 (its key tells snapshots apart by snapshot_ms, its README
	// answers would not match the newest ClickHouse's for snapshots within
	// one second).
	clk := pinClock(time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC))
	for i := 0; i < 6; i++ {
		if i > 0 {
			sim.Advance(1)
			clk.next()
		}
		res := clk.optlake(t, "run", "--api-url", url, "--data-dir", dir, "--sink", "clickhouse", "--sink", "parquet", "--clickhouse-dsn", c.DSN(db), "--migrate")
		if res.code != 0 {
			t.Fatalf("run %d: %s", i, res.stderr)
		}
	}
	// Every README query answers something, and the same on the newest
	// ClickHouse; the views mean what the README says on both.
	ref := sqlEngine{name: "ClickHouse " + c.Version(), query: func(sql string) (string, error) {
		return c.Query(context.Background(), "USE "+db+";\n"+sql)
	}}
	checkVersions(t, versionChecks(t, dir), ref, map[string]func(*testing.T) sqlEngine{
		"newest ClickHouse (chDB)": func(t *testing.T) sqlEngine { return chdbEngine(t, dir) },
	})
	// The events in ClickHouse are exactly the events in Parquet.
	chRows := strings.Split(chQuery(t, c, db, `SELECT instrument_name, event, field, ifNull(old_value, 'NULL'), ifNull(new_value, 'NULL'), toUnixTimestamp(snapshot_time) * 1000 + snapshot_ms, initial
		FROM instrument_events FINAL ORDER BY instrument_name, snapshot_time, snapshot_ms, event, field`), "\n")
	pq := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT instrument_name, event, field, coalesce(old_value, 'NULL'), coalesce(new_value, 'NULL'), epoch_ms(snapshot_time), initial::INT
		FROM read_parquet('%s') ORDER BY instrument_name, snapshot_time, event, field`, filepath.Join(dir, "instrument_events", "*", "*.parquet")))
	var pqRows []string
	for _, r := range pq.Rows {
		f := make([]string, len(r))
		for i, v := range r {
			f[i] = fmt.Sprint(v)
		}
		pqRows = append(pqRows, strings.Join(f, "\t"))
	}
	if len(pqRows) < 3000 || strings.Join(chRows, "\n") != strings.Join(pqRows, "\n") {
		t.Errorf("events differ: clickhouse %d rows, parquet %d rows", len(chRows), len(pqRows))
		for i := range chRows {
			if i < len(pqRows) && chRows[i] != pqRows[i] {
				t.Errorf("first difference:\n clickhouse %q\n parquet    %q", chRows[i], pqRows[i])
				break
			}
		}
	}
}
