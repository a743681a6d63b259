package testenv

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// EnvFakeGCS names a fake-gcs-server binary to use instead of the one in
// the cache directory (installed by scripts/deps.sh) or on PATH.
const EnvFakeGCS = "OPTLAKE_TEST_FAKE_GCS"

// FakeGCS is fake-gcs-server, a Cloud Storage server (the JSON API and the
// path-style downloads the Go client reads with), on a temp directory:
// each bucket is a folder of Dir(), each object a plain file.
type FakeGCS struct {
	bin, base, dir string
	port           int
	proc           process
}

// StartFakeGCS starts fake-gcs-server on a free 127.0.0.1 port serving a
// fresh temp directory with the given buckets, and stops it when the test
// ends. A missing binary skips the test locally and fails it in CI.
func StartFakeGCS(t testing.TB, buckets ...string) *FakeGCS {
	t.Helper()
	bin, err := toolBin(EnvFakeGCS, "fake-gcs-server")
	if err != nil {
		unavailable(t, "fake-gcs-server is not installed (run `bash scripts/deps.sh`): %v", err)
	}
	base := t.TempDir()
	dir := filepath.Join(base, "data")
	for _, b := range buckets {
		if err := os.MkdirAll(filepath.Join(dir, b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return startOnFreePort(t, "fake-gcs-server", filepath.Join(base, "fake-gcs-server.log"), func(port int) *FakeGCS {
		return &FakeGCS{bin: bin, base: base, dir: dir, port: port}
	})
}

func (g *FakeGCS) launch() error {
	logf, err := os.OpenFile(filepath.Join(g.base, "fake-gcs-server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// -public-host: the Go client downloads from http://HOST/BUCKET/OBJECT,
	// which the server answers only for its public host (otherwise 404, and
	// every read looks like a missing object).
	cmd := exec.Command(g.bin, "-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(g.port),
		"-backend", "filesystem", "-filesystem-root", g.dir,
		"-public-host", g.Addr(), "-external-url", "http://"+g.Addr(), "-log-level", "warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if _, err := g.proc.start(cmd, func() { logf.Close() }); err != nil {
		logf.Close()
		return err
	}
	return nil
}

func (g *FakeGCS) wait() error {
	return waitHTTP(&g.proc, "fake-gcs-server", "http://"+g.Addr()+"/storage/v1/b", true)
}

// Addr is host:port.
func (g *FakeGCS) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(g.port)) }

// Dir is the server's folder: bucket B's objects are under Dir()/B.
func (g *FakeGCS) Dir() string { return g.dir }

// SetEmulator points the Cloud Storage client at this server for the test
// (STORAGE_EMULATOR_HOST, which also turns authentication off). It uses
// t.Setenv: the test cannot run in parallel.
func (g *FakeGCS) SetEmulator(t testing.TB) {
	t.Setenv("STORAGE_EMULATOR_HOST", g.Addr())
}

// Stop ends the server (SIGTERM, then SIGKILL).
func (g *FakeGCS) Stop() { g.proc.terminate(syscall.SIGTERM, stopTimeout) }
