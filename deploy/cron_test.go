package deploy

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
)

// The crontab (/etc/cron.d format: five schedule fields, a user, a command)
// runs a snapshot every 5 minutes under flock -n, logging to syslog with
// logger, and its command is valid sh.
func TestCrontab(t *testing.T) {
	const path = "cron/optlake.crontab"
	envLine := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*\s*=`)
	jobs := 0
	for n, line := range strings.Split(readFile(t, path), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || envLine.MatchString(line) {
			continue
		}
		where := path + ":" + strconv.Itoa(n+1)
		jobs++
		f := strings.Fields(line)
		if len(f) < 7 {
			t.Errorf("%s: want 5 schedule fields, a user and a command: %q", where, line)
			continue
		}
		sched, err := parseCron(strings.Join(f[:5], " "))
		if err != nil {
			t.Errorf("%s: %v", where, err)
		} else if !sched.everyFiveMinutes() {
			t.Errorf("%s: schedule %q: want every 5 minutes", where, strings.Join(f[:5], " "))
		}
		if user := f[5]; user == "root" {
			t.Errorf("%s: runs as root", where)
		}
		cmd := regexp.MustCompile(`^(\S+\s+){6}`).ReplaceAllString(line, "")

		// cron turns an unescaped % into a newline.
		if regexp.MustCompile(`(^|[^\\])%`).MatchString(cmd) {
			t.Errorf("%s: unescaped %% in the command (cron reads it as a newline)", where)
		}
		if !regexp.MustCompile(`(^|\s)flock\s+(-\S*n\S*|--nonblock)\s`).MatchString(cmd) {
			t.Errorf("%s: no `flock -n`: runs could overlap", where)
		}
		if !regexp.MustCompile(`\|\s*logger\s`).MatchString(cmd) {
			t.Errorf("%s: output not piped to logger (syslog)", where)
		}
		if !strings.Contains(cmd, "2>&1") {
			t.Errorf("%s: stderr (logs, the failure reason) not sent to logger", where)
		}
		calls := shellRunArgs(cmd)
		if len(calls) != 1 {
			t.Errorf("%s: %d `optlake run` calls, want 1", where, len(calls))
		}
		for _, args := range calls {
			vals := checkRunArgs(t, where, args)
			if len(vals["config"]) == 0 {
				t.Errorf("%s: no --config", where)
			}
			if _, ok := vals["every"]; ok {
				t.Errorf("%s: --every under cron", where)
			}
		}
		// The command is what cron hands to /bin/sh -c.
		sh, err := exec.LookPath("sh")
		if err != nil {
			t.Logf("no sh to check the command's syntax")
			continue
		}
		if out, err := exec.Command(sh, "-n", "-c", cmd).CombinedOutput(); err != nil {
			t.Errorf("%s: sh -n: %v: %s", where, err, out)
		}
	}
	if jobs != 1 {
		t.Errorf("%s: %d jobs, want 1", path, jobs)
	}
}

// The crontab's command, run by sh with stand-ins for optlake and logger:
// optlake gets the secrets of the env file exported, everything it prints
// reaches logger, and while another process holds the lock the snapshot is
// skipped.
func TestCrontabRuns(t *testing.T) {
	for _, tool := range []string{"sh", "flock"} {
		testenv.Command(t, "apt-get install util-linux", tool)
	}
	var cmd string
	for _, line := range strings.Split(readFile(t, "cron/optlake.crontab"), "\n") {
		if strings.HasPrefix(line, "*") || (line != "" && line[0] >= '0' && line[0] <= '9') {
			cmd = regexp.MustCompile(`^(\S+\s+){6}`).ReplaceAllString(strings.TrimSpace(line), "")
		}
	}
	const lockPath, envPath = "/run/lock/optlake.lock", "/etc/optlake/env"
	if !strings.Contains(cmd, lockPath) || !strings.Contains(cmd, envPath) {
		t.Fatalf("the command no longer uses %s and %s: update this test", lockPath, envPath)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	write := func(name, text string, mode os.FileMode) {
		if err := os.WriteFile(name, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(bin, "optlake"), `#!/bin/sh
echo "args: $*" >> "$OUT/calls"
echo "token: ${VENUE_TOKEN-unset}" >> "$OUT/calls"
echo "run 0193 ok in 1s"
echo "level=INFO msg=\"snapshot started\"" >&2
`, 0o755)
	write(filepath.Join(bin, "logger"), "#!/bin/sh\necho \"logger: $*\" >> \"$OUT/log\"\ncat >> \"$OUT/log\"\n", 0o755)
	write(filepath.Join(dir, "env"), "VENUE_TOKEN=tok-123\n", 0o600)
	lock := filepath.Join(dir, "optlake.lock")
	cmd = strings.ReplaceAll(cmd, lockPath, lock)
	cmd = strings.ReplaceAll(cmd, envPath, filepath.Join(dir, "env"))

	run := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c := exec.CommandContext(ctx, "sh", "-c", cmd)
		c.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "OUT=" + dir, "HOME=" + dir}
		// On timeout, kill the whole group (sh, flock, the stand-ins).
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
		c.WaitDelay = 2 * time.Second
		out, err := c.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatal("the command was still running after 20s: waiting for the lock instead of skipping the run?")
		}
		if err != nil || len(out) > 0 {
			t.Fatalf("command: %v, output %q (cron would mail it)", err, out)
		}
	}
	run()
	calls := readFile(t, filepath.Join(dir, "calls"))
	if !strings.Contains(calls, "args: run --config /etc/optlake/optlake.yaml") || !strings.Contains(calls, "token: tok-123") {
		t.Errorf("optlake was called as:\n%s", calls)
	}
	log := readFile(t, filepath.Join(dir, "log"))
	for _, want := range []string{"logger: -t optlake", "run 0193 ok in 1s", "snapshot started"} {
		if !strings.Contains(log, want) {
			t.Errorf("logger got no %q:\n%s", want, log)
		}
	}

	// Another snapshot still running: this one is skipped.
	f, err := os.OpenFile(lock, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	run()
	if n := strings.Count(readFile(t, filepath.Join(dir, "calls")), "args:"); n != 1 {
		t.Errorf("optlake ran %d times, want 1: the held lock did not stop the second run", n)
	}
}
