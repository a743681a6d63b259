package infer

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/optlake/optlake/schema"
)

// Naming rules: see "Column and table names" in the package documentation
// (they are part of the external contract).

// MaxNameLen is the longest column or table name produced (bytes).
const MaxNameLen = 128

// metaNames are the columns every inferred table starts with; no user column
// may take one of these names.
var metaNames = schema.AccountMetaNames()

func isMetaName(s string) bool { return slices.Contains(metaNames, s) }

func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// NormalizeKey turns one JSON key into a name segment of [a-z0-9_] that does
// not begin or end with '_' and contains no "__" (rule 1 above).
func NormalizeKey(key string) string {
	b := make([]byte, 0, len(key)+4)
	under := func() {
		if len(b) > 0 && b[len(b)-1] != '_' {
			b = append(b, '_')
		}
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case isUpper(c):
			if i > 0 {
				p := key[i-1]
				if isLower(p) || isDigit(p) || (isUpper(p) && i+1 < len(key) && isLower(key[i+1])) {
					under()
				}
			}
			b = append(b, c+('a'-'A'))
		case isLower(c) || isDigit(c):
			b = append(b, c)
		default:
			// Any other byte, including every byte of a multi-byte UTF-8
			// sequence, separates words.
			under()
		}
	}
	s := strings.Trim(string(b), "_")
	if s == "" {
		return fmt.Sprintf("k_%08x", hash32(key))
	}
	return s
}

func hash32(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// baseName joins the normalised keys of a path (rule 2); the empty path (a
// map's value itself) is "value".
func baseName(path []string) string {
	if len(path) == 0 {
		return "value"
	}
	parts := make([]string, len(path))
	for i, k := range path {
		parts[i] = NormalizeKey(k)
	}
	return strings.Join(parts, "__")
}

// finalName applies rule 3 to a column name.
func finalName(name string) string {
	if name == "" || isDigit(name[0]) {
		name = "_" + name
	}
	if isMetaName(name) {
		name = "f_" + name
	}
	return limitLen(name)
}

// limitLen cuts a name longer than MaxNameLen, keeping it unique by a hash of
// the full name.
func limitLen(name string) string {
	if len(name) <= MaxNameLen {
		return name
	}
	return fmt.Sprintf("%s_%08x", name[:MaxNameLen-9], hash32(name))
}

// resolve returns name, or name with the first free "_N" suffix (rule 4),
// keeping the result within MaxNameLen.
func resolve(name string, taken func(string) bool) string {
	if !taken(name) {
		return name
	}
	for n := 2; ; n++ {
		suf := "_" + strconv.Itoa(n)
		cand := name
		if len(cand)+len(suf) > MaxNameLen {
			cand = cand[:MaxNameLen-len(suf)]
		}
		cand += suf
		if !taken(cand) {
			return cand
		}
	}
}

// TableName normalises an endpoint's logical name into its root table's
// name (rule 1 on the whole name, then rule 3's length limit; a leading
// digit gets a '_' prefix).
func TableName(endpoint string) string {
	n := NormalizeKey(endpoint)
	if isDigit(n[0]) {
		n = "_" + n
	}
	return limitLen(n)
}

// isTimeName reports whether a normalised key names a point in time (rule for
// the "__time" companion column).
func isTimeName(seg string) bool {
	if seg == "timestamp" {
		return true
	}
	for _, suf := range [...]string{"_time", "_timestamp", "_at", "_ts"} {
		if strings.HasSuffix(seg, suf) {
			return true
		}
	}
	return false
}

// displayPath renders a JSON path for messages: keys joined by '.'; a key
// that is empty or holds '.', '"', spaces or unprintable characters is
// quoted (Go syntax) so the path reads unambiguously on one line.
func displayPath(path []string) string {
	if len(path) == 0 {
		return "(map value)"
	}
	parts := make([]string, len(path))
	for i, k := range path {
		plain := k != ""
		for _, r := range k {
			if r == '.' || r == '"' || r == ' ' || !unicode.IsPrint(r) {
				plain = false
				break
			}
		}
		if plain {
			parts[i] = k
		} else {
			parts[i] = strconv.Quote(k)
		}
	}
	return strings.Join(parts, ".")
}

// fieldOf names what a column of path and role holds, for messages and
// `optlake schema`: the JSON path, or what the key and extra columns hold.
func fieldOf(path []string, role string) string {
	switch role {
	case roleKey:
		return "(map key)"
	case roleExtra:
		return "(fields past the column budget)"
	}
	return displayPath(path)
}
