package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/settings"
	"github.com/optlake/optlake/venuesim"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "optlake.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Precedence flag > environment > file > default, and validation errors
// that name the key and the line.
func TestConfigPrecedenceAndErrors(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "key")
	os.WriteFile(secretFile, []byte("file-secret-123456\n"), 0o600)
	t.Setenv("OPTLAKE_TEST_TOKEN", "env-secret-abcdef")
	good := writeConfig(t, `
api-url: https://file.example
data-dir: /from/file
batch-rows: 1000
timeout: 7s
source: file-source
headers:
  - name: Authorization
    value: Bearer ${OPTLAKE_TEST_TOKEN}
  - name: X-Api-Key
    value_file: `+secretFile+`
endpoints:
  instruments: {params: {currency: [BTC, ETH]}}
  account_summary: {path: /v2/summary}
  positions: {maps: {force: [positions], forbid: ["positions.*.greeks"]}}
rate-limit: 2/s
column-budget: 500
accounts:
  - label: main
    headers: [{name: X-Account, value: main}]
sink: [parquet]
clickhouse-dsn: clickhouse://u:dsn-secret-9876@ch:9000/db
`)
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want []string // substrings of the effective config
		bad  []string // must not appear
	}{
		{name: "file over default", want: []string{"api-url: https://file.example", "data-dir: /from/file", "batch-rows: 1000", "timeout: 7s",
			"- instruments.currency=BTC,ETH", "account_summary: /v2/summary", "main:", "X-Account: [REDACTED]", "source: file-source",
			"rate-limit: 2/s", "rate-burst: 1", "column-budget: 500", "endpoint-maps:", "force:", "- positions.*.greeks"}},
		{name: "env over file", env: map[string]string{"OPTLAKE_DATA_DIR": "/from/env", "OPTLAKE_BATCH_ROWS": "2000"}, want: []string{"data-dir: /from/env", "batch-rows: 2000", "api-url: https://file.example"}},
		{name: "flag over env", env: map[string]string{"OPTLAKE_DATA_DIR": "/from/env"}, args: []string{"--data-dir", "/from/flag"}, want: []string{"data-dir: /from/flag"}, bad: []string{"/from/env"}},
		{name: "default when unset", want: []string{"max-attempts: 5", "log-level: info"}},
		// Every setting of the list is shown, also those config check once left out.
		{name: "every setting shown", args: []string{"--jitter", "3s", "--ca-file", "/ca.pem", "--insecure-skip-verify", "--metrics-file", "/m.prom", "--listen", ":9464"},
			want: []string{"jitter: 3s", "ca-file: /ca.pem", "insecure-skip-verify: true", "metrics-file: /m.prom", `listen: :9464`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			res := optlake(t, append([]string{"config", "check", "--config", good}, tc.args...)...)
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.stdout, w) {
					t.Errorf("effective config lacks %q:\n%s", w, res.stdout)
				}
			}
			for _, b := range append(tc.bad, "env-secret-abcdef", "file-secret-123456", "dsn-secret-9876") {
				if strings.Contains(res.stdout+res.stderr, b) {
					t.Errorf("output contains %q:\n%s", b, res.stdout)
				}
			}
		})
	}

	bad := []struct {
		name, body, want string
	}{
		{"unknown key", "api-url: https://x\napi_urll: y\n", ":2: unknown key \"api_urll\""},
		{"bad duration", "api-url: https://x\n\ntimeout: banana\n", ":3: timeout:"},
		{"bad int", "api-url: https://x\nbatch-rows: many\n", ":2: batch-rows:"},
		{"unset env", "api-url: https://x\nheaders:\n  - name: A\n    value: ${OPTLAKE_TEST_UNSET_VAR}\n", ":4: headers: environment variable OPTLAKE_TEST_UNSET_VAR is not set"},
		{"header without value", "api-url: https://x\nheaders:\n  - name: A\n", ":3: headers: each needs a name and a value"},
		{"endpoint key", "api-url: https://x\nendpoints:\n  instruments: {pth: /x}\n", ":3: endpoints.instruments: unknown key \"pth\""},
		{"unknown endpoint", "api-url: https://x\nendpoints: [instruments, nope]\n", `unknown endpoint "nope"`},
		{"bad sink", "api-url: https://x\nsink: s3\n", `--sink "s3"`},
		{"maps key", "api-url: https://x\nendpoints:\n  positions: {maps: {forse: [a]}}\n", `:3: endpoints.positions.maps: unknown key "forse"`},
		{"maps twice", "api-url: https://x\nendpoints:\n  positions: {maps: {force: [a], forbid: [$.a]}}\n", `map path "$.a" is listed twice`},
		{"bad rate", "api-url: https://x\nrate-limit: fast\n", `--rate-limit: rate "fast"`},
		{"small budget", "api-url: https://x\ncolumn-budget: 5\n", `column budget 5: want at least 16`},
		{"not yaml", "api-url: [\n", "config "},
		{"two values", "api-url: [a, b]\n", ":1: api-url takes one value"},
		{"missing file", "api-url: https://x\nclickhouse-dsn-file: /nonexistent/dsn\n", ":2: clickhouse-dsn-file:"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			res := optlake(t, "config", "check", "--config", writeConfig(t, tc.body))
			if res.code != exitUsage || !strings.Contains(res.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q, want %q", res.code, res.stderr, tc.want)
			}
		})
	}
}

// A run reads its settings from the file.
func TestRunFromConfigFile(t *testing.T) {
	_, url := startSim(t, venuesim.Config{Seed: 1})
	dir := t.TempDir()
	cfg := writeConfig(t, "api-url: "+url+"\ndata-dir: "+dir+"\nendpoints: [instruments]\n")
	res := optlake(t, "run", "--config", cfg)
	if res.code != 0 || !strings.Contains(res.stdout, "instruments ok") {
		t.Fatalf("exit %d: %s %s", res.code, res.stdout, res.stderr)
	}
	if f := snapshotsOnDisk(dir); len(f) != 1 {
		t.Errorf("files: %v", f)
	}
}

// The shipped example config passes the real loader.
func TestExampleConfigLoads(t *testing.T) {
	root, err := filepath.Abs("../../deploy/optlake.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"VENUE_TOKEN", "CLICKHOUSE_PASSWORD", "VENUE_API_KEY"} {
		t.Setenv(v, "example-secret-"+v)
	}
	res := optlake(t, "config", "check", "--config", root)
	if res.code != 0 || !strings.Contains(res.stderr, "configuration ok") || strings.Contains(res.stdout, "example-secret-") {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
}

// The job takes every setting of `optlake run`, each field of the setting's type.
func TestConfigJobTakesEverySetting(t *testing.T) {
	if err := settings.Check(&job{}, settings.Run); err != nil {
		t.Fatal(err)
	}
}

// A secret setting may be a reference (${VAR} or @file) on the command line
// or in the environment; config check shows it redacted.
func TestConfigSecretReferences(t *testing.T) {
	dsnFile := filepath.Join(t.TempDir(), "dsn")
	os.WriteFile(dsnFile, []byte("clickhouse://u:ref-secret-4711@chfile:9000/db\n"), 0o600)
	t.Setenv("OPTLAKE_TEST_DSN", "clickhouse://u:env-secret-4712@chenv:9000/db")
	t.Setenv("OPTLAKE_TEST_HDR", "hdr-secret-4713")
	for _, tc := range []struct {
		name, dsn, want, secret string
	}{
		{"file", "@" + dsnFile, "chfile:9000", "ref-secret-4711"},
		{"env", "${OPTLAKE_TEST_DSN}", "chenv:9000", "env-secret-4712"},
		{"short password", "clickhouse://u:ab@chshort:9000/db", "u:[REDACTED]@chshort:9000", "u:ab@"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := optlake(t, "config", "check", "--api-url", "https://v.example", "--sink", "clickhouse",
				"--clickhouse-dsn", tc.dsn, "--header", "X-Key: ${OPTLAKE_TEST_HDR}")
			if res.code != 0 || !strings.Contains(res.stdout, tc.want) || !strings.Contains(res.stdout, "value: '[REDACTED]'") {
				t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
			}
			for _, s := range []string{tc.secret, "hdr-secret-4713"} {
				if strings.Contains(res.stdout+res.stderr, s) {
					t.Errorf("output shows %q:\n%s", s, res.stdout)
				}
			}
		})
	}
	res := optlake(t, "config", "check", "--api-url", "https://v.example", "--clickhouse-dsn", "${OPTLAKE_TEST_UNSET_DSN}")
	if res.code != exitUsage || !strings.Contains(res.stderr, "--clickhouse-dsn: environment variable OPTLAKE_TEST_UNSET_DSN is not set") {
		t.Errorf("unset reference: exit %d, %s", res.code, res.stderr)
	}
}
