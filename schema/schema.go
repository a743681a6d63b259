// Package schema is the single source of truth for optlake's tables: their
// columns in order, logical types, nullability and keys. The Arrow schema that
// both sinks consume and the ClickHouse DDL are rendered from these
// definitions; no other package lists columns by hand.
package schema

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// Type is a column's logical type. Each sink maps it to its store's type.
type Type int

const (
	String      Type = iota // UTF-8 text
	Float64                 // IEEE 754 double
	Int64                   // signed 64-bit integer
	Bool                    // true/false
	TimestampMs             // instant in UTC with millisecond precision
)

func (t Type) String() string {
	switch t {
	case String:
		return "string"
	case Float64:
		return "float64"
	case Int64:
		return "int64"
	case Bool:
		return "bool"
	case TimestampMs:
		return "timestamp_ms"
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// Column is one column of a table.
type Column struct {
	Name     string
	Type     Type
	Nullable bool
	// List makes the column an array of Type (a JSON array of scalars).
	// List columns are never null: a missing array is an empty one.
	List bool
	// LowCardinality marks columns with few distinct values (currencies,
	// kinds); stores may dictionary-encode them.
	LowCardinality bool
	// SharedPrefix marks string columns whose values share long prefixes
	// with the rows next to them in listing order (instrument names and
	// ids); stores may delta-encode them (Parquet DELTA_BYTE_ARRAY).
	SharedPrefix bool
	// Unfiltered marks columns no reader filters on (an opaque id, a raw
	// text beside its parsed column, currencies that repeat another's
	// filter): a store's per-snapshot files may skip their min/max
	// statistics, which cost a comparison or two per value.
	Unfiltered bool
	// JSON is how the venue sends the field this column holds, for the
	// columns that are fields of a venue object (the 25 of Instruments);
	// NotJSON for meta columns and columns derived from other fields.
	// Decoders take their field tables from it.
	JSON JSONKind
	Doc  string
}

// JSONKind is the JSON value a venue field arrives as.
type JSONKind uint8

const (
	NotJSON         JSONKind = iota // not a venue field
	JSONString                      // a string
	JSONNumber                      // a number, any
	JSONInteger                     // a number that must be an exact integer
	JSONBool                        // true or false
	JSONDecimalText                 // a decimal number as text, or as a number
)

// Fields returns the columns of t that are venue fields (JSON != NotJSON),
// in order.
func (t *Table) Fields() []Column {
	var out []Column
	for _, c := range t.Columns {
		if c.JSON != NotJSON {
			out = append(out, c)
		}
	}
	return out
}

// Table is an ordered list of columns plus the keys stores need.
type Table struct {
	Name    string
	Doc     string
	Columns []Column
	// Key lists the columns that identify one row across re-runs and replays
	// (the ReplacingMergeTree sort key in ClickHouse).
	Key []string
	// PartitionTime names the timestamp column that partitions the table
	// (hive date= folders in Parquet, month partitions in ClickHouse).
	PartitionTime string
}

// Index returns the position of the named column, or -1.
func (t *Table) Index(name string) int {
	for i, c := range t.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// MustIndex is Index for names known at compile time; it panics on a typo.
func (t *Table) MustIndex(name string) int {
	i := t.Index(name)
	if i < 0 {
		panic(fmt.Sprintf("schema: table %s has no column %q", t.Name, name))
	}
	return i
}

// ColumnNames returns the column names in order.
func (t *Table) ColumnNames() []string {
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
	}
	return names
}

// ArrowType maps a logical type to the Arrow type both sinks receive.
func ArrowType(t Type) arrow.DataType {
	switch t {
	case String:
		return arrow.BinaryTypes.String
	case Float64:
		return arrow.PrimitiveTypes.Float64
	case Int64:
		return arrow.PrimitiveTypes.Int64
	case Bool:
		return arrow.FixedWidthTypes.Boolean
	case TimestampMs:
		return &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}
	}
	panic(fmt.Sprintf("schema: no arrow type for %v", t))
}

// ArrowField renders the column as an Arrow field.
func (c Column) ArrowField() arrow.Field {
	if c.List {
		return arrow.Field{Name: c.Name, Type: arrow.ListOf(ArrowType(c.Type)), Nullable: c.Nullable}
	}
	return arrow.Field{Name: c.Name, Type: ArrowType(c.Type), Nullable: c.Nullable}
}

// ArrowSchema renders the table as an Arrow schema, columns in order.
func (t *Table) ArrowSchema() *arrow.Schema {
	fields := make([]arrow.Field, len(t.Columns))
	for i, c := range t.Columns {
		fields[i] = c.ArrowField()
	}
	md := arrow.NewMetadata([]string{"optlake.table"}, []string{t.Name})
	return arrow.NewSchema(fields, &md)
}
