package testenv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A test binary that dies (a panic, -timeout, SIGKILL) never runs Main's
// cleanup: the PostgreSQL server must die with it (pg_ctl start detached
// it, and it outlived the binary). The child test starts the shared
// server, writes its pid and panics; the parent waits for it to be gone.
func TestPostgresDiesWithTheTestBinary(t *testing.T) {
	if f := os.Getenv("OPTLAKE_PG_CHILD"); f != "" {
		pg := SharedPostgres(t)
		if err := os.WriteFile(f, []byte(strconv.Itoa(pg.proc.pid())), 0o644); err != nil {
			t.Fatal(err)
		}
		panic("the test binary dies")
	}
	SharedPostgres(t) // skipped without PostgreSQL
	f := filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestPostgresDiesWithTheTestBinary$", "-test.count=1")
	cmd.Env = append(os.Environ(), "OPTLAKE_PG_CHILD="+f)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the child test did not panic:\n%s", out)
	}
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatalf("the child wrote no pid: %v\n%s", err, out)
	}
	pid, err := strconv.Atoi(string(b))
	if err != nil || pid <= 0 {
		t.Fatalf("pid %q: %v", b, err)
	}
	for deadline := time.Now().Add(testStartTimeout); ; time.Sleep(50 * time.Millisecond) {
		err := syscall.Kill(pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("postgres (pid %d) outlived the test binary that started it", pid)
		}
	}
}
