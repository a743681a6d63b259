package events

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The state of fixtureRows at fixtureTime, as a version 2 build wrote it
// (zstd), is kept in testdata/v2: later builds must still read it.
const fixtureSource = "venue.test:8443"

var fixtureTime = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func fixtureRows() []row {
	var rows []row
	for i := 0; i < 40; i++ {
		r := inst(fmt.Sprintf("BTC-27NOV26-%d-C", 90000+1000*i), "strike", float64(90000+1000*i))
		switch i % 4 {
		case 1:
			r = inst(fmt.Sprintf("BTC-27NOV26-%d-P", 90000+1000*i), "option_type", "put", "is_active", false)
		case 2:
			r = inst(fmt.Sprintf("ETH-28NOV26-%d-C", 3000+10*i), "base_currency", "ETH", "tick_size", nil, "deployed", nil)
		case 3:
			r = inst(fmt.Sprintf("SOL_USDC-%d", i), "kind", "spot", "expiration_time", nil, "min_trade_amount", 0.000125)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestLoadV2Fixture: a version 2 state file (zstd) written by an earlier
// build loads as the same state, a comparison against it gives the same
// events as against the state built from the same rows, and the next state
// is saved as version 3 (S2).
func TestLoadV2Fixture(t *testing.T) {
	dir := t.TempDir()
	path := StatePath(dir, fixtureSource)
	fixture := mustRead(t, StatePath("testdata/v2", fixtureSource))
	if !bytes.HasPrefix(fixture, zstdMagic) || decompress(t, fixture)[len(fileMagic)] != fileVersionV2 {
		t.Fatal("the fixture is not a version 2 (zstd) state file")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, fixture, 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(dir, fixtureSource)
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	_, _, want := diff(t, NewState(fixtureSource), fixtureSource, fixtureTime, fixtureRows(), 0, Options{})
	defer want.Close()
	assertSameState(t, loaded, want)

	next := fixtureRows()[3:]
	next[0] = inst(fmt.Sprintf("%v", next[0]["instrument_name"]), "is_active", false, "tick_size", 0.001)
	got, _, gotState := diff(t, loaded, fixtureSource, fixtureTime.Add(time.Hour), next, 0, Options{TempDir: StateDir(dir)})
	ref, _, _ := diff(t, want, fixtureSource, fixtureTime.Add(time.Hour), next, 0, Options{})
	if d := diffStrings(shorts(got), shorts(ref)); d != "" || len(got) < 4 {
		t.Fatalf("events against the version 2 file (%d):\n%s", len(got), d)
	}
	if err := gotState.Save(dir); err != nil {
		t.Fatal(err)
	}
	gotState.Close()
	saved := mustRead(t, path)
	if bytes.HasPrefix(saved, zstdMagic) || decompress(t, saved)[len(fileMagic)] != fileVersion {
		t.Fatal("the next state was not saved as version 3 (S2)")
	}
	again, err := Load(dir, fixtureSource)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.Len() != len(next) {
		t.Fatalf("reloaded %d instruments, want %d", again.Len(), len(next))
	}
}
