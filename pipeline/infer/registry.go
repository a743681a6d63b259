package infer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/storage"
)

// SchemaDir is the folder of a data directory that holds the registry: one
// file "<table>.json" per inferred table.
const SchemaDir = "_schema"

// fileVersion is the version of the registry's file format. Version 2
// omits defaults (a column's role "value", a first-seen time equal to the
// table's, a stem equal to its column's name) and is not indented, so a wide
// table's file stays small; version 1 files are still read.
const fileVersion = 2

// Column roles: what a column holds for its path.
const (
	roleValue = "value" // the path's scalar or list values
	roleNum   = "num"   // decimal text of the value column, parsed
	roleTime  = "time"  // epoch integer of the value column, as time
	roleJSON  = "json"  // arrays (or too-deep objects) that fit no column, as JSON text
	roleKey   = "key"   // the map key of a row of a map's table (empty path)
	roleExtra = "extra" // fields past the column budget, as a JSON object (empty path)
	// Variant roles are "v_bool", "v_int", "v_float", "v_text".
	rolePrefixVariant = "v_"
)

// colState is one user column of an inferred table.
type colState struct {
	Name      string
	Type      schema.Type
	List      bool
	Path      []string // JSON keys from the row object to the value
	Role      string
	FirstSeen time.Time

	isNew bool // created in the running Decode (may still widen)
}

// tableState is the registry's knowledge of one table.
type tableState struct {
	Name      string
	Root      string   // the endpoint's table this table belongs to
	Parent    string   // "" for an endpoint's table
	Path      []string // in the parent row, the path of the array of objects
	Depth     int      // 0 for an endpoint's table
	Wrap      *string  // key of the {"key":[…]} wrapper the body used, if any
	FirstSeen time.Time
	Cols      []*colState
	Stems     map[string]stemEntry // path key → its base column name
	Children  map[string]string    // path key → child table name

	byKey map[colID]int // path key and role → index in Cols
	names map[string]bool
	tbl   *schema.Table // built from the state; replaced, never mutated
}

// pathKey encodes a path as a map key, unambiguously for any keys: each key
// as its length, ':' and the key.
func pathKey(path []string) string {
	n := 0
	for _, k := range path {
		n += len(k) + 4
	}
	b := make([]byte, 0, n)
	for _, k := range path {
		b = strconv.AppendInt(b, int64(len(k)), 10)
		b = append(b, ':')
		b = append(b, k...)
	}
	return string(b)
}

// stemEntry is the base column name given to a path.
type stemEntry struct {
	Path []string
	Stem string
}

// colID identifies a column within its table: its path (pathKey) and role.
type colID struct{ path, role string }

func newTableState(name, root, parent string, path []string, depth int, at time.Time) *tableState {
	t := &tableState{
		Name: name, Root: root, Parent: parent, Path: path, Depth: depth, FirstSeen: at,
		Stems: map[string]stemEntry{}, Children: map[string]string{},
	}
	t.index()
	return t
}

// index rebuilds the lookup maps from Cols and Stems.
func (t *tableState) index() {
	t.byKey = make(map[colID]int, len(t.Cols))
	t.names = make(map[string]bool, len(t.Cols)+len(metaNames))
	for _, m := range metaNames {
		t.names[m] = true
	}
	for i, c := range t.Cols {
		t.byKey[colID{pathKey(c.Path), c.Role}] = i
		t.names[c.Name] = true
	}
	for _, s := range t.Stems {
		t.names[s.Stem] = true
	}
}

// clone returns a copy the running Decode may change.
func (t *tableState) clone() *tableState {
	c := *t
	c.Cols = make([]*colState, len(t.Cols))
	for i, col := range t.Cols {
		cc := *col
		c.Cols[i] = &cc
	}
	c.Stems = make(map[string]stemEntry, len(t.Stems))
	for k, v := range t.Stems {
		c.Stems[k] = v
	}
	c.Children = make(map[string]string, len(t.Children))
	for k, v := range t.Children {
		c.Children[k] = v
	}
	c.index()
	return &c
}

// find returns the index of the column of path p and role, or -1.
func (t *tableState) find(p fpath, role string) int {
	if i, ok := t.byKey[colID{p.key, role}]; ok {
		return i
	}
	return -1
}

// stem returns the path's base column name, assigning it on first use.
func (t *tableState) stem(p fpath) string {
	if s, ok := t.Stems[p.key]; ok {
		return s.Stem
	}
	s := resolve(finalName(baseName(p.keys)), func(n string) bool { return t.names[n] })
	t.Stems[p.key] = stemEntry{Path: slices.Clone(p.keys), Stem: s}
	t.names[s] = true
	return s
}

// columnName returns the name for a new column of path p and role.
func (t *tableState) columnName(p fpath, role string) string {
	if n := fixedName(role); n != "" {
		n = resolve(n, func(n string) bool { return t.names[n] })
		t.names[n] = true
		return n
	}
	s := t.stem(p)
	if role == roleValue {
		return s
	}
	return resolve(finalName(s+"__"+role), func(n string) bool { return t.names[n] })
}

// peekName is the name columnName would give, without reserving anything.
func (t *tableState) peekName(p fpath, role string) string {
	taken := func(n string) bool { return t.names[n] }
	if n := fixedName(role); n != "" {
		return resolve(n, taken)
	}
	s := t.Stems[p.key].Stem
	if s == "" {
		s = resolve(finalName(baseName(p.keys)), taken)
	}
	if role == roleValue {
		return s
	}
	return resolve(finalName(s+"__"+role), taken)
}

// fixedName is the name of a column that no path names: the map key and the
// column-budget overflow ("" for other roles).
func fixedName(role string) string {
	switch role {
	case roleKey:
		return "key"
	case roleExtra:
		return "extra"
	}
	return ""
}

// isMap reports whether the table's rows are entries of a map (it has a key
// column): once a path is a map, it stays one.
func (t *tableState) isMap() bool {
	_, ok := t.byKey[colID{"", roleKey}]
	return ok
}

func (t *tableState) addColumn(c *colState) int {
	t.Cols = append(t.Cols, c)
	i := len(t.Cols) - 1
	t.byKey[colID{pathKey(c.Path), c.Role}] = i
	t.names[c.Name] = true
	return i
}

// build renders the state as a schema.Table.
func (t *tableState) build() *schema.Table {
	cols := schema.AccountMetaColumns(t.Parent)
	for _, c := range t.Cols {
		cols = append(cols, schema.Column{Name: c.Name, Type: c.Type, List: c.List, Nullable: !c.List, Doc: c.doc()})
	}
	doc := "inferred from the endpoint " + t.Root
	if t.Parent != "" {
		doc = fmt.Sprintf("inferred: the array or map %s of %s rows", displayPath(t.Path), t.Parent)
	}
	return &schema.Table{
		Name:          t.Name,
		Doc:           doc,
		Columns:       cols,
		Key:           slices.Clone(schema.AccountKey),
		PartitionTime: schema.AccountPartitionTime,
	}
}

func (c *colState) doc() string {
	p := displayPath(c.Path)
	if len(c.Path) == 0 {
		p = "map value"
	}
	switch {
	case c.Role == roleKey:
		return "the map key of the row"
	case c.Role == roleExtra:
		return "fields past the column budget: a JSON object of path -> value as received"
	case c.Role == roleValue:
		return "JSON " + p
	case c.Role == roleNum:
		return "JSON " + p + " (decimal text) parsed; null when not a number"
	case c.Role == roleTime:
		return "JSON " + p + " (epoch integer) as UTC time"
	case c.Role == roleJSON:
		return "JSON " + p + " as JSON text (no column fits it)"
	case strings.HasPrefix(c.Role, rolePrefixVariant):
		return fmt.Sprintf("JSON %s values of kind %s (type conflict)", p, strings.TrimPrefix(c.Role, rolePrefixVariant))
	}
	return "JSON " + p
}

// Registry holds the inferred schema of every account table, persisted in a
// data directory. It is safe for concurrent use.
type Registry struct {
	st storage.Store // the data directory; nil for an in-memory registry

	decodeMu sync.Mutex // serialises Decodes

	policy Policy // guarded by decodeMu

	mu     sync.RWMutex
	tables map[string]*tableState
	dirty  map[string]bool // changed since loaded or saved
}

// NewRegistry returns an empty registry that is not persisted (Save does
// nothing).
func NewRegistry() *Registry {
	return &Registry{tables: map[string]*tableState{}, dirty: map[string]bool{}, policy: Policy{ColumnBudget: DefaultColumnBudget}}
}

// LoadRegistry loads the registry persisted in dataDir/_schema (SchemaDir);
// a missing folder is an empty registry. Save writes back to the same folder.
func LoadRegistry(dataDir string) (*Registry, error) {
	return LoadRegistryFrom(context.Background(), storage.NewLocal(dataDir))
}

// LoadRegistryFrom loads the registry persisted in the data directory st
// (SchemaDir/<table>.json, a folder or a bucket prefix); none is an empty
// registry. Save writes back to the same store.
func LoadRegistryFrom(ctx context.Context, st storage.Store) (*Registry, error) {
	r := NewRegistry()
	r.st = st
	files, err := st.List(ctx, SchemaDir+"/")
	if err != nil {
		return nil, fmt.Errorf("infer: load registry: %w", err)
	}
	for _, f := range files {
		name := strings.TrimPrefix(f.Name, SchemaDir+"/")
		if strings.Contains(name, "/") || !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		b, err := storage.ReadAll(ctx, st, f.Name)
		if err != nil {
			return nil, fmt.Errorf("infer: load registry: %w", err)
		}
		t, err := unmarshalTable(b)
		if err != nil {
			return nil, fmt.Errorf("infer: load registry %s: %w", f.Name, err)
		}
		if t.Name+".json" != name {
			return nil, fmt.Errorf("infer: load registry %s: holds table %q", f.Name, t.Name)
		}
		r.tables[t.Name] = t
	}
	if err := r.link(); err != nil {
		return nil, fmt.Errorf("infer: load registry %s/%s: %w", st, SchemaDir, err)
	}
	return r, nil
}

// link checks parent links and rebuilds the parents' Children maps.
func (r *Registry) link() error {
	for _, t := range r.tables {
		if t.Parent == "" {
			if t.Root != t.Name || t.Depth != 0 {
				return fmt.Errorf("table %s: inconsistent root", t.Name)
			}
			continue
		}
		p, ok := r.tables[t.Parent]
		if !ok {
			return fmt.Errorf("table %s: parent table %s is missing", t.Name, t.Parent)
		}
		if p.Root != t.Root || t.Depth != p.Depth+1 {
			return fmt.Errorf("table %s: inconsistent with parent %s", t.Name, t.Parent)
		}
		k := pathKey(t.Path)
		if other, dup := p.Children[k]; dup && other != t.Name {
			return fmt.Errorf("tables %s and %s both hold %s of %s", other, t.Name, displayPath(t.Path), p.Name)
		}
		p.Children[k] = t.Name
	}
	for _, t := range r.tables {
		t.tbl = t.build()
	}
	return nil
}

// Save persists every table changed since the registry was loaded or last
// saved, each to SchemaDir/<table>.json, each whole or not at all (the
// store's Put: temp file, fsync, rename and folder fsync locally; one PUT on
// a bucket). An in-memory registry saves nothing.
func (r *Registry) Save(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.st == nil || len(r.dirty) == 0 {
		return nil
	}
	names := make([]string, 0, len(r.dirty))
	for n := range r.dirty {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := marshalTable(r.tables[n])
		if err != nil {
			return fmt.Errorf("infer: save registry table %s: %w", n, err)
		}
		if err := r.st.Put(ctx, SchemaDir+"/"+n+".json", b); err != nil {
			return fmt.Errorf("infer: save registry table %s: %w", n, err)
		}
		delete(r.dirty, n)
	}
	return nil
}

// Table returns the named table as it is now, or nil. The *schema.Table is
// immutable: a Decode that changes a table replaces it with a new pointer
// (the one it passed to emit), so compare tables by Name, and ask again after
// a Decode for the current columns.
func (r *Registry) Table(name string) *schema.Table {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if t, ok := r.tables[name]; ok {
		return t.tbl
	}
	return nil
}

// Tables returns every table, sorted by name (a table's children follow it).
func (r *Registry) Tables() []*schema.Table {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*schema.Table, 0, len(r.tables))
	for _, n := range r.sortedNames() {
		out = append(out, r.tables[n].tbl)
	}
	return out
}

func (r *Registry) sortedNames() []string {
	names := make([]string, 0, len(r.tables))
	for n := range r.tables {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ColumnInfo describes one column of an inferred table beyond schema.Column.
type ColumnInfo struct {
	schema.Column
	FirstSeen time.Time // snapshot time the column first appeared (zero for meta columns)
	Field     string    // JSON path it comes from, keys joined by '.' ("" for meta columns)
	Role      string    // value, num, time, json, v_bool, v_int, v_float, v_text; "meta"
}

// Columns returns the named table's columns with their history, or nil.
func (r *Registry) Columns(name string) []ColumnInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.tables[name]
	if !ok {
		return nil
	}
	var out []ColumnInfo
	nMeta := len(t.tbl.Columns) - len(t.Cols)
	for i, c := range t.tbl.Columns {
		if i < nMeta {
			out = append(out, ColumnInfo{Column: c, Role: "meta"})
			continue
		}
		cs := t.Cols[i-nMeta]
		out = append(out, ColumnInfo{Column: c, FirstSeen: cs.FirstSeen, Field: fieldOf(cs.Path, cs.Role), Role: cs.Role})
	}
	return out
}

// Print writes every table with its columns, types and the snapshot time
// each column first appeared (the output of `optlake schema`).
func (r *Registry) Print(w io.Writer) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := r.sortedNames()
	if len(names) == 0 {
		_, err := fmt.Fprintln(w, "no inferred tables yet")
		return err
	}
	for i, n := range names {
		t := r.tables[n]
		if i > 0 {
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
		}
		head := fmt.Sprintf("table %s (first seen %s", t.Name, fmtTime(t.FirstSeen))
		if t.Parent != "" {
			head += fmt.Sprintf("; rows of %s in %s, linked by parent_index", displayPath(t.Path), t.Parent)
		}
		head += ")"
		if _, err := fmt.Fprintln(w, head); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  column\ttype\tfirst seen\tfrom")
		nMeta := len(t.tbl.Columns) - len(t.Cols)
		for j, c := range t.tbl.Columns {
			typ := c.Type.String()
			if c.List {
				typ = "list<" + typ + ">"
			}
			if j < nMeta {
				fmt.Fprintf(tw, "  %s\t%s\t-\tmeta\n", c.Name, typ)
				continue
			}
			cs := t.Cols[j-nMeta]
			from := fieldOf(cs.Path, cs.Role)
			if cs.Role != roleValue && fixedName(cs.Role) == "" {
				from += " (" + cs.Role + ")"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", c.Name, typ, fmtTime(cs.FirstSeen), from)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// On-disk format of one table.
type fileTable struct {
	Version   int          `json:"version"`
	Name      string       `json:"name"`
	Root      string       `json:"root"`
	Parent    string       `json:"parent,omitempty"`
	Path      []string     `json:"path,omitempty"`
	Depth     int          `json:"depth,omitempty"`
	Wrap      *string      `json:"wrap,omitempty"`
	FirstSeen time.Time    `json:"first_seen"`
	Columns   []fileColumn `json:"columns"`
	Stems     []fileStem   `json:"stems,omitempty"`
}

type fileColumn struct {
	Name      string     `json:"name"`
	Type      string     `json:"type"`
	List      bool       `json:"list,omitempty"`
	Path      []string   `json:"path,omitempty"`
	Role      string     `json:"role,omitempty"`       // default "value" (version 2)
	FirstSeen *time.Time `json:"first_seen,omitempty"` // default the table's (version 2)
}

type fileStem struct {
	Path []string `json:"path"`
	Stem string   `json:"stem"`
}

func marshalTable(t *tableState) ([]byte, error) {
	f := fileTable{
		Version: fileVersion, Name: t.Name, Root: t.Root, Parent: t.Parent, Path: t.Path,
		Depth: t.Depth, Wrap: t.Wrap, FirstSeen: t.FirstSeen.UTC(), Columns: []fileColumn{},
	}
	named := make(map[string]bool, len(t.Cols)) // stems equal to their value column's name
	for _, c := range t.Cols {
		fc := fileColumn{Name: c.Name, Type: c.Type.String(), List: c.List, Path: c.Path}
		if c.Role != roleValue {
			fc.Role = c.Role
		} else if t.Stems[pathKey(c.Path)].Stem == c.Name {
			named[c.Name] = true
		}
		if !c.FirstSeen.Equal(t.FirstSeen) {
			at := c.FirstSeen.UTC()
			fc.FirstSeen = &at
		}
		f.Columns = append(f.Columns, fc)
	}
	for _, s := range t.Stems {
		if !named[s.Stem] {
			f.Stems = append(f.Stems, fileStem{Path: s.Path, Stem: s.Stem})
		}
	}
	sort.Slice(f.Stems, func(i, j int) bool { return f.Stems[i].Stem < f.Stems[j].Stem })
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// parseType parses a schema.Type's String form.
func parseType(s string) (schema.Type, bool) {
	for _, t := range [...]schema.Type{schema.String, schema.Float64, schema.Int64, schema.Bool, schema.TimestampMs} {
		if t.String() == s {
			return t, true
		}
	}
	return 0, false
}

func validRole(r string) bool {
	switch r {
	case roleValue, roleNum, roleTime, roleJSON, roleKey, roleExtra, "v_bool", "v_int", "v_float", "v_text":
		return true
	}
	return false
}

func validName(s string) bool {
	if s == "" || len(s) > MaxNameLen || isDigit(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isLower(c) && !isDigit(c) && c != '_' {
			return false
		}
	}
	return true
}

func unmarshalTable(b []byte) (*tableState, error) {
	var f fileTable
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	if f.Version != 1 && f.Version != fileVersion {
		return nil, fmt.Errorf("format version %d, want 1 or %d", f.Version, fileVersion)
	}
	if !validName(f.Name) || !validName(f.Root) || (f.Parent != "" && !validName(f.Parent)) {
		return nil, fmt.Errorf("invalid table name in %q/%q/%q", f.Name, f.Root, f.Parent)
	}
	if f.Parent == "" && len(f.Path) > 0 {
		// (A child table's path is empty when its rows are the entries of
		// maps that are the values of its parent's map entries.)
		return nil, errors.New("a table with a path needs a parent")
	}
	t := newTableState(f.Name, f.Root, f.Parent, f.Path, f.Depth, f.FirstSeen)
	t.Wrap = f.Wrap
	seen := map[string]bool{}
	for _, m := range metaNames {
		seen[m] = true
	}
	for _, c := range f.Columns {
		if f.Version >= 2 {
			if c.Role == "" {
				c.Role = roleValue
			}
			if c.FirstSeen == nil {
				c.FirstSeen = &f.FirstSeen
			}
		}
		if c.FirstSeen == nil {
			return nil, fmt.Errorf("column %s: no first_seen", c.Name)
		}
		typ, ok := parseType(c.Type)
		if !ok {
			return nil, fmt.Errorf("column %s: unknown type %q", c.Name, c.Type)
		}
		if !validName(c.Name) || seen[c.Name] {
			return nil, fmt.Errorf("column %q: invalid or duplicate name", c.Name)
		}
		if !validRole(c.Role) || (fixedName(c.Role) != "" && len(c.Path) != 0) {
			return nil, fmt.Errorf("column %s: invalid role %q or path", c.Name, c.Role)
		}
		seen[c.Name] = true
		t.Cols = append(t.Cols, &colState{Name: c.Name, Type: typ, List: c.List, Path: c.Path, Role: c.Role, FirstSeen: *c.FirstSeen})
	}
	stems := map[string]bool{}
	if f.Version >= 2 {
		// Stems equal to their value column's name are implied.
		for _, c := range t.Cols {
			if c.Role == roleValue {
				f.Stems = append(f.Stems, fileStem{Path: c.Path, Stem: c.Name})
			}
		}
	}
	for _, s := range f.Stems {
		if !validName(s.Stem) || isMetaName(s.Stem) || stems[s.Stem] {
			return nil, fmt.Errorf("invalid or duplicate stem %q", s.Stem)
		}
		stems[s.Stem] = true
		k := pathKey(s.Path)
		if _, dup := t.Stems[k]; dup {
			return nil, fmt.Errorf("two stems for path %s", displayPath(s.Path))
		}
		t.Stems[k] = stemEntry{Path: s.Path, Stem: s.Stem}
	}
	t.index()
	if len(t.byKey) != len(t.Cols) {
		return nil, errors.New("two columns for the same path and role")
	}
	for _, c := range t.Cols {
		if c.Role == roleValue && t.Stems[pathKey(c.Path)].Stem != c.Name {
			return nil, fmt.Errorf("column %s: stem of its path is %q", c.Name, t.Stems[pathKey(c.Path)].Stem)
		}
	}
	return t, nil
}

// commit installs the tables the Decode changed.
func (r *Registry) commit(d *decoder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range d.order {
		if !w.changed {
			continue
		}
		for _, c := range w.st.Cols {
			c.isNew = false
		}
		w.st.tbl = w.tbl
		r.tables[w.st.Name] = w.st
		r.dirty[w.st.Name] = true
	}
}

// familyNames lists the root table and its descendants, sorted.
func (r *Registry) familyNames(root string) []string {
	var out []string
	for n, t := range r.tables {
		if t.Root == root {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
