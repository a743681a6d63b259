// Package venueconf reads the real-venue keys of a config file (auth,
// errors, and endpoints' records, fields, pagination, maps…) into the
// pipeline's specs, each checked by the package that uses it. Package
// internal/settings declares the keys and reads their YAML; this package
// gives them their meaning, so the arrow runs from the pipeline to the
// settings and never back.
package venueconf

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/optlake/optlake/internal/secret"
	"github.com/optlake/optlake/internal/settings"
	"github.com/optlake/optlake/pipeline/extract/auth"
	"github.com/optlake/optlake/pipeline/extract/envelope"
	"github.com/optlake/optlake/pipeline/extract/paginate"
	"github.com/optlake/optlake/pipeline/fieldmap"
	"github.com/optlake/optlake/pipeline/infer"
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
	Maps        map[string]infer.MapRules // endpoint -> map detection overrides
}

// Decode reads the real-venue keys of fc. Every error is the user's, a
// *settings.FileError at the key's line.
func Decode(fc *settings.File) (Venue, error) {
	var v Venue
	fail := fc.Fail
	k := fc.Venue
	var err error
	if k.Auth != nil {
		if v.Auth, err = authSpec(k.Auth, "auth", fail); err != nil {
			return v, err
		}
	}
	if k.Errors != nil {
		if v.Errors, err = errorsSpec(k.Errors, "errors", fail); err != nil {
			return v, err
		}
	}
	for _, a := range k.AccountAuth {
		s, err := authSpec(a.Auth, "accounts[].auth", fail)
		if err != nil {
			return v, err
		}
		if v.AccountAuth == nil {
			v.AccountAuth = map[string]*auth.Spec{}
		}
		v.AccountAuth[a.Label] = s
	}
	for _, e := range k.Endpoints {
		if err := v.endpointKey(e.Endpoint, e.Key, e.Value, fail); err != nil {
			return v, err
		}
	}
	for _, p := range k.WholeParams {
		e := v.endpoint(p.Endpoint, p.Line)
		if e.Params == nil {
			e.Params = url.Values{}
		}
		e.Params.Add(p.Key, p.Value)
	}
	if err := v.inlineTemplates(fc.Params); err != nil {
		return v, &settings.FileError{Path: fc.Path, Line: fc.Line("endpoints"), Msg: err.Error()}
	}
	return v, nil
}

// endpoint is the endpoint called name, added at line if new.
func (ve *Venue) endpoint(name string, line int) *Endpoint {
	if ve.Endpoints == nil {
		ve.Endpoints = map[string]*Endpoint{}
	}
	e := ve.Endpoints[name]
	if e == nil {
		e = &Endpoint{Line: line}
		ve.Endpoints[name] = e
	}
	return e
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
	var errs []error
	templated := map[string]string{} // endpoint → one of its templates
	for _, p := range params {
		if key, val, ok := strings.Cut(p, "="); ok && strings.Contains(val, "{{") {
			inline = append(inline, val)
			ep, _, _ := strings.Cut(key, ".")
			templated[ep] = val
		}
	}
	for name, e := range v.Endpoints {
		if strings.Contains(e.Body, "{{") {
			inline = append(inline, e.Body)
			templated[name] = e.Body
		}
		for _, vals := range e.Params {
			for _, val := range vals {
				if strings.Contains(val, "{{") {
					inline = append(inline, val)
					templated[name] = val
				}
			}
		}
	}
	if len(inline) == 0 {
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(templated)) {
		errs = append(errs, v.rendersTemplates(name, templated[name]))
	}
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

// rendersTemplates checks that every signer that may sign endpoint name's
// requests renders templates, tpl being one of them in its params or body:
// any other signer would send "{{ … }}" to the venue as written. The
// endpoint's own auth signs it; without one, an account's (for each
// account with an auth) or the venue's.
func (v *Venue) rendersTemplates(name, tpl string) error {
	check := func(where string, s *auth.Spec) error {
		switch {
		case s == nil || s.Type == auth.None:
			return fmt.Errorf("endpoints.%s: %q is a template, but %s signs nothing: only an auth of type %s renders {{ … }}", name, tpl, where, auth.Templated)
		case s.Type != auth.Templated:
			return fmt.Errorf("endpoints.%s: %q is a template, but %s (type %s) signs it and would send it as written: only an auth of type %s renders {{ … }}; give the endpoint its own", name, tpl, where, s.Type, auth.Templated)
		}
		return nil
	}
	if e := v.Endpoints[name]; e != nil && e.Auth != nil {
		return check("endpoints."+name+".auth", e.Auth)
	}
	labels := slices.Sorted(maps.Keys(v.AccountAuth))
	for _, label := range labels {
		if err := check("accounts["+label+"].auth", v.AccountAuth[label]); err != nil {
			return err
		}
	}
	if v.Auth == nil && len(labels) > 0 {
		return nil // the accounts' signers
	}
	return check("auth", v.Auth)
}

// pairs reads {Name: value} in file order; secret values are expanded.
func pairs(dst *[]auth.KV, where string, fail settings.FailFunc, secrets bool) func(*yaml.Node) error {
	return func(v *yaml.Node) error {
		if v.Kind != yaml.MappingNode {
			return fail(v, "%s: want a mapping Name: value", where)
		}
		for i := 0; i+1 < len(v.Content); i += 2 {
			kv := auth.KV{Name: v.Content[i].Value}
			read := settings.Scalar
			if secrets {
				read = settings.SecretValue
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
func authSpec(v *yaml.Node, where string, fail settings.FailFunc) (*auth.Spec, error) {
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
		return settings.Mapping(n, w("login"), fail, map[string]func(*yaml.Node) error{
			"method": settings.Scalar(&s.Login.Method, w("login.method"), fail),
			"path":   settings.Scalar(&s.Login.Path, w("login.path"), fail),
			"query":  pairs(&s.Login.Query, w("login.query"), fail, true),
			"body":   settings.SecretValue(&s.Login.Body, w("login.body"), fail),
		})
	}
	var typ string
	err := settings.Mapping(v, where, fail, map[string]func(*yaml.Node) error{
		"type":          settings.Scalar(&typ, w("type"), fail),
		"headers":       pairs(&s.Headers, w("headers"), fail, s.Type == auth.Headers),
		"token":         func(n *yaml.Node) error { return tokenKey(s, n, w("token"), fail) },
		"user":          settings.SecretValue(&s.User, w("user"), fail),
		"password":      settings.SecretValue(&s.Password, w("password"), fail),
		"name":          settings.Scalar(&s.Name, w("name"), fail),
		"value":         settings.SecretValue(&s.Value, w("value"), fail),
		"token_url":     settings.Scalar(&s.TokenURL, w("token_url"), fail),
		"client_id":     settings.SecretValue(&s.ClientID, w("client_id"), fail),
		"client_secret": settings.SecretValue(&s.ClientSecret, w("client_secret"), fail),
		"scopes":        settings.StrList(&s.Scopes, w("scopes"), fail),
		"login":         login,
		"expires_in":    settings.Scalar(&s.ExpiresPath, w("expires_in"), fail),
		"key":           settings.SecretValue(&s.Key, w("key"), fail),
		"secret":        settings.SecretValue(&s.Secret, w("secret"), fail),
		"hash":          settings.Scalar(&s.Hash, w("hash"), fail),
		"encoding":      settings.Scalar(&s.Encoding, w("encoding"), fail),
		"timestamp":     settings.Scalar(&s.Timestamp, w("timestamp"), fail),
		"sign":          settings.Scalar(&s.Sign, w("sign"), fail),
		"query":         pairs(&s.Query, w("query"), fail, false),
		"passphrase":    settings.SecretValue(&s.Passphrase, w("passphrase"), fail),
		"vars":          pairs(&s.Vars, w("vars"), fail, true),
		"params":        settings.Scalar(&s.Params, w("params"), fail),
		"body":          settings.Scalar(&s.Body, w("body"), fail),
		"content_type":  settings.Scalar(&s.ContentType, w("content_type"), fail),
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
func tokenKey(s *auth.Spec, n *yaml.Node, where string, fail settings.FailFunc) error {
	if s.Type == auth.Session {
		return settings.Scalar(&s.TokenPath, where, fail)(n)
	}
	return settings.SecretValue(&s.Token, where, fail)(n)
}

func errorsSpec(v *yaml.Node, where string, fail settings.FailFunc) (*envelope.Errors, error) {
	e := &envelope.Errors{}
	w := func(k string) string { return where + "." + k }
	err := settings.Mapping(v, where, fail, map[string]func(*yaml.Node) error{
		"path":        settings.Scalar(&e.Path, w("path"), fail),
		"code":        settings.Scalar(&e.Code, w("code"), fail),
		"message":     settings.Scalar(&e.Message, w("message"), fail),
		"ok":          settings.StrList(&e.OK, w("ok"), fail),
		"non_empty":   settings.Boolean(&e.NonEmpty, w("non_empty"), fail),
		"retry_codes": settings.StrList(&e.RetryCodes, w("retry_codes"), fail),
	})
	if err != nil {
		return nil, err
	}
	if err := e.Check(); err != nil {
		return nil, fail(v, "%s: %v", where, err)
	}
	return e, nil
}

// recordsKey reads records: a dotted path, or {path, key, columns}.
func recordsKey(e *Endpoint, v *yaml.Node, where string, fail settings.FailFunc) error {
	if v.Kind == yaml.ScalarNode {
		e.Records = v.Value
		return nil
	}
	w := func(k string) string { return where + "." + k }
	err := settings.Mapping(v, where, fail, map[string]func(*yaml.Node) error{
		"path":    settings.Scalar(&e.Records, w("path"), fail),
		"key":     settings.Scalar(&e.Shape.Key, w("key"), fail),
		"columns": settings.StrList(&e.Shape.Columns, w("columns"), fail),
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
func fieldsKey(e *Endpoint, v *yaml.Node, where string, fail settings.FailFunc) error {
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
			err := settings.Mapping(val, w(""), fail, map[string]func(*yaml.Node) error{
				"from":  settings.Scalar(&r.From, w(".from"), fail),
				"value": settings.Scalar(&r.Value, w(".value"), fail),
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
					return settings.Scalar(&def, w(".default"), fail)(n)
				},
				"time":     settings.Scalar(&r.Time, w(".time"), fail),
				"scale":    settings.Scalar(&scale, w(".scale"), fail),
				"decimals": settings.Scalar(&r.Decimals, w(".decimals"), fail),
				"split":    settings.Scalar(&r.Split, w(".split"), fail),
				"part":     settings.Integer(&r.Part, w(".part"), fail),
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

func paginationSpec(v *yaml.Node, where string, fail settings.FailFunc) (*paginate.Spec, error) {
	p := &paginate.Spec{}
	w := func(k string) string { return where + "." + k }
	err := settings.Mapping(v, where, fail, map[string]func(*yaml.Node) error{
		"type":               settings.Scalar(&p.Type, w("type"), fail),
		"max_pages":          settings.Integer(&p.MaxPages, w("max_pages"), fail),
		"cursor_path":        settings.Scalar(&p.CursorPath, w("cursor_path"), fail),
		"cursor_param":       settings.Scalar(&p.CursorParam, w("cursor_param"), fail),
		"cursor_from_record": settings.Scalar(&p.CursorFromRecord, w("cursor_from_record"), fail),
		"cursor_plus":        settings.Integer(&p.CursorPlus, w("cursor_plus"), fail),
		"next_path":          settings.Scalar(&p.NextPath, w("next_path"), fail),
		"offset_param":       settings.Scalar(&p.OffsetParam, w("offset_param"), fail),
		"total_path":         settings.Scalar(&p.TotalPath, w("total_path"), fail),
		"page_param":         settings.Scalar(&p.PageParam, w("page_param"), fail),
		"start":              settings.Integer(&p.Start, w("start"), fail),
		"limit_param":        settings.Scalar(&p.LimitParam, w("limit_param"), fail),
		"limit":              settings.Integer(&p.Limit, w("limit"), fail),
	})
	if err != nil {
		return nil, err
	}
	if err := p.Check(); err != nil {
		return nil, fail(v, "%s: %v", where, err)
	}
	return p, nil
}

// endpointKey reads one of the keys of endpoints.<name> beyond path and
// params; a key it does not know is an error.
func (ve *Venue) endpointKey(name string, k, v *yaml.Node, fail settings.FailFunc) error {
	if k.Value == "maps" {
		m, err := mapRules(v, "endpoints."+name+".maps", fail)
		if err != nil {
			return err
		}
		if ve.Maps == nil {
			ve.Maps = map[string]infer.MapRules{}
		}
		ve.Maps[name] = m
		return nil
	}
	e := ve.endpoint(name, k.Line)
	where := "endpoints." + name + "." + k.Value
	var err error
	switch k.Value {
	case "method":
		if err = settings.Scalar(&e.Method, where, fail)(v); err == nil {
			e.Method = strings.ToUpper(e.Method)
			if e.Method != "GET" && e.Method != "POST" {
				err = fail(v, "%s: want GET or POST", where)
			}
		}
	case "body":
		if err = settings.Scalar(&e.Body, where, fail)(v); err == nil {
			var xerr error
			if e.Body, e.BodySecrets, xerr = secret.ExpandBraced(e.Body); xerr != nil {
				err = fail(v, "%s: %v", where, xerr)
			}
		}
	case "records":
		err = recordsKey(e, v, where, fail)
	case "fields":
		if name != "instruments" {
			return fail(k, "%s: only the instrument listing takes fields (other endpoints load every field as a column)", where)
		}
		err = fieldsKey(e, v, where, fail)
	case "kind":
		if err = settings.Scalar(&e.Kind, where, fail)(v); err == nil && e.Kind != "account" && e.Kind != "public" {
			err = fail(v, "%s: want account or public", where)
		}
	case "auth":
		e.Auth, err = authSpec(v, where, fail)
	case "pagination":
		e.Pagination, err = paginationSpec(v, where, fail)
	case "errors":
		e.Errors, err = errorsSpec(v, where, fail)
	default:
		return fail(k, "endpoints.%s: unknown key %q (want path, method, body, records, fields, kind, params, auth, pagination, errors, maps)", name, k.Value)
	}
	return err
}

func (s *Endpoint) String() string { return fmt.Sprintf("%+v", *s) }

// mapRules reads {force: [paths], forbid: [paths]}.
func mapRules(v *yaml.Node, where string, fail settings.FailFunc) (infer.MapRules, error) {
	var m infer.MapRules
	if v.Kind != yaml.MappingNode {
		return m, fail(v, "%s: want {force: [paths], forbid: [paths]}", where)
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		paths, err := settings.Scalars(val)
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
