package infer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

var t0 = time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)

func testMeta(endpoint string, at time.Time) Meta {
	return Meta{Snapshot: sinks.Snapshot{Time: at, RunID: "run-1", Source: "venue.test", Endpoint: endpoint}, Account: "main"}
}

// cell is one emitted value: nil (null), string, int64, float64, bool,
// time.Time or []any (a list).
type cell = any

// emitted is one table's rows from one Decode, in emit order.
type emitted struct {
	table   *schema.Table
	records int
	rows    []map[string]cell
}

type result struct {
	tables  map[string]*emitted
	order   []string
	stats   Stats
	changes []Change
	err     error
}

// decodeBody runs one Decode with a checked allocator and turns every record
// into Go values. It fails the test when a record's schema is not its
// table's, when two records of one table differ in schema, or when memory
// leaks.
func decodeBody(t testing.TB, reg *Registry, body []byte, meta Meta, opt Options) result {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	opt.Mem = mem
	res := result{tables: map[string]*emitted{}}
	res.stats, res.changes, res.err = reg.Decode(context.Background(), bytes.NewReader(body), meta, opt,
		func(tb *schema.Table, rec arrow.Record) error {
			if !rec.Schema().Equal(tb.ArrowSchema()) {
				t.Errorf("table %s: record schema %v differs from the table's %v", tb.Name, rec.Schema(), tb.ArrowSchema())
			}
			e := res.tables[tb.Name]
			if e == nil {
				e = &emitted{table: tb}
				res.tables[tb.Name] = e
				res.order = append(res.order, tb.Name)
			} else if e.table != tb {
				t.Errorf("table %s: records of one Decode with different tables", tb.Name)
			}
			e.records++
			e.rows = append(e.rows, recordRows(t, rec)...)
			return nil
		})
	mem.AssertSize(t, 0)
	if res.err == nil {
		for name, e := range res.tables {
			if e.table == schema.Rejects {
				if got := res.stats.Rejects; got != int64(len(e.rows)) {
					t.Errorf("rejects: stats say %d rows, %d emitted", got, len(e.rows))
				}
				continue
			}
			if got := res.stats.Rows[name]; got != int64(len(e.rows)) {
				t.Errorf("table %s: stats say %d rows, %d emitted", name, got, len(e.rows))
			}
			if cur := reg.Table(name); cur != e.table {
				t.Errorf("table %s: Registry.Table after Decode is not the emitted table", name)
			}
		}
	}
	return res
}

func recordRows(t testing.TB, rec arrow.Record) []map[string]cell {
	out := make([]map[string]cell, rec.NumRows())
	for i := range out {
		out[i] = map[string]cell{}
	}
	for c, f := range rec.Schema().Fields() {
		col := rec.Column(c)
		for i := range out {
			out[i][f.Name] = cellOf(t, col, i)
		}
	}
	return out
}

func cellOf(t testing.TB, a arrow.Array, i int) cell {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.String:
		return a.Value(i)
	case *array.Int64:
		return a.Value(i)
	case *array.Float64:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.Timestamp:
		return time.UnixMilli(int64(a.Value(i))).UTC()
	case *array.List:
		lo, hi := a.ValueOffsets(i)
		vals := a.ListValues()
		out := []any{}
		for j := lo; j < hi; j++ {
			out = append(out, cellOf(t, vals, int(j)))
		}
		return out
	}
	t.Fatalf("unexpected array %T", a)
	return nil
}

// fmtCell renders a cell for golden files.
func fmtCell(v cell) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case time.Time:
		return v.Format(time.RFC3339Nano)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = fmtCell(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprintf("%v", v)
}

var constantMeta = map[string]bool{"snapshot_time": true, "run_id": true, "source": true, "account": true}

// renderRows writes up to max rows of a table: non-null user cells and the
// row and parent indexes.
func renderRows(b *strings.Builder, e *emitted, max int) {
	for i, row := range e.rows {
		if i == max {
			fmt.Fprintf(b, "    … %d more\n", len(e.rows)-max)
			break
		}
		var parts []string
		for _, c := range e.table.Columns {
			v := row[c.Name]
			if constantMeta[c.Name] || v == nil {
				continue
			}
			if l, ok := v.([]any); ok && len(l) == 0 {
				continue
			}
			parts = append(parts, c.Name+"="+fmtCell(v))
		}
		fmt.Fprintf(b, "    %s\n", strings.Join(parts, " "))
	}
}

// leafChecker verifies that every scalar of a body was loaded: it walks the
// JSON with encoding/json (independently of the package's parser) and looks
// each leaf up among the emitted cells, typed: an integer must come back as
// that Int64, as its text, or as an exactly equal Float64; a float as an
// equal Float64 or its text; a string as that text; a bool as that Bool.
// Cells of "__json" and "extra" columns are parsed and their leaves count
// too (a leaf of "extra" under the last key of its path). With
// byColumn, a leaf only counts when found in a column whose name contains
// its normalised key (the last object key above it).
type leafChecker struct {
	byColumn bool
	found    map[string][]string // typed text → column names
}

func newLeafChecker(byColumn bool) *leafChecker {
	return &leafChecker{byColumn: byColumn, found: map[string][]string{}}
}

// rejectsRaw names the raw column of schema.Rejects for addCell: a
// rejected record's JSON, whose leaves count as found.
const rejectsRaw = "rejects.raw"

func (lc *leafChecker) add(res result) {
	for _, e := range res.tables {
		for _, row := range e.rows {
			for _, c := range e.table.Columns {
				if c.Type == schema.TimestampMs {
					continue
				}
				name := c.Name
				if e.table == schema.Rejects && name == "raw" {
					name = rejectsRaw
				}
				lc.addCell(name, row[c.Name])
			}
		}
	}
}

func (lc *leafChecker) addCell(col string, v cell) {
	switch v := v.(type) {
	case string:
		lc.found["s:"+v] = append(lc.found["s:"+v], col)
		if col == "extra" || strings.HasPrefix(col, "extra_") {
			var x map[string]any
			dec := json.NewDecoder(strings.NewReader(v))
			dec.UseNumber()
			if dec.Decode(&x) == nil {
				for path, val := range x {
					keys := strings.Split(path, ".")
					where := col + ":" + NormalizeKey(keys[len(keys)-1])
					walkLeaves(val, nil, func(_ []string, leaf any) {
						for _, k := range leafKeys(leaf) {
							lc.found[k] = append(lc.found[k], where)
						}
					})
				}
			}
		}
		if strings.HasSuffix(col, "__json") || strings.Contains(col, "__json_") || col == rejectsRaw {
			dec := json.NewDecoder(strings.NewReader(v))
			dec.UseNumber()
			var x any
			if dec.Decode(&x) == nil {
				walkLeaves(x, nil, func(_ []string, leaf any) {
					for _, k := range leafKeys(leaf) {
						lc.found[k] = append(lc.found[k], col)
					}
				})
			}
		}
	case int64:
		k := "i:" + strconv.FormatInt(v, 10)
		lc.found[k] = append(lc.found[k], col)
	case float64:
		k := "f:" + strconv.FormatFloat(v, 'g', -1, 64)
		lc.found[k] = append(lc.found[k], col)
	case bool:
		k := "b:" + strconv.FormatBool(v)
		lc.found[k] = append(lc.found[k], col)
	case []any:
		for _, e := range v {
			lc.addCell(col, e)
		}
	}
}

// leafKeys are the typed texts under which a JSON leaf may have been stored.
func leafKeys(leaf any) []string {
	switch v := leaf.(type) {
	case string:
		return []string{"s:" + v}
	case bool:
		return []string{"b:" + strconv.FormatBool(v)}
	case json.Number:
		lit := string(v)
		keys := []string{"s:" + lit}
		if i, err := strconv.ParseInt(lit, 10, 64); err == nil {
			keys = append(keys, "i:"+strconv.FormatInt(i, 10))
			if i >= -(1<<53) && i <= 1<<53 {
				keys = append(keys, "f:"+strconv.FormatFloat(float64(i), 'g', -1, 64))
			}
		} else if !isIntLiteral(lit) {
			if f, err := strconv.ParseFloat(lit, 64); err == nil && !math.IsInf(f, 0) {
				keys = append(keys, "f:"+strconv.FormatFloat(f, 'g', -1, 64))
			}
		}
		return keys
	}
	return nil
}

// walkLeaves calls fn for every non-null scalar with the object keys above it.
func walkLeaves(x any, path []string, fn func(path []string, leaf any)) {
	switch v := x.(type) {
	case nil:
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walkLeaves(v[k], append(path[:len(path):len(path)], k), fn)
		}
	case []any:
		for _, e := range v {
			walkLeaves(e, path, fn)
		}
	default:
		fn(path, v)
	}
}

// missing returns the leaves of body not found among the cells.
func (lc *leafChecker) missing(body []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	var out []string
	walkLeaves(x, nil, func(path []string, leaf any) {
		want := ""
		if lc.byColumn && len(path) > 0 {
			want = NormalizeKey(path[len(path)-1])
		}
		for _, k := range leafKeys(leaf) {
			for _, col := range lc.found[k] {
				if strings.Contains(col, want) {
					return
				}
			}
		}
		out = append(out, fmt.Sprintf("%s=%v", strings.Join(path, "."), leaf))
	})
	return out, nil
}
