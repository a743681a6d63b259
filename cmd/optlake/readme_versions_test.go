package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/schema"
)

// One table of queries, two engines: the README's queries and the views'
// meaning, asked of Debian's clickhouse-server 18.16 (loaded by optlake over
// the native protocol) and of the newest ClickHouse optlake knows, embedded
// through chDB (its schema from `migrate --print --server-version`, its rows
// from the same snapshots' Parquet lake).

// versionCheck is one query every engine answers. want "" means: the same
// answer as 18.16's, which must not be empty (the README queries); otherwise
// the answer every engine must give (the views' meaning, computed by DuckDB
// from the Parquet lake).
type versionCheck struct {
	name, sql, want string
}

// sqlEngine answers SQL in the loaded database, TabSeparated.
type sqlEngine struct {
	name  string
	query func(sql string) (string, error)
}

// versionChecks returns the README's SQL blocks and the views' meaning for
// the lake in dir.
func versionChecks(t *testing.T, dir string) []versionCheck {
	var checks []versionCheck
	for i, q := range readmeQueries(t) {
		checks = append(checks, versionCheck{name: fmt.Sprintf("README query %d", i+1), sql: q})
	}
	glob := func(table string) string { return filepath.Join(dir, table, "*", "*.parquet") }
	// instruments_latest: one row per instrument, the row of the last
	// snapshot that listed it (its is_active there), first_seen/last_seen
	// its first and last snapshot. The simulator delists and deactivates
	// instruments between snapshots, so a view that picks any other row
	// gives other numbers.
	latest := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT count(*), count(*), 0, count(*) FILTER (WHERE active = 1), sum(floor(epoch_ms(first) / 1000))::BIGINT, sum(floor(epoch_ms(last) / 1000))::BIGINT
		FROM (SELECT arg_max(is_active, snapshot_time)::INT AS active, min(snapshot_time) AS first, max(snapshot_time) AS last
		      FROM read_parquet('%s') GROUP BY source, instrument_name)`, glob("instruments")))
	last := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT count(*) FILTER (WHERE last < (SELECT max(snapshot_time) FROM read_parquet('%[1]s')))
		FROM (SELECT max(snapshot_time) AS last FROM read_parquet('%[1]s') GROUP BY source, instrument_name)`, glob("instruments")))
	if fmt.Sprint(last.Rows[0][0]) == "0" {
		t.Fatal("no instrument left the listing: instruments_latest's check proves less")
	}
	// index_price_history: one row per snapshot and currency.
	history := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT count(*), count(*), sum(n)
		FROM (SELECT count(*) AS n FROM read_parquet('%s') WHERE index_price IS NOT NULL AND base_currency IS NOT NULL
		      GROUP BY source, base_currency, snapshot_time)`, glob("instruments")))
	checks = append(checks,
		versionCheck{name: "instruments_latest: one row per instrument, its last snapshot",
			sql: `SELECT count(), uniqExact(source, instrument_name), countIf(snapshot_time != last_seen), countIf(is_active = 1),
				sum(toUnixTimestamp(first_seen)), sum(toUnixTimestamp(last_seen)) FROM instruments_latest`,
			want: tsv(latest.Rows[0])},
		versionCheck{name: "instruments_latest: instruments no longer listed keep their last row",
			sql:  `SELECT countIf(last_seen < (SELECT max(snapshot_time) FROM instruments)) FROM instruments_latest`,
			want: tsv(last.Rows[0])},
		versionCheck{name: "index_price_history: one row per snapshot and currency",
			sql:  `SELECT count(), uniqExact(source, currency, time), sum(instruments) FROM index_price_history`,
			want: tsv(history.Rows[0])},
	)
	return checks
}

func tsv(row []any) string {
	f := make([]string, len(row))
	for i, v := range row {
		f[i] = fmt.Sprint(v)
	}
	return strings.Join(f, "\t")
}

// The differences between the engines' output that are not differences in
// the answer: DateTime64(3) prints milliseconds where 18.16's DateTime has
// seconds (optlake truncates; the test's snapshots are in distinct
// seconds), Bool prints true/false where 18.16's UInt8 prints 1/0, and
// 18.16's TabSeparated escapes ' as \'.
var fracSeconds = regexp.MustCompile(`(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\.\d+`)

func normalizeAnswer(out string) string {
	out = fracSeconds.ReplaceAllString(out, "$1")
	out = strings.ReplaceAll(out, `\'`, `'`)
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		f := strings.Split(l, "\t")
		for j, v := range f {
			switch v {
			case "true":
				f[j] = "1"
			case "false":
				f[j] = "0"
			}
		}
		lines[i] = strings.Join(f, "\t")
	}
	return strings.Join(lines, "\n")
}

// checkVersions asks every engine every check: ref first, the reference for
// the README queries, then each of others in a subtest of that name, which
// builds its engine (and may skip when it cannot).
func checkVersions(t *testing.T, checks []versionCheck, ref sqlEngine, others map[string]func(*testing.T) sqlEngine) {
	refAnswers := make([]string, len(checks))
	for i, c := range checks {
		out, err := ref.query(c.sql)
		if err != nil {
			t.Fatalf("%s on %s: %v\n%s", c.name, ref.name, err, c.sql)
		}
		refAnswers[i] = normalizeAnswer(out)
		switch {
		case c.want == "" && out == "":
			t.Errorf("%s returned no rows on %s:\n%s", c.name, ref.name, c.sql)
		case c.want != "" && refAnswers[i] != c.want:
			t.Errorf("%s on %s = %q, want %q", c.name, ref.name, refAnswers[i], c.want)
		}
	}
	for name, build := range others {
		t.Run(name, func(t *testing.T) {
			e := build(t)
			for i, c := range checks {
				out, err := e.query(c.sql)
				if err != nil {
					t.Errorf("%s: %v\n%s", c.name, err, c.sql)
					continue
				}
				want, from := c.want, "DuckDB over the Parquet lake"
				if want == "" {
					want, from = refAnswers[i], ref.name
				}
				if got := normalizeAnswer(out); got != want {
					t.Errorf("%s: the answer differs from %s's\n%s\n%s", c.name, from, c.sql, firstDifference(got, want, e.name, from))
				}
			}
		})
	}
}

// firstDifference shows the first line where got and want differ, and
// their line counts.
func firstDifference(got, want, gotName, wantName string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	i := 0
	for i < len(g) && i < len(w) && g[i] == w[i] {
		i++
	}
	line := func(ls []string) string {
		if i < len(ls) {
			return ls[i]
		}
		return "(no more lines)"
	}
	return fmt.Sprintf("%s: %d lines, line %d: %q\n%s: %d lines, line %d: %q", gotName, len(g), i+1, line(g), wantName, len(w), i+1, line(w))
}

// chdbEngine creates optlake's schema in a chDB session from `migrate
// --print --server-version schema.NewestKnownVersion` and loads every table
// of schema.Tables() that has files in the Parquet lake dir, twice, by
// column name (INSERT ... SELECT ... FROM file(..., Parquet)). Without chDB
// installed it skips the test (fails it in CI).
func chdbEngine(t *testing.T, dir string) sqlEngine {
	ch := testenv.NewChDB(t)
	const db = "optlake"
	res := optlake(t, "migrate", "--print", "--server-version", schema.NewestKnownVersion, "--clickhouse-dsn", "clickhouse://localhost:9000/"+db)
	if res.code != 0 {
		t.Fatalf("migrate --print: %d %s", res.code, res.stderr)
	}
	var load strings.Builder
	load.WriteString(res.stdout)
	loaded := 0
	for _, tb := range schema.Tables() {
		files, _ := filepath.Glob(filepath.Join(dir, tb.Name, "*", "*.parquet"))
		if len(files) == 0 {
			continue
		}
		loaded++
		cols := make([]string, len(tb.Columns))
		for i, c := range tb.Columns {
			cols[i] = schema.Quote(c.Name)
		}
		list := strings.Join(cols, ", ")
		// Twice, as a retried or replayed load would: the answers must
		// come from FINAL (and the views' FINAL), not from one copy.
		for range 2 {
			fmt.Fprintf(&load, "INSERT INTO %s.%s (%s) SELECT %s FROM file('%s', Parquet);\n",
				db, schema.Quote(tb.Name), list, list, filepath.Join(dir, tb.Name, "*", "*.parquet"))
		}
	}
	if loaded < 2 {
		t.Fatalf("the lake in %s has %d of optlake's tables", dir, loaded)
	}
	ctx := context.Background()
	if _, err := ch.Query(ctx, load.String()); err != nil {
		t.Fatalf("create and load: %v", err)
	}
	version, err := ch.Query(ctx, "SELECT version()")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(version, schema.NewestKnownVersion+".") {
		t.Errorf("chDB runs ClickHouse %s, the newest known version is %s", version, schema.NewestKnownVersion)
	}
	return sqlEngine{name: "ClickHouse " + version + " (chDB)", query: func(sql string) (string, error) {
		return ch.Query(ctx, "USE "+db+";\n"+sql)
	}}
}

// The cluster loads' insert_distributed_sync is, on current releases, an
// alias of distributed_foreground_insert (chDB cannot run a cluster: this
// only checks the name is still understood).
func TestCurrentClickHouseKnowsSettings(t *testing.T) {
	t.Parallel()
	ch := testenv.NewChDB(t)
	got, err := ch.Query(context.Background(), "SET insert_distributed_sync = 1; SELECT alias_for, getSetting('distributed_foreground_insert') FROM system.settings WHERE name = 'insert_distributed_sync'")
	if err != nil {
		t.Fatal(err)
	}
	if got != "distributed_foreground_insert\ttrue" {
		t.Errorf("insert_distributed_sync on current ClickHouse: %q", got)
	}
}
