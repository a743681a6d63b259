package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/pipeline/archive"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// durableShape is one shape of endpoint the durability tests run: a listing
// in one body, a paginated listing, an account endpoint.
type durableShape struct {
	name     string
	endpoint string   // the endpoint loaded
	tables   []string // the data tables its rows go to
	sim      venuesim.Config
	config   string // the config file's text ("": none)
}

var durableShapes = []durableShape{
	{name: "single", endpoint: "instruments", tables: []string{"instruments", "instrument_events", "rejects"},
		sim: venuesim.Config{Seed: 21, Instruments: 300}},
	{name: "paged", endpoint: "instruments", tables: []string{"instruments", "instrument_events", "rejects"},
		sim:    venuesim.Config{Seed: 22, Instruments: 300, Real: venuesim.RealVenue{Paginate: venuesim.PageCursor, PageSize: 100}},
		config: "endpoints:\n  instruments:\n    records: data\n    pagination: {type: cursor, cursor_path: next_cursor, cursor_param: cursor}\n"},
	{name: "account", endpoint: "positions", tables: []string{"positions"},
		sim: venuesim.Config{Seed: 23, Instruments: 300}},
}

// args are the shape's `optlake run` arguments against the simulator at url.
func (s durableShape) args(t *testing.T, url, dir string) []string {
	args := []string{"run", "--api-url", url, "--data-dir", dir, "--source", "sim", "--catch-up-budget", "0"}
	if s.config != "" {
		return append(args, "--config", writeFile(t, t.TempDir(), "c.yaml", s.config))
	}
	return append(args, "--endpoints", s.endpoint)
}

// lakeSnapshots returns the snapshot times (storage.TimeLayout) of the
// Parquet files of tables in dir.
func lakeSnapshots(t *testing.T, dir string, tables []string) []string {
	t.Helper()
	var out []string
	for _, tb := range tables {
		files, _ := filepath.Glob(filepath.Join(dir, tb, "*", "*.parquet"))
		for _, f := range files {
			out = append(out, filepath.Base(f)[:len(storage.TimeLayout)])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// durableTableRows is lakeRowsGo of the named tables only.
func durableTableRows(t *testing.T, dir string, tables []string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for part, rows := range lakeRowsGo(t, dir) {
		if slices.Contains(tables, strings.Split(part, string(filepath.Separator))[0]) {
			out[part] = rows
		}
	}
	return out
}

// A kill -9 at each step of a snapshot's load into the lake (file opened,
// rows written, about to commit, committed), for every shape of endpoint:
// every snapshot the lake holds rows of has its raw body (and meta.json)
// in the archive at that moment; the next run catches up and exits 0
// with nothing pending; and a replay of the archive rebuilds the lake's
// rows, instrument events included, exactly.
func TestLoadKill9RawDurableFirst(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	for _, shape := range durableShapes {
		for _, step := range loadSteps {
			t.Run(shape.name+"/"+step, func(t *testing.T) {
				t.Parallel()
				clk := pinClock(base)
				sim, url := startSim(t, shape.sim)
				dir := t.TempDir()
				args := shape.args(t, url, dir)
				if res := clk.optlake(t, args...); res.code != 0 {
					t.Fatalf("first run: exit %d %s", res.code, res.stderr)
				}
				sim.Advance(1)
				clk.next()
				cmd, _, stderr := startCLIEnv(t, []string{loadCrashEnv + "=" + step, clk.env()}, args...)
				if err := cmd.Wait(); exitCode(err) != -1 {
					t.Fatalf("the run was not killed at the hook: %v\n%s", err, stderr)
				}
				snaps, err := archive.List(dir, []string{shape.endpoint}, time.Time{}, time.Time{})
				if err != nil {
					t.Fatal(err)
				}
				archived := map[string]bool{}
				for _, s := range snaps {
					if len(s.Bodies) > 0 {
						archived[s.Time.Format(storage.TimeLayout)] = true
					}
				}
				for _, s := range lakeSnapshots(t, dir, shape.tables) {
					if !archived[s] {
						t.Errorf("snapshot %s is in the lake but its raw body is not archived whole", s)
					}
				}
				sim.Advance(1)
				clk.next()
				if res := clk.optlake(t, args...); res.code != 0 {
					t.Fatalf("run after the kill: exit %d\n%s", res.code, res.stderr)
				}
				// A body the kill left without its meta.json (the kill
				// came after the body's rename and before its metadata's)
				// never loaded: its load is failed, and it is not in the
				// lake.
				st := statusJSON(t, dir)["parquet"]
				if st.Pending != 0 {
					t.Errorf("status after the kill: %+v", st)
				}
				for _, f := range st.Failed {
					if step == "commit" || step == "committed" || slices.Contains(lakeSnapshots(t, dir, shape.tables), f.SnapshotTime.Format(storage.TimeLayout)) {
						t.Errorf("status after the kill: %s failed (%s)", f.SnapshotTime, f.Reason)
					}
				}
				want := durableTableRows(t, dir, shape.tables)
				for _, tb := range shape.tables {
					if err := os.RemoveAll(filepath.Join(dir, tb)); err != nil {
						t.Fatal(err)
					}
				}
				res := optlake(t, "replay", "--data-dir", dir, "--endpoints", shape.endpoint)
				if res.code != 0 {
					t.Fatalf("replay: exit %d (%d failed in status)\n%s\n%s", res.code, len(st.Failed), res.stdout, res.stderr)
				}
				got := durableTableRows(t, dir, shape.tables)
				if len(got) != len(want) {
					t.Errorf("replay has %d partitions, the lake had %d", len(got), len(want))
				}
				for part, w := range want {
					if g := got[part]; !slices.Equal(g, w) {
						t.Errorf("%s: replay has %d rows, the lake had %d (or they differ)", part, len(g), len(w))
					}
				}
			})
		}
	}
}
