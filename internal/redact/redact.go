// Package redact removes secret values (API header values, DSN passwords)
// from text before it reaches a log line, an error message, a summary or the
// raw archive's metadata.
package redact

import (
	"context"
	"log/slog"
	"net/url"
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
// URL-escaped forms, as it may appear inside a URL.
func (r *Redactor) Add(secrets ...string) {
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		if len(s) < minSecret {
			continue
		}
		q := url.QueryEscape(s)
		for _, v := range []string{s, q, strings.ReplaceAll(q, "+", "%20"), url.PathEscape(s)} {
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

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// String returns s with every secret masked.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	for _, sec := range r.secrets {
		if strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, Mask)
		}
	}
	return s
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
