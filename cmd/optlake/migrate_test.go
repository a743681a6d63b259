package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/schema"
)

// migrate --print renders without connecting (the DSN points nowhere), for
// the version asked (the newest known by default), into the DSN's database
// and --cluster's cluster; the password never appears.
func TestMigratePrint(t *testing.T) {
	t.Parallel()
	const dsn = "clickhouse://admin:s3cret-pw@127.0.0.1:1/analytics"
	cases := []struct {
		name string
		args []string
		want []string // in the output
		not  []string // not in the output
	}{
		{"newest by default", []string{"--clickhouse-dsn", dsn},
			[]string{fmt.Sprintf("-- optlake schema version %d for ClickHouse %s\n", schema.LatestVersion(), schema.NewestKnownVersion), "CREATE DATABASE IF NOT EXISTS `analytics`;\n",
				"DateTime64(3, 'UTC')", "ALL INNER JOIN", "DROP TABLE IF EXISTS `analytics`.`instruments_latest`;\n", "VALUES (4, "},
			[]string{"ON CLUSTER", "s3cret-pw"}},
		{"18.16", []string{"--clickhouse-dsn", dsn, "--server-version", "18.16"},
			[]string{"for ClickHouse 18.16\n", "`snapshot_time` DateTime('UTC')", "Nullable(UInt8)"},
			[]string{"DateTime64", "LowCardinality", "Bool"}},
		{"cluster", []string{"--clickhouse-dsn", dsn, "--cluster", "analytics_c", "--server-version", "24.8.4"},
			[]string{", cluster analytics_c\n", "CREATE DATABASE IF NOT EXISTS `analytics` ON CLUSTER `analytics_c`;\n",
				"DROP TABLE IF EXISTS `analytics`.`instruments_latest` ON CLUSTER `analytics_c`;\n", "FROM `analytics`.instruments_local"},
			nil},
		{"no DSN: database default", nil, []string{"CREATE DATABASE IF NOT EXISTS `default`;\n"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := optlake(t, append([]string{"migrate", "--print"}, c.args...)...)
			if res.code != 0 || res.stderr != "" {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(res.stdout, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			for _, n := range c.not {
				if strings.Contains(res.stdout, n) {
					t.Errorf("output has %q", n)
				}
			}
			// Every statement ends with ";" (each is followed by an empty line).
			for _, st := range strings.Split(strings.TrimSpace(res.stdout), "\n\n") {
				if !strings.HasSuffix(st, ";") {
					t.Errorf("statement not ;-terminated: %q", st)
				}
			}
		})
	}
	for _, args := range [][]string{
		{"migrate", "--print", "--server-version", "26"},
		{"migrate", "--print", "--server-version", "17.1"},
		{"migrate", "--print", "--clickhouse-dsn", "http://x/y"},
		{"migrate", "--server-version", "24.8", "--clickhouse-dsn", dsn},
	} {
		if res := optlake(t, args...); res.code != exitUsage || res.stdout != "" || strings.Count(res.stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, res.code, res.stdout, res.stderr)
		}
	}
}

// A DBA who applies the printed DDL with clickhouse-client (twice: it is
// idempotent) gets a database optlake finds up to date.
func TestMigratePrintAppliedByHand(t *testing.T) {
	t.Parallel()
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	v := c.Version()
	res := optlake(t, "migrate", "--print", "--server-version", v, "--clickhouse-dsn", c.DSN(db))
	if res.code != 0 {
		t.Fatalf("print: %s", res.stderr)
	}
	for i := 0; i < 2; i++ {
		if err := c.Exec(context.Background(), res.stdout); err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
	}
	up := optlake(t, "migrate", "--clickhouse-dsn", c.DSN(db))
	if up.code != 0 || !strings.Contains(up.stdout, fmt.Sprintf("is up to date (schema version %d)", schema.LatestVersion())) {
		t.Fatalf("migrate after the printed DDL: %d %s %s", up.code, up.stdout, up.stderr)
	}
	def := chQuery(t, c, db, "SELECT create_table_query FROM system.tables WHERE database = currentDatabase() AND name = 'instruments_latest'")
	if !strings.Contains(def, "ALL INNER JOIN") {
		t.Errorf("instruments_latest: %s", def)
	}
}
