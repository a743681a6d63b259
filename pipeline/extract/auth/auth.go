// Package auth authenticates requests to a venue: static headers, bearer
// tokens, HTTP basic, an API key in the query, OAuth2 client credentials,
// a login session, HMAC signatures laid out by a template, and requests
// whose every part is a Go template with signing functions (nested
// digests, JWTs, Ed25519, RSA and secp256k1 signatures; signer.go). An
// Authenticator sees the request that goes on the wire (its final URL and
// body), like an http.RoundTripper would. Every credential is a secret:
// Secrets lists them for redaction, and no error of this package quotes one.
package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The types of Spec.Type.
const (
	None     = "none"
	Headers  = "headers"
	Bearer   = "bearer"
	Basic    = "basic"
	QueryKey = "query_key"
	OAuth2   = "oauth2"
	Session  = "session"
	HMAC     = "hmac"
	// Template renders every part of a signed request from Go templates
	// with Funcs (signer.go): nested digests, JWTs, Ed25519, RSA and
	// secp256k1 signatures, form bodies.
	Templated = "template"
)

// Types lists the authentication types.
var Types = []string{None, Headers, Bearer, Basic, QueryKey, OAuth2, Session, HMAC, Templated}

// KV is one ordered name/value pair (headers, query entries).
type KV struct{ Name, Value string }

// Login is a session's login request.
type Login struct {
	Method string // default POST
	Path   string // relative to the API URL, or absolute
	Query  []KV
	Body   string // sent as application/json when not empty; a secret
}

// Spec configures one authenticator (the `auth:` key of the config).
type Spec struct {
	Type string
	// headers: sent as they are; session: templates with {token}; hmac:
	// templates with the signing placeholders.
	Headers []KV
	Token   string // bearer
	User    string // basic
	// Password is basic's password.
	Password string
	Name     string // query_key: the parameter name
	Value    string // query_key: the key
	// oauth2 (client credentials).
	TokenURL     string
	ClientID     string
	ClientSecret string
	Scopes       []string
	// session.
	Login       Login
	TokenPath   string // dotted path of the token in the login answer
	ExpiresPath string // dotted path of its lifetime in seconds (optional)
	// hmac.
	Key       string
	Secret    string
	Hash      string // sha256 (default) | sha384 | sha512
	Encoding  string // hex (default) | base64
	Timestamp string // ms (default) | s | us | iso
	Sign      string // hmac: the signed text's template; template: the signature's
	Query     []KV   // query entries (templates)
	// template (also Key, Secret, Timestamp, Sign, Headers, Query).
	Passphrase  string
	Vars        []KV   // more secrets, by name (.Vars.name)
	Params      string // query (default) | body: where the endpoint's parameters go
	Body        string // the body's template
	ContentType string // the Content-Type of a body
	// Inline lists the endpoints' parameter values and bodies that are
	// templates, as the config file gives them: only these are rendered,
	// never a value that came from the venue (a cursor, a next link).
	Inline []string
}

// Secrets returns the secret values of s (for redaction).
func (s Spec) Secrets() []string {
	out := []string{s.Token, s.Password, s.Value, s.ClientSecret, s.Secret, s.Key, s.Login.Body, s.Passphrase}
	for _, v := range s.Vars {
		out = append(out, v.Value)
	}
	if s.Type == Headers {
		for _, h := range s.Headers {
			out = append(out, h.Value)
		}
	}
	for _, q := range s.Login.Query {
		out = append(out, q.Value)
	}
	var keep []string
	for _, v := range out {
		if v != "" {
			keep = append(keep, v)
		}
	}
	return keep
}

// Check reports the first mistake in s, naming the key (never a value).
func (s Spec) Check() error {
	_, err := s.build(Env{Base: &url.URL{Scheme: "http", Host: "venue.invalid"}})
	return err
}

// Authenticator adds credentials to one request. body is the request's
// body as it is sent (nil for none). Apply may be called again for a
// retry of the same request (a new timestamp and signature).
type Authenticator interface {
	Apply(ctx context.Context, req *http.Request, body []byte) error
}

// Refresher is an Authenticator whose credentials can go stale (a
// session): Refresh drops them after a 401, so the next Apply logs in
// again.
type Refresher interface {
	Refresh()
}

// Env is what authenticators that make requests of their own (oauth2,
// session) need.
type Env struct {
	Base   *url.URL     // the API URL
	Client *http.Client // default http.DefaultClient
	Now    func() time.Time
	// Nonce returns a fresh nonce (default 16 random hex characters).
	Nonce func() string
}

// New builds the authenticator of s; a nil Authenticator (and nil error)
// for type none.
func New(s Spec, env Env) (Authenticator, error) { return s.build(env) }

func (s Spec) build(env Env) (Authenticator, error) {
	if env.Client == nil {
		env.Client = http.DefaultClient
	}
	if env.Now == nil {
		env.Now = time.Now
	}
	if env.Nonce == nil {
		env.Nonce = randomNonce
	}
	need := func(key, v string) error {
		if v == "" {
			return fmt.Errorf("auth %s: %s is required", s.Type, key)
		}
		return nil
	}
	switch s.Type {
	case None:
		return nil, nil
	case Headers:
		if len(s.Headers) == 0 {
			return nil, errors.New("auth headers: headers is required")
		}
		return staticHeaders(s.Headers), nil
	case Bearer:
		if err := need("token", s.Token); err != nil {
			return nil, err
		}
		return staticHeaders{{"Authorization", "Bearer " + s.Token}}, nil
	case Basic:
		if err := need("user", s.User); err != nil {
			return nil, err
		}
		return basicAuth{s.User, s.Password}, nil
	case QueryKey:
		if err := errors.Join(need("name", s.Name), need("value", s.Value)); err != nil {
			return nil, err
		}
		return queryKey{s.Name, s.Value}, nil
	case OAuth2:
		if err := errors.Join(need("token_url", s.TokenURL), need("client_id", s.ClientID), need("client_secret", s.ClientSecret)); err != nil {
			return nil, err
		}
		return newOAuth2(s, env)
	case Session:
		if err := errors.Join(need("login.path", s.Login.Path), need("token", s.TokenPath)); err != nil {
			return nil, err
		}
		return newSession(s, env)
	case HMAC:
		if err := errors.Join(need("key", s.Key), need("secret", s.Secret), need("sign", s.Sign)); err != nil {
			return nil, err
		}
		return newHMAC(s, env)
	case Templated:
		return newTemplateSigner(s, env)
	case "":
		return nil, fmt.Errorf("auth: type is required (one of %s)", strings.Join(Types, ", "))
	}
	return nil, fmt.Errorf("auth: unknown type %q (want one of %s)", s.Type, strings.Join(Types, ", "))
}

type staticHeaders []KV

func (h staticHeaders) Apply(_ context.Context, req *http.Request, _ []byte) error {
	for _, kv := range h {
		req.Header.Set(kv.Name, kv.Value)
	}
	return nil
}

type basicAuth struct{ user, password string }

func (b basicAuth) Apply(_ context.Context, req *http.Request, _ []byte) error {
	req.SetBasicAuth(b.user, b.password)
	return nil
}

type queryKey struct{ name, value string }

func (q queryKey) Apply(_ context.Context, req *http.Request, _ []byte) error {
	v := req.URL.Query()
	v.Set(q.name, q.value)
	req.URL.RawQuery = v.Encode()
	return nil
}

// hmacSigner signs each request: the query entries without {signature} are
// added first, then the text of Sign is signed with Secret, and the
// headers and the remaining query entries carry the signature.
type hmacSigner struct {
	key, secret string
	newHash     func() hash.Hash
	encode      func([]byte) string
	stamp       func(time.Time) string
	sign        *Template
	headers     []tkv
	before      []tkv // query entries added before signing
	after       []tkv // query entries that carry {signature}
	env         Env
}

type tkv struct {
	name string
	t    *Template
}

func newHMAC(s Spec, env Env) (*hmacSigner, error) {
	h := &hmacSigner{key: s.Key, secret: s.Secret, env: env}
	switch s.Hash {
	case "", "sha256":
		h.newHash = sha256.New
	case "sha384":
		h.newHash = sha512.New384
	case "sha512":
		h.newHash = sha512.New
	default:
		return nil, fmt.Errorf("auth hmac: hash %q: want sha256, sha384 or sha512", s.Hash)
	}
	switch s.Encoding {
	case "", "hex":
		h.encode = hex.EncodeToString
	case "base64":
		h.encode = base64.StdEncoding.EncodeToString
	default:
		return nil, fmt.Errorf("auth hmac: encoding %q: want hex or base64", s.Encoding)
	}
	var err error
	if h.stamp, err = stamper(s.Timestamp); err != nil {
		return nil, err
	}
	signVars := without(Placeholders, "signature", "token")
	if h.sign, err = ParseTemplate(s.Sign, signVars...); err != nil {
		return nil, fmt.Errorf("auth hmac: sign: %w", err)
	}
	all := without(Placeholders, "token")
	for _, kv := range s.Headers {
		t, err := ParseTemplate(kv.Value, all...)
		if err != nil {
			return nil, fmt.Errorf("auth hmac: headers.%s: %w", kv.Name, err)
		}
		h.headers = append(h.headers, tkv{kv.Name, t})
	}
	for _, kv := range s.Query {
		t, err := ParseTemplate(kv.Value, all...)
		if err != nil {
			return nil, fmt.Errorf("auth hmac: query.%s: %w", kv.Name, err)
		}
		if t.Uses("signature") {
			h.after = append(h.after, tkv{kv.Name, t})
		} else {
			h.before = append(h.before, tkv{kv.Name, t})
		}
	}
	if len(h.headers) == 0 && len(h.after) == 0 {
		return nil, errors.New("auth hmac: the signature goes nowhere: give headers or query entries with {signature}")
	}
	return h, nil
}

func without(list []string, drop ...string) []string {
	var out []string
	for _, v := range list {
		if !contains(drop, v) {
			out = append(out, v)
		}
	}
	return out
}

// stamper formats the timestamp in the unit asked.
func stamper(unit string) (func(time.Time) string, error) {
	switch unit {
	case "", "ms":
		return func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }, nil
	case "s":
		return func(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }, nil
	case "us":
		return func(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }, nil
	case "iso":
		return func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }, nil
	}
	return nil, fmt.Errorf("auth hmac: timestamp %q: want s, ms, us or iso", unit)
}

func (h *hmacSigner) Apply(_ context.Context, req *http.Request, body []byte) error {
	vars := map[string]string{
		"key":       h.key,
		"timestamp": h.stamp(h.env.Now()),
		"nonce":     h.env.Nonce(),
		"method":    req.Method,
		"path":      req.URL.EscapedPath(),
		"body":      string(body),
	}
	if len(h.before) > 0 {
		q := req.URL.Query()
		for _, kv := range h.before {
			q.Set(kv.name, kv.t.Render(vars))
		}
		req.URL.RawQuery = q.Encode()
	}
	vars["query"] = req.URL.RawQuery
	vars["path_query"] = vars["path"]
	if req.URL.RawQuery != "" {
		vars["path_query"] += "?" + req.URL.RawQuery
	}
	m := hmac.New(h.newHash, []byte(h.secret))
	m.Write([]byte(h.sign.Render(vars)))
	vars["signature"] = h.encode(m.Sum(nil))
	for _, kv := range h.headers {
		req.Header.Set(kv.name, kv.t.Render(vars))
	}
	for _, kv := range h.after {
		if req.URL.RawQuery != "" {
			req.URL.RawQuery += "&"
		}
		req.URL.RawQuery += url.QueryEscape(kv.name) + "=" + url.QueryEscape(kv.t.Render(vars))
	}
	return nil
}

func randomNonce() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
