package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// `make demo` runs `optlake demo`: a few snapshots of the simulated venue
// into a Parquet lake, then commands to try on it, which work as printed.
func TestDemo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res := optlake(t, "demo", "--data-dir", dir, "--interval", "10ms", "--snapshots", "3")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if strings.Count(res.stdout, " ok in ") != 3 || !strings.Contains(res.stdout, "Try next:") {
		t.Errorf("demo output:\n%s", res.stdout)
	}
	// The printed DuckDB query works as printed.
	start := strings.Index(res.stdout, "SELECT ")
	end := strings.Index(res.stdout[max(start, 0):], ";")
	if start < 0 || end < 0 {
		t.Fatalf("no query in the output:\n%s", res.stdout)
	}
	if r := duckScalar(t, "SELECT count(*) FROM ("+res.stdout[start:start+end]+")"); r == "0" {
		t.Errorf("the demo query returned nothing")
	}
	// So do the printed commands, and the instrument named has events.
	var cmds []string
	for _, line := range strings.Split(res.stdout, "\n") {
		line, _, _ = strings.Cut(strings.TrimSpace(line), "#")
		args := strings.Fields(line)
		if len(args) > 1 && (args[0] == "optlake" || args[0] == "bin/optlake") {
			cmds = append(cmds, args[1])
			r := optlake(t, args[1:]...)
			if r.code != 0 || strings.TrimSpace(r.stdout) == "" {
				t.Errorf("%s: exit %d, stdout %q, stderr %s", line, r.code, r.stdout, r.stderr)
			}
			if args[1] == "history" && strings.Contains(r.stdout, "— 0 events") {
				t.Errorf("%s: the demo names an instrument with no events:\n%s", line, r.stdout)
			}
		}
	}
	if strings.Join(cmds, " ") != "history status schema" {
		t.Errorf("the demo suggests %v, want history, status, schema", cmds)
	}
	if got := duckScalar(t, fmt.Sprintf("SELECT count(DISTINCT snapshot_time) FROM read_parquet('%s')", filepath.Join(dir, "instruments", "*", "*.parquet"))); got != "3" {
		t.Errorf("snapshots = %s", got)
	}
	if got := duckScalar(t, fmt.Sprintf("SELECT count(*) > 0 FROM read_parquet('%s') WHERE NOT initial", filepath.Join(dir, "instrument_events", "*", "*.parquet"))); got != "true" {
		t.Errorf("no events after the first snapshot")
	}
}

// A second demo into the same lake continues the simulated history: its
// events are exactly those of one demo taking all the snapshots, with no
// false "activated" (a restart at the first tick would undo every flip).
func TestDemoTwiceContinues(t *testing.T) {
	t.Parallel()
	twice, once := t.TempDir(), t.TempDir()
	for i := 0; i < 2; i++ {
		res := optlake(t, "demo", "--data-dir", twice, "--interval", "10ms", "--snapshots", "3", "--instruments", "600")
		if res.code != 0 {
			t.Fatalf("demo %d: exit %d: %s", i+1, res.code, res.stderr)
		}
		if i == 1 && !strings.Contains(res.stdout, "continuing the simulated history") {
			t.Errorf("the second demo does not say it continues:\n%s", res.stdout)
		}
	}
	if res := optlake(t, "demo", "--data-dir", once, "--interval", "10ms", "--snapshots", "6", "--instruments", "600"); res.code != 0 {
		t.Fatalf("demo of 6: exit %d: %s", res.code, res.stderr)
	}
	events := func(dir string) string {
		r := duckScalar(t, fmt.Sprintf(`SELECT string_agg(concat_ws(' ', instrument_name, event, field, old_value, new_value), '; ' ORDER BY instrument_name, event, field, old_value)
			FROM read_parquet('%s') WHERE NOT initial`, filepath.Join(dir, "instrument_events", "*", "*.parquet")))
		return r
	}
	got, want := events(twice), events(once)
	if got != want || want == "" {
		t.Errorf("events of two demos of 3 differ from one demo of 6:\n two: %.600s\n one: %.600s", got, want)
	}
	// Another venue into that lake is refused, not mixed in.
	if res := optlake(t, "demo", "--data-dir", twice, "--seed", "2", "--interval", "10ms", "--instruments", "600"); res.code != 2 || !strings.Contains(res.stderr, "--seed 1") {
		t.Errorf("demo --seed 2 into a seed-1 lake: exit %d: %s", res.code, res.stderr)
	}
}
