package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlake/optlake/venuesim"
)

// The binary's build information (internal/buildinfo) is in --version, in
// the run summary (--summary-json, under "optlake") and in the metrics
// (optlake_build_info). The release build's stamping itself is checked on
// the released binary (deploy/image_test.go).
func TestBuildInfoReported(t *testing.T) {
	t.Parallel()
	want := buildInfo()
	if res := optlake(t, "--version"); res.code != 0 || res.stdout != "optlake version "+want.String()+"\n" {
		t.Errorf("--version: exit %d, %q; want %q", res.code, res.stdout, "optlake version "+want.String())
	}

	sim, url := startSim(t, venuesim.Config{Seed: 5})
	sim.Advance(1)
	dir := t.TempDir()
	sumPath, mf := filepath.Join(dir, "summary.json"), filepath.Join(dir, "optlake.prom")
	if res := optlake(t, "run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments",
		"--summary-json", sumPath, "--metrics-file", mf); res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	b, err := os.ReadFile(sumPath)
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Optlake struct {
			Version, Commit, Date string
			GoVersion             string `json:"go_version"`
			Platform              string
		} `json:"optlake"`
		OK        bool              `json:"ok"`
		Endpoints []json.RawMessage `json:"endpoints"`
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	got := sum.Optlake
	if got.Version != want.Version || got.Commit != want.Commit || got.GoVersion != want.GoVersion || got.Platform != want.Platform || got.Version == "" {
		t.Errorf("summary optlake = %+v, want %+v", got, want)
	}
	if !sum.OK || len(sum.Endpoints) != 1 || !strings.HasPrefix(string(b), "{\n  \"optlake\": {") {
		t.Errorf("summary: ok %v, %d endpoints; want the run's summary after the build:\n%s", sum.OK, len(sum.Endpoints), b)
	}

	text, err := os.ReadFile(mf)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"version": want.Version, "revision": want.Commit, "build_date": want.Date, "goversion": want.GoVersion}
	if v := counterValue(t, string(text), "optlake_build_info", labels); v != 1 {
		t.Errorf("optlake_build_info%v = %v, want 1", labels, v)
	}
}
