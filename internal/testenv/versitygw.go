package testenv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Credentials of the versitygw root account the tests use; SetCredentials
// puts them in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, and tests check
// that the secret shows up in no error, output or object.
const (
	S3AccessKey = "optlaketestkey"
	S3SecretKey = "optlake-s3-secret-Xq7Zp2"
	S3Region    = "us-east-1"
)

// EnvVersityGW names a versitygw binary to use instead of the one in the
// cache directory (installed by scripts/deps.sh) or on PATH.
const EnvVersityGW = "OPTLAKE_TEST_VERSITYGW"

// VersityGW is a versitygw S3 gateway (posix backend) running on a temp
// directory: each bucket is a folder of Dir(), each object a plain file.
type VersityGW struct {
	bin, base, dir, iam string
	port                int
	proc                process
}

// VersityGWBin finds the versitygw binary: $OPTLAKE_TEST_VERSITYGW, then
// ${XDG_CACHE_HOME:-$HOME/.cache}/optlake/bin/versitygw, then PATH.
func VersityGWBin() (string, error) { return toolBin(EnvVersityGW, "versitygw") }

// toolBin finds a server binary that scripts/deps.sh builds with go
// install: $env, then ${XDG_CACHE_HOME:-$HOME/.cache}/optlake/bin/name,
// then PATH.
func toolBin(env, name string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		if h, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(h, ".cache")
		}
	}
	if cache != "" {
		p := filepath.Join(cache, "optlake", "bin", name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return exec.LookPath(name)
}

// StartVersityGW starts versitygw on a free 127.0.0.1 port serving a fresh
// temp directory with the given buckets created, and stops it when the test
// ends. A missing binary skips the test locally and fails it in CI.
func StartVersityGW(t testing.TB, buckets ...string) *VersityGW {
	t.Helper()
	bin, err := VersityGWBin()
	if err != nil {
		unavailable(t, "versitygw is not installed (run `bash scripts/deps.sh`): %v", err)
	}
	base := t.TempDir()
	dir := filepath.Join(base, "data")
	iam := filepath.Join(base, "iam")
	for _, d := range []string{dir, iam} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range buckets {
		if err := os.MkdirAll(filepath.Join(dir, b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return startOnFreePort(t, "versitygw", filepath.Join(base, "versitygw.log"), func(port int) *VersityGW {
		return &VersityGW{bin: bin, base: base, dir: dir, iam: iam, port: port}
	})
}

// portServer is a server process the tests start on a port of their choice.
type portServer interface {
	launch() error // start the process
	wait() error   // until it answers (or exits, or startTimeout)
	Stop()
}

// startOnFreePort starts the server mk makes for a free port, with fresh
// ports when it does not come up (a port taken meanwhile), and stops it
// when the test ends. A server that cannot be launched skips the test
// locally and fails it in CI.
func startOnFreePort[S portServer](t testing.TB, name, logPath string, mk func(port int) S) S {
	t.Helper()
	var lastErr error
	for range startTries {
		ports, err := freePorts(1)
		if err != nil {
			t.Fatal(err)
		}
		s := mk(ports[0])
		if err := s.launch(); err != nil {
			unavailable(t, "%s: %v", name, err)
		}
		if lastErr = s.wait(); lastErr == nil {
			t.Cleanup(s.Stop)
			return s
		}
		s.Stop()
	}
	log, _ := os.ReadFile(logPath)
	t.Fatalf("%s did not start: %v\n%s", name, lastErr, log)
	var zero S
	return zero
}

// launch starts the server process on g's port and folders.
func (g *VersityGW) launch() error {
	logf, err := os.OpenFile(filepath.Join(g.base, "versitygw.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(g.bin, "--port", g.Addr(), "--iam-dir", g.iam, "posix", g.dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+S3AccessKey, "ROOT_SECRET_KEY="+S3SecretKey)
	cmd.Stdout, cmd.Stderr = logf, logf
	if _, err := g.proc.start(cmd, func() { logf.Close() }); err != nil {
		logf.Close()
		return err
	}
	return nil
}

// Restart starts a stopped server again on the same port and folder (what
// it stored is still there).
func (g *VersityGW) Restart(t testing.TB) {
	t.Helper()
	g.Stop()
	if err := g.launch(); err != nil {
		t.Fatalf("versitygw restart: %v", err)
	}
	if err := g.wait(); err != nil {
		log, _ := os.ReadFile(filepath.Join(g.base, "versitygw.log"))
		t.Fatalf("versitygw did not restart: %v\n%s", err, log)
	}
}

func (g *VersityGW) wait() error { return waitHTTP(&g.proc, "versitygw", g.Endpoint(), false) }

// waitHTTP polls url until the server answers (with 200 when ok200 is set),
// its process exits, or startTimeout passes.
func waitHTTP(p *process, name, url string, ok200 bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-p.done():
			return fmt.Errorf("%s exited", name)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		resp, err := client.Get(url)
		if err != nil {
			continue
		}
		resp.Body.Close()
		if !ok200 || resp.StatusCode == http.StatusOK {
			return nil
		}
	}
}

// Addr is host:port.
func (g *VersityGW) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(g.port)) }

// Endpoint is the server's http:// URL.
func (g *VersityGW) Endpoint() string { return "http://" + g.Addr() }

// Dir is the posix backend's folder: bucket B's objects are under Dir()/B.
func (g *VersityGW) Dir() string { return g.dir }

// URL is the s3:// data directory URL for bucket/prefix on this server.
func (g *VersityGW) URL(bucket, prefix string) string {
	return fmt.Sprintf("s3://%s/%s?endpoint=%s&region=%s", bucket, prefix, g.Endpoint(), S3Region)
}

// SetCredentials puts the root account's keys into the environment of the
// test process, where the AWS SDK finds them (and so does every CLI process
// a test starts, which inherits it). Every server StartVersityGW starts has
// the same root account, so the values are the same for every test: they
// are set once per process and left set. Unlike t.Setenv, this lets bucket
// tests run in parallel (t.Parallel). A test may still t.Setenv one of them
// (a wrong key) if it does not run in parallel: t.Setenv puts these values
// back when it ends.
func (g *VersityGW) SetCredentials(t testing.TB) {
	t.Helper()
	if err := setS3Credentials(); err != nil {
		t.Fatalf("setting the S3 credentials: %v", err)
	}
}

var s3Credentials struct {
	once sync.Once
	err  error
}

// setS3Credentials sets the root account's keys in the process's
// environment, once.
func setS3Credentials() error {
	s3Credentials.once.Do(func() {
		for _, kv := range [][2]string{
			{"AWS_ACCESS_KEY_ID", S3AccessKey},
			{"AWS_SECRET_ACCESS_KEY", S3SecretKey},
			{"AWS_SESSION_TOKEN", ""},
			{"AWS_REGION", S3Region},
			{"AWS_CONFIG_FILE", os.DevNull},
			{"AWS_SHARED_CREDENTIALS_FILE", os.DevNull},
			{"AWS_EC2_METADATA_DISABLED", "true"},
		} {
			if err := os.Setenv(kv[0], kv[1]); err != nil {
				s3Credentials.err = fmt.Errorf("%s: %w", kv[0], err)
				return
			}
		}
	})
	return s3Credentials.err
}

// Stop ends the server (SIGTERM, then SIGKILL).
func (g *VersityGW) Stop() { g.proc.terminate(syscall.SIGTERM, stopTimeout) }
