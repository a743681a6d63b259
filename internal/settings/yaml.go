package settings

import (
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/optlake/optlake/internal/secret"
)

// The readers of a config file's values: each returns a function that
// reads one node into *dst, or fails at the node's line naming where
// (the key's dotted path). Package pipeline/venueconf builds the real-venue
// keys from them.

// Mapping calls each of keys' functions with the value of its key; an
// unknown key is an error listing the known ones.
func Mapping(n *yaml.Node, where string, fail FailFunc, keys map[string]func(v *yaml.Node) error) error {
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

// Scalar reads a plain value.
func Scalar(dst *string, where string, fail FailFunc) func(*yaml.Node) error {
	return func(v *yaml.Node) error {
		if v.Kind != yaml.ScalarNode {
			return fail(v, "%s: want a value", where)
		}
		*dst = v.Value
		return nil
	}
}

// SecretValue reads a secret: ${VAR} anywhere reads the environment, a
// value starting with @ reads the file it names.
func SecretValue(dst *string, where string, fail FailFunc) func(*yaml.Node) error {
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

// Integer reads a whole number.
func Integer(dst *int, where string, fail FailFunc) func(*yaml.Node) error {
	return func(v *yaml.Node) error {
		n, err := strconv.Atoi(v.Value)
		if v.Kind != yaml.ScalarNode || err != nil {
			return fail(v, "%s: want a whole number", where)
		}
		*dst = n
		return nil
	}
}

// StrList reads a value or a list of values.
func StrList(dst *[]string, where string, fail FailFunc) func(*yaml.Node) error {
	return func(v *yaml.Node) error {
		vals, err := Scalars(v)
		if err != nil {
			return fail(v, "%s: %v", where, err)
		}
		*dst = vals
		return nil
	}
}

// Boolean reads true or false.
func Boolean(dst *bool, where string, fail FailFunc) func(*yaml.Node) error {
	return func(v *yaml.Node) error {
		b, err := strconv.ParseBool(v.Value)
		if v.Kind != yaml.ScalarNode || err != nil {
			return fail(v, "%s: want true or false", where)
		}
		*dst = b
		return nil
	}
}
