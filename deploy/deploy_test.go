package deploy

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/settings"
)

// flagKind is how a flag of `optlake run` takes its value.
type flagKind int

const (
	kindString flagKind = iota
	kindList            // repeatable; a YAML list in the config file
	kindBool            // no value on the command line
	kindDuration
	kindInt
	kindFloat
)

func (k flagKind) String() string {
	return [...]string{"string", "list", "bool", "duration", "int", "float"}[k]
}

// runFlags are the flags of `optlake run`, as `optlake run --help` lists
// them, derived from the one list of settings (internal/settings); each also
// reads OPTLAKE_<NAME> (upper case, "-" as "_") and the key <name> of the
// --config file. The examples may use these and no others.
var runFlags = func() map[string]flagKind {
	kinds := map[settings.Kind]flagKind{
		settings.String: kindString, settings.List: kindList, settings.Bool: kindBool,
		settings.Duration: kindDuration, settings.Int: kindInt, settings.Int64: kindInt,
		settings.Float: kindFloat,
	}
	out := map[string]flagKind{}
	for _, s := range settings.For(settings.Run) {
		out[s.Name] = kinds[s.Kind]
	}
	return out
}()

// envName is the variable a flag reads.
func envName(flag string) string {
	return "OPTLAKE_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// runEnvVars maps every OPTLAKE_* variable of `optlake run` to its flag.
func runEnvVars() map[string]string {
	out := map[string]string{}
	for f := range runFlags {
		out[envName(f)] = f
	}
	return out
}

// checkRunArgs checks a command line of optlake (see runArgs) and returns
// the values by flag.
func checkRunArgs(t *testing.T, where string, args []string) map[string][]string {
	t.Helper()
	vals, errs := runArgs(args)
	for _, e := range errs {
		t.Errorf("%s: %s", where, e)
	}
	return vals
}

// runArgs checks a command line of optlake: args[0] is "run", every option
// is a flag of runFlags, and every flag but a bool has a value. It returns
// the values by flag, and the problems.
func runArgs(args []string) (map[string][]string, []string) {
	vals := map[string][]string{}
	var errs []string
	if len(args) == 0 || args[0] != "run" {
		return vals, []string{fmt.Sprintf("optlake arguments %q do not start with \"run\"", args)}
	}
	for i := 1; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			errs = append(errs, fmt.Sprintf("argument %q is not a --flag (optlake run takes no positional arguments)", a))
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		kind, ok := runFlags[name]
		if !ok {
			errs = append(errs, fmt.Sprintf("--%s is not a flag of optlake run", name))
			continue
		}
		if kind == kindBool {
			if hasVal {
				if _, err := strconv.ParseBool(val); err != nil {
					errs = append(errs, fmt.Sprintf("--%s=%s: not a bool", name, val))
				}
			}
			vals[name] = append(vals[name], "true")
			continue
		}
		if !hasVal {
			if i+1 >= len(args) || strings.HasPrefix(args[i+1], "--") {
				errs = append(errs, fmt.Sprintf("--%s has no value", name))
				continue
			}
			i++
			val = args[i]
		}
		vals[name] = append(vals[name], val)
	}
	return vals, errs
}

// shellRunArgs finds `optlake run ...` (or /path/optlake run) in shell text
// and returns its arguments, up to the end of the simple command (a quote,
// ;, |, &, < or > or the end of the line), quotes around a word removed.
func shellRunArgs(text string) [][]string {
	re := regexp.MustCompile(`(?:^|[\s/])optlake\s+(run(?:[ \t]+[^\s;|&<>']+)*)`)
	var out [][]string
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		var args []string
		for _, f := range strings.Fields(m[1]) {
			args = append(args, strings.Trim(f, `"`))
		}
		out = append(out, args)
	}
	return out
}

// The flags the examples rely on are in the list, and each reads the
// variable the examples set.
func TestRunFlagsMatchCLI(t *testing.T) {
	for _, name := range []string{"config", "api-url", "header", "endpoints", "sink", "data-dir", "clickhouse-dsn",
		"every", "metrics-file", "listen", "summary-json", "log-format"} {
		if _, ok := runFlags[name]; !ok {
			t.Errorf("--%s is no longer a flag of optlake run (internal/settings)", name)
		}
	}
	for _, s := range settings.For(settings.Run) {
		if s.Env() != envName(s.Name) {
			t.Errorf("--%s reads %s, want %s", s.Name, s.Env(), envName(s.Name))
		}
	}
}

// cronSchedule is a parsed five-field cron expression: the allowed values
// of each field.
type cronSchedule struct {
	minute, hour, dom, month, dow map[int]bool
}

var cronFields = []struct {
	name     string
	min, max int
	names    []string // names for min, min+1, ...
}{
	{"minute", 0, 59, nil},
	{"hour", 0, 23, nil},
	{"day of month", 1, 31, nil},
	{"month", 1, 12, []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	{"day of week", 0, 7, []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}},
}

// parseCron parses a standard five-field cron expression (minute hour
// day-of-month month day-of-week) as cron(8), Kubernetes and Airflow read
// it: lists, ranges, steps, * and month / weekday names.
func parseCron(expr string) (cronSchedule, error) {
	fields := strings.Fields(expr)
	if len(fields) != 5 {
		return cronSchedule{}, fmt.Errorf("%q: %d fields, want 5", expr, len(fields))
	}
	sets := make([]map[int]bool, 5)
	for i, f := range fields {
		set, err := parseCronField(f, cronFields[i].min, cronFields[i].max, cronFields[i].names)
		if err != nil {
			return cronSchedule{}, fmt.Errorf("%q: %s field: %v", expr, cronFields[i].name, err)
		}
		sets[i] = set
	}
	if sets[4][7] { // Sunday is 0 or 7
		delete(sets[4], 7)
		sets[4][0] = true
	}
	return cronSchedule{sets[0], sets[1], sets[2], sets[3], sets[4]}, nil
}

func parseCronField(f string, lo, hi int, names []string) (map[int]bool, error) {
	num := func(s string) (int, error) {
		for i, n := range names {
			if strings.EqualFold(s, n) {
				return lo + i, nil
			}
		}
		v, err := strconv.Atoi(s)
		if err != nil || v < lo || v > hi {
			return 0, fmt.Errorf("%q is not a number in %d-%d", s, lo, hi)
		}
		return v, nil
	}
	set := map[int]bool{}
	for _, part := range strings.Split(f, ",") {
		rng, stepText, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			s, err := strconv.Atoi(stepText)
			if err != nil || s < 1 || s > hi {
				return nil, fmt.Errorf("bad step %q", stepText)
			}
			step = s
		}
		var from, to int
		switch {
		case rng == "*":
			from, to = lo, hi
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			var err error
			if from, err = num(a); err != nil {
				return nil, err
			}
			if to, err = num(b); err != nil {
				return nil, err
			}
			if from > to {
				return nil, fmt.Errorf("range %q runs backwards", rng)
			}
		default:
			v, err := num(rng)
			if err != nil {
				return nil, err
			}
			from, to = v, v
			if hasStep {
				to = hi
			}
		}
		for v := from; v <= to; v += step {
			set[v] = true
		}
	}
	return set, nil
}

// everyFiveMinutes reports whether a schedule fires at :00, :05, ... :55 of
// every hour of every day.
func (c cronSchedule) everyFiveMinutes() bool {
	all := func(set map[int]bool, lo, hi int) bool {
		for v := lo; v <= hi; v++ {
			if !set[v] {
				return false
			}
		}
		return true
	}
	if len(c.minute) != 12 {
		return false
	}
	for m := 0; m < 60; m += 5 {
		if !c.minute[m] {
			return false
		}
	}
	return all(c.hour, 0, 23) && all(c.dom, 1, 31) && all(c.month, 1, 12) && all(c.dow, 0, 6)
}

func TestParseCron(t *testing.T) {
	for _, tc := range []struct {
		expr  string
		ok    bool
		every bool
	}{
		{"*/5 * * * *", true, true},
		{"0-59/5 * * * *", true, true},
		{"0,5,10,15,20,25,30,35,40,45,50,55 * * * *", true, true},
		{"*/5 * * * sun-sat", true, true},
		{"*/5 * * * 0-7", true, true},
		{"*/10 * * * *", true, false},
		{"*/5 9-17 * * mon-fri", true, false},
		{"5/15 * 1,15 jan,jul *", true, false},
		{"*/5 * * *", false, false},
		{"*/5 * * * * *", false, false},
		{"60 * * * *", false, false},
		{"*/0 * * * *", false, false},
		{"* 24 * * *", false, false},
		{"* * 0 * *", false, false},
		{"* * * 13 *", false, false},
		{"* * * * 8", false, false},
		{"10-5 * * * *", false, false},
		{"*/5 * * * funday", false, false},
		{"@every 5m", false, false},
	} {
		c, err := parseCron(tc.expr)
		if (err == nil) != tc.ok {
			t.Errorf("parseCron(%q): err %v, want ok=%v", tc.expr, err, tc.ok)
			continue
		}
		if err == nil && c.everyFiveMinutes() != tc.every {
			t.Errorf("parseCron(%q).everyFiveMinutes() = %v, want %v", tc.expr, !tc.every, tc.every)
		}
	}
}

func TestRunArgs(t *testing.T) {
	got := shellRunArgs(`x=1; /usr/local/bin/optlake run --config /etc/o.yaml --migrate --sink=parquet --summary-json "$s" >&2; optlake run --every 5m | logger`)
	if len(got) != 2 || strings.Join(got[0], " ") != "run --config /etc/o.yaml --migrate --sink=parquet --summary-json $s" || strings.Join(got[1], " ") != "run --every 5m" {
		t.Fatalf("shellRunArgs: %q", got)
	}
	vals, errs := runArgs(got[0])
	if len(errs) > 0 || vals["config"][0] != "/etc/o.yaml" || vals["sink"][0] != "parquet" || vals["migrate"][0] != "true" || vals["summary-json"][0] != "$s" {
		t.Errorf("runArgs: %v %v", vals, errs)
	}
	for _, bad := range [][]string{
		{"--config", "x"},
		{"run", "--no-such-flag"},
		{"run", "--sink"},
		{"run", "--sink", "--migrate"},
		{"run", "--migrate=perhaps"},
		{"run", "extra"},
	} {
		if _, errs := runArgs(bad); len(errs) == 0 {
			t.Errorf("runArgs(%q): want a problem", bad)
		}
	}
}

// readFile reads an example, failing the test when it is missing.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
