package settings

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// Decode sets each field of the struct *dst tagged `setting:"NAME"` to the
// setting's value in c. `setting:"NAME,split"` on a []string field also
// splits comma lists (--endpoints a,b --endpoints c). A tag naming no
// setting of the list, or a field whose type does not match the setting's
// kind, is an error (a programming mistake that Check finds in tests).
func Decode(c *cli.Context, dst any) error {
	return walk(dst, func(s Setting, f reflect.Value, split bool) error {
		if !hasFlag(c, s.Name) {
			return nil // the command does not take it: leave the field alone
		}
		v := reflect.ValueOf(s.Value(c))
		if split {
			v = reflect.ValueOf(SplitList(v.Interface().([]string)))
		}
		f.Set(v)
		return nil
	})
}

// Get returns the value of the field of *src tagged with name.
func Get(src any, name string) (any, bool) {
	var out any
	found := false
	walk(src, func(s Setting, f reflect.Value, _ bool) error {
		if s.Name == name {
			out, found = f.Interface(), true
		}
		return nil
	})
	return out, found
}

// Check reports tags of *dst that name no setting or do not match its kind,
// and settings of command that no field of *dst takes.
func Check(dst any, command string) error {
	seen := map[string]bool{}
	if err := walk(dst, func(s Setting, _ reflect.Value, _ bool) error {
		seen[s.Name] = true
		return nil
	}); err != nil {
		return err
	}
	var missing []string
	for _, s := range For(command) {
		if !seen[s.Name] {
			missing = append(missing, s.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("settings of %s with no field: %s", command, strings.Join(missing, ", "))
	}
	return nil
}

func hasFlag(c *cli.Context, name string) bool {
	if c.Command == nil {
		return false
	}
	for _, f := range c.Command.Flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

var goType = map[Kind]reflect.Type{
	String: reflect.TypeOf(""), List: reflect.TypeOf([]string(nil)), Bool: reflect.TypeOf(false),
	Int: reflect.TypeOf(0), Int64: reflect.TypeOf(int64(0)), Duration: reflect.TypeOf(time.Duration(0)),
	Float: reflect.TypeOf(0.0),
}

func walk(dst any, fn func(s Setting, f reflect.Value, split bool) error) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("settings: want a pointer to a struct, got %T", dst)
	}
	rv = rv.Elem()
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		tag, ok := rt.Field(i).Tag.Lookup("setting")
		if !ok {
			continue
		}
		name, opt, _ := strings.Cut(tag, ",")
		s, ok := Lookup(name)
		if !ok {
			return fmt.Errorf("settings: field %s: no setting %q", rt.Field(i).Name, name)
		}
		if want := goType[s.Kind]; rt.Field(i).Type != want {
			return fmt.Errorf("settings: field %s is %s, setting %q is %s (%s)", rt.Field(i).Name, rt.Field(i).Type, name, s.Kind, want)
		}
		if err := fn(s, rv.Field(i), opt == "split"); err != nil {
			return err
		}
	}
	return nil
}

// SplitList splits comma lists in repeatable flags: --endpoints a,b
// --endpoints c is [a b c].
func SplitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// Set sets the field of *dst tagged with name to v (of the setting's Go
// type); it reports whether such a field exists.
func Set(dst any, name string, v any) bool {
	found := false
	walk(dst, func(s Setting, f reflect.Value, _ bool) error {
		if s.Name == name {
			if l, ok := v.([]string); ok {
				v = append([]string(nil), l...)
			}
			f.Set(reflect.ValueOf(v))
			found = true
		}
		return nil
	})
	return found
}
