// Package secret resolves references to secrets, so that credentials stay
// out of command lines, config files and process listings. The syntax, in
// one place:
//
//   - "${VAR}" as a whole flag value (--header 'Name: ${VAR}',
//     --clickhouse-dsn '${VAR}'): the environment variable VAR (Resolve).
//   - "@/path" as a whole flag value: the file's contents without the
//     trailing newline (Resolve).
//   - In a config file, ${VAR} (or $VAR) anywhere in a value (Expand); in a
//     request body only ${VAR}, a body's own text may hold $ (ExpandBraced);
//     and a
//     key ending in _file or -file (value_file, clickhouse-dsn-file) reads
//     the value from the file it names (FileKey, ReadFile).
//
// An unset variable is an error, never an empty secret.
package secret

import (
	"fmt"
	"os"
	"strings"
)

// Resolve returns the secret a flag value refers to: "${VAR}" reads the
// environment, "@path" reads a file; any other value is the secret itself.
func Resolve(v string) (string, error) {
	switch {
	case strings.HasPrefix(v, "${") && strings.HasSuffix(v, "}"):
		name := v[2 : len(v)-1]
		val, ok := os.LookupEnv(name)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
		return val, nil
	case strings.HasPrefix(v, "@"):
		return ReadFile(v[1:])
	}
	return v, nil
}

// Expand replaces ${VAR} and $VAR in s with the environment variables; an
// unset one is an error (a missing secret must not become an empty header).
func Expand(s string) (string, error) {
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

// ExpandBraced replaces ${VAR} in s with the environment variables and
// returns the values it put in (secrets to redact); a lone $ and $VAR stay
// as written. An unset variable is an error.
func ExpandBraced(s string) (string, []string, error) {
	var b strings.Builder
	var vals, missing []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			break
		}
		end := strings.IndexByte(s[i:], '}')
		name := ""
		if end > 2 {
			name = s[i+2 : i+end]
		}
		if !isName(name) {
			b.WriteString(s[:i+2])
			s = s[i+2:]
			continue
		}
		v, ok := os.LookupEnv(name)
		if !ok {
			missing = append(missing, name)
		} else if v != "" {
			vals = append(vals, v)
		}
		b.WriteString(s[:i])
		b.WriteString(v)
		s = s[i+end+1:]
	}
	if len(missing) > 0 {
		return "", nil, fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
	}
	return b.String(), vals, nil
}

// isName reports whether s is an environment variable's name: a letter or
// _, then letters, digits and _.
func isName(s string) bool {
	for i, c := range s {
		if c != '_' && !('a' <= c && c <= 'z') && !('A' <= c && c <= 'Z') && (i == 0 || !('0' <= c && c <= '9')) {
			return false
		}
	}
	return s != ""
}

// ReadFile returns a secret file's contents without the trailing newline.
// The error names the file, never its contents.
func ReadFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read secret file: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// FileKey reports whether a config key names a file holding the value of
// another key (clickhouse-dsn-file, value_file), and which.
func FileKey(key string) (base string, ok bool) {
	for _, suf := range []string{"-file", "_file"} {
		if b, found := strings.CutSuffix(key, suf); found && b != "" {
			return b, true
		}
	}
	return "", false
}
