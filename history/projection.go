package history

import (
	"fmt"
	"strings"
	"time"

	"github.com/optlake/optlake/schema"
)

// The projection: which columns of schema's tables a Point and an Event
// show, and where each value goes. Both readers (Parquet, ClickHouse), the
// ClickHouse queries and the CSV columns are derived from it.

// row gives one row's values by column name (nil for null).
type row interface {
	str(col string) *string
	f64(col string) *float64
	boolean(col string) *bool
	time(col string) *time.Time
}

// column is one column of a projection onto T.
type column[T any] struct {
	name string
	set  func(v *T, r row, name string) // sets v's field from r's column name
	// csv renders the value for the CSV (and the table's) columns; nil for
	// a column they do not show.
	csv func(*T) string
}

// projection is the columns a T shows, from one table.
type projection[T any] struct {
	table *schema.Table
	cols  []column[T]
}

func (p projection[T]) names() []string {
	out := make([]string, len(p.cols))
	for i, c := range p.cols {
		out[i] = c.name
	}
	return out
}

func (p projection[T]) build(r row) T {
	var v T
	for _, c := range p.cols {
		c.set(&v, r, c.name)
	}
	return v
}

// csvNames are the columns the CSV shows, in order.
func (p projection[T]) csvNames() []string {
	var out []string
	for _, c := range p.cols {
		if c.csv != nil {
			out = append(out, c.name)
		}
	}
	return out
}

// csvValues renders v's CSV columns; a nil v gives empty cells.
func (p projection[T]) csvValues(v *T) []string {
	var out []string
	for _, c := range p.cols {
		if c.csv != nil {
			s := ""
			if v != nil {
				s = c.csv(v)
			}
			out = append(out, s)
		}
	}
	return out
}

// query is the ClickHouse query of the projection's columns of the rows of
// one instrument (parameter ?), deduplicated, in order. Every column is read
// as a nullable: times as epoch milliseconds (exact where time columns are
// DateTime64, 20.1+; whole seconds on older servers, whose DateTime has no
// more, except snapshot_time, whose milliseconds are in the table's
// schema.SnapshotMs there), booleans as UInt8. Rows of snapshots within one
// second are ordered by their milliseconds on every server.
func (p projection[T]) query(db string, f schema.Features, order ...string) string {
	ms := p.table.HasSnapshotMs(f)
	exprs := make([]string, len(p.cols))
	for i, c := range p.cols {
		col := p.table.Columns[p.table.MustIndex(c.name)]
		q := schema.Quote(c.name)
		switch col.Type {
		case schema.TimestampMs:
			switch {
			case f.DateTime64:
				q = "toUnixTimestamp64Milli(" + q + ")"
			case ms && c.name == "snapshot_time":
				q = "toInt64(toUnixTimestamp(" + q + ")) * 1000 + " + schema.Quote(schema.SnapshotMs)
			default:
				q = "toInt64(toUnixTimestamp(" + q + ")) * 1000"
			}
		case schema.Bool:
			q = "toUInt8(" + q + ")"
		}
		exprs[i] = "toNullable(" + q + ")"
	}
	var by []string
	for _, o := range order {
		by = append(by, o)
		if ms && o == "snapshot_time" {
			by = append(by, schema.SnapshotMs)
		}
	}
	return fmt.Sprintf("SELECT %s\n\t\tFROM %s.%s FINAL WHERE instrument_name = ? ORDER BY %s",
		strings.Join(exprs, ", "), schema.Quote(db), schema.Quote(p.table.Name), strings.Join(by, ", "))
}

// scanTargets are pointers to scan one ClickHouse row of the query into,
// and the row they make.
func (p projection[T]) scanTargets() ([]any, row) {
	r := chRow{}
	dst := make([]any, len(p.cols))
	for i, c := range p.cols {
		switch p.table.Columns[p.table.MustIndex(c.name)].Type {
		case schema.String:
			dst[i] = new(*string)
		case schema.Float64:
			dst[i] = new(*float64)
		case schema.Bool:
			dst[i] = new(*uint8)
		case schema.TimestampMs, schema.Int64:
			dst[i] = new(*int64)
		default:
			panic("history: no ClickHouse scan type for " + c.name)
		}
		r[c.name] = dst[i]
	}
	return dst, r
}

// chRow is a scanned ClickHouse row: column name -> **T.
type chRow map[string]any

func (r chRow) str(c string) *string   { return *r[c].(**string) }
func (r chRow) f64(c string) *float64  { return *r[c].(**float64) }
func (r chRow) boolean(c string) *bool { return u8bool(*r[c].(**uint8)) }
func (r chRow) time(c string) *time.Time {
	ms := *r[c].(**int64)
	if ms == nil {
		return nil
	}
	t := time.UnixMilli(*ms).UTC()
	return &t
}

func deref[V any](p *V) V {
	var zero V
	if p == nil {
		return zero
	}
	return *p
}

var points = projection[Point]{table: schema.Instruments, cols: []column[Point]{
	{name: "snapshot_time", set: func(p *Point, r row, c string) { p.Time = deref(r.time(c)) }},
	{name: "source", set: func(p *Point, r row, c string) { p.Source = deref(r.str(c)) }},
	{name: "index_price", set: func(p *Point, r row, c string) { p.IndexPrice = r.f64(c) }, csv: func(p *Point) string { return csvOf(p.IndexPrice, fmtF) }},
	{name: "is_active", set: func(p *Point, r row, c string) { p.IsActive = r.boolean(c) }, csv: func(p *Point) string { return csvOf(p.IsActive, fmtB) }},
	{name: "deployed", set: func(p *Point, r row, c string) { p.Deployed = r.boolean(c) }, csv: func(p *Point) string { return csvOf(p.Deployed, fmtB) }},
	{name: "maker_commission", set: func(p *Point, r row, c string) { p.MakerCommission = r.f64(c) }, csv: func(p *Point) string { return csvOf(p.MakerCommission, fmtF) }},
	{name: "taker_commission", set: func(p *Point, r row, c string) { p.TakerCommission = r.f64(c) }, csv: func(p *Point) string { return csvOf(p.TakerCommission, fmtF) }},
	{name: "tick_size", set: func(p *Point, r row, c string) { p.TickSize = r.f64(c) }, csv: func(p *Point) string { return csvOf(p.TickSize, fmtF) }},
	{name: "strike", set: func(p *Point, r row, c string) { p.Strike = r.f64(c) }, csv: func(p *Point) string { return csvOf(p.Strike, fmtF) }},
	{name: "expiration_time", set: func(p *Point, r row, c string) { p.Expiration = r.time(c) }},
}}

var events = projection[Event]{table: schema.InstrumentEvents, cols: []column[Event]{
	{name: "snapshot_time", set: func(e *Event, r row, c string) { e.Time = deref(r.time(c)) }},
	{name: "previous_snapshot_time", set: func(e *Event, r row, c string) { e.PreviousTime = r.time(c) }},
	{name: "source", set: func(e *Event, r row, c string) { e.Source = deref(r.str(c)) }},
	{name: "event", set: func(e *Event, r row, c string) { e.Event = deref(r.str(c)) }, csv: func(e *Event) string { return e.Event }},
	{name: "field", set: func(e *Event, r row, c string) { e.Field = deref(r.str(c)) }, csv: func(e *Event) string { return e.Field }},
	{name: "old_value", set: func(e *Event, r row, c string) { e.Old = r.str(c) }, csv: func(e *Event) string { return csvOf(e.Old, fmtS) }},
	{name: "new_value", set: func(e *Event, r row, c string) { e.New = r.str(c) }, csv: func(e *Event) string { return csvOf(e.New, fmtS) }},
	{name: "initial", set: func(e *Event, r row, c string) { e.Initial = deref(r.boolean(c)) }},
}}

// csvOf renders a nullable value for CSV: a null is an empty cell (the
// table's "-" and "∅" are for reading on a terminal).
func csvOf[T any](v *T, format func(*T) string) string {
	if v == nil {
		return ""
	}
	return format(v)
}
