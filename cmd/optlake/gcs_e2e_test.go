package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/venuesim"
)

// The data directory on a gs:// bucket (fake-gcs-server, through the same
// Cloud Storage client as Google's service): three runs, each taking the
// lease the one before released and comparing with its events state; the
// lake DuckDB reads from the server's folder equals the one a local replay
// of the bucket's raw archive builds; status and history read the URL.
func TestLakeOnGCS(t *testing.T) {
	g := testenv.StartFakeGCS(t, "lake")
	g.SetEmulator(t)
	const url = "gs://lake/hist"
	lake := filepath.Join(g.Dir(), "lake", "hist")
	sim, api := startSim(t, venuesim.Config{Seed: 8, Instruments: 500, Faults: venuesim.Faults{WrongTypes: true, IndexPriceVariants: true}})
	for i := 0; i < 3; i++ {
		if i > 0 {
			sim.Advance(1)
		}
		if res := optlake(t, "run", "--api-url", api, "--data-dir", url, "--endpoints", "instruments"); res.code != 0 {
			t.Fatalf("run %d on gs://: exit %d\n%s%s", i, res.code, res.stdout, res.stderr)
		}
	}
	onBucket := lakeDigest(t, lake)
	if !strings.HasPrefix(onBucket, "instruments ") || strings.Contains(onBucket, "instruments 0/") {
		t.Fatalf("lake on gs://: %s", onBucket)
	}
	local := localReplay(t, lake, onBucket)
	if s := statusJSON(t, url)["parquet"]; s.Pending != 0 || s.LastError != "" {
		t.Errorf("status on gs://: %+v", s)
	}
	sameHistory(t, sim, url, local)
}

// localReplay replays the raw archive of the lake in folder lake (a test
// server keeps a bucket's objects as plain files) into a fresh local data
// directory, checks that its lakeDigest is want, and returns the directory.
func localReplay(t *testing.T, lake, want string) string {
	t.Helper()
	local := t.TempDir()
	if err := os.CopyFS(filepath.Join(local, "raw"), os.DirFS(filepath.Join(lake, "raw"))); err != nil {
		t.Fatal(err)
	}
	if res := optlake(t, "replay", "--data-dir", local); res.code != 0 {
		t.Fatalf("local replay: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if got := lakeDigest(t, local); got != want {
		t.Errorf("local replay of the bucket's archive: %s\nthe bucket's lake: %s", got, want)
	}
	return local
}
