package main

import (
	"testing"
	"time"

	"github.com/optlake/optlake/venuesim"
)

// A catch-up bounded by --catch-up-max stops before the listing of a run
// killed before it saved its events state: that listing is caught up all
// the same (the run's own listing is compared with it), so the lake's
// events are exactly those of uninterrupted runs, none twice. The backlog
// is a snapshot missed while the lake was unwritable, then the killed run
// (its catch-up stopped at once by a 1ns budget, killed after its own
// listing's commit).
func TestCatchUpBoundedBeforeKilledListing(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 23, 16, 0, 0, 0, time.UTC)
	lake := func(t *testing.T, fault bool) string {
		clk := pinClock(base)
		sim, url := startSim(t, venuesim.Config{Seed: 12, Instruments: 400})
		dir := t.TempDir()
		args := []string{"run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments", "--source", "sim"}
		var repair func()
		for i := range 5 {
			a, want := args, 0
			switch {
			case fault && i == 1:
				repair = blockParquet(t, dir)
				want = exitPartial
			case fault && i == 2:
				repair()
				cmd, _, stderr := startCLIEnv(t, []string{loadCrashEnv + "=committed", clk.env()}, append(a, "--catch-up-budget", "1ns")...)
				if err := cmd.Wait(); exitCode(err) != -1 {
					t.Fatalf("run 2 was not killed at the hook: %v\n%s", err, stderr)
				}
				sim.Advance(1)
				clk.next()
				continue
			case fault && i == 3:
				a = append(a, "--catch-up-max", "1")
			}
			res := clk.optlake(t, a...)
			if res.code != want && !(fault && i == 3 && res.code == exitPartial) { // the bound may leave loads for run 4
				t.Fatalf("run %d: exit %d, want %d\n%s\n%s", i, res.code, want, res.stdout, res.stderr)
			}
			sim.Advance(1)
			clk.next()
		}
		return dir
	}
	ref, got := lake(t, false), lake(t, true)
	lakes := lakesEvents(t, map[string]string{"reference": ref, "fault": got})
	if len(lakes["reference"].events) < 401 {
		t.Fatalf("reference: %d events", len(lakes["reference"].events))
	}
	sameEvents(t, "after a bounded catch-up", lakes["fault"], lakes["reference"])
}
