package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/history"
	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/venuesim"
)

// optlake history gives the same timeline from the lake and from ClickHouse,
// and it matches what was loaded.
func TestHistoryCommand(t *testing.T) {
	t.Parallel()
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	sim, url := startSim(t, venuesim.Config{Seed: 9})
	dir := t.TempDir()
	const snaps = 5
	for i := 0; i < snaps; i++ {
		if i > 0 {
			// No pause: snapshots milliseconds apart are distinct in
			// ClickHouse too (snapshot_ms on 18.16).
			sim.Advance(1)
		}
		res := optlake(t, "run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments", "--sink", "parquet", "--sink", "clickhouse", "--clickhouse-dsn", c.DSN(db), "--migrate")
		if res.code != 0 {
			t.Fatal(res.stderr)
		}
	}
	// An instrument with a non-initial event.
	r := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT instrument_name, count(*) FROM read_parquet('%s') WHERE NOT initial GROUP BY ALL ORDER BY 2 DESC, 1 LIMIT 1`,
		filepath.Join(dir, "instrument_events", "*", "*.parquet")))
	if len(r.Rows) != 1 {
		t.Fatal("no instrument with events")
	}
	name := r.Rows[0][0].(string)
	points := duckScalar(t, fmt.Sprintf(`SELECT count(*) FROM read_parquet('%s') WHERE instrument_name = '%s'`, filepath.Join(dir, "instruments", "*", "*.parquet"), name))
	events := duckScalar(t, fmt.Sprintf(`SELECT count(*) FROM read_parquet('%s') WHERE instrument_name = '%s'`, filepath.Join(dir, "instrument_events", "*", "*.parquet"), name))

	var fromLake, fromCH history.Timeline
	res := optlake(t, "history", "--data-dir", dir, "--format", "json", name)
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &fromLake) != nil {
		t.Fatalf("history from the lake: %d %s %s", res.code, res.stdout, res.stderr)
	}
	res = optlake(t, "history", "--clickhouse-dsn", c.DSN(db), "--format", "json", name)
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &fromCH) != nil {
		t.Fatalf("history from clickhouse: %d %s %s", res.code, res.stdout, res.stderr)
	}
	if fmt.Sprint(len(fromLake.Points)) != points || fmt.Sprint(len(fromLake.Events)) != events {
		t.Errorf("lake timeline: %d points, %d events; want %s, %s", len(fromLake.Points), len(fromLake.Events), points, events)
	}
	key := func(tl history.Timeline) string {
		var ks []string
		for _, e := range tl.Events {
			ks = append(ks, fmt.Sprintf("%s|%s|%s|%s|%s", e.Time.Format(time.RFC3339Nano), e.Event, e.Field, fmtPtr(e.Old), fmtPtr(e.New)))
		}
		for _, p := range tl.Points {
			ks = append(ks, fmt.Sprintf("%s|%v|%v", p.Time.Format(time.RFC3339Nano), fmtPtr(p.IndexPrice), fmtPtr(p.IsActive)))
		}
		sort.Strings(ks)
		return strings.Join(ks, "\n")
	}
	if key(fromLake) != key(fromCH) {
		t.Errorf("lake and ClickHouse timelines differ:\n%s\n---\n%s", key(fromLake), key(fromCH))
	}
	// Human and CSV forms.
	if res := optlake(t, "history", "--data-dir", dir, name); res.code != 0 || !strings.Contains(res.stdout, "SNAPSHOT TIME") || !strings.Contains(res.stdout, name) {
		t.Errorf("table output: %s", res.stdout)
	}
	// Flags after the argument are parsed too.
	if res := optlake(t, "history", name, "--data-dir", dir, "--format", "csv"); res.code != 0 || strings.Count(res.stdout, "\n") != len(fromLake.Points)+len(fromLake.Events)+1 {
		t.Errorf("csv output: %s", res.stdout)
	}
	if res := optlake(t, "history", "--data-dir", dir, "NOPE-1"); res.code != exitFailure || !strings.Contains(res.stderr, "instrument not found: NOPE-1") {
		t.Errorf("unknown instrument: %d %s", res.code, res.stderr)
	}
}

func fmtPtr[T any](p *T) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}
