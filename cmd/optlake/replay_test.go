package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/venuesim"
)

// lakeDigest summarises everything the tables hold, for before/after
// comparisons (DuckDB reads the files).
func lakeDigest(t *testing.T, dir string) string {
	t.Helper()
	// One DuckDB process for the three tables (a process per table before).
	glob := func(table string) string { return filepath.Join(dir, table, "*", "*.parquet") }
	return duckScalar(t, fmt.Sprintf(`SELECT 'instruments ' || coalesce((SELECT count(*) || '/' || sum(hash(instrument_name, snapshot_time, run_id, index_price, index_price_raw, is_active, strike, expiration_time, extra))
		FROM read_parquet('%s')), '<nil>')
		|| ' events ' || coalesce((SELECT count(*) || '/' || sum(hash(instrument_name, event, field, old_value, new_value, snapshot_time, previous_snapshot_time, run_id, initial))
		FROM read_parquet('%s')), '<nil>')
		|| ' rejects ' || coalesce((SELECT count(*) || '/' || sum(hash(reason, raw, row_index)) FROM read_parquet('%s')), '<nil>')`, glob("instruments"), glob("instrument_events"), glob("rejects")))
}

func files(t *testing.T, dir string, tables ...string) []string {
	var out []string
	for _, tb := range tables {
		f, _ := filepath.Glob(filepath.Join(dir, tb, "*", "*.parquet"))
		for _, p := range f {
			out = append(out, strings.TrimPrefix(p, dir))
		}
	}
	return out
}

// dayFiles lists the files (one line each) with a compacted file's name
// as "compacted" (every file's, when compacted is set: the day's layout
// once compacted).
func dayFiles(names []string, compacted bool) string {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		base := filepath.Base(n)
		if compacted || pq.IsCompacted(base) {
			base = "compacted"
		}
		if l := filepath.Dir(n) + "/" + base; !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Replay rebuilds the same rows and events from the raw
// archive; replaying twice changes nothing; ClickHouse gets exact counts.
// (A listing of 1,000 instruments: the default 3,000 proved nothing more.)
func TestReplayRebuildsExactly(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t, venuesim.Config{Seed: 8, Instruments: 1000, Faults: venuesim.Faults{WrongTypes: true, IndexPriceVariants: true}})
	dir := t.TempDir()
	for i := 0; i < 3; i++ {
		if i > 0 {
			sim.Advance(1) // no pause: snapshot_ms keeps them apart in 18.16 below
		}
		if res := optlake(t, "run", "--api-url", url, "--data-dir", dir); res.code != 0 {
			t.Fatalf("run %d: %s", i, res.stderr)
		}
	}
	before := lakeDigest(t, dir)
	names := files(t, dir, "instruments", "instrument_events", "rejects")
	// Each table has rows (an empty one's digest is <nil>): there are
	// events and rejects to rebuild.
	if strings.Contains(before, "<nil>") || len(names) < 7 {
		t.Fatalf("lake before: %s, files %v", before, names)
	}
	// Lose every table and the events state; keep only raw/.
	for _, d := range []string{"instruments", "instrument_events", "rejects", "_state"} {
		os.RemoveAll(filepath.Join(dir, d))
	}
	for round := 0; round < 2; round++ {
		res := optlake(t, "replay", "--data-dir", dir)
		if res.code != 0 || !strings.Contains(res.stdout, "replayed 3 snapshots") {
			t.Fatalf("replay %d: exit %d %s %s", round, res.code, res.stdout, res.stderr)
		}
		if after := lakeDigest(t, dir); after != before {
			t.Errorf("replay %d: lake %s, before %s", round, after, before)
		}
		// One file per table and day, sorted: the compacted layout.
		if got, want := dayFiles(files(t, dir, "instruments", "instrument_events", "rejects"), false), dayFiles(names, true); got != want {
			t.Errorf("replay %d files: %s, want one compacted file in each of %s", round, got, want)
		}
	}
	// The state was rebuilt: the next live run continues the events.
	sim.Advance(1)
	if res := optlake(t, "run", "--api-url", url, "--data-dir", dir); res.code != 0 || strings.Contains(res.stdout, " 0 events") {
		t.Errorf("run after replay: %d %s", res.code, res.stdout)
	}

	// Into ClickHouse, twice: exact counts.
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	for round := 0; round < 2; round++ {
		res := optlake(t, "replay", "--data-dir", dir, "--sink", "clickhouse", "--clickhouse-dsn", c.DSN(db), "--migrate")
		if res.code != 0 {
			t.Fatalf("replay into clickhouse: %s %s", res.stdout, res.stderr)
		}
	}
	good := duckScalar(t, fmt.Sprintf("SELECT count(*) FROM read_parquet('%s')", filepath.Join(dir, "instruments", "*", "*.parquet")))
	if got := chQuery(t, c, db, "SELECT count() FROM instruments FINAL"); got != good {
		t.Errorf("clickhouse rows after two replays = %s, want %s", got, good)
	}
	// Three snapshots, at the lake's exact milliseconds.
	chSnaps := chQuery(t, c, db, "SELECT arrayStringConcat(groupArray(toString(ms)), ',') FROM (SELECT DISTINCT toInt64(toUnixTimestamp(snapshot_time)) * 1000 + snapshot_ms AS ms FROM instruments FINAL ORDER BY ms)")
	pqSnaps := duckScalar(t, fmt.Sprintf("SELECT string_agg(ms::VARCHAR, ',' ORDER BY ms) FROM (SELECT DISTINCT epoch_ms(snapshot_time) AS ms FROM read_parquet('%s'))", filepath.Join(dir, "instruments", "*", "*.parquet")))
	if strings.Count(pqSnaps, ",") != 3 || chSnaps != pqSnaps {
		t.Errorf("snapshots in clickhouse %s, in the lake %s (want the 4 of them in both)", chSnaps, pqSnaps)
	}
}

// A corrupt raw file is reported and skipped; the rest replays.
func TestReplaySkipsCorruptFiles(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t, venuesim.Config{Seed: 2})
	dir := t.TempDir()
	for i := 0; i < 2; i++ {
		sim.Advance(i)
		if res := optlake(t, "run", "--api-url", url, "--data-dir", dir); res.code != 0 {
			t.Fatal(res.stderr)
		}
	}
	bodies, _ := filepath.Glob(filepath.Join(dir, "raw", "instruments", "*", "*.json.zst"))
	if len(bodies) != 2 {
		t.Fatalf("bodies: %v", bodies)
	}
	fi, _ := os.Stat(bodies[0])
	if err := os.Truncate(bodies[0], fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	// And a body whose run died before its metadata was written.
	orphan := strings.Replace(bodies[1], "-a1.json.zst", "-a9.json.zst", 1)
	os.WriteFile(orphan, []byte("x"), 0o644)

	os.RemoveAll(filepath.Join(dir, "instruments"))
	res := optlake(t, "replay", "--data-dir", dir)
	if res.code != exitPartial || !strings.Contains(res.stdout, "replayed 2 snapshots") || !strings.Contains(res.stdout, "1 failed, 2 files skipped") {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stdout, filepath.Base(bodies[0])) || !strings.Contains(res.stdout, "no metadata") {
		t.Errorf("summary does not name the skipped files:\n%s", res.stdout)
	}
	if got := files(t, dir, "instruments"); len(got) != 1 {
		t.Errorf("instrument files after replay: %v", got)
	}
}
