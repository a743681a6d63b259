package settings

import (
	"context"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// The list is well formed: unique names, defaults of the kind's Go type,
// known commands, overrides only for commands that take the setting.
func TestListWellFormed(t *testing.T) {
	commands := map[string]bool{Run: true, Replay: true, Demo: true, Migrate: true, Status: true, Schema: true, History: true, Compact: true, Convert: true}
	seen := map[string]bool{}
	for _, s := range All() {
		if seen[s.Name] {
			t.Errorf("%s listed twice", s.Name)
		}
		seen[s.Name] = true
		if s.Name == "" || strings.ToLower(s.Name) != s.Name || strings.ContainsAny(s.Name, " _") {
			t.Errorf("%q: want a lower-case flag name with -", s.Name)
		}
		if s.Usage == "" {
			t.Errorf("%s: no usage", s.Name)
		}
		if s.Default != nil && reflect.TypeOf(s.Default) != goType[s.Kind] {
			t.Errorf("%s: default %T, kind %s wants %s", s.Name, s.Default, s.Kind, goType[s.Kind])
		}
		if len(s.Commands) == 0 {
			t.Errorf("%s: no command takes it", s.Name)
		}
		for _, c := range s.Commands {
			if !commands[c] {
				t.Errorf("%s: unknown command %q", s.Name, c)
			}
		}
		for c, o := range s.Overrides {
			if !s.Takes(c) {
				t.Errorf("%s: override for %s, which does not take it", s.Name, c)
			}
			if o.Default != nil && reflect.TypeOf(o.Default) != goType[s.Kind] {
				t.Errorf("%s: %s default %T, want %s", s.Name, c, o.Default, goType[s.Kind])
			}
		}
	}
}

func TestEnvName(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"api-url", "OPTLAKE_API_URL"}, {"data-dir", "OPTLAKE_DATA_DIR"}, {"every", "OPTLAKE_EVERY"},
		{"insecure-skip-verify", "OPTLAKE_INSECURE_SKIP_VERIFY"},
	} {
		if got := EnvName(tc.name); got != tc.want {
			t.Errorf("EnvName(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestForAppliesOverrides(t *testing.T) {
	get := func(cmd, name string) Setting {
		for _, s := range For(cmd) {
			if s.Name == name {
				return s
			}
		}
		t.Fatalf("%s does not take %s", cmd, name)
		return Setting{}
	}
	if d := get(Migrate, "log-level").Default; d != "warn" {
		t.Errorf("migrate log-level default %v, want warn", d)
	}
	if d := get(Run, "log-level").Default; d != "info" {
		t.Errorf("run log-level default %v, want info", d)
	}
	if u := get(Replay, "data-dir").Usage; !strings.Contains(u, "replayed") {
		t.Errorf("replay data-dir usage %q", u)
	}
	if d := get(Run, "batch-rows").Default; d != DefaultBatchRows {
		t.Errorf("batch-rows default %v", d)
	}
	for _, s := range For(Status) {
		if s.Name != "data-dir" && !strings.HasPrefix(s.Name, "iceberg-") {
			t.Errorf("status takes %s", s.Name)
		}
	}
}

type target struct {
	URL       string        `setting:"api-url"`
	Endpoints []string      `setting:"endpoints,split"`
	Sinks     []string      `setting:"sink"`
	Every     time.Duration `setting:"every"`
	Migrate   bool          `setting:"migrate"`
	Body      int64         `setting:"max-body-size"`
	Batch     int           `setting:"batch-rows"`
	Other     string
}

// parse runs a command of the settings of cmd on args and decodes them.
func parse(t *testing.T, cmd string, args []string) *target {
	t.Helper()
	var got target
	app := &cli.App{Writer: io.Discard, ErrWriter: io.Discard, Commands: []*cli.Command{{
		Name: cmd, Flags: Flags(cmd),
		Action: func(c *cli.Context) error { return Decode(c, &got) },
	}}}
	if err := app.RunContext(context.Background(), append([]string{"x", cmd}, args...)); err != nil {
		t.Fatal(err)
	}
	return &got
}

func TestDecode(t *testing.T) {
	t.Setenv("OPTLAKE_EVERY", "5m")
	got := parse(t, Run, []string{"--api-url", "http://h", "--endpoints", "a,b", "--endpoints", " c ", "--migrate"})
	want := target{URL: "http://h", Endpoints: []string{"a", "b", "c"}, Sinks: []string{"parquet"}, Every: 5 * time.Minute,
		Migrate: true, Body: 4 << 30, Batch: DefaultBatchRows}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("got %+v\nwant %+v", *got, want)
	}
	// replay takes no api-url or max-body-size: those fields stay as they were.
	got = parse(t, Replay, []string{"--sink", "clickhouse"})
	if got.URL != "" || got.Body != 0 || !reflect.DeepEqual(got.Sinks, []string{"clickhouse"}) || got.Batch != DefaultBatchRows {
		t.Errorf("replay: %+v", *got)
	}
}

func TestGetSetCheck(t *testing.T) {
	var tg target
	if !Set(&tg, "api-url", "u") || tg.URL != "u" {
		t.Errorf("Set: %+v", tg)
	}
	if v, ok := Get(&tg, "api-url"); !ok || v != "u" {
		t.Errorf("Get = %v, %v", v, ok)
	}
	if _, ok := Get(&tg, "listen"); ok {
		t.Error("Get found a field for listen")
	}
	if err := Check(&tg, Run); err == nil || !strings.Contains(err.Error(), "listen") {
		t.Errorf("Check: %v, want the settings with no field", err)
	}
	var bad struct {
		X int `setting:"api-url"`
	}
	if err := Check(&bad, Status); err == nil || !strings.Contains(err.Error(), "api-url") {
		t.Errorf("Check of a mistyped field: %v", err)
	}
	var unknown struct {
		X string `setting:"nope"`
	}
	if err := Check(&unknown, Status); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("Check of an unknown tag: %v", err)
	}
}
