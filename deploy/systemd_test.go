package deploy

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
)

// unitFile is a parsed systemd unit: section -> key -> values in order
// (a key may repeat; an empty assignment resets the list, as in systemd).
type unitFile map[string]map[string][]string

// parseUnit reads a unit file the way systemd.syntax(7) describes it:
// [Section] headers, Key=Value lines, # and ; comments, a trailing
// backslash continuing a line.
func parseUnit(text string) (unitFile, error) {
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	n := 0
	var cont strings.Builder
	for sc.Scan() {
		n++
		line := sc.Text()
		if cont.Len() > 0 {
			line = cont.String() + " " + strings.TrimSpace(line)
			cont.Reset()
		}
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || trimmed[0] == '#' || trimmed[0] == ';' {
			continue
		}
		if strings.HasSuffix(trimmed, `\`) {
			cont.WriteString(strings.TrimSuffix(trimmed, `\`))
			continue
		}
		if strings.HasPrefix(trimmed, "[") {
			if !strings.HasSuffix(trimmed, "]") {
				return nil, fmt.Errorf("line %d: bad section header %q", n, trimmed)
			}
			section = trimmed[1 : len(trimmed)-1]
			if _, dup := u[section]; dup {
				return nil, fmt.Errorf("line %d: section [%s] twice", n, section)
			}
			u[section] = map[string][]string{}
			continue
		}
		if section == "" {
			return nil, fmt.Errorf("line %d: %q outside any section", n, trimmed)
		}
		key, val, ok := strings.Cut(trimmed, "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !ok || key == "" || strings.ContainsAny(key, " \t") {
			return nil, fmt.Errorf("line %d: want Key=Value, got %q", n, trimmed)
		}
		if val == "" {
			u[section][key] = []string{} // reset, but the key is set
			continue
		}
		u[section][key] = append(u[section][key], val)
	}
	if cont.Len() > 0 {
		return nil, fmt.Errorf("line %d: continuation at end of file", n)
	}
	return u, sc.Err()
}

// get returns the last value of a key ("" when unset) and whether it is set.
func (u unitFile) get(section, key string) (string, bool) {
	vals, ok := u[section][key]
	if !ok {
		return "", false
	}
	if len(vals) == 0 {
		return "", true
	}
	return vals[len(vals)-1], true
}

// all returns every value of a key, space-separated lists split.
func (u unitFile) all(section, key string) []string {
	var out []string
	for _, v := range u[section][key] {
		out = append(out, strings.Fields(v)...)
	}
	return out
}

func unitBool(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "1", "yes", "y", "true", "t", "on":
		return true, true
	case "0", "no", "n", "false", "f", "off":
		return false, true
	}
	return false, false
}

func loadUnit(t *testing.T, path string) unitFile {
	t.Helper()
	u, err := parseUnit(readFile(t, path))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return u
}

// under reports whether path is dir or inside it.
func under(path, dir string) bool {
	dir = strings.TrimSuffix(strings.TrimPrefix(dir, "-"), "/")
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// The service: a hardened oneshot that runs `optlake run --config
// /etc/optlake/optlake.yaml` as an unprivileged user, writing only where the
// sandbox lets it.
func TestSystemdService(t *testing.T) {
	u := loadUnit(t, "systemd/optlake.service")
	want := func(key, value string) {
		t.Helper()
		got, ok := u.get("Service", key)
		if !ok || got != value {
			t.Errorf("optlake.service: %s=%q, want %q", key, got, value)
		}
	}
	wantBool := func(key string) {
		t.Helper()
		got, _ := u.get("Service", key)
		if b, ok := unitBool(got); !ok || !b {
			t.Errorf("optlake.service: %s=%q, want yes", key, got)
		}
	}
	if d, _ := u.get("Unit", "Description"); d == "" {
		t.Error("optlake.service: no Description")
	}
	if !strings.Contains(strings.Join(u.all("Unit", "After"), " "), "network-online.target") {
		t.Error("optlake.service: After=network-online.target missing: the venue is on the network")
	}
	want("Type", "oneshot")
	want("StateDirectory", "optlake")
	want("ProtectSystem", "strict")
	want("EnvironmentFile", "-/etc/optlake/env")
	wantBool("NoNewPrivileges")
	wantBool("PrivateTmp")
	wantBool("ProtectHome")

	user, _ := u.get("Service", "User")
	dyn, _ := u.get("Service", "DynamicUser")
	if b, _ := unitBool(dyn); !b && (user == "" || user == "root" || user == "0") {
		t.Errorf("optlake.service: runs as root: want DynamicUser=yes or a dedicated User=")
	}

	execs := u["Service"]["ExecStart"]
	if len(execs) != 1 {
		t.Fatalf("optlake.service: %d ExecStart lines, want 1", len(execs))
	}
	argv := strings.Fields(execs[0])
	if !filepath.IsAbs(argv[0]) || filepath.Base(argv[0]) != "optlake" {
		t.Errorf("ExecStart: %q: want an absolute path to optlake", argv[0])
	}
	vals := checkRunArgs(t, "optlake.service ExecStart", argv[1:])
	if got := vals["config"]; len(got) != 1 || got[0] != "/etc/optlake/optlake.yaml" {
		t.Errorf("ExecStart: --config %q, want /etc/optlake/optlake.yaml", got)
	}
	if _, ok := vals["every"]; ok {
		t.Error("ExecStart: --every in a oneshot service started by a timer")
	}

	// Everything optlake writes is writable under ProtectSystem=strict: the
	// state directory and ReadWritePaths.
	rw := u.all("Service", "ReadWritePaths")
	if len(rw) == 0 {
		t.Error("optlake.service: no ReadWritePaths")
	}
	writable := append([]string{"/var/lib/optlake"}, rw...)
	for _, flag := range []string{"data-dir", "metrics-file", "summary-json"} {
		for _, p := range vals[flag] {
			ok := false
			for _, dir := range writable {
				ok = ok || under(p, dir)
			}
			if !ok {
				t.Errorf("ExecStart: --%s %s is not writable under ProtectSystem=strict (state directory or ReadWritePaths %v)", flag, p, rw)
			}
		}
	}
	if wd, ok := u.get("Service", "WorkingDirectory"); ok && !under(wd, "/var/lib/optlake") {
		t.Errorf("WorkingDirectory=%s: want the state directory", wd)
	}
}

// The timer: every 5 minutes, catching up after downtime, with jitter.
func TestSystemdTimer(t *testing.T) {
	u := loadUnit(t, "systemd/optlake.timer")
	cal, ok := u.get("Timer", "OnCalendar")
	if !ok || cal == "" {
		t.Fatal("optlake.timer: no OnCalendar")
	}
	if p, _ := u.get("Timer", "Persistent"); !isTrue(p) {
		t.Errorf("optlake.timer: Persistent=%q, want true", p)
	}
	d, _ := u.get("Timer", "RandomizedDelaySec")
	if dur, err := parseSpan(d); err != nil || dur <= 0 || dur >= time.Minute {
		t.Errorf("optlake.timer: RandomizedDelaySec=%q: want a delay under a minute (of a 5-minute interval)", d)
	}
	if unit, ok := u.get("Timer", "Unit"); ok && unit != "optlake.service" {
		t.Errorf("optlake.timer: Unit=%s, want optlake.service", unit)
	}
	if w, _ := u.get("Install", "WantedBy"); w != "timers.target" {
		t.Errorf("optlake.timer: WantedBy=%q, want timers.target", w)
	}

	// OnCalendar: every 5 minutes. systemd-analyze computes the next
	// elapses where it exists; otherwise the expression must be one of the
	// usual spellings.
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		switch cal {
		case "*:0/5", "*:00/5", "*-*-* *:00/5:00", "*-*-* *:0/5:0", "*:0/5:0", "*:00/5:00":
		default:
			t.Errorf("OnCalendar=%s: not a known spelling of every 5 minutes (systemd-analyze is not installed to check it)", cal)
		}
		return
	}
	out, err := exec.Command(bin, "calendar", "--iterations=4", cal).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze calendar %q: %v\n%s", cal, err, out)
	}
	var elapses []time.Time
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok || (k != "Next elapse" && !strings.HasPrefix(k, "Iter.")) {
			continue
		}
		// "Sun 2026-11-22 01:05:00 UTC"
		f := strings.Fields(v)
		if len(f) < 3 {
			continue
		}
		at, err := time.Parse("2006-01-02 15:04:05", f[1]+" "+f[2])
		if err != nil {
			t.Fatalf("systemd-analyze calendar: %q: %v", line, err)
		}
		elapses = append(elapses, at)
	}
	if len(elapses) != 4 {
		t.Fatalf("systemd-analyze calendar: %d elapses in\n%s", len(elapses), out)
	}
	for i, at := range elapses {
		if at.Minute()%5 != 0 || at.Second() != 0 {
			t.Errorf("OnCalendar=%s elapses at %s", cal, at.Format(time.TimeOnly))
		}
		if i > 0 && at.Sub(elapses[i-1]) != 5*time.Minute {
			t.Errorf("OnCalendar=%s: %s after %s", cal, at.Format(time.TimeOnly), elapses[i-1].Format(time.TimeOnly))
		}
	}
}

// parseSpan parses a systemd time span of one unit ("30s", "30", "1min",
// "500ms"; systemd.time(7)).
func parseSpan(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := s, "s"
	if i >= 0 {
		num, unit = s[:i], strings.TrimSpace(s[i:])
	}
	units := map[string]string{
		"us": "us", "usec": "us", "ms": "ms", "msec": "ms", "s": "s", "sec": "s", "second": "s", "seconds": "s",
		"m": "m", "min": "m", "minute": "m", "minutes": "m", "h": "h", "hr": "h", "hour": "h", "hours": "h",
	}
	u, ok := units[unit]
	if !ok || num == "" {
		return 0, fmt.Errorf("time span %q: want one number and unit", s)
	}
	return time.ParseDuration(num + u)
}

func isTrue(v string) bool { b, ok := unitBool(v); return ok && b }

// systemd-analyze verify passes both units with nothing to say. verify
// only warns (exit 0) about unknown keys and bad values, so any line it
// prints about our units is a failure. The ExecStart binary is replaced by
// a stub (verify checks that it exists and is executable).
func TestSystemdAnalyzeVerify(t *testing.T) {
	bin := testenv.Command(t, "apt-get install systemd; only the INI checks ran", "systemd-analyze")
	dir := t.TempDir()
	stub := filepath.Join(dir, "optlake")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Does verify work here at all? A minimal good unit must pass.
	probe := filepath.Join(dir, "probe.service")
	os.WriteFile(probe, []byte("[Service]\nType=oneshot\nExecStart="+stub+"\n"), 0o644)
	if out, err := exec.Command(bin, "verify", "--man=no", probe).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		testenv.Unavailable(t, "systemd-analyze verify does not work in this environment (%v): %s", err, out)
	}

	svc := readFile(t, "systemd/optlake.service")
	if !strings.Contains(svc, "ExecStart=/usr/local/bin/optlake ") {
		t.Fatal("optlake.service: ExecStart is not /usr/local/bin/optlake: update this test")
	}
	svc = strings.ReplaceAll(svc, "ExecStart=/usr/local/bin/optlake ", "ExecStart="+stub+" ")
	os.WriteFile(filepath.Join(dir, "optlake.service"), []byte(svc), 0o644)
	os.WriteFile(filepath.Join(dir, "optlake.timer"), []byte(readFile(t, "systemd/optlake.timer")), 0o644)

	cmd := exec.Command(bin, "verify", "--man=no", "optlake.service", "optlake.timer")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze verify: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		if strings.Contains(line, "optlake.") {
			t.Errorf("systemd-analyze verify: %s", line)
		} else {
			t.Logf("systemd-analyze verify (not about our units): %s", line)
		}
	}
}
