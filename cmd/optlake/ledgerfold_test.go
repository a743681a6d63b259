package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/venuesim"
)

// The first run of a UTC day folds the done records of the days before it
// into one object a day: day 1's two snapshots are one folded object
// holding both, day 2's snapshot stays a single record, and status still
// finds nothing pending.
func TestRunFoldsClosedDaysDoneRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, url := startSim(t, venuesim.Config{Seed: 15, Instruments: 20})
	clk := pinClock(compactDay) // 23:57
	run := func(what string) {
		t.Helper()
		if res := clk.optlake(t, "run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments"); res.code != 0 {
			t.Fatalf("%s: exit %d\n%s", what, res.code, res.stderr)
		}
	}
	run("day 1")
	clk.next()
	run("day 1, later")
	clk.next()
	clk.next() // 00:00 of day 2
	run("day 2")
	done := filepath.Join(dir, ledger.Dir, "done")
	day1, _ := filepath.Glob(filepath.Join(done, "date="+compactDay.Format(time.DateOnly), "*"))
	if len(day1) != 1 || filepath.Base(day1[0]) != "folded.json" {
		t.Fatalf("day 1's done records: %v, want one folded object", day1)
	}
	b, err := os.ReadFile(day1[0])
	if err != nil {
		t.Fatal(err)
	}
	var recs []ledger.Record
	if err := json.Unmarshal(b, &recs); err != nil || len(recs) != 2 || !recs[0].Settled() || !recs[1].Settled() || !recs[0].SnapshotTime.Before(recs[1].SnapshotTime) {
		t.Fatalf("day 1's folded records: %d %v", len(recs), err)
	}
	day2, _ := filepath.Glob(filepath.Join(done, "date="+compactDay.AddDate(0, 0, 1).Format(time.DateOnly), "*"))
	if len(day2) != 1 || filepath.Base(day2[0]) == "folded.json" {
		t.Fatalf("day 2's done records: %v, want its single record", day2)
	}
	if st := statusJSON(t, dir)["parquet"]; st.Pending != 0 || len(st.Failed) != 0 {
		t.Errorf("status: %+v", st)
	}
}
