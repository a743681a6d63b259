package iceberg

import (
	"fmt"

	icego "github.com/optlake/optlake/third_party/iceberg-go"

	"github.com/optlake/optlake/schema"
)

// fieldType is the Iceberg type of a column of schema/. TimestampMs is a
// timestamptz (Iceberg has no millisecond type; see fixTimestamps for the
// files, which keep their millisecond Parquet columns).
func fieldType(c schema.Column, elementID int) (icego.Type, error) {
	var t icego.Type
	switch c.Type {
	case schema.String:
		t = icego.PrimitiveTypes.String
	case schema.Float64:
		t = icego.PrimitiveTypes.Float64
	case schema.Int64:
		t = icego.PrimitiveTypes.Int64
	case schema.Bool:
		t = icego.PrimitiveTypes.Bool
	case schema.TimestampMs:
		t = icego.PrimitiveTypes.TimestampTz
	default:
		return nil, fmt.Errorf("column %s: no Iceberg type for %v", c.Name, c.Type)
	}
	if c.List {
		// List elements are never null in optlake's arrays (see schema.Column).
		return &icego.ListType{ElementID: elementID, Element: t, ElementRequired: false}, nil
	}
	return t, nil
}

// Schema is the Iceberg schema of t: its columns in order with field ids
// 1..n (list elements after them). A new table's ids; an existing table's
// columns keep theirs and new ones are added by evolve.
func Schema(t *schema.Table) (*icego.Schema, error) {
	fields := make([]icego.NestedField, 0, len(t.Columns))
	next := len(t.Columns) + 1
	for i, c := range t.Columns {
		typ, err := fieldType(c, next)
		if err != nil {
			return nil, fmt.Errorf("table %s: %w", t.Name, err)
		}
		if c.List {
			next++
		}
		fields = append(fields, icego.NestedField{
			ID: i + 1, Name: c.Name, Type: typ, Required: false, Doc: c.Doc,
		})
	}
	return icego.NewSchema(0, fields...), nil
}

// newColumns are the columns of t that sc lacks (by name), in t's order.
func newColumns(t *schema.Table, sc *icego.Schema) []schema.Column {
	var out []schema.Column
	for _, c := range t.Columns {
		if _, ok := sc.FindFieldByName(c.Name); !ok {
			out = append(out, c)
		}
	}
	return out
}
