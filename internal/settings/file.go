package settings

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"

	"github.com/optlake/optlake/internal/secret"
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

// File is what a config file adds to the flags: values of settings, and
// the structured keys.
type File struct {
	Path           string
	values         map[string][]string // flag name -> values (lists for slice flags)
	lines          map[string]int      // flag name -> line, for errors
	Headers        []string            // "Name: value"
	Paths          map[string]string   // endpoint path overrides
	Params         []string            // endpoint.key=value
	Accounts       []string
	AccountHeaders []string
	// Venue holds the keys the pipeline's packages read (auth, errors,
	// endpoints' records, pagination, maps…) as written: settings declares
	// them (FileKeys) and reads their YAML, package pipeline/venueconf
	// turns them into the pipeline's specs, so settings imports no
	// package of the pipeline.
	Venue VenueKeys
}

// VenueKeys are the real-venue keys of a config file, as YAML nodes in
// file order.
type VenueKeys struct {
	Auth, Errors *yaml.Node    // the top-level auth: and errors:
	AccountAuth  []AccountAuth // accounts[].auth
	Endpoints    []EndpointKey // endpoints.<name>.<key> but path and params
	WholeParams  []WholeParam  // params: {key: {value, split: false}}
}

// AccountAuth is the auth: node of one account.
type AccountAuth struct {
	Label string
	Auth  *yaml.Node
}

// EndpointKey is one key of endpoints.<Endpoint> other than path and params.
type EndpointKey struct {
	Endpoint   string
	Key, Value *yaml.Node
}

// WholeParam is a parameter sent as written, never split at commas.
type WholeParam struct {
	Endpoint   string
	Key, Value string
	Line       int
}

// FileError is a mistake in a config file, at a line when known.
type FileError struct {
	Path string
	Line int
	Msg  string
}

func (e *FileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("config %s:%d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("config %s: %s", e.Path, e.Msg)
}

// LoadFile parses and checks a config file against the settings of
// command. Every error is the user's (a *FileError, or the file unread).
func LoadFile(path, command string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &FileError{Path: path, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	fc := &File{Path: path, values: map[string][]string{}, lines: map[string]int{}, Paths: map[string]string{}}
	if len(doc.Content) == 0 {
		return fc, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, &FileError{Path: path, Line: root.Line, Msg: "want a mapping of settings"}
	}
	known := map[string]Setting{}
	for _, s := range For(command) {
		if !s.NotInFile {
			known[s.Name] = s
		}
	}
	fail := fc.Fail
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		key := k.Value
		switch key {
		case "headers":
			hs, err := fc.headerList(v, fail)
			if err != nil {
				return nil, err
			}
			fc.Headers = append(fc.Headers, hs...)
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
		case "auth":
			fc.Venue.Auth = v
			continue
		case "errors":
			fc.Venue.Errors = v
			continue
		case "config":
			return nil, fail(k, "config files do not nest (key %q)", key)
		}
		name := key
		fromFile := false
		if _, ok := known[key]; !ok {
			if base, ok := secret.FileKey(key); ok {
				name, fromFile = base, true
			}
		}
		f, ok := known[name]
		if !ok {
			return nil, fail(k, "unknown key %q (keys are the flag names of `optlake run --help`, plus headers, endpoints, accounts, auth, errors)", key)
		}
		vals, err := Scalars(v)
		if err != nil {
			return nil, fail(v, "%s: %v", key, err)
		}
		for j, s := range vals {
			if vals[j], err = secret.Expand(s); err != nil {
				return nil, fail(v, "%s: %v", key, err)
			}
			if fromFile {
				if vals[j], err = secret.ReadFile(vals[j]); err != nil {
					return nil, fail(v, "%s: %v", key, err)
				}
			}
		}
		if f.Kind != List && len(vals) != 1 {
			return nil, fail(v, "%s takes one value", key)
		}
		fc.values[name] = vals
		fc.lines[name] = v.Line
	}
	return fc, nil
}

// Fail is a *FileError at n's line.
func (fc *File) Fail(n *yaml.Node, format string, args ...any) error {
	return &FileError{Path: fc.Path, Line: n.Line, Msg: fmt.Sprintf(format, args...)}
}

// Line is the line of the top-level key, 0 when the file has none.
func (fc *File) Line(key string) int { return fc.lines[key] }

// Scalars returns a scalar or a list of scalars as strings.
func Scalars(v *yaml.Node) ([]string, error) {
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

// FailFunc makes the error of a mistake at a node (File.Fail).
type FailFunc func(n *yaml.Node, format string, args ...any) error

// headerList reads [{name, value | value_file}] into "Name: value" specs.
func (fc *File) headerList(v *yaml.Node, fail FailFunc) ([]string, error) {
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
			s, err := secret.Expand(val.Value)
			if err != nil {
				return nil, fail(val, "headers: %v", err)
			}
			switch k.Value {
			case "name":
				name = s
			case "value":
				value, have = s, true
			case "value_file", "value-file":
				if value, err = secret.ReadFile(s); err != nil {
					return nil, fail(val, "headers: %v", err)
				}
				have = true
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
func (fc *File) endpoints(v *yaml.Node, fail FailFunc) error {
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
				fc.Paths[k.Value] = ev.Value
			case "params":
				if ev.Kind != yaml.MappingNode {
					return fail(ev, "endpoints.%s.params: want a mapping key -> value", k.Value)
				}
				for p := 0; p+1 < len(ev.Content); p += 2 {
					if ev.Content[p+1].Kind == yaml.MappingNode {
						if err := fc.wholeParam(k.Value, ev.Content[p], ev.Content[p+1], fail); err != nil {
							return err
						}
						continue
					}
					vals, err := Scalars(ev.Content[p+1])
					if err != nil {
						return fail(ev.Content[p+1], "endpoints.%s.params.%s: %v", k.Value, ev.Content[p].Value, err)
					}
					s, err := secret.Expand(strings.Join(vals, ","))
					if err != nil {
						return fail(ev.Content[p+1], "endpoints.%s.params: %v", k.Value, err)
					}
					fc.Params = append(fc.Params, k.Value+"."+ev.Content[p].Value+"="+s)
				}
			default: // read by pipeline/venueconf, which rejects a key it does not know
				fc.Venue.Endpoints = append(fc.Venue.Endpoints, EndpointKey{Endpoint: k.Value, Key: ek, Value: ev})
			}
		}
	}
	fc.values["endpoints"] = names
	fc.lines["endpoints"] = v.Line
	return nil
}

// wholeParam reads params.<key>: {value, split}: with split: false the
// value (a list is joined with commas) is sent as one parameter; split:
// true fans a comma list out as a plain value does.
func (fc *File) wholeParam(endpoint string, k, v *yaml.Node, fail FailFunc) error {
	where := "endpoints." + endpoint + ".params." + k.Value
	var vals []string
	split := true
	err := Mapping(v, where, fail, map[string]func(*yaml.Node) error{
		"value": StrList(&vals, where+".value", fail),
		"split": Boolean(&split, where+".split", fail),
	})
	if err != nil {
		return err
	}
	if vals == nil {
		return fail(v, "%s: value is required", where)
	}
	s, err := secret.Expand(strings.Join(vals, ","))
	if err != nil {
		return fail(v, "%s: %v", where, err)
	}
	if split {
		fc.Params = append(fc.Params, endpoint+"."+k.Value+"="+s)
		return nil
	}
	fc.Venue.WholeParams = append(fc.Venue.WholeParams, WholeParam{Endpoint: endpoint, Key: k.Value, Value: s, Line: k.Line})
	return nil
}

// accounts reads [{label, headers, auth}].
func (fc *File) accounts(v *yaml.Node, fail FailFunc) error {
	if v.Kind != yaml.SequenceNode {
		return fail(v, "accounts: want a list of {label, headers}")
	}
	for _, a := range v.Content {
		if a.Kind != yaml.MappingNode {
			return fail(a, "accounts: want {label, headers}")
		}
		var label string
		var hdrs []string
		var spec *yaml.Node
		for i := 0; i+1 < len(a.Content); i += 2 {
			k, val := a.Content[i], a.Content[i+1]
			switch k.Value {
			case "label":
				label = val.Value
			case "auth":
				spec = val
			case "headers":
				hs, err := fc.headerList(val, fail)
				if err != nil {
					return err
				}
				hdrs = hs
			default:
				return fail(k, "accounts: unknown key %q (want label, headers, auth)", k.Value)
			}
		}
		if label == "" {
			return fail(a, "accounts: each needs a label")
		}
		if spec != nil {
			fc.Venue.AccountAuth = append(fc.Venue.AccountAuth, AccountAuth{Label: label, Auth: spec})
		}
		fc.Accounts = append(fc.Accounts, label)
		for _, h := range hdrs {
			fc.AccountHeaders = append(fc.AccountHeaders, label+":"+h)
		}
	}
	return nil
}

// Apply sets every flag the command line and environment left unset.
func (fc *File) Apply(c *cli.Context) error {
	names := make([]string, 0, len(fc.values))
	for n := range fc.values {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if c.IsSet(n) {
			continue // flag or environment wins
		}
		for _, v := range fc.values[n] {
			if err := c.Set(n, v); err != nil {
				return &FileError{Path: fc.Path, Line: fc.lines[n], Msg: fmt.Sprintf("%s: %v", n, err)}
			}
		}
	}
	return nil
}
