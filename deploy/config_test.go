package deploy

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// optionalFlags may be left out of the example: a cluster is the exception,
// and accounts are shown commented out (several accounts are the exception),
// as are an Iceberg catalog's URI, table prefix and REST settings (no
// catalog by default).
var optionalFlags = map[string]bool{"cluster": true, "account": true, "account-header": true, "ca-file": true, "insecure-skip-verify": true,
	"jitter": true, "cpuprofile": true, "memprofile": true, "rate-limit": true, "rate-burst": true,
	"iceberg-catalog-uri": true, "iceberg-table-prefix": true,
	"iceberg-catalog-warehouse": true, "iceberg-catalog-token": true, "iceberg-catalog-credential": true, "iceberg-catalog-oauth2-uri": true,
	"iceberg-catalog-scope": true, "iceberg-catalog-sigv4-region": true, "iceberg-catalog-sigv4-service": true}

// The example config: one mapping whose keys are the flags of `optlake
// run`, each with a value of the flag's kind; every flag is shown; secrets
// appear only as ${ENV} references, and those variables are documented.
func TestExampleConfig(t *testing.T) {
	const path = "optlake.example.yaml"
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(readFile(t, path)), &root); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 || root.Content[0].Kind != yaml.MappingNode {
		t.Fatalf("%s: want one YAML mapping", path)
	}
	m := root.Content[0]
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		where := path + ":" + strconv.Itoa(k.Line) + ": " + k.Value
		if _, dup := seen[k.Value]; dup {
			t.Errorf("%s: key twice", where)
		}
		seen[k.Value] = v
		kind, ok := runFlags[k.Value]
		if !ok {
			t.Errorf("%s: not a flag of optlake run", where)
			continue
		}
		if k.Value == "config" {
			t.Errorf("%s: a config file cannot name a config file", where)
		}
		checkConfigValue(t, where, kind, v)
	}
	for flag := range runFlags {
		if _, ok := seen[flag]; !ok && flag != "config" && !optionalFlags[flag] {
			t.Errorf("%s: --%s is not shown", path, flag)
		}
	}

	// No secret in clear: header values and the DSN's password are ${ENV}.
	ref := regexp.MustCompile(`\$\{([A-Z][A-Z0-9_]*)\}`)
	var refs []string
	if h := seen["header"]; h != nil {
		for _, v := range h.Content {
			_, val, _ := strings.Cut(v.Value, ":")
			if !ref.MatchString(val) {
				t.Errorf("%s: header %q: the value must be a ${ENV} reference", path, v.Value)
			}
			refs = append(refs, v.Value)
		}
	}
	if d := seen["clickhouse-dsn"]; d != nil {
		if !regexp.MustCompile(`^clickhouse://[^:@/]+:\$\{[A-Z][A-Z0-9_]*\}@`).MatchString(d.Value) {
			t.Errorf("%s: clickhouse-dsn %q: the password must be a ${ENV} reference", path, d.Value)
		}
		refs = append(refs, d.Value)
	}
	readme := readFile(t, "README.md")
	for _, r := range refs {
		for _, mm := range ref.FindAllStringSubmatch(r, -1) {
			if !strings.Contains(readme, mm[1]) {
				t.Errorf("%s: ${%s} is not documented in deploy/README.md", path, mm[1])
			}
		}
	}
	if e := seen["every"]; e != nil {
		if d, err := time.ParseDuration(e.Value); err == nil && d != 0 {
			t.Errorf("%s: every: %s: the example serves the one-shot deployments (cron, systemd, CronJob, Airflow): 0s", path, e.Value)
		}
	}
}

func checkConfigValue(t *testing.T, where string, kind flagKind, v *yaml.Node) {
	t.Helper()
	if kind == kindList {
		if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
			t.Errorf("%s: want a non-empty YAML list", where)
			return
		}
		for _, e := range v.Content {
			if e.Kind != yaml.ScalarNode || e.Value == "" {
				t.Errorf("%s: list items must be strings", where)
			}
		}
		return
	}
	if v.Kind != yaml.ScalarNode {
		t.Errorf("%s: want a scalar", where)
		return
	}
	var err error
	switch kind {
	case kindBool:
		var b bool
		err = v.Decode(&b)
	case kindInt:
		var n int64
		err = v.Decode(&n)
	case kindFloat:
		var f float64
		err = v.Decode(&f)
	case kindDuration:
		_, err = time.ParseDuration(v.Value)
	case kindString:
		if v.Tag != "!!str" || v.Value == "" {
			t.Errorf("%s: want a non-empty string, got %s %q", where, v.Tag, v.Value)
		}
	}
	if err != nil {
		t.Errorf("%s: want a %s: %v", where, kind, err)
	}
}
