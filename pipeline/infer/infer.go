// Package infer turns account endpoint bodies, whose shape nobody documented,
// into typed Arrow tables, and evolves those tables when the venue changes
// its payloads, without ever losing a value.
//
// # Record set
//
// The rows of an endpoint's table (named after the endpoint, see TableName)
// come from the body:
//
//   - a top-level array: each element is a row; elements must be objects or
//     null (a null element is a row whose user columns are all null);
//   - a top-level object with exactly one member whose value is an array of
//     objects (nulls allowed, empty allowed), as {"positions":[…]}: that
//     array's elements (the key is remembered; a later {"positions":null}
//     is then an empty record set);
//   - a top-level object that is a map (see Maps): one row per entry;
//   - any other top-level object: the object itself, as one row.
//
// Anything else (a scalar, or an array holding scalars or arrays) fails with
// a *values.ShapeError; a body that is not JSON fails with a *SyntaxError.
// Both are values.ErrBadInput (errors.Is), which tells them apart from read,
// contract and emit failures. The caller archives the raw body either way.
//
// # Flattening
//
// Within a row, members are visited in the order received:
//
//   - a nested object flattens into "<parent>__<child>" columns, at any depth
//     (objects nested more than MaxObjectDepth levels inside a row are kept as
//     JSON text in "<path>__json");
//   - an array of objects (nulls allowed) becomes rows of the child table
//     "<table>__<path>", each carrying parent_index = row_index of its parent
//     row; arrays of objects inside child rows become grandchild tables
//     "<table>__<path>__<path2>", and so on (below MaxTableDepth the array is
//     kept as JSON text instead);
//   - an array of scalars becomes one List column (null elements allowed);
//   - any other array (objects and scalars mixed, arrays of arrays, scalars of
//     kinds that do not unify) is kept as compact JSON text in a String column
//     "<path>__json"; so is an array that does not fit the path's existing
//     List column;
//   - null, a missing member and an empty array are null. An all-null array
//     decides nothing: it gives rows of nulls to the path's child table, or
//     nulls to its List column, if the path has one, and is null otherwise.
//     List columns are never null: missing is [].
//
// # Maps
//
// An object whose keys are data (instrument names, currencies, ids) is a
// map: its entries become rows of the child table "<table>__<path>" (as an
// array of objects at that path would; both share the table), each with the
// user column "key" (the map key; "key_2" and so on for a field named key)
// and the entry's value at the empty path: an object's members flatten into
// columns, a scalar goes to "value" (with "value__num" and variants as any
// column), an array as at any path, and an object that is itself a map to
// "<table>__<path>__value". A top-level map's entries are the rows of the
// endpoint's table. The decision, for an object at a path:
//
//  1. the endpoint's MapRules (Policy.Maps) force or forbid it;
//  2. else a path whose table already has a key column is a map (once a map,
//     always a map; the registry persists it);
//  3. else the shape (looksLikeMap): the non-null values share one kind
//     (objects whose common keys are at least half of all their keys,
//     numbers, strings, bools or arrays) and either every key is data-like
//     (not identLike) with at least MapMinDataKeys members, or there are at
//     least MapMinObjects objects or MapMinMembers other values.
//
// Only objects below a row and the top-level body are tested; the elements
// of arrays are rows, never maps.
//
// # Column budget
//
// A table has at most Policy.ColumnBudget columns, meta columns included,
// one of them always kept for "extra". A value that would need a new
// column (value, list, JSON or variant) past the budget goes instead to
// "extra": per row, a JSON object of display path → the value as received.
// Companion columns ("__num", "__time") past the budget are not created.
// Stats.Overflow counts the fields per table.
//
// # Types
//
// The first non-null value of a path decides its column's type: bool → Bool,
// an integer literal within int64 → Int64, another finite number → Float64,
// a string → String. Numbers outside int64/float64 (2^70, 1e400) are treated
// as the text of their literal, so nothing is rounded. JSON null never
// decides a type.
//
//   - Int64 → Float64 widening: while a column is new (created in the same
//     Decode) a float value widens it to Float64, provided every integer it
//     holds so far is exact in float64 (|i| ≤ 2^53). Once a column has been
//     committed its type never changes (stores only ever ADD COLUMN): a float
//     arriving later in an Int64 column is a conflict (see below).
//   - Decimal text: a String column whose first value is decimal text
//     (values.ParseDecimal) gets a companion "<name>__num" Float64 column:
//     the parsed number, null where the text is not a number.
//   - Timestamps: an Int64 column whose last key is "timestamp" or ends in
//     "_time", "_timestamp", "_at" or "_ts" gets a companion "<name>__time"
//     TimestampMs column the first time it holds an epoch value: an integer
//     ≥ 100,000,000 whose unit (s, ms, µs or ns by magnitude,
//     values.DetectUnit) gives an instant in years 0001-9999. The raw
//     integer stays in "<name>"; "<name>__time" is null for values that are
//     not epoch values.
//
// # Conflicts (variant columns)
//
// A value that its column cannot hold exactly goes to the variant column
// "<name>__v_<kind>" (kind: bool → Bool, int → Int64, float → Float64,
// text → String holding the string as received) and the column itself is
// null for that row:
//
//   - a String column accepts strings and numbers (a number's literal text;
//     its "__num" companion gets the number); a bool is a conflict;
//   - an Int64 column accepts integers; a Float64 column floats and the
//     integers float64 holds exactly (|i| ≤ 2^53; others go to "__v_int");
//     a string in either is a conflict, but when the text is a number the
//     column can hold (an integer literal for Int64, any decimal for Float64)
//     the column also gets that number, so the column stays continuous when a
//     venue starts quoting a number;
//   - a Bool column accepts bools only;
//   - a scalar arriving where a List column is, is a conflict; an array where
//     a scalar column is goes to "<name>__json".
//
// An object where a scalar was (or the reverse) is no conflict: its members
// flatten into "<name>__<member>" columns beside the scalar column.
//
// # Meta columns
//
// Every table starts with snapshot_time (TimestampMs), run_id, source,
// account (String), row_index (Int64: the row's position in its table for
// this snapshot and account, counted across all parent rows for child
// tables), and child tables with parent_index (Int64). The key is (source,
// account, snapshot_time, row_index). User columns are nullable; List columns
// are not (empty list).
//
// # Column and table names
//
//  1. Each JSON key is normalised on its own (NormalizeKey): camelCase and
//     PascalCase become snake_case ("userID" → "user_id", "HTTPServer" →
//     "http_server"), ASCII letters are lowercased, every other character
//     that is not [a-z0-9] (spaces, dots, dashes, non-ASCII letters, …)
//     separates words as '_', runs of '_' collapse into one and '_' is
//     trimmed from both ends. A key that normalises to nothing ("", "$$",
//     "价格") becomes "k_" + 8 hex digits of the FNV-1a hash of the key.
//  2. A column's base name joins the normalised keys of its path with "__"
//     (greeks.delta → "greeks__delta"); derived columns append "__num",
//     "__time", "__json" or "__v_<kind>" to the name of the path's column.
//  3. A name starting with a digit gets a '_' prefix ("1d" → "_1d"); a name
//     equal to a meta column (snapshot_time, run_id, source, account,
//     row_index, parent_index) gets an "f_" prefix ("account" →
//     "f_account"); a name longer than MaxNameLen (128) bytes is cut to 119
//     bytes + '_' + 8 hex digits of the FNV-1a hash of the full name.
//  4. Collisions (two paths with one name) go to the path the registry met
//     first; later ones get "_2", "_3", … The registry remembers every name
//     it gave, so a path keeps its column name forever.
//
// Tables: an endpoint's table is TableName(endpoint) (rule 1 on the whole
// name, then rule 3); a child table is "<parent table>__<base name of the
// array's path>", with rules 3 and 4 (among all tables) applied.
//
// # Evolution and contracts
//
// The Registry keeps every table's columns in order (new columns are only
// appended, a column's type never changes once committed) with the snapshot
// time each first appeared, persisted in DATA/_schema/<table>.json. Under
// Freeze a Decode that would add a column, variant or child table to a table
// that existed before fails with a *ContractError naming the table and the
// field; under DiscardColumns such values are dropped (Stats.Discarded lists
// them). A table that did not exist is always created from its first body.
package infer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/pipeline/values"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// Depth limits of flattening (see the package documentation).
const (
	// MaxObjectDepth is the deepest object nesting inside one row that is
	// flattened into columns; deeper objects are kept as JSON text.
	MaxObjectDepth = 32
	// MaxTableDepth is the deepest chain of child tables below an endpoint's
	// table; deeper arrays of objects are kept as JSON text.
	MaxTableDepth = 16
)

// Meta identifies the snapshot and account every row belongs to. The
// snapshot's Endpoint is the logical endpoint name, the root table's name
// (see TableName); its Part is not used.
type Meta struct {
	sinks.Snapshot
	Account string // the account's label
	// RowOffsets gives, per table name, the row_index of the first row this
	// Decode emits into that table (default 0). When several bodies of one
	// endpoint belong to the same snapshot and account (a fanned-out
	// parameter), pass the running sum of the earlier Decodes' Stats.Rows so
	// that keys do not collide.
	RowOffsets map[string]int64
	// RecordOffset is the row_index in schema.Rejects of the body's first
	// record: the sum of the earlier Decodes' Stats.Records of the
	// endpoint in the snapshot (every account), so rejects never collide.
	RecordOffset int64
}

// Mode is the schema contract of a Decode.
type Mode int

const (
	// Evolve adds new columns, child tables and variant columns as needed.
	Evolve Mode = iota
	// Freeze fails the Decode, naming the table and field, when a table that
	// already existed before the Decode would change; nothing is emitted.
	Freeze
	// DiscardColumns drops values that would need a new column, child table
	// or variant column in a table that already existed; known columns load.
	DiscardColumns
)

// String returns the mode's flag value.
func (m Mode) String() string {
	switch m {
	case Evolve:
		return "evolve"
	case Freeze:
		return "freeze"
	case DiscardColumns:
		return "discard-columns"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses evolve|freeze|discard-columns ("" is evolve).
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "evolve":
		return Evolve, nil
	case "freeze":
		return Freeze, nil
	case "discard-columns", "discard_columns", "discard":
		return DiscardColumns, nil
	}
	return 0, fmt.Errorf("unknown schema contract %q (want evolve, freeze or discard-columns)", s)
}

// Options tune a Decode.
type Options struct {
	// Mode is the schema contract (default Evolve). A table that does not
	// exist yet is always created from its first body, whatever the mode:
	// the contract applies to tables that existed before the Decode.
	Mode Mode
	// BatchRows bounds the rows of one emitted record (default schema.DefaultBatchRows).
	BatchRows int
	// Mem allocates Arrow buffers (default Go allocator).
	Mem memory.Allocator
	// OnChanges, if set, is called once per Decode that changes the schema,
	// after the whole body was inferred and before the first record is
	// emitted, with the changes Decode will return (a store can add the
	// columns before rows arrive). An error aborts the Decode; the registry
	// stays unchanged.
	OnChanges func([]Change) error
}

func (o *Options) defaults() {
	if o.BatchRows <= 0 {
		o.BatchRows = schema.DefaultBatchRows
	}
	if o.Mem == nil {
		o.Mem = memory.DefaultAllocator
	}
}

// Change kinds.
const (
	ChangeTable   = "table"   // a new table (Column is ""): create it from Registry.Table
	ChangeColumn  = "column"  // a new column appended to an existing table
	ChangeVariant = "variant" // a new variant column (a type conflict), appended
)

// Change is one schema change made by a Decode. Columns are only ever
// appended; a column never changes type once committed.
type Change struct {
	Table  string
	Column string // "" for ChangeTable
	Type   schema.Type
	List   bool
	Kind   string // ChangeTable, ChangeColumn or ChangeVariant
	Field  string // the JSON path of the field, keys joined by '.'
}

func (c Change) String() string {
	if c.Kind == ChangeTable {
		if c.Field != "" {
			return fmt.Sprintf("new table %s (field %s)", c.Table, c.Field)
		}
		return fmt.Sprintf("new table %s", c.Table)
	}
	t := c.Type.String()
	if c.List {
		t = "list<" + t + ">"
	}
	return fmt.Sprintf("table %s: new %s %s %s (field %s)", c.Table, c.Kind, c.Column, t, c.Field)
}

// LogAttrs are the change's slog attributes: a new table names its table and
// the field it holds (if any); a new column also its name and type.
func (c Change) LogAttrs() []any {
	attrs := []any{"change", c.Kind, "table", c.Table}
	if c.Kind != ChangeTable {
		t := c.Type.String()
		if c.List {
			t = "list<" + t + ">"
		}
		attrs = append(attrs, "column", c.Column, "type", t)
	}
	if c.Field != "" {
		attrs = append(attrs, "field", c.Field)
	}
	return attrs
}

// Stats counts what a Decode produced.
type Stats struct {
	// Rows per table name, for the endpoint's table and every child table
	// the registry knows for it (0 when this body had none).
	Rows map[string]int64
	// Discarded lists, under DiscardColumns, the columns and tables that
	// would have been added (each once); their values were not loaded.
	Discarded []Change
	// Overflow counts, per table that reached its column budget, the
	// fields stored in its "extra" column instead of a column of their own.
	Overflow map[string]int64
	// Records are the records of the body (rows of the endpoint's table
	// and rejects); Rejects those emitted to schema.Rejects, TopReason the
	// reason most of them gave (TopRejects of them).
	Records, Rejects int64
	TopReason        string
	TopRejects       int64
}

// Emit receives each finished record with its table. All records of one
// table in one Decode share one schema: t's Arrow schema, the table as it is
// at the end of the Decode. The record is released after Emit returns: a
// consumer that keeps it must Retain it. Emit must not call Decode.
type Emit func(t *schema.Table, rec arrow.Record) error

// shapeError is a body that is valid JSON but cannot be made into rows.
func shapeError(table, format string, args ...any) error {
	return &values.ShapeError{Pkg: "infer", Table: table, Msg: fmt.Sprintf(format, args...)}
}

// SyntaxError is a body that is not valid JSON.
type SyntaxError struct {
	Offset int64 // bytes of the body consumed when the error was found
	Err    error
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("infer: malformed JSON near byte %d: %v", e.Offset, e.Err)
}

func (e *SyntaxError) Unwrap() error { return e.Err }

// Is makes a SyntaxError a values.ErrBadInput.
func (e *SyntaxError) Is(target error) bool { return target == values.ErrBadInput }

// ContractError is a Decode refused by the Freeze contract.
type ContractError struct {
	Table  string
	Field  string // JSON path, keys joined by '.'
	Column string // the column (or child table) the field would have needed
	Reason string // "new field" or "type conflict"
	More   int    // further violations in the same body
}

func (e *ContractError) Error() string {
	s := fmt.Sprintf("infer: schema contract freeze: table %s: %s %q (would need %s)", e.Table, e.Reason, e.Field, e.Column)
	if e.More > 0 {
		s += fmt.Sprintf(" and %d more", e.More)
	}
	return s
}

// Decode reads one account endpoint body and emits its rows.
//
// The table is named after meta.Endpoint (TableName); child tables after it.
// Decode evolves the schema per opt.Mode and emits one or more records per
// table that has rows (the endpoint's table first, then child tables in the
// order first met), each table's records sharing the table's final schema.
// A record that cannot be a row (not an object, or holding a value nested
// deeper than MaxNesting) is emitted last to schema.Rejects with the
// reason, its JSON as received, and the other records load.
// It returns the rows per table and the schema changes it made, in the order
// made, so the caller can log them and stores can add columns.
//
// The registry changes only when Decode returns nil: on any error (a
// malformed body, a freeze violation, ctx, emit) it is as before, though
// records may already have been emitted when emit or ctx failed. Changes are
// in memory; the caller calls Save after the rows were loaded. Decodes on
// one Registry run one at a time (they serialise on a lock that is held
// while emit runs; emit may call Table, Tables and Save, not Decode).
func (r *Registry) Decode(ctx context.Context, body io.Reader, meta Meta, opt Options, emit Emit) (Stats, []Change, error) {
	opt.defaults()
	if meta.Endpoint == "" {
		return Stats{}, nil, errors.New("infer: Decode without an endpoint name")
	}
	if emit == nil {
		return Stats{}, nil, errors.New("infer: Decode without an emit function")
	}
	if err := ctx.Err(); err != nil {
		return Stats{}, nil, err
	}
	root := TableName(meta.Endpoint)
	tree, err := parse(body)
	if err != nil {
		var se *values.ShapeError
		if errors.As(err, &se) {
			se.Table = root
		}
		return Stats{}, nil, err
	}

	r.decodeMu.Lock()
	defer r.decodeMu.Unlock()
	var promoted map[string]bool
	var d *decoder
	for try := 0; ; try++ {
		if d, err = r.newDecoder(root, meta, opt); err != nil {
			return Stats{}, nil, err
		}
		d.promoted = promoted
		err := d.run(ctx, tree)
		if len(d.promote) == 0 || try == maxMapPasses {
			if err != nil {
				return Stats{}, nil, err
			}
			break
		}
		// A path was a map for a later object after an earlier object at
		// the same path had been flattened: decode again with the path a
		// map from the start, so that a body decodes the same way twice.
		if promoted == nil {
			promoted = map[string]bool{}
		}
		for k := range d.promote {
			promoted[k] = true
		}
	}
	if d.nrecords > 0 && len(d.rejects) == d.nrecords {
		// Every record rejected: no row, and nothing learnt of the schema.
		if err := d.emitRejects(emit); err != nil {
			return Stats{}, nil, err
		}
		st := d.stats()
		clear(st.Rows)
		st.Overflow = nil
		return st, nil, nil
	}
	if len(d.changes) > 0 && opt.OnChanges != nil {
		if err := opt.OnChanges(d.changes); err != nil {
			return Stats{}, nil, err
		}
	}
	if err := d.emitAll(ctx, emit); err != nil {
		return Stats{}, nil, err
	}
	st := d.stats()
	r.commit(d)
	return st, d.changes, nil
}
