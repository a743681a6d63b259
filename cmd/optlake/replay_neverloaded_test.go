package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// One rule for what a killed run leaves in the archive, a listing in one
// body or in pages alike: a request its run never archived whole (a body
// left without its metadata; a paginated request without its last page)
// never loaded, so `replay` of the archive alone lists it as never loaded
// and exits 0 with every other snapshot rebuilt; over the lake whose
// ledger says a sink committed it, the same archive is a real problem
// (exit 3).
func TestReplayNeverLoadedOneRule(t *testing.T) {
	t.Parallel()
	for _, shape := range durableShapes[:2] {
		t.Run(shape.name, func(t *testing.T) {
			t.Parallel()
			base := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
			clk := pinClock(base)
			sim, url := startSim(t, shape.sim)
			dir := t.TempDir()
			args := shape.args(t, url, dir)
			for i := range 3 {
				if res := clk.optlake(t, args...); res.code != 0 {
					t.Fatalf("run %d: exit %d\n%s", i, res.code, res.stderr)
				}
				sim.Advance(1)
				clk.next()
			}
			// The last snapshot as its run would have left it, killed:
			// the body's metadata not written, or the last page not
			// fetched.
			last := base.Add(2 * time.Minute)
			bodies, _ := filepath.Glob(filepath.Join(dir, "raw", shape.endpoint, "*", last.Format("20060102T150405")+"*.json.zst"))
			if len(bodies) == 0 {
				t.Fatalf("no archived body of %s", last)
			}
			slices.Sort(bodies)
			cut := bodies[len(bodies)-1]
			meta := strings.TrimSuffix(cut, ".json.zst") + ".meta.json"
			if err := os.Remove(meta); err != nil {
				t.Fatal(err)
			}
			if len(bodies) > 1 { // paged: the last page is not there at all
				if err := os.Remove(cut); err != nil {
					t.Fatal(err)
				}
			}
			want := soakRows(t, dir, shape.tables)
			for tb, rows := range want {
				want[tb] = slices.DeleteFunc(rows, func(r string) bool { return strings.Contains(r, last.Format("2006-01-02T15:04:05")) })
			}

			rep := t.TempDir()
			if err := os.CopyFS(filepath.Join(rep, "raw"), os.DirFS(filepath.Join(dir, "raw"))); err != nil {
				t.Fatal(err)
			}
			res := optlake(t, "replay", "--data-dir", rep, "--endpoints", shape.endpoint)
			if res.code != 0 || !strings.Contains(res.stdout, "never loaded") || !strings.Contains(res.stdout, "0 failed, 0 files skipped") {
				t.Fatalf("replay of the archive: exit %d, want 0 with the snapshot listed as never loaded\n%s\n%s", res.code, res.stdout, lastLine(res.stderr))
			}
			sameRows(t, "replay", soakRows(t, rep, shape.tables), want)

			// The lake's ledger says the snapshot loaded: now it is lost.
			for _, tb := range shape.tables {
				os.RemoveAll(filepath.Join(dir, tb))
			}
			if res := optlake(t, "replay", "--data-dir", dir, "--endpoints", shape.endpoint); res.code != exitPartial {
				t.Fatalf("replay over the lake whose ledger has the snapshot committed: exit %d, want %d\n%s", res.code, exitPartial, res.stdout)
			}
		})
	}
}
