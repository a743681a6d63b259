package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/internal/settings"
	"github.com/optlake/optlake/pipeline/extract/auth"
	"github.com/optlake/optlake/pipeline/venueconf"
)

// configure reads the command's settings: flags and environment, then the
// config file (if any) for what they left unset, then the file's structured
// settings. Call after the flags were parsed.
func configure(c *cli.Context) (*job, error) {
	j, err := readJob(c)
	if err != nil || j.Config == "" {
		return j, err
	}
	// The config file's format: see internal/settings (file.go); its
	// real-venue keys: pipeline/venueconf.
	fc, err := settings.LoadFile(j.Config, settings.Run)
	if err != nil {
		return nil, usageError{err}
	}
	if err := fc.Apply(c); err != nil {
		return nil, usageError{err}
	}
	if j, err = readJob(c); err != nil {
		return nil, err
	}
	if !c.IsSet("header") {
		j.Headers = append(j.Headers, fc.Headers...)
	}
	if !c.IsSet("param") {
		j.Params = append(j.Params, fc.Params...)
	}
	if !c.IsSet("account") {
		j.Accounts = append(j.Accounts, fc.Accounts...)
	}
	if !c.IsSet("account-header") {
		j.AccountHeaders = append(j.AccountHeaders, fc.AccountHeaders...)
	}
	venue, err := venueconf.Decode(fc)
	if err != nil {
		return nil, usageError{err}
	}
	j.Paths = fc.Paths
	j.Maps = venue.Maps
	j.Venue = venue
	return j, nil
}

// printEffective writes the effective configuration as YAML, secrets
// redacted: every setting of the list under its name (or Shown key), plus
// the structured keys of the config file.
func printEffective(w io.Writer, j *job, red *redact.Redactor) error {
	out := map[string]any{}
	for _, s := range settings.For(settings.Run) {
		if s.NotInFile || s.Shown == "-" {
			continue
		}
		key := s.Name
		if s.Shown != "" {
			key = s.Shown
		}
		v, ok := settings.Get(j, s.Name)
		if !ok {
			return fmt.Errorf("config check: setting %s has no field", s.Name)
		}
		switch x := v.(type) {
		case string:
			v = red.String(x)
		case time.Duration:
			v = x.String()
		}
		out[key] = v
	}
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
	out["headers"], out["accounts"], out["endpoint-paths"], out["endpoint-maps"] = hdrs, accts, j.Paths, j.Maps
	if venue := shownVenue(j.Venue, red); len(venue) > 0 {
		out["venue"] = venue
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(out); err != nil {
		return err
	}
	return enc.Close()
}

// shownVenue is the real-venue part of the configuration for config check:
// each auth's type and keys with every secret redacted, and the endpoints'
// records, pagination and error keys.
func shownVenue(v venueconf.Venue, red *redact.Redactor) map[string]any {
	out := map[string]any{}
	show := func(s *auth.Spec) map[string]any {
		if s == nil {
			return nil
		}
		return shown(s, red)
	}
	if v.Auth != nil {
		out["auth"] = show(v.Auth)
	}
	if v.Errors != nil {
		out["errors"] = shown(v.Errors, red)
	}
	if len(v.AccountAuth) > 0 {
		acc := map[string]any{}
		for label, s := range v.AccountAuth {
			acc[label] = show(s)
		}
		out["accounts"] = acc
	}
	if len(v.Endpoints) > 0 {
		eps := map[string]any{}
		for name, e := range v.Endpoints {
			m := map[string]any{}
			for k, val := range map[string]any{"method": e.Method, "records": e.Records, "kind": e.Kind, "body": red.String(e.Body)} {
				if val != "" {
					m[k] = val
				}
			}
			if e.Auth != nil {
				m["auth"] = show(e.Auth)
			}
			if e.Pagination != nil {
				m["pagination"] = shown(e.Pagination, red)
			}
			if e.Errors != nil {
				m["errors"] = shown(e.Errors, red)
			}
			if e.Shape.Shaped() {
				m["records"] = map[string]any{"path": e.Records, "key": e.Shape.Key, "columns": e.Shape.Columns}
			}
			if len(e.Fields) > 0 {
				f := map[string]any{}
				for _, r := range e.Fields {
					rule := map[string]any{}
					for k, val := range map[string]string{"from": r.From, "value": r.Value, "time": r.Time, "split": r.Split} {
						if val != "" {
							rule[k] = val
						}
					}
					if r.Values != nil {
						rule["values"] = r.Values
					}
					if r.Default != nil {
						rule["default"] = *r.Default
					}
					if r.Scale != 0 {
						rule["scale"] = r.Scale
					}
					if r.Part != 0 {
						rule["part"] = r.Part
					}
					f[r.Column] = rule
				}
				m["fields"] = f
			}
			if len(e.Params) > 0 {
				m["whole_params"] = e.Params
			}
			eps[name] = m
		}
		out["endpoints"] = eps
	}
	return out
}

// shown is a config struct as config check prints it: snake_case keys,
// zero values left out, secrets redacted.
func shown(v any, red *redact.Redactor) map[string]any {
	b, _ := json.Marshal(v)
	var all map[string]any
	json.Unmarshal([]byte(red.String(string(b))), &all)
	return snakeKeys(all).(map[string]any)
}

func snakeKeys(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if !isZero(e) {
				out[snake(k)] = snakeKeys(e)
			}
		}
		return out
	case []any:
		for i := range x {
			x[i] = snakeKeys(x[i])
		}
	}
	return v
}

// snake turns a Go field name into the config key: TokenPath -> token_path.
func snake(s string) string {
	var b strings.Builder
	lower := false
	for _, r := range s {
		up := r >= 'A' && r <= 'Z'
		if up && lower {
			b.WriteByte('_')
		}
		if up {
			r += 'a' - 'A'
		}
		lower = !up
		b.WriteRune(r)
	}
	// The keys whose config name is not their field's.
	switch k := b.String(); k {
	case "token_path":
		return "token"
	case "expires_path":
		return "expires_in"
	default:
		return k
	}
}

func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case float64:
		return x == 0
	case bool:
		return !x
	case []any:
		return len(x) == 0
	case map[string]any:
		for _, e := range x {
			if !isZero(e) {
				return false
			}
		}
		return true
	}
	return false
}
