package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/optlake/optlake/venuesim"
)

// cli starts the CLI as a separate process (the test binary re-executed).
func startCLI(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	return startCLIEnv(t, nil, args...)
}

// startCLIEnv is startCLI with env added to the process's environment.
func startCLIEnv(t *testing.T, env []string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "OPTLAKE_TEST_AS_CLI=1"), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, &out, &errb
}

// testNowEnv pins the clock of a CLI process a test starts (RFC 3339; see
// processHost): the process's twin of testClock.
const testNowEnv = "OPTLAKE_TEST_NOW"

// processHost is the host of the test binary run as the CLI (TestMain):
// the process's own, its clock pinned if testNowEnv is set.
func processHost() host {
	v := os.Getenv(testNowEnv)
	if v == "" {
		return host{}
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", testNowEnv, err)
		os.Exit(exitUsage)
	}
	return host{clock: func() time.Time { return at }}
}

// optlakeProcess runs the CLI as a process of its own to its end, env
// added to its environment: for what is the process's own (GOMAXPROCS, the
// heap's limit) and must not change the test binary's.
func optlakeProcess(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd, out, errb := startCLIEnv(t, env, args...)
	code := exitCode(cmd.Wait())
	return result{code, out.String(), errb.String()}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

func snapshotsOnDisk(dir string) []string {
	f, _ := filepath.Glob(filepath.Join(dir, "instruments", "*", "*.parquet"))
	return f
}

// --every 1s for three cycles, then SIGTERM: three snapshots, exit 0,
// nothing partial; meanwhile a second process is refused the data dir.
func TestEverySIGTERMAndLock(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, venuesim.Config{Seed: 3})
	dir := t.TempDir()
	cmd, out, errb := startCLI(t, "run", "--api-url", url, "--data-dir", dir, "--every", "1s")
	waitFor(t, "the first snapshot", func() bool { return len(snapshotsOnDisk(dir)) >= 1 })

	second := optlake(t, "run", "--api-url", url, "--data-dir", dir)
	if second.code != exitLocked || !strings.Contains(lastLine(second.stderr), "is in use by another optlake process (pid ") {
		t.Errorf("second process: exit %d, %q", second.code, second.stderr)
	}

	waitFor(t, "three snapshots", func() bool { return len(snapshotsOnDisk(dir)) >= 3 })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if code := exitCode(err); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, errb.String())
	}
	n := len(snapshotsOnDisk(dir))
	if n < 3 || strings.Count(out.String(), " ok in ") != n {
		t.Errorf("%d snapshots on disk, summary lines:\n%s", n, out.String())
	}
	// Nothing partial: no temp files, every file readable.
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.Contains(fi.Name(), ".tmp-") {
			t.Errorf("temp file left: %s", p)
		}
		return nil
	})
	if got := duckScalar(t, fmt.Sprintf("SELECT count(DISTINCT snapshot_time) FROM read_parquet('%s')", filepath.Join(dir, "instruments", "*", "*.parquet"))); got != fmt.Sprint(n) {
		t.Errorf("readable snapshots = %s, want %d", got, n)
	}
	// The lock is free again.
	if res := optlake(t, "run", "--api-url", url, "--data-dir", dir); res.code != 0 {
		t.Errorf("run after the loop stopped: %d %s", res.code, res.stderr)
	}
}

// kill -9 in the middle of a snapshot leaves nothing a reader could
// mistake for data; the next run cleans up and succeeds. The kill comes at
// a known point, the load's crash hook after its first batch of rows (12,000
// rows are three batches: the file is in flight, the body not read to its
// end). (It used to wait for a temp file and kill then, on 100,000 rows so
// that a 20 ms poll would see one in flight: a minute under -race.)
func TestKill9MidRun(t *testing.T) {
	t.Parallel()
	const n = 12_000
	sim := venuesim.New(venuesim.Config{Seed: 5, Instruments: n})
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	dir := t.TempDir()
	cmd, _, stderr := startCLICrashing(t, "written", "run", "--api-url", srv.URL, "--data-dir", dir, "--batch-rows", "4096")
	if err := cmd.Wait(); exitCode(err) != -1 {
		t.Fatalf("the run was not killed at the hook: %v\n%s", err, stderr)
	}
	if f, _ := filepath.Glob(filepath.Join(dir, "instruments", "*", ".*.tmp-*")); len(f) == 0 {
		t.Fatal("no file in flight at the kill")
	}
	if f := snapshotsOnDisk(dir); len(f) != 0 {
		t.Fatalf("a killed run left visible Parquet files: %v", f)
	}
	metas, _ := filepath.Glob(filepath.Join(dir, "raw", "instruments", "*", "*.meta.json"))
	if len(metas) != 0 {
		t.Fatalf("a cut-off body has metadata (would be taken as complete): %v", metas)
	}
	res := optlake(t, "run", "--api-url", srv.URL, "--data-dir", dir, "--log-level", "info")
	if res.code != 0 || !strings.Contains(res.stderr, "removed temp files of an interrupted run") {
		t.Fatalf("next run: exit %d\n%s", res.code, res.stderr)
	}
	if got := duckScalar(t, fmt.Sprintf("SELECT count(*) FROM read_parquet('%s')", filepath.Join(dir, "instruments", "*", "*.parquet"))); got != fmt.Sprint(n) {
		t.Errorf("rows after the next run = %s", got)
	}
	var temps []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && strings.Contains(fi.Name(), ".tmp-") {
			temps = append(temps, p)
		}
		return nil
	})
	if len(temps) != 0 {
		t.Errorf("temp files remain: %v", temps)
	}
}

// A pinned clock reaches the CLI, in-process (testClock.optlake) and in a
// process of its own (testNowEnv): each run's snapshot is at its clock's
// time, not the real one.
func TestPinnedClocks(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, venuesim.Config{Seed: 2, Instruments: 50})
	clk := pinClock(time.Date(2026, 3, 4, 5, 6, 0, 0, time.UTC))
	dir := t.TempDir()
	args := []string{"run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments"}
	if res := clk.optlake(t, args...); res.code != 0 {
		t.Fatalf("in-process run: exit %d: %s", res.code, res.stderr)
	}
	clk.next()
	if res := optlakeProcess(t, []string{clk.env()}, args...); res.code != 0 {
		t.Fatalf("process run: exit %d: %s", res.code, res.stderr)
	}
	var got []string
	for _, m := range rawMetas(t, dir, "instruments") {
		got = append(got, m.SnapshotTime.UTC().Format(time.RFC3339))
	}
	slices.Sort(got)
	if want := []string{"2026-03-04T05:06:00Z", "2026-03-04T05:07:00Z"}; !slices.Equal(got, want) {
		t.Errorf("snapshot times %v, want %v", got, want)
	}
}
