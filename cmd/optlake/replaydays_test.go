package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/venuesim"
)

// kill -9 during a replay's publish of a day (the new file written, the
// journal written, the folders swapped, the old files retired): readers
// see every row exactly once right after the crash, and the next replay
// recovers the publish and writes the day compacted, rows unchanged.
func TestReplayKill9MidPublish(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	_, clk := buildLake(t, base, 3)
	want := lakeRows(t, base)
	for _, step := range []string{"written", "journal", "swap", "retire"} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "data")
			if out, err := exec.Command("cp", "-a", base, dir).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v %s", err, out)
			}
			args := []string{"replay", "--data-dir", dir, "--endpoints", "instruments"}
			cmd := exec.Command(os.Args[0], args...)
			cmd.Env = append(os.Environ(), "OPTLAKE_TEST_AS_CLI=1", crashEnv+"="+step)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || !strings.Contains(ee.Error(), "killed") {
				t.Fatalf("replay did not die at %s: %v\n%s", step, err, out)
			}
			sameLake(t, "right after the crash", lakeRows(t, dir), want)
			if res := clk.optlake(t, args...); res.code != 0 {
				t.Fatalf("replay after the crash: exit %d\n%s%s", res.code, res.stdout, res.stderr)
			}
			for _, table := range []string{"instruments", "instrument_events"} {
				part := filepath.Join(dir, table, "date="+compactDay.Format("2006-01-02"))
				ents, _ := os.ReadDir(part)
				if len(ents) != 1 || !strings.HasPrefix(ents[0].Name(), "compacted-") {
					t.Fatalf("%s after the second replay: %d files (%v), want one compacted", part, len(ents), ents)
				}
			}
			for _, sub := range []string{"journal", "stage", "tmp", "pending"} {
				filepath.WalkDir(filepath.Join(dir, ".compact", sub), func(p string, d os.DirEntry, err error) error {
					if err == nil && !d.IsDir() {
						t.Errorf("replay left %s", p)
					}
					return nil
				})
			}
			sameLake(t, "after the next replay", lakeRows(t, dir), want)
		})
	}
}

// The Parquet sink misses two snapshots (its folder unwritable); a replay
// while it is still unwritable cannot write their day: the ledger keeps
// them pending (not loaded), so the next run, the folder repaired, loads
// them from the raw archive: every snapshot's rows exactly once, as
// without the fault.
func TestReplayDayNotWrittenStaysPending(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	run := func(t *testing.T, fault bool) (rows, events []string) {
		clk := pinClock(base)
		sim, url := startSim(t, venuesim.Config{Seed: 4, Instruments: 200})
		dir := t.TempDir()
		args := []string{"--data-dir", dir, "--endpoints", "instruments"}
		var repair func()
		if fault {
			repair = blockParquet(t, dir)
		}
		for i := 0; i < 3; i++ {
			if i == 2 && fault {
				res := clk.optlake(t, append([]string{"replay"}, args...)...)
				if res.code == 0 || !strings.Contains(res.stderr+res.stdout, "not written") {
					t.Fatalf("replay into the unwritable lake: exit %d\n%s%s", res.code, res.stdout, res.stderr)
				}
				if st := statusJSON(t, dir)["parquet"]; st.Pending != 2 || !strings.Contains(st.LastError, "not written") {
					t.Fatalf("after a replay whose day was not written the ledger says %+v, want both snapshots pending", st)
				}
				repair()
			}
			res := clk.optlake(t, append([]string{"run", "--api-url", url, "--source", "sim"}, args...)...)
			want := 0
			if fault && i < 2 {
				want = exitPartial
			}
			if res.code != want {
				t.Fatalf("run %d: exit %d, want %d: %s", i, res.code, want, res.stderr)
			}
			if fault && i == 2 && !strings.Contains(res.stdout, "caught up 2 of 2 snapshots") {
				t.Errorf("run after the failed replay did not catch the day up: %s", res.stdout)
			}
			sim.Advance(1)
			clk.next()
		}
		if st := statusJSON(t, dir)["parquet"]; st.Pending != 0 || len(st.Failed) != 0 {
			t.Errorf("ledger at the end: %+v", st)
		}
		return lakeCounts(t, dir, "instruments", "instrument_name"),
			lakeCounts(t, dir, "instrument_events", "instrument_name || event || coalesce(field, '')")
	}
	wantRows, wantEvents := run(t, false)
	gotRows, gotEvents := run(t, true)
	if len(wantRows) != 3 || strings.Join(gotRows, " ") != strings.Join(wantRows, " ") {
		t.Errorf("instruments per snapshot: got %v, want %v", gotRows, wantRows)
	}
	if len(wantEvents) < 2 || strings.Join(gotEvents, " ") != strings.Join(wantEvents, " ") {
		t.Errorf("instrument_events per snapshot: got %v, want %v", gotEvents, wantEvents)
	}
}

// lowerMemoryLimit only ever lowers the soft limit: a replay into a bucket
// keeps the bucket run's 128 MiB when its day writer asks for compaction's
// 160 MiB (which raised it before). Not parallel: it sets the process's
// limit (the in-process runs of tests leave it alone: testHost).
func TestLowerMemoryLimitNeverRaises(t *testing.T) {
	if os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOMEMLIMIT is set: lowerMemoryLimit leaves the limit alone")
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	debug.SetMemoryLimit(bucketMemoryLimit)
	lowerMemoryLimit(compact.MemoryLimit)
	if got := debug.SetMemoryLimit(-1); got != bucketMemoryLimit {
		t.Errorf("after asking for %d MiB: limit %d MiB, want the lower %d MiB kept", compact.MemoryLimit>>20, got>>20, bucketMemoryLimit>>20)
	}
	lowerMemoryLimit(64 << 20)
	if got := debug.SetMemoryLimit(-1); got != 64<<20 {
		t.Errorf("after asking for 64 MiB: limit %d MiB", got>>20)
	}
}

// A run collects at GOGC=200 (its soft memory limit bounds the heap),
// unless GOGC is set.
func TestRaiseGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	raiseGCPercent()
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("GOGC %d, want %d", got, gcPercent)
	}
	t.Setenv("GOGC", "50")
	raiseGCPercent()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC set: %d, want it left alone (100)", got)
	}
}
