package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/lake"
	"github.com/optlake/optlake/venuesim"
)

// An Iceberg lake through `optlake run`: the format chosen at the first run
// is kept by the later runs (no flag), the other format is refused (exit
// 2), compaction is refused, and ClickHouse 26.7 (chDB, icebergLocal) reads
// every table with the rows of its Parquet files; the account field that
// appears at tick 4 reads back null in the earlier snapshots.
func TestIcebergLakeEndToEnd(t *testing.T) {
	sim, url := startSim(t, venuesim.Config{Seed: 12, Faults: venuesim.Faults{SchemaDrift: true}})
	dir := t.TempDir()
	args := []string{"run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments,account_summary",
		"--account", "main", "--account-header", "main:X-Account: main"}
	const ticks = 6
	for i := range ticks {
		a := args
		if i == 0 {
			a = append(a, "--table-format", "iceberg")
		} else {
			sim.Advance(1)
		}
		if res := optlake(t, a...); res.code != 0 {
			t.Fatalf("tick %d: exit %d\n%s", i, res.code, res.stderr)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, lake.FormatName)); err != nil || strings.TrimSpace(string(b)) != "iceberg" {
		t.Fatalf("recorded format: %q %v", b, err)
	}
	res := optlake(t, append(args, "--table-format", "parquet")...)
	if res.code != exitUsage || !strings.Contains(res.stderr, "is iceberg") {
		t.Errorf("--table-format parquet on an Iceberg lake: exit %d, %q", res.code, lastLine(res.stderr))
	}
	if res := optlake(t, "compact", "--data-dir", dir); res.code != exitUsage {
		t.Errorf("compact of an Iceberg lake: exit %d, %q", res.code, lastLine(res.stderr))
	}

	ch := testenv.NewChDB(t)
	ch.Workdir = dir
	q := func(sql string) string {
		t.Helper()
		out, err := ch.Query(context.Background(), sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return out
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "*", "metadata", "v1.metadata.json"))
	if len(tables) < 4 { // instruments, instrument_events, runs, account_summary, …
		t.Fatalf("Iceberg tables: %v", tables)
	}
	for _, md := range tables {
		name := filepath.Base(filepath.Dir(filepath.Dir(md)))
		ice, files, err := ch.IcebergDigest(context.Background(), name, "")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ice != files || strings.HasPrefix(ice, "0\t") {
			t.Errorf("%s: icebergLocal %s, Parquet files %s", name, ice, files)
		}
	}
	if got := q("SELECT count(), countIf(portfolio_margin IS NULL), uniqExact(snapshot_time) FROM icebergLocal('account_summary') FORMAT TSV;"); got != fmt.Sprintf("%d\t4\t%d", ticks, ticks) {
		t.Errorf("account_summary (rows, null portfolio_margin, snapshots) = %q", got)
	}
}
