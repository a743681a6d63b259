// Package dotpath reads a value at a dotted path ("result.access_token",
// "data.0.id") in a decoded JSON document: the one path syntax of the
// config file's records, token, expires_in and error keys.
package dotpath

import (
	"strconv"
	"strings"
)

// Lookup returns the value at path in doc (as decoded by encoding/json
// into any); a segment that is a number selects an array element, and ""
// is doc itself.
func Lookup(doc any, path string) (any, bool) {
	if path == "" {
		return doc, true
	}
	cur := doc
	for _, seg := range strings.Split(path, ".") {
		switch x := cur.(type) {
		case map[string]any:
			v, ok := x[seg]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			cur = x[i]
		default:
			return nil, false
		}
	}
	return cur, true
}
