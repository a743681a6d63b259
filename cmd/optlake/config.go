package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/internal/settings"
)

// configure reads the command's settings: flags and environment, then the
// config file (if any) for what they left unset, then the file's structured
// settings. Call after the flags were parsed.
func configure(c *cli.Context) (*job, error) {
	j, err := readJob(c)
	if err != nil || j.Config == "" {
		return j, err
	}
	// The config file's format: see internal/settings (file.go).
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
	j.Paths = fc.Paths
	j.Maps = fc.Maps
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
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(out); err != nil {
		return err
	}
	return enc.Close()
}
