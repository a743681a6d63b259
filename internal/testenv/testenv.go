// Package testenv provides the real external components optlake's tests run
// against: a clickhouse-server started from its binary in a temp dir, and
// DuckDB (through tools/duckdb/query.mjs) as the independent Parquet reader.
//
// It is imported only by tests. Everything it needs outside Go is installed by
// `make deps` (scripts/deps.sh). When a component is missing, a test is skipped
// with a message saying so — except when the environment variable CI is
// non-empty, where it fails instead: CI never silently skips.
//
// Typical use, in a package's main_test.go:
//
//	func TestMain(m *testing.M) { testenv.Main(m) } // stops the shared server
//
//	func TestSomething(t *testing.T) {
//		ch := testenv.SharedClickHouse(t)
//		db := testenv.FreshDatabase(t, ch)
//		dsn := ch.DSN(db)
//		...
//		out, err := ch.Query(ctx, "SELECT count() FROM "+db+".instruments")
//	}
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// inCI reports whether missing components must fail tests rather than skip them.
func inCI() bool { return os.Getenv("CI") != "" }

// unavailable skips the test (locally) or fails it (in CI) because a component
// the test needs is missing or broken.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if inCI() {
		t.Fatalf("%s (CI is set, so this is a failure, not a skip)", msg)
	}
	t.Skip(msg)
}

var (
	rootOnce sync.Once
	rootDir  string
	rootErr  error
)

// ModuleRoot returns the directory holding the module's go.mod, found by
// walking up from the current working directory (a test's cwd is its package
// directory).
func ModuleRoot() (string, error) {
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			rootErr = err
			return
		}
		for {
			if st, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && !st.IsDir() {
				rootDir = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				rootErr = fmt.Errorf("testenv: no go.mod above the working directory")
				return
			}
			dir = parent
		}
	})
	return rootDir, rootErr
}

// Unavailable skips the test locally, and fails it in CI, because something
// it needs is missing or does not work here.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	unavailable(t, format, args...)
}

// Command returns the path of the first of names on PATH. When there is
// none, the test is skipped locally and fails in CI (scripts/deps.sh must
// install it); install says how.
func Command(t testing.TB, install string, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	unavailable(t, "%s is not installed (%s)", names[0], install)
	return ""
}
