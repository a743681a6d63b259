// Package fieldmap renames and converts a venue's record fields into a
// table's venue fields (the `fields:` key of an endpoint): an OKX, Bybit or
// Binance option listing becomes rows of the instruments table, whatever
// the venue calls instId, stk or expTime. A mapped record is rewritten as
// a JSON object of the table's fields first, then every member no rule
// took, as received (they land in the table's extra column).
//
// A value a rule cannot convert is written as received, so the decoder
// rejects the row with its reason; mapping never fails a body.
package fieldmap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/optlake/optlake/pipeline/extract/dotpath"
	"github.com/optlake/optlake/pipeline/values"
	"github.com/optlake/optlake/schema"
)

// Rule fills one column of the table.
type Rule struct {
	Column string `json:"column"`
	// From is the dotted path of the value in the record
	// (priceFilter.tickSize, filters.0.tickSize); Value a constant
	// instead.
	From  string `json:"from,omitempty"`
	Value string `json:"value,omitempty"`
	// Values replaces a value by its text (C: call, P: put); a value not
	// listed becomes Default when set, else stays as received.
	Values  map[string]string `json:"values,omitempty"`
	Default *string           `json:"default,omitempty"`
	// Time converts a timestamp to epoch milliseconds: iso (RFC 3339),
	// s, ms, us or ns (a number or a string holding one).
	Time string `json:"time,omitempty"`
	// Scale multiplies a number.
	Scale float64 `json:"scale,omitempty"`
	// Decimals names a member of the record holding a count of decimal
	// places: the number is multiplied by 10^-count (Bitget's tick,
	// priceEndStep at pricePlace decimals).
	Decimals string `json:"decimals,omitempty"`
	// Split cuts a text at this separator and takes its Part (0 the first,
	// -1 the last): the strike inside BTC-29DEC23-40000-C.
	Split string `json:"split,omitempty"`
	Part  int    `json:"part,omitempty"`
}

// Map is the rules of one endpoint, in the order they are written.
type Map []Rule

// TimeUnits are the values of Rule.Time.
var TimeUnits = []string{"iso", "s", "ms", "us", "ns"}

// Check reports the first mistake of m against the venue fields of t.
func (m Map) Check(t *schema.Table) error {
	seen := map[string]bool{}
	for _, r := range m {
		c, ok := venueColumn(t, r.Column)
		if !ok {
			return fmt.Errorf("%s: not a column of %s (want one of %s)", r.Column, t.Name, strings.Join(venueColumns(t), ", "))
		}
		if seen[r.Column] {
			return fmt.Errorf("%s: mapped twice", r.Column)
		}
		seen[r.Column] = true
		if (r.From == "") == (r.Value == "") {
			return fmt.Errorf("%s: want a field name (from) or a constant (value)", r.Column)
		}
		if r.Time != "" {
			if c.JSON != schema.JSONInteger {
				return fmt.Errorf("%s: time converts timestamps; %s is not one", r.Column, r.Column)
			}
			if !contains(TimeUnits, r.Time) {
				return fmt.Errorf("%s: time %q (want one of %s)", r.Column, r.Time, strings.Join(TimeUnits, ", "))
			}
		}
		if r.Split != "" && r.From == "" {
			return fmt.Errorf("%s: split cuts a field's text: from is required", r.Column)
		}
		if r.Part != 0 && r.Split == "" {
			return fmt.Errorf("%s: part goes with split", r.Column)
		}
		if r.Scale != 0 && c.JSON != schema.JSONNumber {
			return fmt.Errorf("%s: scale multiplies numbers; %s is not one", r.Column, r.Column)
		}
		if r.Decimals != "" && (c.JSON != schema.JSONNumber || r.From == "") {
			return fmt.Errorf("%s: decimals shifts a field's number; %s is not one", r.Column, r.Column)
		}
	}
	return nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func venueColumn(t *schema.Table, name string) (schema.Column, bool) {
	for _, c := range t.Columns {
		if c.Name == name && c.JSON != schema.NotJSON {
			return c, true
		}
	}
	return schema.Column{}, false
}

func venueColumns(t *schema.Table) []string {
	var out []string
	for _, c := range t.Columns {
		if c.JSON != schema.NotJSON {
			out = append(out, c.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Mapper applies a checked Map to records.
type Mapper struct {
	rules []rule
	taken map[string]bool // record members a rule reads whole, or a column names
}

type rule struct {
	Rule
	kind  schema.JSONKind
	first string // From's first segment
	path  string // From after its first segment ("" when From is one name)
}

// New compiles m for the venue fields of t (m must pass Check).
func New(m Map, t *schema.Table) (*Mapper, error) {
	if err := m.Check(t); err != nil {
		return nil, err
	}
	mp := &Mapper{taken: map[string]bool{}}
	for _, r := range m {
		c, _ := venueColumn(t, r.Column)
		first, rest, _ := strings.Cut(r.From, ".")
		mp.rules = append(mp.rules, rule{Rule: r, kind: c.JSON, first: first, path: rest})
		mp.taken[r.Column] = true
		if r.From != "" && rest == "" {
			mp.taken[first] = true
		}
	}
	return mp, nil
}

type member struct {
	key string
	val json.RawMessage
}

// Apply appends the mapped record to dst[:0] and returns it. A record that
// is not a JSON object is returned as received.
func (mp *Mapper) Apply(dst, raw []byte) []byte {
	members, err := split(raw)
	if err != nil {
		return append(dst[:0], raw...)
	}
	out := append(dst[:0], '{')
	n := 0
	add := func(key string, val []byte) {
		if n > 0 {
			out = append(out, ',')
		}
		n++
		k, _ := json.Marshal(key)
		out = append(out, k...)
		out = append(out, ':')
		out = append(out, val...)
	}
	for i := range mp.rules {
		r := &mp.rules[i]
		if v, ok := r.value(members); ok {
			add(r.Column, v)
		}
	}
	for _, m := range members {
		if !mp.taken[m.key] {
			add(m.key, m.val)
		}
	}
	return append(out, '}')
}

// split reads the members of a JSON object, values as received.
func split(raw []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not an object")
	}
	var out []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, member{key: t.(string), val: v})
	}
	return out, nil
}

// value is the rule's converted value, or false when the record has none
// (the column is null).
func (r *rule) value(members []member) ([]byte, bool) {
	if r.Value != "" {
		return r.typed(r.Value, true, nil)
	}
	var v json.RawMessage
	found := false
	for i := len(members) - 1; i >= 0; i-- { // a later duplicate wins
		if members[i].key == r.first {
			v, found = members[i].val, true
			break
		}
	}
	if !found {
		return nil, false
	}
	if r.path != "" {
		var doc any
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		if d.Decode(&doc) != nil {
			return nil, false
		}
		x, ok := dotpath.Lookup(doc, r.path)
		if !ok {
			return nil, false
		}
		v, _ = json.Marshal(x)
	}
	switch v[0] {
	case 'n':
		return nil, false
	case '{', '[':
		return v, true // the decoder rejects it with its reason
	}
	text, quoted := string(v), false
	if v[0] == '"' {
		if json.Unmarshal(v, &text) != nil {
			return v, true
		}
		quoted = true
	}
	if r.Split != "" {
		parts := strings.Split(text, r.Split)
		i := r.Part
		if i < 0 {
			i += len(parts)
		}
		if i < 0 || i >= len(parts) {
			return nil, false
		}
		text, quoted, v = parts[i], true, nil
	}
	if r.Values != nil {
		if to, ok := r.Values[text]; ok {
			return r.typed(to, true, nil)
		}
		if r.Default != nil {
			return r.typed(*r.Default, true, nil)
		}
	}
	if r.Decimals != "" {
		if n, ok := decimals(members, r.Decimals); ok && isNumber(text) {
			// The decimal point moved in the text (its exponent lowered):
			// exact, rounded once by the decoder, and outside float64's
			// range rejected by it with the reason. A text that is no
			// number, or no count, stays as sent.
			mant, exp := text, 0
			var err error
			if i := strings.IndexAny(text, "eE"); i >= 0 {
				mant = text[:i]
				exp, err = strconv.Atoi(text[i+1:])
			}
			if err == nil && exp > math.MinInt+30 { // an exponent past int's range: far outside float64's, left as sent
				text, quoted, v = mant+"e"+strconv.Itoa(exp-n), false, nil
			}
		}
	}
	return r.typed(text, quoted, v)
}

// decimals reads the whole number of decimal places in the record's member
// name (a number or a string holding one, 0 to 30).
func decimals(members []member, name string) (int, bool) {
	for i := len(members) - 1; i >= 0; i-- {
		if members[i].key != name {
			continue
		}
		var text string
		if json.Unmarshal(members[i].val, &text) != nil {
			text = string(members[i].val)
		}
		n, err := strconv.Atoi(text)
		return n, err == nil && n >= 0 && n <= 30
	}
	return 0, false
}

// typed writes text (a JSON string's contents when quoted, else a JSON
// number or bool literal) as the column's JSON kind; raw is the value as
// received (nil for the config's own texts), written when text does not
// convert. An empty string is null.
func (r *rule) typed(text string, quoted bool, raw json.RawMessage) ([]byte, bool) {
	asIs := func() ([]byte, bool) {
		if raw != nil {
			return raw, true
		}
		b, _ := json.Marshal(text)
		return b, true
	}
	if text == "" {
		return nil, false // venues send "" for "none" (OKX)
	}
	switch r.kind {
	case schema.JSONString, schema.JSONDecimalText:
		if !quoted && text != "true" && text != "false" {
			return []byte(text), true // a number: the decoder keeps its text
		}
		b, _ := json.Marshal(text)
		return b, true
	case schema.JSONBool:
		switch strings.ToLower(text) {
		case "true":
			return []byte("true"), true
		case "false":
			return []byte("false"), true
		}
		return asIs()
	case schema.JSONInteger:
		if r.Time != "" {
			if ms, ok := millis(text, r.Time); ok {
				return strconv.AppendInt(nil, ms, 10), true
			}
			return asIs()
		}
		if isNumber(text) {
			return []byte(text), true
		}
		return asIs()
	case schema.JSONNumber:
		if !isNumber(text) {
			return asIs()
		}
		if r.Scale != 0 {
			f, err := strconv.ParseFloat(text, 64)
			g := f * r.Scale
			if err != nil || math.IsInf(g, 0) || values.Underflows(f, text) || (f != 0 && math.Abs(g) < minNormal) {
				// Outside float64's range, before or after scaling: the
				// exact product, which the decoder rejects with the reason
				// (never the unscaled value, a 0 or a rounded subnormal).
				return scaled(text, r.Scale)
			}
			return strconv.AppendFloat(nil, g, 'g', -1, 64), true
		}
		return []byte(text), true
	}
	return asIs()
}

// minNormal is the smallest positive normal float64: a scaled value below
// it has lost digits (values.Underflows).
const minNormal = 0x1p-1022

// scaled is the JSON number text times scale, computed without float64's
// range.
func scaled(text string, scale float64) ([]byte, bool) {
	x, _, err := big.ParseFloat(text, 10, 64, big.ToNearestEven)
	if err != nil {
		b, _ := json.Marshal(text)
		return b, true
	}
	x.Mul(x, new(big.Float).SetFloat64(scale))
	return []byte(x.Text('g', -1)), true
}

// isNumber reports whether s is a JSON number.
func isNumber(s string) bool {
	if s == "" || s[0] == '+' || s[0] == ' ' || strings.ContainsAny(s, "xXnN_ \t") {
		return false
	}
	var n json.Number
	return json.Unmarshal([]byte(s), &n) == nil
}

// millis converts a timestamp in unit to epoch milliseconds.
func millis(text, unit string) (int64, bool) {
	if unit == "iso" {
		t, err := time.Parse(time.RFC3339Nano, text)
		if err != nil {
			return 0, false
		}
		return t.UnixMilli(), true
	}
	if !isNumber(text) {
		return 0, false
	}
	if i, err := strconv.ParseInt(text, 10, 64); err == nil {
		switch unit {
		case "s":
			if i > math.MaxInt64/1000 || i < math.MinInt64/1000 {
				return 0, false
			}
			return i * 1000, true
		case "ms":
			return i, true
		case "us":
			return i / 1000, true
		case "ns":
			return i / 1e6, true
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return 0, false
	}
	f *= map[string]float64{"s": 1e3, "ms": 1, "us": 1e-3, "ns": 1e-6}[unit]
	if math.IsNaN(f) || f >= math.MaxInt64 || f <= math.MinInt64 {
		return 0, false
	}
	return int64(math.Round(f)), true
}
