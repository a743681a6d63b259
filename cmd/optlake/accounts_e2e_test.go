package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/venuesim"
)

// Account payloads that change over time (a field added at tick 4, numbers
// turning into strings at tick 6) load into ClickHouse and Parquet without a
// failed run and without losing a value.
// (A listing of 300 instruments: its size proves nothing about the
// account tables.)
func TestAccountsEvolveEndToEnd(t *testing.T) {
	t.Parallel()
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	sim, url := startSim(t, venuesim.Config{Seed: 12, Instruments: 300, Faults: venuesim.Faults{SchemaDrift: true}})
	dir := t.TempDir()
	args := []string{"run", "--api-url", url, "--data-dir", dir, "--sink", "parquet", "--sink", "clickhouse",
		"--clickhouse-dsn", c.DSN(db), "--migrate",
		"--account", "main", "--account-header", "main:X-Account: main", "--account-header", "alt:X-Account: alt"}
	const ticks = 7
	for i := 0; i < ticks; i++ {
		if i > 0 {
			sim.Advance(1) // no pause: snapshot_ms keeps the snapshots apart on 18.16
		}
		res := optlake(t, args...)
		if res.code != 0 {
			t.Fatalf("tick %d: exit %d\n%s", sim.Tick(), res.code, res.stderr)
		}
	}

	// The field that appeared at tick 4 is a column; earlier rows are null.
	got := chQuery(t, c, db, "SELECT count(), countIf(portfolio_margin IS NULL), uniqExact(account), uniqExact(snapshot_time, snapshot_ms) FROM account_summary FINAL")
	if got != fmt.Sprintf("%d\t%d\t2\t%d", 2*ticks, 2*4, ticks) {
		t.Errorf("account_summary (rows, null portfolio_margin, accounts, snapshots) = %q", got)
	}
	// Every Parquet file of the table, read together by name: same rows.
	files := filepath.Join(dir, "account_summary", "*", "*.parquet")
	pq := duckScalar(t, fmt.Sprintf("SELECT count(*) || chr(9) || count(*) FILTER (WHERE portfolio_margin IS NULL) FROM read_parquet('%s', union_by_name = true)", files))
	if pq != fmt.Sprintf("%d\t%d", 2*ticks, 2*4) {
		t.Errorf("parquet account_summary = %q", pq)
	}

	// A type change went to a variant column in both stores, nothing dropped.
	cols := chQuery(t, c, db, fmt.Sprintf("SELECT arrayStringConcat(groupArray(name), ',') FROM system.columns WHERE database = '%s' AND table = 'positions' AND name LIKE 'leverage%%'", db))
	if !strings.Contains(cols, "leverage__v_text") {
		t.Fatalf("positions leverage columns in ClickHouse: %s", cols)
	}
	chPos := chQuery(t, c, db, "SELECT count(), countIf(leverage IS NOT NULL OR leverage__v_text IS NOT NULL) FROM positions FINAL")
	pqPos := duckScalar(t, fmt.Sprintf("SELECT count(*) || chr(9) || count(*) FILTER (WHERE leverage IS NOT NULL OR leverage__v_text IS NOT NULL) FROM read_parquet('%s', union_by_name = true)",
		filepath.Join(dir, "positions", "*", "*.parquet")))
	if chPos != pqPos || strings.HasPrefix(chPos, "0") {
		t.Errorf("positions: clickhouse %q, parquet %q", chPos, pqPos)
	}
	parts := strings.Split(chPos, "\t")
	if parts[0] != parts[1] {
		t.Errorf("positions with no leverage value in either column: %q", chPos)
	}
	// Child tables are linked to their parent rows.
	orphans := chQuery(t, c, db, `SELECT count(), countIf(found = 0) FROM (SELECT snapshot_time, account, parent_index FROM positions_with_mints__mints FINAL)
		ANY LEFT JOIN (SELECT snapshot_time, account, row_index AS parent_index, 1 AS found FROM positions_with_mints FINAL)
		USING (snapshot_time, account, parent_index)`)
	if f := strings.Split(orphans, "\t"); f[0] == "0" || f[1] != "0" {
		t.Errorf("mints, of which without a parent position: %s", orphans)
	}

	// The schema's history is in ClickHouse too: the column, with the
	// snapshot it first appeared in (tick 4, the fifth snapshot).
	first := chQuery(t, c, db, "SELECT toString(first_seen) FROM inferred_columns FINAL WHERE table_name = 'account_summary' AND column_name = 'portfolio_margin'")
	fifth := chQuery(t, c, db, "SELECT toString(snapshot_time) FROM (SELECT DISTINCT snapshot_time, snapshot_ms FROM account_summary FINAL ORDER BY snapshot_time, snapshot_ms LIMIT 1 OFFSET 4)")
	if first == "" || first != fifth {
		t.Errorf("inferred_columns first_seen of portfolio_margin = %q, want the fifth snapshot %q", first, fifth)
	}

	// optlake schema shows the column and when it appeared.
	res := optlake(t, "schema", "--data-dir", dir)
	if res.code != 0 || !strings.Contains(res.stdout, "portfolio_margin") || !strings.Contains(res.stdout, "leverage__v_text") {
		t.Errorf("optlake schema: %d\n%s", res.code, res.stdout)
	}
}

// freeze fails the endpoint whose payload gained a field, naming the field;
// discard-columns loads the known columns only.
func TestSchemaContractModes(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t, venuesim.Config{Seed: 12, Faults: venuesim.Faults{SchemaDrift: true}})
	dir := t.TempDir()
	base := []string{"run", "--api-url", url, "--data-dir", dir, "--endpoints", "account_summary"}
	if res := optlake(t, base...); res.code != 0 {
		t.Fatal(res.stderr)
	}
	sim.Advance(4) // portfolio_margin appears
	res := optlake(t, append(base, "--schema-contract", "freeze")...)
	if res.code != exitFailure || !strings.Contains(lastLine(res.stderr), "portfolio_margin") {
		t.Errorf("freeze: exit %d, %q", res.code, lastLine(res.stderr))
	}
	time.Sleep(5 * time.Millisecond)
	res = optlake(t, append(base, "--schema-contract", "discard-columns")...)
	if res.code != 0 {
		t.Fatalf("discard-columns: %s", res.stderr)
	}
	out := optlake(t, "schema", "--data-dir", dir).stdout
	if strings.Contains(out, "portfolio_margin") {
		t.Errorf("discard-columns added the column:\n%s", out)
	}
	if n := duckScalar(t, fmt.Sprintf("SELECT count(*) FROM read_parquet('%s', union_by_name = true)", filepath.Join(dir, "account_summary", "*", "*.parquet"))); n != "2" {
		t.Errorf("account_summary rows = %s, want 2 (one per loaded snapshot)", n)
	}
}
