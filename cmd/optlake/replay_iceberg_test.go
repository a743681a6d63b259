package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/venuesim"
)

// A replay into an Iceberg lake commits each table one day at a time, not
// one snapshot at a time: five snapshots over two days are two commits of
// the instruments table (two metadata versions; each replaces the day's
// files, a delete and an append, so the metadata, which lists every
// snapshot, grows by the days), and the table's rows stay those of the
// runs (each snapshot's new file replaces the one the runs appended).
func TestIcebergReplayCommitsADayAtATime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, url := startSim(t, venuesim.Config{Seed: 21, Instruments: 30})
	clk := pinClock(compactDay) // 23:57
	for i := range 5 {
		if i > 0 {
			clk.next()
		}
		if res := clk.optlake(t, "run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments", "--table-format", "iceberg"); res.code != 0 {
			t.Fatalf("run %d: exit %d\n%s", i, res.code, res.stderr)
		}
	}
	days, _ := filepath.Glob(filepath.Join(dir, "raw", "instruments", "date=*"))
	if len(days) != 2 {
		t.Fatalf("the runs archived %d days, want 2", len(days))
	}
	before := icebergMetadata(t, dir, "instruments")
	if res := clk.optlake(t, "replay", "--data-dir", dir, "--endpoints", "instruments"); res.code != 0 {
		t.Fatalf("replay: exit %d\n%s", res.code, res.stderr)
	}
	after := icebergMetadata(t, dir, "instruments")
	if got := after.version - before.version; got != len(days) {
		t.Errorf("the replay of 5 snapshots over %d days made %d commits, want %d", len(days), got, len(days))
	}
	if got := len(after.Snapshots) - len(before.Snapshots); got > 2*len(days) {
		t.Errorf("the replay of 5 snapshots over %d days added %d Iceberg snapshots, want at most %d", len(days), got, 2*len(days))
	}
	if b, a := before.records(), after.records(); b == 0 || a != b {
		t.Errorf("rows after the replay: %d, want the runs' %d", a, b)
	}
}

// icebergMeta is what the test reads of a table's newest metadata file.
type icebergMeta struct {
	version   int   // N of vN.metadata.json
	Current   int64 `json:"current-snapshot-id"`
	Snapshots []struct {
		ID      int64             `json:"snapshot-id"`
		Summary map[string]string `json:"summary"`
	} `json:"snapshots"`
}

// records is the current snapshot's total-records.
func (m icebergMeta) records() int64 {
	for _, s := range m.Snapshots {
		if s.ID == m.Current {
			n, _ := strconv.ParseInt(s.Summary["total-records"], 10, 64)
			return n
		}
	}
	return 0
}

// icebergMetadata reads table's newest vN.metadata.json in dir.
func icebergMetadata(t *testing.T, dir, table string) icebergMeta {
	t.Helper()
	newest, best, err := iceberg.NewestMetadataFile(filepath.Join(dir, table, "metadata"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(newest)
	if err != nil {
		t.Fatal(err)
	}
	m := icebergMeta{version: best}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", newest, err)
	}
	return m
}
