package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/pipeline/infer"
)

// The config file (--config, OPTLAKE_CONFIG) holds anything the flags can,
// under the flag's name, plus structured keys for what is awkward as flags:
//
//	api-url: https://api.venue.example
//	headers:                      # --header
//	  - name: Authorization
//	    value: Bearer ${VENUE_TOKEN}    # ${VAR} reads the environment
//	  - name: X-Api-Key
//	    value_file: /run/secrets/key    # *_file reads a file
//	endpoints:                    # --endpoints, with paths and parameters
//	  instruments: {params: {currency: "BTC,ETH"}}
//	  all_account_balances: {path: /v2/private/balances}
//	  positions: {maps: {force: [positions], forbid: ["positions.*.greeks"]}}
//	accounts:                     # --account / --account-header
//	  - label: main
//	    headers: [{name: X-Account, value: main}]
//	clickhouse-dsn-file: /run/secrets/dsn
//
// Precedence: flag > environment > file > default. Unknown keys and bad
// values are errors naming the file, line and key.

// fileConfig is what a config file adds to the flags.
type fileConfig struct {
	path    string
	flags   map[string][]string // flag name -> values (lists for slice flags)
	lines   map[string]int      // flag name -> line, for errors
	headers []string            // "Name: value"
	paths   map[string]string   // endpoint path overrides
	params  []string            // endpoint.key=value
	accts   []string
	acctHdr []string
	maps    map[string]infer.MapRules // endpoint -> map detection overrides
}

type configError struct {
	path string
	line int
	msg  string
}

func (e *configError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("config %s:%d: %s", e.path, e.line, e.msg)
	}
	return fmt.Sprintf("config %s: %s", e.path, e.msg)
}

// loadConfig parses and checks a config file against the command's flags.
func loadConfig(path string, flags []cli.Flag) (*fileConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError{fmt.Errorf("config: %w", err)}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, usageError{&configError{path: path, msg: strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	fc := &fileConfig{path: path, flags: map[string][]string{}, lines: map[string]int{}, paths: map[string]string{}}
	if len(doc.Content) == 0 {
		return fc, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, usageError{&configError{path: path, line: root.Line, msg: "want a mapping of settings"}}
	}
	known := map[string]cli.Flag{}
	for _, f := range flags {
		for _, n := range f.Names() {
			known[n] = f
		}
	}
	fail := func(n *yaml.Node, format string, args ...any) error {
		return usageError{&configError{path: path, line: n.Line, msg: fmt.Sprintf(format, args...)}}
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		key := k.Value
		switch key {
		case "headers":
			hs, err := fc.headerList(v, fail)
			if err != nil {
				return nil, err
			}
			fc.headers = append(fc.headers, hs...)
			continue
		case "endpoints":
			if v.Kind == yaml.SequenceNode || v.Kind == yaml.ScalarNode {
				break // a plain list, like the flag
			}
			if err := fc.endpoints(v, fail); err != nil {
				return nil, err
			}
			continue
		case "accounts":
			if err := fc.accounts(v, fail); err != nil {
				return nil, err
			}
			continue
		case "config":
			return nil, fail(k, "config files do not nest (key %q)", key)
		}
		name := key
		fromFile := false
		if strings.HasSuffix(key, "-file") || strings.HasSuffix(key, "_file") {
			if _, ok := known[key]; !ok {
				name, fromFile = key[:len(key)-5], true
			}
		}
		f, ok := known[name]
		if !ok {
			return nil, fail(k, "unknown key %q (keys are the flag names of `optlake run --help`, plus headers, endpoints, accounts)", key)
		}
		vals, err := scalars(v)
		if err != nil {
			return nil, fail(v, "%s: %v", key, err)
		}
		for j, s := range vals {
			if vals[j], err = expand(s); err != nil {
				return nil, fail(v, "%s: %v", key, err)
			}
			if fromFile {
				b, err := os.ReadFile(vals[j])
				if err != nil {
					return nil, fail(v, "%s: %v", key, err)
				}
				vals[j] = strings.TrimRight(string(b), "\r\n")
			}
		}
		if _, isSlice := f.(*cli.StringSliceFlag); !isSlice && len(vals) != 1 {
			return nil, fail(v, "%s takes one value", key)
		}
		fc.flags[name] = vals
		fc.lines[name] = v.Line
	}
	return fc, nil
}

// scalars returns a scalar or a list of scalars as strings.
func scalars(v *yaml.Node) ([]string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		return []string{v.Value}, nil
	case yaml.SequenceNode:
		var out []string
		for _, e := range v.Content {
			if e.Kind != yaml.ScalarNode {
				return nil, errors.New("want a list of plain values")
			}
			out = append(out, e.Value)
		}
		return out, nil
	}
	return nil, errors.New("want a value or a list of values")
}

// expand replaces ${VAR} with the environment variable; an unset one is an
// error (a missing secret should not become an empty header).
func expand(s string) (string, error) {
	var missing []string
	out := os.Expand(s, func(name string) string {
		v, ok := os.LookupEnv(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
	}
	return out, nil
}

type failFunc func(n *yaml.Node, format string, args ...any) error

// headerList reads [{name, value | value_file}] into "Name: value" specs.
func (fc *fileConfig) headerList(v *yaml.Node, fail failFunc) ([]string, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, fail(v, "headers: want a list of {name, value} or {name, value_file}")
	}
	var out []string
	for _, h := range v.Content {
		if h.Kind != yaml.MappingNode {
			return nil, fail(h, "headers: want {name, value} or {name, value_file}")
		}
		var name, value string
		var have bool
		for i := 0; i+1 < len(h.Content); i += 2 {
			k, val := h.Content[i], h.Content[i+1]
			s, err := expand(val.Value)
			if err != nil {
				return nil, fail(val, "headers: %v", err)
			}
			switch k.Value {
			case "name":
				name = s
			case "value":
				value, have = s, true
			case "value_file", "value-file":
				b, err := os.ReadFile(s)
				if err != nil {
					return nil, fail(val, "headers: %v", err)
				}
				value, have = strings.TrimRight(string(b), "\r\n"), true
			default:
				return nil, fail(k, "headers: unknown key %q (want name, value, value_file)", k.Value)
			}
		}
		if name == "" || !have {
			return nil, fail(h, "headers: each needs a name and a value or value_file")
		}
		out = append(out, name+": "+value)
	}
	return out, nil
}

// endpoints reads {name: {path, params}}.
func (fc *fileConfig) endpoints(v *yaml.Node, fail failFunc) error {
	if v.Kind != yaml.MappingNode {
		return fail(v, "endpoints: want a list of names or a mapping name -> {path, params}")
	}
	var names []string
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, e := v.Content[i], v.Content[i+1]
		names = append(names, k.Value)
		if e.Kind == yaml.ScalarNode && (e.Value == "" || e.Tag == "!!null") {
			continue
		}
		if e.Kind != yaml.MappingNode {
			return fail(e, "endpoints.%s: want {path, params}", k.Value)
		}
		for j := 0; j+1 < len(e.Content); j += 2 {
			ek, ev := e.Content[j], e.Content[j+1]
			switch ek.Value {
			case "path":
				fc.paths[k.Value] = ev.Value
			case "params":
				if ev.Kind != yaml.MappingNode {
					return fail(ev, "endpoints.%s.params: want a mapping key -> value", k.Value)
				}
				for p := 0; p+1 < len(ev.Content); p += 2 {
					vals, err := scalars(ev.Content[p+1])
					if err != nil {
						return fail(ev.Content[p+1], "endpoints.%s.params.%s: %v", k.Value, ev.Content[p].Value, err)
					}
					s, err := expand(strings.Join(vals, ","))
					if err != nil {
						return fail(ev.Content[p+1], "endpoints.%s.params: %v", k.Value, err)
					}
					fc.params = append(fc.params, k.Value+"."+ev.Content[p].Value+"="+s)
				}
			case "maps":
				m, err := mapRules(ev, "endpoints."+k.Value+".maps", fail)
				if err != nil {
					return err
				}
				if fc.maps == nil {
					fc.maps = map[string]infer.MapRules{}
				}
				fc.maps[k.Value] = m
			default:
				return fail(ek, "endpoints.%s: unknown key %q (want path, params, maps)", k.Value, ek.Value)
			}
		}
	}
	fc.flags["endpoints"] = names
	fc.lines["endpoints"] = v.Line
	return nil
}

// mapRules reads {force: [paths], forbid: [paths]}.
func mapRules(v *yaml.Node, where string, fail failFunc) (infer.MapRules, error) {
	var m infer.MapRules
	if v.Kind != yaml.MappingNode {
		return m, fail(v, "%s: want {force: [paths], forbid: [paths]}", where)
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		paths, err := scalars(val)
		if err != nil {
			return m, fail(val, "%s.%s: %v", where, k.Value, err)
		}
		switch k.Value {
		case "force":
			m.Force = append(m.Force, paths...)
		case "forbid":
			m.Forbid = append(m.Forbid, paths...)
		default:
			return m, fail(k, "%s: unknown key %q (want force, forbid)", where, k.Value)
		}
	}
	return m, nil
}

// accounts reads [{label, headers}].
func (fc *fileConfig) accounts(v *yaml.Node, fail failFunc) error {
	if v.Kind != yaml.SequenceNode {
		return fail(v, "accounts: want a list of {label, headers}")
	}
	for _, a := range v.Content {
		if a.Kind != yaml.MappingNode {
			return fail(a, "accounts: want {label, headers}")
		}
		var label string
		var hdrs []string
		for i := 0; i+1 < len(a.Content); i += 2 {
			k, val := a.Content[i], a.Content[i+1]
			switch k.Value {
			case "label":
				label = val.Value
			case "headers":
				hs, err := fc.headerList(val, fail)
				if err != nil {
					return err
				}
				hdrs = hs
			default:
				return fail(k, "accounts: unknown key %q (want label, headers)", k.Value)
			}
		}
		if label == "" {
			return fail(a, "accounts: each needs a label")
		}
		fc.accts = append(fc.accts, label)
		for _, h := range hdrs {
			fc.acctHdr = append(fc.acctHdr, label+":"+h)
		}
	}
	return nil
}

// apply sets every flag the command line and environment left unset.
func (fc *fileConfig) apply(c *cli.Context) error {
	names := make([]string, 0, len(fc.flags))
	for n := range fc.flags {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if c.IsSet(n) {
			continue // flag or environment wins
		}
		for _, v := range fc.flags[n] {
			if err := c.Set(n, v); err != nil {
				return usageError{&configError{path: fc.path, line: fc.lines[n], msg: fmt.Sprintf("%s: %v", n, err)}}
			}
		}
	}
	return nil
}

// configure applies the file (if any) to c and to the job's structured
// settings. Call after the flags were parsed.
func configure(c *cli.Context, j *job, flags []cli.Flag) error {
	path := c.String("config")
	if path == "" {
		return nil
	}
	fc, err := loadConfig(path, flags)
	if err != nil {
		return err
	}
	if err := fc.apply(c); err != nil {
		return err
	}
	*j = *jobFromFlags(c)
	if !c.IsSet("header") {
		j.Headers = append(j.Headers, fc.headers...)
	}
	if !c.IsSet("param") {
		j.Params = append(j.Params, fc.params...)
	}
	if !c.IsSet("account") {
		j.Accounts = append(j.Accounts, fc.accts...)
	}
	if !c.IsSet("account-header") {
		j.AccountHeaders = append(j.AccountHeaders, fc.acctHdr...)
	}
	j.Paths = fc.paths
	j.Maps = fc.maps
	return nil
}

// printEffective writes the effective configuration as YAML, secrets
// redacted.
func printEffective(w io.Writer, j *job, red *redact.Redactor) error {
	hdrs := make([]map[string]string, 0, len(j.Headers))
	for _, h := range j.Headers {
		name, _, _ := strings.Cut(h, ":")
		hdrs = append(hdrs, map[string]string{"name": strings.TrimSpace(name), "value": redact.Mask})
	}
	accts := map[string][]string{}
	for _, a := range j.Accounts {
		accts[a] = nil
	}
	for _, h := range j.AccountHeaders {
		label, rest, _ := strings.Cut(h, ":")
		name, _, _ := strings.Cut(rest, ":")
		accts[label] = append(accts[label], strings.TrimSpace(name)+": "+redact.Mask)
	}
	out := map[string]any{
		"api-url": red.String(j.APIURL), "headers": hdrs, "params": j.Params, "endpoints": j.Endpoints,
		"endpoint-paths": j.Paths, "accounts": accts, "sink": j.Sinks, "data-dir": j.DataDir,
		"clickhouse-dsn": red.String(j.ClickHouseDSN), "migrate": j.Migrate, "cluster": j.Cluster, "source": j.Source,
		"timestamp-unit": j.TimestampUnit, "timeout": j.Timeout.String(), "deadline": j.Deadline.String(),
		"max-attempts": j.MaxAttempts, "max-body-size": j.MaxBodyBytes, "batch-rows": j.BatchRows,
		"summary-json": j.SummaryJSON, "every": j.Every.String(), "log-format": j.LogFormat, "log-level": j.LogLevel,
		"schema-contract": j.SchemaContract, "rate-limit": j.RateLimit, "rate-burst": j.RateBurst,
		"catch-up-budget": j.CatchUpBudget.String(), "catch-up-max": j.CatchUpMax,
		"column-budget": j.ColumnBudget, "endpoint-maps": j.Maps, "compact": j.Compact,
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(out); err != nil {
		return err
	}
	return enc.Close()
}
