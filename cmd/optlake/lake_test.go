package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/lake"
)

// `optlake lake convert --to iceberg` on the demo's Parquet lake: refused
// while replays wait parked for a compaction; killed after its first table
// it leaves a lake that is still Parquet, and the rerun converts it; then
// ClickHouse 26.7 (chDB, icebergLocal) reads every table with the rows of
// its Parquet files (count and hash), the counts DuckDB reads from the
// files; no file was rewritten; a third convert commits nothing.
func TestLakeConvert(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if res := optlake(t, "demo", "--data-dir", dir, "--interval", "10ms", "--snapshots", "3", "--instruments", "600"); res.code != 0 {
		t.Fatalf("demo: exit %d: %s", res.code, res.stderr)
	}
	format := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, lake.FormatName))
		return strings.TrimSpace(string(b))
	}
	parquets := func() map[string]os.FileInfo {
		out := map[string]os.FileInfo{}
		names, _ := filepath.Glob(filepath.Join(dir, "*", "date=*", "*.parquet"))
		for _, n := range names {
			fi, err := os.Stat(n)
			if err != nil {
				t.Fatal(err)
			}
			out[n] = fi
		}
		return out
	}
	before := parquets()
	if format() != "parquet" || len(before) < 6 {
		t.Fatalf("demo lake: format %q, %d files", format(), len(before))
	}
	args := []string{"lake", "convert", "--to", "iceberg", "--data-dir", dir}

	// A parked replay (a compacted day's late file) refuses it.
	parked := filepath.Join(dir, ".compact", "pending", "instruments", "date=2026-01-01", "x.parquet")
	if err := os.MkdirAll(filepath.Dir(parked), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(parked, []byte("x"), 0o644)
	if res := optlake(t, args...); res.code == 0 || !strings.Contains(res.stderr, "unfinished compaction") || format() != "parquet" {
		t.Fatalf("convert with a parked file: exit %d, format %q\n%s", res.code, format(), res.stderr)
	}
	os.RemoveAll(filepath.Join(dir, ".compact", "pending"))

	// Killed after its first table: still a Parquet lake.
	cmd, _, errb := startCLIEnv(t, []string{convertCrashEnv + "=inferred_columns"}, args...)
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("convert was not killed at the hook: %v\n%s", err, errb)
	}
	if format() != "parquet" {
		t.Fatalf("format after a killed convert = %q", format())
	}
	if res := optlake(t, "run", "--api-url", "http://127.0.0.1:1", "--data-dir", dir, "--table-format", "iceberg"); res.code != exitUsage {
		t.Errorf("--table-format iceberg after a killed convert: exit %d, want %d (the lake is Parquet)", res.code, exitUsage)
	}

	res := optlake(t, args...)
	if res.code != 0 || format() != "iceberg" || !strings.Contains(res.stdout, "is Iceberg") {
		t.Fatalf("convert: exit %d, format %q\n%s%s", res.code, format(), res.stdout, res.stderr)
	}
	for n, fi := range parquets() {
		if b := before[n]; b == nil || !b.ModTime().Equal(fi.ModTime()) || b.Size() != fi.Size() {
			t.Errorf("%s was written by the conversion", n)
		}
	}

	ch := testenv.NewChDB(t)
	ch.Workdir = dir
	// Each table's digests in two chDB processes, its DuckDB count in one
	// DuckDB process for all (a process per table and reader before).
	tables := icebergTables(t, dir, 5)
	var counts []string
	for _, name := range tables {
		counts = append(counts, fmt.Sprintf("SELECT '%s', count(*) FROM read_parquet('%s', union_by_name=true)", name, filepath.Join(dir, name, "date=*", "*.parquet")))
	}
	duckCounts := map[string]string{}
	for _, r := range testenv.DuckDBQuery(t, strings.Join(counts, "\nUNION ALL\n")).Rows {
		duckCounts[fmt.Sprint(r[0])] = fmt.Sprint(r[1])
	}
	digests := icebergDigests(t, ch, tables, func(table string) string { return fmt.Sprintf("icebergLocal('%s')", table) })
	for i, name := range tables {
		ice, files, duck := digests[2*i+1], digests[2*i], duckCounts[name]
		if ice != files || duck == "" || !strings.HasPrefix(ice, duck+"\t") {
			t.Errorf("%s: icebergLocal %s, Parquet files %s, DuckDB count %s", name, ice, files, duck)
		}
	}

	checkStatusFormat(t, dir)

	// Again: nothing to register, no commit.
	versions, _ := filepath.Glob(filepath.Join(dir, "*", "metadata", "v*.metadata.json"))
	if res := optlake(t, args...); res.code != 0 || !strings.Contains(res.stdout, "Iceberg already") {
		t.Errorf("convert again: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if again, _ := filepath.Glob(filepath.Join(dir, "*", "metadata", "v*.metadata.json")); len(again) != len(versions) {
		t.Errorf("convert again committed: %d metadata versions, was %d", len(again), len(versions))
	}
}
