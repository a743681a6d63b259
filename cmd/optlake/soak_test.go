package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"

	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/events"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// The kill -9 soak's knobs (`make soak` sets them; the test's defaults are
// its short version, part of `make test`).
const (
	soakKillsEnv = "OPTLAKE_SOAK_KILLS" // kills per shape of endpoint
	soakSeedEnv  = "OPTLAKE_SOAK_SEED"  // the kill moments' seed (killAtEnv steps)
)

func envInt(t *testing.T, name string, def int64) int64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

// soakShapes are the runs the soak kills: a listing in one body with an
// account endpoint, and a paginated listing.
var soakShapes = []durableShape{
	{name: "single", endpoint: "instruments,positions", tables: []string{"instruments", "instrument_events", "rejects", "positions"},
		sim: venuesim.Config{Seed: 31, Instruments: 300}},
	{name: "paged", endpoint: "instruments", tables: []string{"instruments", "instrument_events", "rejects"},
		sim:    venuesim.Config{Seed: 32, Instruments: 300, Real: venuesim.RealVenue{Paginate: venuesim.PageCursor, PageSize: 60}},
		config: "endpoints:\n  instruments:\n    records: data\n    pagination: {type: cursor, cursor_path: next_cursor, cursor_param: cursor}\n"},
}

// A kill -9 soak: runs (each a process of its own, its own minute, the
// venue one tick on) killed at moments a seed chooses and reproduces — a
// body or page archived, a sink's file opened, written, about to commit or
// committed, the events about to be compared and saved, an outcome about
// to reach the ledger; each the 1st to 4th time, so in a catch-up too —
// until the shape has had its kills (at most 10 runs a kill), then two
// normal runs. Then:
//   - no instrument is twice in a snapshot, and the lake's rows, instrument
//     events and events state are exactly those of uninterrupted runs of
//     the snapshots that loaded (a snapshot killed before its body was
//     whole never loaded; its changes are the next one's, as live);
//   - `status` has nothing pending, and the snapshots it reports failed
//     are not in the lake;
//   - `replay` of the archive into an empty data directory rebuilds the
//     lake's rows and events.
func TestKill9Soak(t *testing.T) {
	t.Parallel()
	kills := int(envInt(t, soakKillsEnv, 6))
	seed := uint64(envInt(t, soakSeedEnv, 1))
	for i, shape := range soakShapes {
		t.Run(shape.name, func(t *testing.T) {
			t.Parallel()
			t.Logf("seed %d (%s=%d replays these kill moments)", seed, soakSeedEnv, seed)
			soak(t, shape, kills, rand.New(rand.NewPCG(seed, uint64(i))))
		})
	}
}

// soakSteps are the moments the soak kills a run at: the Nth time the
// process reaches one of them (killAtEnv), live or catching up.
var soakSteps = append(append([]string{pipeline.StepArchived}, loadSteps...), pipeline.StepEvents, pipeline.StepSettle)

func soak(t *testing.T, shape durableShape, kills int, rng *rand.Rand) {
	base := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	clk := pinClock(base)
	sim, url := startSim(t, shape.sim)
	dir := t.TempDir()
	args := shape.args(t, url, dir)
	started := time.Now()
	// A run whose chosen moment never comes finishes; the cap bounds the
	// soak all the same.
	maxRuns := 10*kills + 10
	killed, finished, tick := 0, 0, 0
	byStep := map[string]int{} // kills by step
	for killed < kills {
		if tick >= maxRuns {
			t.Fatalf("%d kills in %d runs (the cap): the chosen moments never came", killed, tick)
		}
		tick++
		sim.Advance(1)
		clk.set(base.Add(time.Duration(tick) * time.Minute))
		// The first run is whole; then each run is killed at a step the
		// seed chooses (its 1st to 4th time: a page, a table, a snapshot
		// caught up).
		env := []string{clk.env()}
		step := ""
		if tick > 1 {
			step = fmt.Sprintf("%s:%d", soakSteps[rng.IntN(len(soakSteps))], 1+rng.IntN(4))
			env = append(env, killAtEnv+"="+step)
		}
		cmd, _, stderr := startCLIEnv(t, env, args...)
		code := exitCode(cmd.Wait())
		switch {
		case code == -1:
			killed++
			byStep[step]++
		case tick == 1 && code != 0:
			t.Fatalf("first run: exit %d\n%s", code, stderr)
		case code != 0 && code != exitPartial:
			t.Fatalf("run %d (kill at %s): exit %d\n%s", tick, step, code, stderr)
		default:
			finished++
		}
	}
	for range 2 {
		tick++
		sim.Advance(1)
		clk.set(base.Add(time.Duration(tick) * time.Minute))
		if res := clk.optlake(t, args...); res.code != 0 {
			t.Fatalf("normal run after the kills: exit %d\n%s", res.code, res.stderr)
		}
	}
	soaked := time.Since(started)

	// The snapshots that loaded, and uninterrupted runs of just those.
	loaded := lakeSnapshots(t, dir, []string{"instruments"})
	ref := t.TempDir()
	rsim, rurl := startSim(t, shape.sim)
	rargs := shape.args(t, rurl, ref)
	rclk, at := pinClock(base), 0
	for _, s := range loaded {
		ts, err := time.Parse(storage.TimeLayout, s)
		if err != nil {
			t.Fatal(err)
		}
		n := int(ts.Sub(base) / time.Minute)
		rsim.Advance(n - at)
		at = n
		rclk.set(ts)
		if res := rclk.optlake(t, rargs...); res.code != 0 {
			t.Fatalf("reference run at %s: exit %d\n%s", s, res.code, res.stderr)
		}
	}
	got, want := soakRows(t, dir, shape.tables), soakRows(t, ref, shape.tables)
	// An account endpoint comes after the listing: a run killed between
	// them loaded only the listing.
	for _, tb := range shape.tables[3:] {
		in := lakeSnapshots(t, dir, []string{tb})
		want[tb] = slices.DeleteFunc(want[tb], func(row string) bool {
			var r struct {
				T time.Time `json:"snapshot_time"`
			}
			json.Unmarshal([]byte(row), &r)
			return !slices.Contains(in, r.T.UTC().Format(storage.TimeLayout))
		})
	}
	sameRows(t, "lake after the kills", got, want)
	if g, w := eventsStates(t, dir), eventsStates(t, ref); len(w) == 0 || !maps.Equal(g, w) {
		t.Errorf("events state differs from the uninterrupted runs'")
	}

	// status: nothing pending; what failed never loaded.
	failed := 0
	for sink, st := range statusJSON(t, dir) {
		failed += len(st.Failed)
		if st.Pending != 0 {
			t.Errorf("status: %s has %d pending", sink, st.Pending)
		}
		for _, f := range st.Failed {
			if slices.Contains(lakeSnapshots(t, dir, []string{f.Endpoint}), f.SnapshotTime.UTC().Format(storage.TimeLayout)) {
				t.Errorf("status: %s reports %s %s failed (%s), but it is in the lake", sink, f.SnapshotTime, f.Endpoint, f.Reason)
			}
		}
	}

	// replay of the archive alone rebuilds the lake.
	rep := t.TempDir()
	if err := os.CopyFS(filepath.Join(rep, "raw"), os.DirFS(filepath.Join(dir, "raw"))); err != nil {
		t.Fatal(err)
	}
	replayStart := time.Now()
	res := optlake(t, "replay", "--data-dir", rep, "--endpoints", shape.endpoint)
	// A snapshot its run never archived whole (killed between its pages,
	// or before its body's metadata) never loaded: listed, no problem.
	if res.code != 0 {
		t.Fatalf("replay: exit %d (%d failed load(s) in status)\n%s\n%s", res.code, failed, res.stdout, res.stderr)
	}
	sameRows(t, "replay", soakRows(t, rep, shape.tables), got)
	if res.code != 0 {
		t.Logf("replay: %s", lastLine(res.stderr))
	}
	events := len(got["instrument_events"])
	t.Logf("%s: %d kills (%v), %d runs finished, 2 normal runs, %d snapshots loaded of %d, %d instrument events and %d instruments rows compared with uninterrupted runs; soak %s, replay %s (exit %d)",
		shape.name, killed, byStep, finished, len(loaded), tick+2, events, len(got["instruments"]), soaked.Round(time.Millisecond), time.Since(replayStart).Round(time.Millisecond), res.code)
}

// soakRows are the rows of tables in dir (every partition together), each
// a JSON text without its run id (new in every lake), sorted; a table's
// rows twice over show as repeats.
func soakRows(t *testing.T, dir string, tables []string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, tb := range tables {
		files, _ := filepath.Glob(filepath.Join(dir, tb, "*", "*.parquet"))
		cols := map[string]bool{}
		var rows []map[string]any
		for _, f := range files {
			rows = append(rows, parquetRows(t, f, cols)...)
		}
		for _, r := range rows {
			delete(r, "run_id")
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			out[tb] = append(out[tb], string(b))
		}
		slices.Sort(out[tb])
	}
	return out
}

// sameRows fails unless got and want hold the same rows per table; it
// names the first difference.
func sameRows(t *testing.T, what string, got, want map[string][]string) {
	t.Helper()
	for tb, w := range want {
		g := got[tb]
		if slices.Equal(g, w) {
			continue
		}
		missing, extra := diffSorted(w, g), diffSorted(g, w)
		msg := ""
		if len(missing) > 0 {
			msg += "\n  missing: " + missing[0]
		}
		if len(extra) > 0 {
			msg += "\n  extra (or twice): " + extra[0]
		}
		t.Errorf("%s: %s has %d rows, want %d (%d missing, %d extra)%s", what, tb, len(g), len(w), len(missing), len(extra), msg)
	}
}

// diffSorted returns the rows of a (sorted) not in b (sorted), counting
// repeats.
func diffSorted(a, b []string) []string {
	var out []string
	j := 0
	for _, x := range a {
		for j < len(b) && b[j] < x {
			j++
		}
		if j < len(b) && b[j] == x {
			j++
			continue
		}
		out = append(out, x)
	}
	return out
}

// eventsStates reads the decompressed events state files of dir by name.
func eventsStates(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	files, _ := filepath.Glob(filepath.Join(events.StateDir(dir), "*.state.zst"))
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(s2.NewReader(f))
		f.Close()
		if err != nil {
			t.Fatalf("events state %s: %v", p, err)
		}
		out[filepath.Base(p)] = string(b)
	}
	return out
}
