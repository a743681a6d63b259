package settings

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/optlake/optlake/internal/secret"
	"github.com/optlake/optlake/pipeline/extract/auth"
	"github.com/optlake/optlake/pipeline/extract/envelope"
	"github.com/optlake/optlake/pipeline/extract/paginate"
	"github.com/optlake/optlake/pipeline/fieldmap"
	"github.com/optlake/optlake/schema"
)

// The config file's keys for real venues (DESIGN.md, "Real venues"):
//
//	auth: {type: hmac, key: ${KEY}, secret: @/run/secrets/s, sign: "…", headers: {…}}
//	errors: {path: error, code: error.code, message: error.message, retry_codes: [10028]}
//	accounts: [{label: main, auth: {type: bearer, token: ${MAIN_TOKEN}}}]
//	endpoints:
//	  instruments: {records: result, pagination: {type: cursor, cursor_path: result.next, cursor_param: cursor}}
//	  trades: {kind: account, path: /v1/private/trades, method: POST, body: '{"jsonrpc":"2.0"}', auth: none}
//
// Secret values (tokens, keys, passwords) take ${VAR} and @file.

// Endpoint is what the config file says of one endpoint beyond its path,
// parameters and maps.
type Endpoint struct {
	Line   int
	Method string
	// Body is sent as written, ${VAR} replaced by the environment
	// variable (BodySecrets: the values put in, redacted like secrets).
	Body        string
	BodySecrets []string
	Records     string
	Shape       envelope.Shape // records: {key, columns}
	Kind        string         // account | public (endpoints beyond the seed's)
	Auth        *auth.Spec
	Pagination  *paginate.Spec
	Errors      *envelope.Errors
	Fields      fieldmap.Map // the listing's fields, by instruments column
	// Params are sent as written, never split at commas
	// (params: {key: {value: "A,B", split: false}}).
	Params url.Values
}

// Venue is the real-venue part of a config file.
type Venue struct {
	Auth        *auth.Spec
	Errors      *envelope.Errors
	AccountAuth map[string]*auth.Spec // per account label
	Endpoints   map[string]*Endpoint
}

// Secrets lists every secret value of v, for redaction.
func (v *Venue) Secrets() []string {
	var out []string
	add := func(s *auth.Spec) {
		if s != nil {
			out = append(out, s.Secrets()...)
		}
	}
	add(v.Auth)
	for _, s := range v.AccountAuth {
		add(s)
	}
	for _, e := range v.Endpoints {
		add(e.Auth)
		out = append(out, e.BodySecrets...)
	}
	return out
}

// inlineTemplates gives every template signer the endpoints' parameter
// values (endpoint.key=value) and bodies that are templates: those, and
// only those, it renders for each request. Each signer renders them once
// here, so a mistake in one is the config's.
func (v *Venue) inlineTemplates(params []string) error {
	var inline []string
	for _, p := range params {
		if _, val, ok := strings.Cut(p, "="); ok && strings.Contains(val, "{{") {
			inline = append(inline, val)
		}
	}
	for _, e := range v.Endpoints {
		if strings.Contains(e.Body, "{{") {
			inline = append(inline, e.Body)
		}
	}
	if len(inline) == 0 {
		return nil
	}
	var errs []error
	set := func(where string, s *auth.Spec) {
		if s != nil && s.Type == auth.Templated {
			s.Inline = inline
			if err := s.Check(); err != nil {
				errs = append(errs, fmt.Errorf("endpoints: a template in params or body, signed by %s: %w", where, err))
			}
		}
	}
	set("auth", v.Auth)
	for label, s := range v.AccountAuth {
		set("accounts["+label+"].auth", s)
	}
	for name, e := range v.Endpoints {
		set("endpoints."+name+".auth", e.Auth)
	}
	return errors.Join(errs...)
}

// mapping calls each of keys' functions with the value of its key; an
// unknown key is an error listing the known ones.
func mapping(n *yaml.Node, where string, fail failFunc, keys map[string]func(v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return fail(n, "%s: want a mapping", where)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		fn, ok := keys[k.Value]
		if !ok {
			names := make([]string, 0, len(keys))
			for name := range keys {
				names = append(names, name)
			}
			sort.Strings(names)
			return fail(k, "%s: unknown key %q (want %s)", where, k.Value, strings.Join(names, ", "))
		}
		if err := fn(v); err != nil {
			return err
		}
	}
	return nil
}

func scalar(dst *string, where string, fail failFunc) func(*yaml.Node) error {
	return func(v *yaml.Node) error {
		if v.Kind != yaml.ScalarNode {
			return fail(v, "%s: want a value", where)
		}
		*dst = v.Value
		return nil
	}
}

// secretValue reads a secret: ${VAR} anywhere reads the environment, a
// value starting with @ reads the file it names.
func secretValue(dst *string, where string, fail failFunc) func(*yaml.Node) error {
	return func(v *yaml.Node) error {
		if v.Kind != yaml.ScalarNode {
			return fail(v, "%s: want a value", where)
		}
		s, err := secret.Expand(v.Value)
		if err == nil && strings.HasPrefix(s, "@") {
			s, err = secret.ReadFile(s[1:])
		}
		if err != nil {
			return fail(v, "%s: %v", where, err)
		}
		*dst = s
		return nil
	}
}

func integer(dst *int, where string, fail failFunc) func(*yaml.Node) error {
	return func(v *yaml.Node) error {
		n, err := strconv.Atoi(v.Value)
		if v.Kind != yaml.ScalarNode || err != nil {
			return fail(v, "%s: want a whole number", where)
		}
		*dst = n
		return nil
	}
}

func strList(dst *[]string, where string, fail failFunc) func(*yaml.Node) error {
	return func(v *yaml.Node) error {
		vals, err := scalars(v)
		if err != nil {
			return fail(v, "%s: %v", where, err)
		}
		*dst = vals
		return nil
	}
}

// pairs reads {Name: value} in file order; secret values are expanded.
func pairs(dst *[]auth.KV, where string, fail failFunc, secrets bool) func(*yaml.Node) error {
	return func(v *yaml.Node) error {
		if v.Kind != yaml.MappingNode {
			return fail(v, "%s: want a mapping Name: value", where)
		}
		for i := 0; i+1 < len(v.Content); i += 2 {
			kv := auth.KV{Name: v.Content[i].Value}
			read := scalar
			if secrets {
				read = secretValue
			}
			if err := read(&kv.Value, where+"."+kv.Name, fail)(v.Content[i+1]); err != nil {
				return err
			}
			*dst = append(*dst, kv)
		}
		return nil
	}
}

// authSpec reads an auth: key ("none", or a mapping with a type).
func authSpec(v *yaml.Node, where string, fail failFunc) (*auth.Spec, error) {
	s := &auth.Spec{}
	if v.Kind == yaml.ScalarNode {
		if v.Value != auth.None {
			return nil, fail(v, "%s: want none or a mapping with a type", where)
		}
		s.Type = auth.None
		return s, nil
	}
	// The type first: it decides which header values are secrets.
	if v.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(v.Content); i += 2 {
			if v.Content[i].Value == "type" {
				s.Type = v.Content[i+1].Value
			}
		}
	}
	w := func(k string) string { return where + "." + k }
	login := func(n *yaml.Node) error {
		return mapping(n, w("login"), fail, map[string]func(*yaml.Node) error{
			"method": scalar(&s.Login.Method, w("login.method"), fail),
			"path":   scalar(&s.Login.Path, w("login.path"), fail),
			"query":  pairs(&s.Login.Query, w("login.query"), fail, true),
			"body":   secretValue(&s.Login.Body, w("login.body"), fail),
		})
	}
	var typ string
	err := mapping(v, where, fail, map[string]func(*yaml.Node) error{
		"type":          scalar(&typ, w("type"), fail),
		"headers":       pairs(&s.Headers, w("headers"), fail, s.Type == auth.Headers),
		"token":         func(n *yaml.Node) error { return tokenKey(s, n, w("token"), fail) },
		"user":          secretValue(&s.User, w("user"), fail),
		"password":      secretValue(&s.Password, w("password"), fail),
		"name":          scalar(&s.Name, w("name"), fail),
		"value":         secretValue(&s.Value, w("value"), fail),
		"token_url":     scalar(&s.TokenURL, w("token_url"), fail),
		"client_id":     secretValue(&s.ClientID, w("client_id"), fail),
		"client_secret": secretValue(&s.ClientSecret, w("client_secret"), fail),
		"scopes":        strList(&s.Scopes, w("scopes"), fail),
		"login":         login,
		"expires_in":    scalar(&s.ExpiresPath, w("expires_in"), fail),
		"key":           secretValue(&s.Key, w("key"), fail),
		"secret":        secretValue(&s.Secret, w("secret"), fail),
		"hash":          scalar(&s.Hash, w("hash"), fail),
		"encoding":      scalar(&s.Encoding, w("encoding"), fail),
		"timestamp":     scalar(&s.Timestamp, w("timestamp"), fail),
		"sign":          scalar(&s.Sign, w("sign"), fail),
		"query":         pairs(&s.Query, w("query"), fail, false),
		"passphrase":    secretValue(&s.Passphrase, w("passphrase"), fail),
		"vars":          pairs(&s.Vars, w("vars"), fail, true),
		"params":        scalar(&s.Params, w("params"), fail),
		"body":          scalar(&s.Body, w("body"), fail),
		"content_type":  scalar(&s.ContentType, w("content_type"), fail),
	})
	if err != nil {
		return nil, err
	}
	if err := s.Check(); err != nil {
		var ke *auth.KeyError
		if errors.As(err, &ke) {
			// Point at the key's own line: a template's error has its
			// line and column inside the value.
			return nil, fail(keyNode(v, ke.Key), "%s: %v", where, err)
		}
		return nil, fail(v, "%s: %v", where, err)
	}
	return s, nil
}

// keyNode finds the node of a dotted key ("headers.API-Sign") in the
// mapping n: the value of the deepest key found, else n.
func keyNode(n *yaml.Node, key string) *yaml.Node {
	for n.Kind == yaml.MappingNode {
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if key == k || strings.HasPrefix(key, k+".") {
				n, key, found = n.Content[i+1], strings.TrimPrefix(strings.TrimPrefix(key, k), "."), true
				break
			}
		}
		if !found || key == "" {
			break
		}
	}
	return n
}

// tokenKey is bearer's token (a secret) or session's token path.
func tokenKey(s *auth.Spec, n *yaml.Node, where string, fail failFunc) error {
	if s.Type == auth.Session {
		return scalar(&s.TokenPath, where, fail)(n)
	}
	return secretValue(&s.Token, where, fail)(n)
}

func errorsSpec(v *yaml.Node, where string, fail failFunc) (*envelope.Errors, error) {
	e := &envelope.Errors{}
	w := func(k string) string { return where + "." + k }
	err := mapping(v, where, fail, map[string]func(*yaml.Node) error{
		"path":        scalar(&e.Path, w("path"), fail),
		"code":        scalar(&e.Code, w("code"), fail),
		"message":     scalar(&e.Message, w("message"), fail),
		"ok":          strList(&e.OK, w("ok"), fail),
		"non_empty":   boolean(&e.NonEmpty, w("non_empty"), fail),
		"retry_codes": strList(&e.RetryCodes, w("retry_codes"), fail),
	})
	if err != nil {
		return nil, err
	}
	if err := e.Check(); err != nil {
		return nil, fail(v, "%s: %v", where, err)
	}
	return e, nil
}

func boolean(dst *bool, where string, fail failFunc) func(*yaml.Node) error {
	return func(v *yaml.Node) error {
		b, err := strconv.ParseBool(v.Value)
		if v.Kind != yaml.ScalarNode || err != nil {
			return fail(v, "%s: want true or false", where)
		}
		*dst = b
		return nil
	}
}

// recordsKey reads records: a dotted path, or {path, key, columns}.
func recordsKey(e *Endpoint, v *yaml.Node, where string, fail failFunc) error {
	if v.Kind == yaml.ScalarNode {
		e.Records = v.Value
		return nil
	}
	w := func(k string) string { return where + "." + k }
	err := mapping(v, where, fail, map[string]func(*yaml.Node) error{
		"path":    scalar(&e.Records, w("path"), fail),
		"key":     scalar(&e.Shape.Key, w("key"), fail),
		"columns": strList(&e.Shape.Columns, w("columns"), fail),
	})
	if err != nil {
		return err
	}
	if err := e.Shape.Check(); err != nil {
		return fail(v, "%s: %v", where, err)
	}
	return nil
}

// fieldsKey reads fields: {column: venue_field | {from, value, values,
// default, time, scale, decimals, split, part}}, checked against the instruments table.
func fieldsKey(e *Endpoint, v *yaml.Node, where string, fail failFunc) error {
	if v.Kind != yaml.MappingNode {
		return fail(v, "%s: want a mapping column -> venue field", where)
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		r := fieldmap.Rule{Column: k.Value}
		w := func(s string) string { return where + "." + k.Value + s }
		if val.Kind == yaml.ScalarNode {
			r.From = val.Value
		} else {
			var def, scale string
			hasDefault := false
			err := mapping(val, w(""), fail, map[string]func(*yaml.Node) error{
				"from":  scalar(&r.From, w(".from"), fail),
				"value": scalar(&r.Value, w(".value"), fail),
				"values": func(n *yaml.Node) error {
					if n.Kind != yaml.MappingNode {
						return fail(n, "%s: want a mapping venue value -> value", w(".values"))
					}
					r.Values = map[string]string{}
					for j := 0; j+1 < len(n.Content); j += 2 {
						if n.Content[j+1].Kind != yaml.ScalarNode {
							return fail(n.Content[j+1], "%s: want a value", w(".values."+n.Content[j].Value))
						}
						r.Values[n.Content[j].Value] = n.Content[j+1].Value
					}
					return nil
				},
				"default": func(n *yaml.Node) error {
					hasDefault = true
					return scalar(&def, w(".default"), fail)(n)
				},
				"time":     scalar(&r.Time, w(".time"), fail),
				"scale":    scalar(&scale, w(".scale"), fail),
				"decimals": scalar(&r.Decimals, w(".decimals"), fail),
				"split":    scalar(&r.Split, w(".split"), fail),
				"part":     integer(&r.Part, w(".part"), fail),
			})
			if err != nil {
				return err
			}
			if hasDefault {
				r.Default = &def
			}
			if scale != "" {
				f, err := strconv.ParseFloat(scale, 64)
				if err != nil || f == 0 {
					return fail(val, "%s: want a number other than 0", w(".scale"))
				}
				r.Scale = f
			}
		}
		e.Fields = append(e.Fields, r)
		if err := (fieldmap.Map{r}).Check(schema.Instruments); err != nil {
			return fail(k, "%s: %v", where, err)
		}
	}
	if err := e.Fields.Check(schema.Instruments); err != nil {
		return fail(v, "%s: %v", where, err)
	}
	return nil
}

func paginationSpec(v *yaml.Node, where string, fail failFunc) (*paginate.Spec, error) {
	p := &paginate.Spec{}
	w := func(k string) string { return where + "." + k }
	err := mapping(v, where, fail, map[string]func(*yaml.Node) error{
		"type":               scalar(&p.Type, w("type"), fail),
		"max_pages":          integer(&p.MaxPages, w("max_pages"), fail),
		"cursor_path":        scalar(&p.CursorPath, w("cursor_path"), fail),
		"cursor_param":       scalar(&p.CursorParam, w("cursor_param"), fail),
		"cursor_from_record": scalar(&p.CursorFromRecord, w("cursor_from_record"), fail),
		"cursor_plus":        integer(&p.CursorPlus, w("cursor_plus"), fail),
		"next_path":          scalar(&p.NextPath, w("next_path"), fail),
		"offset_param":       scalar(&p.OffsetParam, w("offset_param"), fail),
		"total_path":         scalar(&p.TotalPath, w("total_path"), fail),
		"page_param":         scalar(&p.PageParam, w("page_param"), fail),
		"start":              integer(&p.Start, w("start"), fail),
		"limit_param":        scalar(&p.LimitParam, w("limit_param"), fail),
		"limit":              integer(&p.Limit, w("limit"), fail),
	})
	if err != nil {
		return nil, err
	}
	if err := p.Check(); err != nil {
		return nil, fail(v, "%s: %v", where, err)
	}
	return p, nil
}

// endpointKey reads one of the real-venue keys of endpoints.<name>; it
// reports false for a key it does not know.
func (fc *File) endpointKey(name string, k, v *yaml.Node, fail failFunc) (bool, error) {
	if fc.Venue.Endpoints == nil {
		fc.Venue.Endpoints = map[string]*Endpoint{}
	}
	e := fc.Venue.Endpoints[name]
	if e == nil {
		e = &Endpoint{Line: k.Line}
		fc.Venue.Endpoints[name] = e
	}
	where := "endpoints." + name + "." + k.Value
	var err error
	switch k.Value {
	case "method":
		if err = scalar(&e.Method, where, fail)(v); err == nil {
			e.Method = strings.ToUpper(e.Method)
			if e.Method != "GET" && e.Method != "POST" {
				err = fail(v, "%s: want GET or POST", where)
			}
		}
	case "body":
		if err = scalar(&e.Body, where, fail)(v); err == nil {
			var xerr error
			if e.Body, e.BodySecrets, xerr = secret.ExpandBraced(e.Body); xerr != nil {
				err = fail(v, "%s: %v", where, xerr)
			}
		}
	case "records":
		err = recordsKey(e, v, where, fail)
	case "fields":
		if name != "instruments" {
			return true, fail(k, "%s: only the instrument listing takes fields (other endpoints load every field as a column)", where)
		}
		err = fieldsKey(e, v, where, fail)
	case "kind":
		if err = scalar(&e.Kind, where, fail)(v); err == nil && e.Kind != "account" && e.Kind != "public" {
			err = fail(v, "%s: want account or public", where)
		}
	case "auth":
		e.Auth, err = authSpec(v, where, fail)
	case "pagination":
		e.Pagination, err = paginationSpec(v, where, fail)
	case "errors":
		e.Errors, err = errorsSpec(v, where, fail)
	default:
		return false, nil
	}
	return true, err
}

func (s *Endpoint) String() string { return fmt.Sprintf("%+v", *s) }
