package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// `make demo` runs `optlake demo`: a few snapshots of the simulated venue
// into a Parquet lake, with instructions to query it.
func TestDemo(t *testing.T) {
	dir := t.TempDir()
	res := optlake(t, "demo", "--data-dir", dir, "--interval", "10ms", "--snapshots", "3")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if strings.Count(res.stdout, " ok in ") != 3 || !strings.Contains(res.stdout, "read_parquet(") || !strings.Contains(res.stdout, "pd.read_parquet(") {
		t.Errorf("demo output:\n%s", res.stdout)
	}
	// The printed DuckDB query works as printed.
	start := strings.Index(res.stdout, "SELECT ")
	end := strings.Index(res.stdout[start:], ";")
	if start < 0 || end < 0 {
		t.Fatalf("no query in the output:\n%s", res.stdout)
	}
	r := duckScalar(t, "SELECT count(*) FROM ("+res.stdout[start:start+end]+")")
	if r == "0" {
		t.Errorf("the demo query returned nothing")
	}
	if got := duckScalar(t, fmt.Sprintf("SELECT count(DISTINCT snapshot_time) FROM read_parquet('%s')", filepath.Join(dir, "instruments", "*", "*.parquet"))); got != "3" {
		t.Errorf("snapshots = %s", got)
	}
	if got := duckScalar(t, fmt.Sprintf("SELECT count(*) > 0 FROM read_parquet('%s') WHERE NOT initial", filepath.Join(dir, "instrument_events", "*", "*.parquet"))); got != "true" {
		t.Errorf("no events after the first snapshot")
	}
}
