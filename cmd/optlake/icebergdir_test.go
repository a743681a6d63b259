package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/venuesim"
)

// An Iceberg lake made with a relative --data-dir (the default ./data)
// opens from another folder by its absolute path, and ClickHouse reads it
// there; a copy of it is refused with a message that says what happened
// and what to run, and after `lake convert --to iceberg` the copy is a
// lake of its own. Not parallel: it changes the working directory.
func TestIcebergRelativeDataDir(t *testing.T) {
	ch := testenv.NewChDB(t) // finds the module before the working directory changes
	sim, url := startSim(t, venuesim.Config{Seed: 45})
	top := t.TempDir()
	t.Chdir(top)
	args := func(dir string) []string {
		return []string{"run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments"}
	}
	if res := optlake(t, append(args("./data"), "--table-format", "iceberg")...); res.code != 0 {
		t.Fatalf("first run: exit %d\n%s", res.code, res.stderr)
	}
	dir := filepath.Join(top, "data")
	t.Chdir(t.TempDir())
	sim.Advance(1)
	if res := optlake(t, args(dir)...); res.code != 0 {
		t.Fatalf("a run by the absolute path from another folder: exit %d\n%s", res.code, lastLine(res.stderr))
	}
	ch.Workdir = top
	if n, err := ch.Query(context.Background(), "SELECT uniqExact(snapshot_time) FROM icebergLocal('data/instruments') FORMAT TSV;"); err != nil || n != "2" {
		t.Errorf("ClickHouse from the folder above: %q snapshots, want 2 (%v)", n, err)
	}

	cp := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", dir, cp).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	sim.Advance(1)
	res := optlake(t, args(cp)...)
	if res.code == 0 || !strings.Contains(res.stderr, "copied or moved") || !strings.Contains(res.stderr, "optlake lake convert --to iceberg") {
		t.Fatalf("a run on a copy: exit %d, %q; want a failure saying the lake moved and what to run", res.code, lastLine(res.stderr))
	}
	if res := optlake(t, "lake", "convert", "--to", "iceberg", "--data-dir", cp); res.code != 0 || !strings.Contains(res.stdout, "registered at") {
		t.Fatalf("lake convert on the copy: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if res := optlake(t, args(cp)...); res.code != 0 {
		t.Fatalf("a run on the converted copy: exit %d\n%s", res.code, lastLine(res.stderr))
	}
	// The two of the original, the refused run's (caught up: refused is
	// not lost) and the last run's.
	ch.Workdir = cp
	if n, err := ch.Query(context.Background(), "SELECT uniqExact(snapshot_time) FROM icebergLocal('instruments') FORMAT TSV;"); err != nil || n != "4" {
		t.Errorf("ClickHouse on the copy: %q snapshots, want 4 (%v)", n, err)
	}
	if res := optlake(t, "lake", "convert", "--to", "iceberg", "--data-dir", dir); res.code != 0 || !strings.Contains(res.stdout, "nothing to convert") {
		t.Errorf("lake convert on the original: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}
