package infer

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/optlake/optlake/pipeline/values"
	"github.com/optlake/optlake/schema"
)

// work is one table's state and rows during a Decode.
type work struct {
	st      *tableState // a clone of the committed state, or a new table
	isNew   bool        // the table did not exist before this Decode
	changed bool        // st differs from the committed state
	tbl     *schema.Table
	offset  int64 // row_index of the first row
	nrows   int
	parents []int64   // parent_index per row (child tables)
	vals    [][]value // per user column, per row (shorter slices: null)
	// extra holds, per row, the fields past the column budget as the open
	// JSON object written so far ("{" + members); overflow counts them.
	extra    map[int]*bytes.Buffer
	overflow int64
}

// decoder is the state of one Decode.
type decoder struct {
	meta      Meta
	opt       Options
	root      string
	rootNew   bool
	committed map[string]*tableState // the registry's tables of this family
	family    []string               // committed names of this family
	taken     map[string]bool        // table names in use
	works     map[string]*work
	order     []*work
	changes   []Change
	discarded []Change
	seenDisc  map[string]bool
	keyCache  map[[2]string]string
	violation *ContractError
	policy    Policy
	rules     map[string]bool // MapRules of the endpoint: joined body path -> force
	// Map decisions by table and path key (mapID): objects found not to be
	// maps, paths that were promoted to maps by an earlier pass, and paths
	// this pass found to be maps after an object there was flattened.
	notMap   map[string]bool
	promoted map[string]bool
	promote  map[string]bool
	// nrecords are the records of the body (entries of a body that is a
	// map); rejects those rejected (rejectRow), in body order.
	nrecords int
	rejects  []rejected
}

// rejected is one record of the body that is not loaded, with the reason.
type rejected struct {
	index  int // the record's position in the body
	reason string
	raw    string
}

// Reasons a record of an account body is rejected.
const (
	reasonNotObject = "a JSON %s, not an object: rows must be objects"
)

// ReasonTooDeep is the reason of a rejected row that holds a value nested
// deeper than MaxNesting.
var ReasonTooDeep = fmt.Sprintf("JSON nested deeper than %d levels", MaxNesting)

// rejectRow records record i (raw: its JSON) as rejected when it cannot be
// a row: it holds a value nested too deep, or (not an entry of a body that
// is a map) it is not an object. It reports whether it did.
func (d *decoder) rejectRow(i int, n *node, entry bool, raw func() string) bool {
	reason := ""
	switch {
	case n.deep:
		reason = ReasonTooDeep
	case !entry && n.kind != nObject && n.kind != nNull:
		reason = fmt.Sprintf(reasonNotObject, n.kind)
	default:
		return false
	}
	d.rejects = append(d.rejects, rejected{index: i, reason: reason, raw: raw()})
	return true
}

func (r *Registry) newDecoder(root string, meta Meta, opt Options) (*decoder, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	d := &decoder{
		meta: meta, opt: opt, root: root, policy: r.policy,
		rules:     r.policy.Maps[meta.Endpoint].index(),
		committed: map[string]*tableState{},
		taken:     make(map[string]bool, len(r.tables)),
		works:     map[string]*work{},
		seenDisc:  map[string]bool{},
		keyCache:  map[[2]string]string{},
	}
	for n := range r.tables {
		d.taken[n] = true
	}
	if t, ok := r.tables[root]; ok && t.Parent != "" {
		return nil, fmt.Errorf("infer: endpoint %q: table name %s is taken by a child table of %s", meta.Endpoint, root, t.Parent)
	}
	d.family = r.familyNames(root)
	for _, n := range d.family {
		d.committed[n] = r.tables[n]
	}
	if _, ok := d.committed[root]; !ok {
		d.rootNew = true
		st := newTableState(root, root, "", nil, 0, meta.Time)
		d.addWork(st, true)
		d.taken[root] = true
		d.changes = append(d.changes, Change{Table: root, Kind: ChangeTable})
	}
	return d, nil
}

func (d *decoder) addWork(st *tableState, isNew bool) *work {
	w := &work{st: st, isNew: isNew, changed: isNew, offset: d.meta.RowOffsets[st.Name]}
	d.works[st.Name] = w
	d.order = append(d.order, w)
	return w
}

// work returns the working state of a table of the family.
func (d *decoder) work(name string) *work {
	if w, ok := d.works[name]; ok {
		return w
	}
	return d.addWork(d.committed[name].clone(), false)
}

// run turns the parsed body into rows.
func (d *decoder) run(ctx context.Context, tree *node) error {
	rw := d.work(d.root)
	records, mapBody, err := d.records(tree, rw)
	if err != nil {
		return err
	}
	d.nrecords = len(records)
	if mapBody {
		d.nrecords = len(tree.keys)
	}
	var base []string
	if len(d.rules) > 0 {
		switch {
		case mapBody:
			base = []string{mapSegment}
		case tree.kind == nObject && len(records) > 0 && records[0] != tree:
			base = []string{tree.keys[0]} // the wrapper's key
		}
	}
	tick := func(i int) error {
		if i%256 == 255 {
			return ctx.Err()
		}
		return nil
	}
	if mapBody {
		for i, k := range tree.keys {
			if err := tick(i); err != nil {
				return err
			}
			v := tree.vals[i]
			if d.rejectRow(i, v, true, func() string { return compactJSON(&node{kind: nObject, keys: []string{k}, vals: []*node{v}}) }) {
				continue
			}
			d.addEntry(rw, k, v, -1, base)
		}
	}
	for i, rec := range records {
		if err := tick(i); err != nil {
			return err
		}
		if rec != nil && d.rejectRow(i, rec, false, func() string { return compactJSON(rec) }) {
			continue
		}
		d.addRow(rw, rec, -1, base)
	}
	for _, w := range d.order {
		d.closeExtra(w)
	}
	if d.violation != nil {
		return d.violation
	}
	return ctx.Err()
}

// records picks the record set of the body (see the package documentation).
// For a body that is a map it returns mapBody: the entries are the rows.
func (d *decoder) records(tree *node, rw *work) (recs []*node, mapBody bool, err error) {
	switch tree.kind {
	case nArray:
		return tree.elems, false, nil // an element that is not an object is rejected
	case nObject:
		if len(tree.keys) == 1 {
			key, v := tree.keys[0], tree.vals[0]
			if v.kind == nArray && objectsOrNull(v.elems) {
				if rw.st.Wrap == nil || *rw.st.Wrap != key {
					rw.st.Wrap = &key
					rw.changed = true
				}
				return v.elems, false, nil
			}
			if v.kind == nNull && rw.st.Wrap != nil && *rw.st.Wrap == key {
				return nil, false, nil
			}
		}
		if d.bodyIsMap(rw, tree) {
			return nil, true, nil
		}
		return []*node{tree}, false, nil
	}
	return nil, false, shapeError(d.root, "the body is a JSON %s; expected an object or an array of objects", tree.kind)
}

func objectsOrNull(elems []*node) bool {
	for _, e := range elems {
		if e.kind != nObject && e.kind != nNull {
			return false
		}
	}
	return true
}

// addRow adds one row (obj nil or JSON null: all user columns null); base
// is the body path of the row (see MapRules).
func (d *decoder) addRow(w *work, obj *node, parent int64, base []string) {
	r := w.nrows
	w.nrows++
	w.parents = append(w.parents, parent)
	if obj != nil && obj.kind == nObject {
		// Each row gets its own path buffer: a child row is flattened while
		// its parent row's paths are still in use.
		d.flatten(w, r, obj, fpath{keys: make([]string, 0, 8), base: base}, 0)
	}
}

// addEntry adds the row of one map entry: its key in the key column, its
// value at the empty path (an object's members flatten into columns, a
// scalar goes to "value", an object that is itself a map to the child table
// "<table>__value").
func (d *decoder) addEntry(w *work, key string, v *node, parent int64, base []string) {
	r := w.nrows
	w.nrows++
	w.parents = append(w.parents, parent)
	p := fpath{keys: make([]string, 0, 8), base: base}
	if c := d.keyColumn(w); c >= 0 {
		d.set(w, r, c, value{k: vString, s: key})
	}
	switch v.kind {
	case nNull:
	case nObject:
		if d.isMap(w, p, v) {
			d.mapRows(w, r, p, v)
			return
		}
		d.flatten(w, r, v, p, 0)
	case nArray:
		d.array(w, r, p, v)
	default:
		d.scalar(w, r, p, scalarValue(v))
	}
}

// keyColumn returns w's key column, adding it when w's rows become map
// entries (-1 when the contract refuses it).
func (d *decoder) keyColumn(w *work) int {
	p := fpath{}
	if c := w.st.find(p, roleKey); c >= 0 {
		return c
	}
	return d.newColumn(w, p, roleKey, schema.String, false)
}

// mapRows makes the entries of the map v at path p of row r rows of the
// child table of p.
func (d *decoder) mapRows(w *work, r int, p fpath, v *node) {
	if w.st.Depth+1 > MaxTableDepth {
		d.setJSON(w, r, p, v)
		return
	}
	cw := d.child(w, p)
	if cw == nil {
		return
	}
	parent := w.offset + int64(r)
	base := d.bodyPath(p, true)
	for i, k := range v.keys {
		d.addEntry(cw, k, v.vals[i], parent, base)
	}
}

// fpath is a JSON path from a row object and its pathKey.
type fpath struct {
	keys []string // may share its backing array with sibling paths: copy to keep
	key  string
	base []string // the body path of the row (shared: copy to keep)
}

// childKey returns pathKey(append(parent's keys, k)) from the parent's key,
// remembering it so that rows after the first allocate nothing.
func (d *decoder) childKey(parent, k string) string {
	id := [2]string{parent, k}
	if s, ok := d.keyCache[id]; ok {
		return s
	}
	s := parent + strconv.Itoa(len(k)) + ":" + k
	d.keyCache[id] = s
	return s
}

func (d *decoder) flatten(w *work, r int, obj *node, prefix fpath, depth int) {
	for i, k := range obj.keys {
		v := obj.vals[i]
		p := fpath{keys: append(prefix.keys, k), key: d.childKey(prefix.key, k), base: prefix.base}
		switch v.kind {
		case nNull:
		case nObject:
			if d.isMap(w, p, v) {
				d.mapRows(w, r, p, v)
				continue
			}
			if depth+1 > MaxObjectDepth {
				d.setJSON(w, r, p, v)
				continue
			}
			d.flatten(w, r, v, p, depth+1)
		case nArray:
			d.array(w, r, p, v)
		default:
			d.scalar(w, r, p, scalarValue(v))
		}
	}
}

func (d *decoder) array(w *work, r int, p fpath, v *node) {
	var nObj, nScalar, nNulls, nOther int
	for _, e := range v.elems {
		switch e.kind {
		case nNull:
			nNulls++
		case nObject:
			nObj++
		case nArray:
			nOther++
		default:
			nScalar++
		}
	}
	switch {
	case len(v.elems) == 0:
		// An empty array is null: a List column's default is [] already.
	case nNulls == len(v.elems):
		// All null decides nothing; it fills what the path already has.
		if _, ok := w.st.Children[p.key]; ok {
			d.children(w, r, p, v)
		} else if c := w.st.find(p, roleValue); c >= 0 && w.st.Cols[c].List {
			d.list(w, r, p, v)
		}
	case nOther == 0 && nScalar == 0:
		d.children(w, r, p, v)
	case nOther == 0 && nObj == 0:
		d.list(w, r, p, v)
	default:
		d.setJSON(w, r, p, v)
	}
}

func (d *decoder) children(w *work, r int, p fpath, v *node) {
	if w.st.Depth+1 > MaxTableDepth {
		d.setJSON(w, r, p, v)
		return
	}
	cw := d.child(w, p)
	if cw == nil {
		return
	}
	parent := w.offset + int64(r)
	base := d.bodyPath(p, false)
	for _, e := range v.elems {
		d.addRow(cw, e, parent, base)
	}
}

// child returns the child table holding the arrays of objects at path p of
// w's rows, creating it when the contract allows.
func (d *decoder) child(w *work, p fpath) *work {
	if name, ok := w.st.Children[p.key]; ok {
		return d.work(name)
	}
	name := resolve(limitLen(w.st.Name+"__"+baseName(p.keys)), func(n string) bool { return d.taken[n] })
	if !d.allow(w, p, Change{Table: name, Kind: ChangeTable, Field: displayPath(p.keys)}, "child table "+name) {
		return nil
	}
	d.taken[name] = true
	w.st.Children[p.key] = name
	w.changed = true
	st := newTableState(name, w.st.Root, w.st.Name, slices.Clone(p.keys), w.st.Depth+1, d.meta.Time)
	d.changes = append(d.changes, Change{Table: name, Kind: ChangeTable, Field: displayPath(p.keys)})
	return d.addWork(st, true)
}

// allow applies the contract to a schema change of w's table (or a new
// child of it). A table created in this Decode may always change.
func (d *decoder) allow(w *work, p fpath, ch Change, what string) bool {
	if d.opt.Mode == Evolve || d.rootNew || w.isNew {
		return true
	}
	switch d.opt.Mode {
	case Freeze:
		if d.violation == nil {
			reason := "new field"
			if ch.Kind == ChangeVariant {
				reason = "type conflict in field"
			}
			d.violation = &ContractError{Table: w.st.Name, Field: displayPath(p.keys), Column: what, Reason: reason}
		} else {
			d.violation.More++
		}
	case DiscardColumns:
		key := ch.Table + "\x00" + ch.Column + "\x00" + ch.Kind
		if !d.seenDisc[key] {
			d.seenDisc[key] = true
			d.discarded = append(d.discarded, ch)
		}
	}
	return false
}

// newColumn appends a column for path p and role, or returns -1 when the
// contract refuses it.
func (d *decoder) newColumn(w *work, p fpath, role string, typ schema.Type, list bool) int {
	if d.full(w, role) {
		// The table does not change (unless extra is new: closeExtra asks
		// the contract for it), so neither freeze nor discard-columns
		// applies to fields stored in extra.
		return overBudget
	}
	kind := ChangeColumn
	if len(role) > len(rolePrefixVariant) && role[:len(rolePrefixVariant)] == rolePrefixVariant {
		kind = ChangeVariant
	}
	if d.opt.Mode != Evolve && !d.rootNew && !w.isNew {
		name := w.st.peekName(p, role)
		ch := Change{Table: w.st.Name, Column: name, Type: typ, List: list, Kind: kind, Field: fieldOf(p.keys, role)}
		what := "column " + name
		if !d.allow(w, p, ch, what) {
			return -1
		}
	}
	name := w.st.columnName(p, role)
	c := w.st.addColumn(&colState{Name: name, Type: typ, List: list, Path: slices.Clone(p.keys), Role: role, FirstSeen: d.meta.Time, isNew: true})
	w.changed = true
	if !w.isNew {
		d.changes = append(d.changes, Change{Table: w.st.Name, Column: name, Type: typ, List: list, Kind: kind, Field: fieldOf(p.keys, role)})
	}
	return c
}

// overBudget is newColumn's answer when the table has no room for another
// column: the value goes to the extra column.
const overBudget = -2

// full reports whether a new column of role would take w's table past the
// column budget. The budget counts every column, meta columns included,
// and always keeps one for "extra"; the key and extra columns themselves
// are never refused.
func (d *decoder) full(w *work, role string) bool {
	if role == roleKey || role == roleExtra {
		return false
	}
	n := len(w.st.Cols) + len(metaNames) + 1 // meta columns, and this one
	if w.st.Parent == "" {
		n-- // no parent_index
	}
	if w.st.find(fpath{}, roleExtra) < 0 {
		n++ // room for extra
	}
	return n > d.policy.ColumnBudget
}

// overflow starts the member for path p in row r's extra JSON object and
// returns the buffer to write the value to.
func (d *decoder) overflow(w *work, r int, p fpath) *bytes.Buffer {
	if w.extra == nil {
		w.extra = map[int]*bytes.Buffer{}
	}
	b := w.extra[r]
	if b == nil {
		b = &bytes.Buffer{}
		b.WriteByte('{')
		w.extra[r] = b
	} else {
		b.WriteByte(',')
	}
	w.overflow++
	writeString(b, displayPath(p.keys))
	b.WriteByte(':')
	return b
}

func (d *decoder) overflowValue(w *work, r int, p fpath, v value) {
	appendValueJSON(d.overflow(w, r, p), v)
}

func (d *decoder) overflowNode(w *work, r int, p fpath, n *node) {
	writeJSON(d.overflow(w, r, p), n)
}

// closeExtra stores the extra JSON object of every row that overflowed in
// the extra column (created when the contract allows).
func (d *decoder) closeExtra(w *work) {
	if len(w.extra) == 0 {
		return
	}
	c := w.st.find(fpath{}, roleExtra)
	if c < 0 {
		if c = d.newColumn(w, fpath{}, roleExtra, schema.String, false); c < 0 {
			w.extra, w.overflow = nil, 0 // refused by the contract: not loaded
			return
		}
	}
	for r, b := range w.extra {
		b.WriteByte('}')
		d.set(w, r, c, value{k: vString, s: b.String()})
	}
	w.extra = nil
}

// set stores v in column c of row r.
func (d *decoder) set(w *work, r, c int, v value) {
	for len(w.vals) <= c {
		w.vals = append(w.vals, nil)
	}
	col := w.vals[c]
	for len(col) <= r {
		col = append(col, value{})
	}
	col[r] = v
	w.vals[c] = col
}

func typeOf(k vkind) schema.Type {
	switch k {
	case vBool:
		return schema.Bool
	case vInt:
		return schema.Int64
	case vFloat:
		return schema.Float64
	}
	return schema.String
}

// scalar routes one scalar value of path p (see the package documentation
// for the rules).
func (d *decoder) scalar(w *work, r int, p fpath, v value) {
	c := w.st.find(p, roleValue)
	if c < 0 {
		typ := typeOf(v.k)
		if c = d.newColumn(w, p, roleValue, typ, false); c < 0 {
			if c == overBudget {
				d.overflowValue(w, r, p, v)
			}
			return
		}
		if typ == schema.String {
			if _, ok := values.ParseDecimal([]byte(v.s)); ok {
				d.newColumn(w, p, roleNum, schema.Float64, false)
			}
		}
	}
	col := w.st.Cols[c]
	if col.List {
		d.variant(w, r, p, v)
		return
	}
	switch col.Type {
	case schema.Bool:
		if v.k == vBool {
			d.set(w, r, c, v)
		} else {
			d.variant(w, r, p, v)
		}
	case schema.Int64:
		switch v.k {
		case vInt:
			d.set(w, r, c, v)
			d.epoch(w, r, p, v.i)
		case vFloat:
			if col.isNew && exactInFloat(w, c) {
				col.Type = schema.Float64 // widen: the column is not committed yet
				d.set(w, r, c, v)
			} else {
				d.variant(w, r, p, v)
			}
		case vString:
			d.variant(w, r, p, v)
			if i, err := strconv.ParseInt(v.s, 10, 64); err == nil {
				d.set(w, r, c, value{k: vInt, i: i, s: v.s})
				d.epoch(w, r, p, i)
			}
		default:
			d.variant(w, r, p, v)
		}
	case schema.Float64:
		switch {
		case v.k == vFloat || (v.k == vInt && intFitsFloat(v.i)):
			d.set(w, r, c, v)
		case v.k == vString:
			d.variant(w, r, p, v)
			if f, ok := values.ParseDecimal([]byte(v.s)); ok {
				d.set(w, r, c, value{k: vFloat, f: f, s: v.s})
			}
		default:
			d.variant(w, r, p, v)
		}
	case schema.String:
		switch v.k {
		case vString, vInt, vFloat:
			d.set(w, r, c, value{k: vString, s: v.s})
			if n := w.st.find(p, roleNum); n >= 0 {
				if f, ok := values.ParseDecimal([]byte(v.s)); ok {
					d.set(w, r, n, value{k: vFloat, f: f, s: v.s})
				}
			}
		default:
			d.variant(w, r, p, v)
		}
	default:
		d.variant(w, r, p, v)
	}
}

// epochMillis converts an epoch value of any unit to milliseconds; ok is
// false for values below 100,000,000 (not an epoch value) and instants
// outside years 0001-9999.
func epochMillis(v int64) (int64, bool) {
	if v < 100_000_000 {
		return 0, false
	}
	return values.EpochToMillis(v, values.UnitAuto)
}

// epoch fills the "__time" companion of an Int64 column with a time name.
func (d *decoder) epoch(w *work, r int, p fpath, v int64) {
	if len(p.keys) == 0 || !isTimeName(NormalizeKey(p.keys[len(p.keys)-1])) {
		return
	}
	ms, ok := epochMillis(v)
	if !ok {
		return
	}
	t := w.st.find(p, roleTime)
	if t < 0 {
		if t = d.newColumn(w, p, roleTime, schema.TimestampMs, false); t < 0 {
			return
		}
	}
	d.set(w, r, t, value{k: vInt, i: ms})
}

// variant stores a value its column cannot hold in "<name>__v_<kind>".
func (d *decoder) variant(w *work, r int, p fpath, v value) {
	role := rolePrefixVariant + v.k.kindName()
	c := w.st.find(p, role)
	if c < 0 {
		if c = d.newColumn(w, p, role, typeOf(v.k), false); c < 0 {
			if c == overBudget {
				d.overflowValue(w, r, p, v)
			}
			return
		}
	}
	d.set(w, r, c, v)
}

// list stores an array of scalars (and nulls) in the path's List column.
func (d *decoder) list(w *work, r int, p fpath, n *node) {
	vals := make([]value, len(n.elems))
	var hasBool, hasInt, hasFloat, hasStr bool
	for i, e := range n.elems {
		if e.kind == nNull {
			continue
		}
		v := scalarValue(e)
		vals[i] = v
		switch v.k {
		case vBool:
			hasBool = true
		case vInt:
			hasInt = true
		case vFloat:
			hasFloat = true
		default:
			hasStr = true
		}
	}
	known := true
	var et schema.Type
	switch {
	case hasBool && !hasInt && !hasFloat && !hasStr:
		et = schema.Bool
	case hasInt && !hasBool && !hasFloat && !hasStr:
		et = schema.Int64
	case (hasInt || hasFloat) && !hasBool && !hasStr:
		et = schema.Float64
	case hasStr && !hasBool && !hasInt && !hasFloat:
		et = schema.String
	case !hasBool && !hasInt && !hasFloat && !hasStr:
		known = false // all null
	default:
		d.setJSON(w, r, p, n) // scalars of kinds that do not unify
		return
	}
	c := w.st.find(p, roleValue)
	if c < 0 {
		if !known {
			return
		}
		if c = d.newColumn(w, p, roleValue, et, true); c < 0 {
			if c == overBudget {
				d.overflowNode(w, r, p, n)
			}
			return
		}
	}
	col := w.st.Cols[c]
	if !col.List {
		d.setJSON(w, r, p, n)
		return
	}
	fits := !known || et == col.Type ||
		(col.Type == schema.Float64 && et == schema.Int64 && listFitsFloat(vals)) ||
		(col.Type == schema.String && (et == schema.Int64 || et == schema.Float64))
	if !fits && col.isNew && col.Type == schema.Int64 && et == schema.Float64 &&
		listFitsFloat(vals) && exactInFloat(w, c) {
		col.Type = schema.Float64 // widen: the column is not committed yet
		fits = true
	}
	if !fits {
		d.setJSON(w, r, p, n)
		return
	}
	d.set(w, r, c, value{k: vList, list: vals})
}

// setJSON keeps a value no column fits as JSON text in "<name>__json".
func (d *decoder) setJSON(w *work, r int, p fpath, n *node) {
	c := w.st.find(p, roleJSON)
	if c < 0 {
		if c = d.newColumn(w, p, roleJSON, schema.String, false); c < 0 {
			if c == overBudget {
				d.overflowNode(w, r, p, n)
			}
			return
		}
	}
	d.set(w, r, c, value{k: vString, s: compactJSON(n)})
}

// stats returns the rows per table of the family.
func (d *decoder) stats() Stats {
	st := Stats{Rows: map[string]int64{}, Discarded: d.discarded, Records: int64(d.nrecords), Rejects: int64(len(d.rejects))}
	reasons := map[string]int64{}
	for _, rj := range d.rejects {
		reasons[rj.reason]++
	}
	for reason, n := range reasons {
		if n > st.TopRejects || n == st.TopRejects && reason < st.TopReason {
			st.TopReason, st.TopRejects = reason, n
		}
	}
	for _, n := range d.family {
		st.Rows[n] = 0
	}
	for _, w := range d.order {
		st.Rows[w.st.Name] = int64(w.nrows)
		if w.overflow > 0 {
			if st.Overflow == nil {
				st.Overflow = map[string]int64{}
			}
			st.Overflow[w.st.Name] = w.overflow
		}
	}
	return st
}

// maxExactInt is the largest magnitude below which float64 holds every
// integer exactly (2^53).
const maxExactInt = 1 << 53

func intFitsFloat(i int64) bool { return i >= -maxExactInt && i <= maxExactInt }

func listFitsFloat(vals []value) bool {
	for _, v := range vals {
		if v.k == vInt && !intFitsFloat(v.i) {
			return false
		}
	}
	return true
}

// exactInFloat reports whether every integer stored so far in column c
// (scalars or list elements) converts to float64 exactly, so that the column
// may widen to Float64 without changing a value.
func exactInFloat(w *work, c int) bool {
	if c >= len(w.vals) {
		return true
	}
	for _, v := range w.vals[c] {
		if v.k == vInt && !intFitsFloat(v.i) {
			return false
		}
		if v.k == vList && !listFitsFloat(v.list) {
			return false
		}
	}
	return true
}
