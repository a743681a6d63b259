package auth

import (
	"fmt"
	"strings"
)

// Placeholders are the names a signing template may use.
var Placeholders = []string{"key", "timestamp", "nonce", "method", "path", "query", "path_query", "body", "signature", "token"}

// Template is a parsed text with {name} placeholders; "{{" and "}}" stand
// for literal braces.
type Template struct {
	parts []part
}

type part struct {
	lit  string
	name string // placeholder; "" for a literal
}

// ParseTemplate parses s. A placeholder not in allowed, or a brace that
// opens no placeholder, is an error.
func ParseTemplate(s string, allowed ...string) (*Template, error) {
	t := &Template{}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, part{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '{' && i+1 < len(s) && s[i+1] == '{':
			lit.WriteByte('{')
			i++
		case c == '}' && i+1 < len(s) && s[i+1] == '}':
			lit.WriteByte('}')
			i++
		case c == '{':
			end := strings.IndexByte(s[i+1:], '}')
			if end < 0 {
				return nil, fmt.Errorf("template: '{' at %d is not closed (write {{ for a literal brace)", i)
			}
			name := s[i+1 : i+1+end]
			if !contains(allowed, name) {
				return nil, fmt.Errorf("template: unknown placeholder {%s} (want one of {%s})", name, strings.Join(allowed, "} {"))
			}
			flush()
			t.parts = append(t.parts, part{name: name})
			i += end + 1
		case c == '}':
			return nil, fmt.Errorf("template: '}' at %d closes nothing (write }} for a literal brace)", i)
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return t, nil
}

// Uses reports whether the template has the placeholder name.
func (t *Template) Uses(name string) bool {
	for _, p := range t.parts {
		if p.name == name {
			return true
		}
	}
	return false
}

// Render fills the placeholders from vars (a missing one renders empty).
func (t *Template) Render(vars map[string]string) string {
	var b strings.Builder
	for _, p := range t.parts {
		if p.name == "" {
			b.WriteString(p.lit)
		} else {
			b.WriteString(vars[p.name])
		}
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
