package infer

import (
	"fmt"
	"strings"

	"github.com/optlake/optlake/internal/settings"
)

// Map detection: see "Maps" in the package documentation.

// Thresholds of map detection by shape.
const (
	// MapMinDataKeys is the fewest members of a map whose keys are all
	// data-like (not identifiers: "BTC", "BTC-25DEC26-130000-P", "42").
	MapMinDataKeys = 2
	// MapMinObjects is the fewest members of a map of objects whose keys
	// look like identifiers ("btc", "acc_1").
	MapMinObjects = 16
	// MapMinMembers is the fewest members of any other map (scalars or
	// arrays under identifier-like keys).
	MapMinMembers = 64
)

// mapSegment stands for "any key of a map" in a body path.
const mapSegment = "*"

// DefaultColumnBudget is the column budget of a table when Policy sets none.
const DefaultColumnBudget = settings.DefaultColumnBudget

// minColumnBudget leaves room for the meta, key and extra columns.
const minColumnBudget = 16

// MapRules override map detection for one endpoint: JSON paths in its
// bodies where an object is always (Force) or never (Forbid) a map.
//
// A path is the JSON keys from the top of the body joined by '.', as
// received (case matters); arrays add nothing to a path, each level of map
// adds "*": in {"positions": {"BTC-1": {"legs": {...}}}}, "positions" is
// the map of positions and "positions.*.legs" the legs object of each.
// "$" (or "") is the body itself; a leading "$." is allowed.
type MapRules struct {
	Force  []string
	Forbid []string
}

// index returns the rules as joined path -> force.
func (m MapRules) index() map[string]bool {
	if len(m.Force) == 0 && len(m.Forbid) == 0 {
		return nil
	}
	out := map[string]bool{}
	for _, p := range m.Forbid {
		out[normalRulePath(p)] = false
	}
	for _, p := range m.Force {
		out[normalRulePath(p)] = true
	}
	return out
}

// normalRulePath drops "$" and the "[]" segments a user may write for
// arrays, so that "$.positions[].greeks" is "positions.greeks".
func normalRulePath(p string) string {
	p = strings.TrimSpace(p)
	p = strings.ReplaceAll(p, "[]", "")
	p = strings.TrimPrefix(strings.TrimPrefix(p, "$"), ".")
	return p
}

// Policy is how a Registry infers tables (set by SetPolicy).
type Policy struct {
	// ColumnBudget caps the columns of every table, meta columns included
	// (default DefaultColumnBudget; at least 16). Fields that would need a
	// column past it go to the table's "extra" column: a JSON object of
	// path -> value as received. Stats.Overflow counts them.
	ColumnBudget int
	// Maps holds map detection overrides per endpoint (logical name).
	Maps map[string]MapRules
}

// Validate reports a budget below 16 and map rules with an empty key or a
// path listed twice.
func (p Policy) Validate() error { return p.validate() }

func (p *Policy) validate() error {
	if p.ColumnBudget == 0 {
		p.ColumnBudget = DefaultColumnBudget
	}
	if p.ColumnBudget < minColumnBudget {
		return fmt.Errorf("infer: column budget %d: want at least %d", p.ColumnBudget, minColumnBudget)
	}
	for ep, m := range p.Maps {
		seen := map[string]string{}
		for _, l := range [][]string{m.Force, m.Forbid} {
			for _, path := range l {
				n := normalRulePath(path)
				for _, seg := range strings.Split(n, ".") {
					if n != "" && seg == "" {
						return fmt.Errorf("infer: endpoint %s: map path %q has an empty key", ep, path)
					}
				}
				if prev, dup := seen[n]; dup {
					return fmt.Errorf("infer: endpoint %s: map path %q is listed twice (also as %q)", ep, path, prev)
				}
				seen[n] = path
			}
		}
	}
	return nil
}

// SetPolicy sets how the registry infers tables from now on.
func (r *Registry) SetPolicy(p Policy) error {
	if err := p.validate(); err != nil {
		return err
	}
	r.decodeMu.Lock()
	defer r.decodeMu.Unlock()
	r.policy = p
	return nil
}

// bodyPath is the body path of the object at p (with mapSegment appended
// for the rows of a map at p), or nil when the endpoint has no MapRules.
func (d *decoder) bodyPath(p fpath, isMap bool) []string {
	if len(d.rules) == 0 {
		return nil
	}
	out := make([]string, 0, len(p.base)+len(p.keys)+1)
	out = append(append(out, p.base...), p.keys...)
	if isMap {
		out = append(out, mapSegment)
	}
	return out
}

// rule returns the override for the object at p, if any.
func (d *decoder) rule(p fpath) (force, ok bool) {
	if len(d.rules) == 0 {
		return false, false
	}
	force, ok = d.rules[strings.Join(d.bodyPath(p, false), ".")]
	return force, ok
}

// bodyIsMap decides whether a top-level object is a map (its entries are
// the rows of the endpoint's table).
func (d *decoder) bodyIsMap(rw *work, obj *node) bool {
	if force, ok := d.rule(fpath{}); ok {
		return force
	}
	return rw.st.isMap() || looksLikeMap(obj)
}

// maxMapPasses bounds the passes of a Decode that promote paths to maps.
const maxMapPasses = 8

// isMap decides whether the object v at path p of w's rows is a map: a
// rule, else once a map always a map (in the registry, or earlier in this
// body), else its shape. When an object is a map by its shape after an
// earlier object at the same path was not, the path is noted for promotion
// (see Decode): every object at a path is decided the same way.
func (d *decoder) isMap(w *work, p fpath, v *node) bool {
	if force, ok := d.rule(p); ok {
		return force
	}
	id := w.st.Name + "\x00" + p.key
	if d.promoted[id] {
		return true
	}
	if name, ok := w.st.Children[p.key]; ok {
		if cw, ok := d.works[name]; ok {
			if cw.st.isMap() {
				return true
			}
		} else if st := d.committed[name]; st != nil && st.isMap() {
			return true
		}
	}
	if !looksLikeMap(v) {
		if d.notMap == nil {
			d.notMap = map[string]bool{}
		}
		d.notMap[id] = true
		return false
	}
	if d.notMap[id] {
		if d.promote == nil {
			d.promote = map[string]bool{}
		}
		d.promote[id] = true
	}
	return true
}

// looksLikeMap is the shape rule: the non-null member values share one
// shape (all objects with mostly the same keys, all numbers, all strings,
// all bools or all arrays) and either every key is data-like (at least
// MapMinDataKeys members), or there are many members (MapMinObjects
// objects, or MapMinMembers of another shape).
func looksLikeMap(obj *node) bool {
	if len(obj.keys) < MapMinDataKeys {
		return false
	}
	allData := true
	for _, k := range obj.keys {
		if identLike(k) {
			allData = false
			break
		}
	}
	if !allData && len(obj.keys) < MapMinObjects {
		return false
	}
	n := 0
	shape := nNull
	for _, v := range obj.vals {
		if v.kind == nNull {
			continue
		}
		if shape == nNull {
			shape = v.kind
		} else if v.kind != shape {
			return false
		}
		n++
	}
	switch {
	case n < MapMinDataKeys:
		return false
	case shape == nObject:
		if !sharedKeys(obj.vals, n) {
			return false
		}
		return allData || n >= MapMinObjects
	}
	return allData || n >= MapMinMembers
}

// sharedKeys reports whether n objects among vals (nulls skipped) have
// mostly the same keys: the keys all of them have are at least half of the
// keys any of them has. Empty objects share every shape.
func sharedKeys(vals []*node, n int) bool {
	counts := map[string]int{}
	empty := 0
	for _, v := range vals {
		if v.kind != nObject {
			continue
		}
		if len(v.keys) == 0 {
			empty++
		}
		for _, k := range v.keys {
			counts[k]++
		}
	}
	all := 0
	for _, c := range counts {
		if c == n-empty {
			all++
		}
	}
	return 2*all >= len(counts)
}

// identLike reports whether a key reads as a field name rather than data:
// an ASCII letter or '_' first, then letters, digits and '_', at most 64
// bytes, with at least one lower-case letter ("size", "userId",
// "maker_fee"; not "BTC", "ETH_USDC", "42", "BTC-25DEC26-130000-P").
func identLike(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	lower := false
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case isLower(c):
			lower = true
		case isUpper(c) || c == '_':
		case isDigit(c):
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return lower
}
