package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/pipeline/archive"
	"github.com/optlake/optlake/venuesim"
)

// rawBodies runs n snapshots of the simulator into a new data directory
// and returns it with the archived instrument bodies, oldest first.
func rawBodies(t *testing.T, n int) (string, []string) {
	t.Helper()
	sim, url := startSim(t, venuesim.Config{Seed: 4, Instruments: 100})
	dir := t.TempDir()
	for i := range n {
		if i > 0 {
			sim.Advance(1)
		}
		if res := optlake(t, "run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments"); res.code != 0 {
			t.Fatalf("run %d: %s", i, res.stderr)
		}
	}
	bodies, _ := filepath.Glob(filepath.Join(dir, "raw", "instruments", "*", "*.json.zst"))
	sort.Strings(bodies)
	if len(bodies) != n {
		t.Fatalf("raw bodies: %v", bodies)
	}
	return dir, bodies
}

// oldMeta rewrites the sidecar of body as archives wrote it before
// object_sha256: the decompressed body's sha256 only.
func oldMeta(t *testing.T, dir, body string) {
	t.Helper()
	metaPath := archive.MetaPath(body)
	b, err := os.ReadFile(metaPath)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(dir, body)
	rc, err := archive.Open(dir, rel)
	if err != nil {
		t.Fatal(err)
	}
	var plain bytes.Buffer
	_, err = plain.ReadFrom(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(plain.Bytes())
	delete(m, "object_sha256")
	m["sha256"] = hex.EncodeToString(sum[:])
	if b, err = json.MarshalIndent(m, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(metaPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// tamperings change a stored object after it was written: a flipped byte,
// and another snapshot's object (valid zstd: only the hash tells).
var tamperings = []struct {
	name   string
	tamper func(t *testing.T, bodies []string, i int)
}{
	{"one byte flipped", func(t *testing.T, bodies []string, i int) {
		b, err := os.ReadFile(bodies[i])
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 1
		if err := os.WriteFile(bodies[i], b, 0o644); err != nil {
			t.Fatal(err)
		}
	}},
	{"another valid object", func(t *testing.T, bodies []string, i int) {
		b, err := os.ReadFile(bodies[i-1])
		if err != nil {
			t.Fatal(err)
		}
		if old, _ := os.ReadFile(bodies[i]); bytes.Equal(old, b) {
			t.Fatalf("%s and %s are the same object", bodies[i-1], bodies[i])
		}
		if err := os.WriteFile(bodies[i], b, 0o644); err != nil {
			t.Fatal(err)
		}
	}},
}

// Replay verifies each stored object against its meta.json before
// decoding it: a changed one fails its snapshot, named, with exit 3, and
// the others load. An archive written before object_sha256 still replays.
func TestReplayVerifiesObjectHash(t *testing.T) {
	t.Parallel()
	for _, tc := range tamperings {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, bodies := rawBodies(t, 3)
			tc.tamper(t, bodies, 1)
			os.RemoveAll(filepath.Join(dir, "instruments"))
			res := optlake(t, "replay", "--data-dir", dir, "--endpoints", "instruments")
			if res.code != exitPartial || !strings.Contains(res.stdout, "replayed 3 snapshots") || !strings.Contains(res.stdout, "1 failed") {
				t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
			}
			if !strings.Contains(res.stdout, filepath.Base(bodies[1])+": ") || !strings.Contains(res.stdout, "object_sha256") {
				t.Errorf("the summary does not name the changed object and its hash:\n%s", res.stdout)
			}
			if got := lakeCounts(t, dir, "instruments", "instrument_name"); len(got) != 2 {
				t.Errorf("snapshots in the lake: %v, want the two unchanged ones", got)
			}
		})
	}
	t.Run("written before object_sha256", func(t *testing.T) {
		t.Parallel()
		dir, bodies := rawBodies(t, 2)
		want := lakeCounts(t, dir, "instruments", "instrument_name")
		for _, b := range bodies {
			oldMeta(t, dir, b)
		}
		os.RemoveAll(filepath.Join(dir, "instruments"))
		res := optlake(t, "replay", "--data-dir", dir, "--endpoints", "instruments")
		if res.code != 0 || !strings.Contains(res.stdout, "replayed 2 snapshots") {
			t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
		}
		if got := lakeCounts(t, dir, "instruments", "instrument_name"); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("lake after replay: %v, want %v", got, want)
		}
	})
}

// Catch-up verifies the stored object too: a snapshot whose object was
// replaced by another valid one is marked failed, the others load.
func TestCatchUpVerifiesObjectHash(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	clk := pinClock(base)
	sim, url := startSim(t, venuesim.Config{Seed: 6, Instruments: 100})
	dir := t.TempDir()
	args := []string{"run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments"}
	repair := blockParquet(t, dir)
	missSnapshots(t, 3, clk, sim, args...)
	repair()
	bodies, _ := filepath.Glob(filepath.Join(dir, "raw", "instruments", "*", "*.json.zst"))
	sort.Strings(bodies)
	if len(bodies) != 3 {
		t.Fatalf("raw bodies: %v", bodies)
	}
	tamperings[1].tamper(t, bodies, 1)
	res := clk.optlake(t, args...)
	if res.code != 0 || !strings.Contains(res.stdout, "caught up 2 of 3 snapshots") {
		t.Fatalf("catch-up with a changed object: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	st := statusJSON(t, dir)["parquet"]
	if len(st.Failed) != 1 || !st.Failed[0].SnapshotTime.Equal(base.Add(time.Minute)) || !strings.Contains(st.Failed[0].Reason, "object_sha256") {
		t.Fatalf("status: %+v", st)
	}
	if got := lakeCounts(t, dir, "instruments", "instrument_name"); len(got) != 3 || slicesContain(got, fmt.Sprint(base.Add(time.Minute).UnixMilli())) {
		t.Errorf("lake: %v, want the 3 snapshots other than the changed one", got)
	}
}

func slicesContain(s []string, prefix string) bool {
	for _, v := range s {
		if strings.HasPrefix(v, prefix+":") {
			return true
		}
	}
	return false
}
