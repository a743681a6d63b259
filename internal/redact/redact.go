// Package redact removes secret values (API header values, DSN passwords)
// from text before it reaches a log line, an error message, a summary or the
// raw archive's metadata.
package redact

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces every secret.
const Mask = "[REDACTED]"

// Redactor knows the secrets of one run. The zero value redacts nothing.
type Redactor struct {
	secrets []string
}

// minSecret is the shortest value treated as a secret: shorter values
// ("1", "on") would mangle unrelated text and are not credentials.
const minSecret = 4

// New returns a Redactor for the given secret values.
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	r.Add(secrets...)
	return r
}

// Add registers more secrets. Each value is also registered in its
// URL-escaped and JSON-escaped forms, as it may appear inside a URL or a
// JSON string.
func (r *Redactor) Add(secrets ...string) {
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		if len(s) < minSecret {
			continue
		}
		if strings.ContainsAny(s, "\r\n") {
			// A multi-line secret (a PEM key) is printed line by line: an
			// indented YAML block, an escaped JSON string. Each line is a
			// secret of its own.
			r.Add(strings.FieldsFunc(s, func(c rune) bool { return c == '\n' || c == '\r' })...)
		}
		q := url.QueryEscape(s)
		forms := []string{s, q, strings.ReplaceAll(q, "+", "%20"), url.PathEscape(s)}
		// Inside a JSON string (config check's JSON, a JSON log line) a
		// quote, a backslash, a control character and, by default, <, >
		// and & are escaped.
		forms = append(forms, jsonEscaped(s, true), jsonEscaped(s, false))
		for _, v := range forms {
			if !contains(r.secrets, v) {
				r.secrets = append(r.secrets, v)
			}
		}
	}
	// Longest first so a secret containing another is masked whole.
	for i := 1; i < len(r.secrets); i++ {
		for j := i; j > 0 && len(r.secrets[j]) > len(r.secrets[j-1]); j-- {
			r.secrets[j], r.secrets[j-1] = r.secrets[j-1], r.secrets[j]
		}
	}
}

// jsonEscaped is s as it stands inside a JSON string, without the quotes.
func jsonEscaped(s string, html bool) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	enc.Encode(s)
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(b.String(), "\n"), `"`), `"`)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// String returns s with every secret masked, and the password of every
// URL in it (scheme://user:password@host), whatever its length: a DSN's
// password is a secret by where it stands, even when too short to be
// registered as one.
func (r *Redactor) String(s string) string {
	if r != nil {
		for _, sec := range r.secrets {
			if strings.Contains(s, sec) {
				s = strings.ReplaceAll(s, sec, Mask)
			}
		}
	}
	return Userinfo(s)
}

// userinfo matches the user:password@ of a URL in text.
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]*:)([^\s@]+)@`)

// Userinfo returns s with the password of every URL in it masked.
func Userinfo(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return userinfo.ReplaceAllStringFunc(s, func(m string) string {
		sub := userinfo.FindStringSubmatch(m)
		if sub[2] == Mask {
			return m
		}
		return sub[1] + Mask + "@"
	})
}

// URL returns u as text with its password masked and any secret removed.
func (r *Redactor) URL(u *url.URL) string {
	if u == nil {
		return ""
	}
	return r.String(u.Redacted())
}

// Handler wraps a slog.Handler so that messages and string attributes (and
// errors) are redacted before they are written.
func (r *Redactor) Handler(h slog.Handler) slog.Handler {
	return &handler{next: h, r: r}
}

type handler struct {
	next slog.Handler
	r    *Redactor
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		attrs := v.Group()
		out := make([]any, len(attrs))
		for i, g := range attrs {
			out[i] = h.attr(g)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return slog.String(a.Key, h.r.String(x.Error()))
		case interface{ String() string }:
			return slog.String(a.Key, h.r.String(x.String()))
		}
		return slog.String(a.Key, h.r.String(v.String()))
	}
	return slog.Attr{Key: a.Key, Value: v}
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = h.attr(a)
	}
	return &handler{next: h.next.WithAttrs(red), r: h.r}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name), r: h.r}
}

// With returns a new Redactor that knows r's secrets and more; r is not
// changed. r may be nil.
func (r *Redactor) With(secrets ...string) *Redactor {
	out := &Redactor{}
	if r != nil {
		out.secrets = append(out.secrets, r.secrets...)
	}
	out.Add(secrets...)
	return out
}

// DSNPassword returns the password of a URL-shaped DSN
// (scheme://user:password@host/...), "" when it has none.
func DSNPassword(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			return p
		}
	}
	return ""
}

// URISecrets returns the secrets of a connection URI or DSN for a
// Redactor: the whole value, the password of its user, the values of its
// password-like query parameters (?password=, ?sslpassword=, a token) and
// of a keyword/value DSN's (host=… password=…), each also URL-decoded.
func URISecrets(uri string) []string {
	if uri == "" {
		return nil
	}
	out := []string{uri}
	add := func(v string) {
		if v == "" {
			return
		}
		out = append(out, v)
		if d, err := url.QueryUnescape(v); err == nil && d != v {
			out = append(out, d)
		}
	}
	secretKey := func(k string) bool {
		k = strings.ToLower(k)
		return strings.Contains(k, "password") || strings.Contains(k, "secret") || strings.Contains(k, "token") || strings.HasSuffix(k, "key")
	}
	s := strings.TrimPrefix(uri, "jdbc:")
	if u, err := url.Parse(s); err == nil {
		if u.User != nil {
			if p, ok := u.User.Password(); ok {
				add(p)
			}
		}
	}
	if _, q, ok := strings.Cut(s, "?"); ok {
		for _, kv := range strings.FieldsFunc(q, func(r rune) bool { return r == '&' || r == ';' }) {
			if k, v, ok := strings.Cut(kv, "="); ok && secretKey(k) {
				add(v)
			}
		}
	}
	for _, f := range strings.Fields(s) {
		if k, v, ok := strings.Cut(f, "="); ok && secretKey(k) {
			add(strings.Trim(v, `'"`))
		}
	}
	if _, rest, ok := strings.Cut(s, "://"); ok {
		s = rest
	}
	if i := strings.LastIndex(s, "@"); i > 0 {
		// user:pass@host, also of text that does not parse as a URL
		if _, p, ok := strings.Cut(s[:i], ":"); ok {
			add(p)
		}
	}
	return out
}

// Error is an error whose message has its secrets masked. It keeps the
// original in its chain, so errors.Is and errors.As see through it (to
// context.Canceled, a server exception, ...); whoever unwraps it and
// prints what they find must redact that text again.
type Error struct {
	msg string
	err error
}

// Error returns the redacted message.
func (e *Error) Error() string { return e.msg }

// Unwrap returns the original error.
func (e *Error) Unwrap() error { return e.err }

// Err returns err with its message redacted (nil for nil). An error that is
// already redacted by r is redacted again, which changes nothing.
func (r *Redactor) Err(err error) error {
	if err == nil {
		return nil
	}
	return &Error{msg: r.String(err.Error()), err: err}
}

// Errorf is fmt.Errorf whose message is redacted; %w verbs keep their
// errors in the chain.
func (r *Redactor) Errorf(format string, args ...any) error {
	return r.Err(fmt.Errorf(format, args...))
}
