package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testStartTimeout bounds a start made on behalf of a test (the server itself
// gives up after 30s).
const testStartTimeout = 60 * time.Second

var shared struct {
	mu      sync.Mutex
	started bool
	ch      *ClickHouse
	err     error
	dir     string
}

// SharedClickHouse returns the clickhouse-server shared by all tests of the
// calling test binary (package): started once, lazily, by the first test that
// asks, in a temp dir of its own. Stop it from TestMain with StopShared, or use
// Main, which does that for you; if neither is done it still dies with the test
// binary, but its temp dir is left behind.
//
// Tests on the shared server should work in their own database (FreshDatabase)
// and must not Stop/Kill/Restart it: use NewClickHouse for that.
//
// When no server is installed, or it fails to start, the test is skipped — or
// failed when CI is set.
func SharedClickHouse(t testing.TB) *ClickHouse {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.started {
		shared.started = true
		dir, err := os.MkdirTemp("", "optlake-clickhouse-")
		if err != nil {
			shared.err = err
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), testStartTimeout)
			shared.ch, shared.err = StartClickHouse(ctx, dir, nil)
			cancel()
			if shared.err != nil {
				os.RemoveAll(dir)
			} else {
				shared.dir = dir
			}
		}
	}
	if shared.err != nil {
		clickHouseUnavailable(t, shared.err)
		return nil
	}
	if !shared.ch.Running() {
		t.Fatalf("the shared clickhouse-server has died (was it stopped by a test? use NewClickHouse for that)\n%s", shared.ch.LogTail(40))
	}
	return shared.ch
}

// StopShared stops the shared server and the shared cluster, if they were
// started, and removes their directories. Call it from TestMain after m.Run
// (or use Main).
func StopShared() { stopShared(false) }

func stopShared(keepDir bool) {
	stopSharedCluster(keepDir)
	stopSharedPostgres()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.ch != nil {
		if err := shared.ch.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: stopping the shared clickhouse-server: %v\n", err)
		}
	}
	if shared.dir != "" {
		if keepDir {
			fmt.Fprintf(os.Stderr, "testenv: tests failed; shared clickhouse-server's data and logs kept in %s\n", shared.dir)
		} else {
			os.RemoveAll(shared.dir)
		}
	}
	shared.started, shared.ch, shared.err, shared.dir = false, nil, nil, ""
}

// Main is a ready-made TestMain body: it runs the tests, stops the shared
// server and the shared cluster (keeping their directories for inspection
// when tests failed) and exits.
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	stopShared(code != 0)
	os.Exit(code)
}

// NewClickHouse starts a private clickhouse-server for one test — for tests
// that stop, kill or restart it — in t.TempDir(), stopped when the test ends
// (its log tail is logged if the test failed). Skips (fails in CI) like
// SharedClickHouse.
func NewClickHouse(t testing.TB) *ClickHouse {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), testStartTimeout)
	defer cancel()
	c, err := StartClickHouse(ctx, dir, nil)
	if err != nil {
		clickHouseUnavailable(t, err)
		return nil
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("clickhouse-server %s logs:\n%s", c.Addr(), c.LogTail(30))
		}
		// Its directory is about to be removed: no need for a clean (~0.8s) shutdown.
		if err := c.Kill(); err != nil {
			t.Errorf("stopping clickhouse-server: %v", err)
		}
	})
	return c
}

func clickHouseUnavailable(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNotInstalled) {
		unavailable(t, "%v", err)
		return
	}
	unavailable(t, "clickhouse-server failed to start: %v", err)
}

var dbCounter atomic.Int64

// FreshDatabase creates a database named t_<sanitized test name>_<n>, unique
// within the test binary, and returns its name. It is dropped when the test
// ends, unless the test failed (kept for inspection) or the server is down.
func FreshDatabase(t testing.TB, c *ClickHouse) string {
	t.Helper()
	name := fmt.Sprintf("t_%s_%d", sanitizeIdent(t.Name(), 48), dbCounter.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if t.Failed() || !c.Running() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Logf("dropping database %s: %v", name, err)
		}
	})
	return name
}

// sanitizeIdent maps s to [a-z0-9_] (lowercased, runs of others → "_"), at most
// max bytes long.
func sanitizeIdent(s string, max int) string {
	var b strings.Builder
	under := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			under = false
		} else if !under {
			b.WriteByte('_')
			under = true
		}
	}
	out := strings.Trim(b.String(), "_")
	if len(out) > max {
		out = strings.TrimRight(out[:max], "_")
	}
	if out == "" {
		out = "x"
	}
	return out
}
