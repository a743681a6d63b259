package infer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/pipeline/values"
	"github.com/optlake/optlake/schema"
)

const (
	snapA = `[
	  {"id": 1, "amount": 10, "status": "open", "gone": "soon", "nested": {"k": 1}, "legs": [{"n": "a"}]},
	  {"id": 2, "amount": 20, "status": "open", "gone": "later", "nested": {"k": 2}}
	]`
	snapB = `[
	  {"id": 3, "amount": "n/a", "status": "closed", "added": true, "nested": {"k": 3, "extra": "x"}, "legs": [{"n": "b", "ratio": 2}]},
	  {"id": 4, "amount": "40", "status": "open", "added": false, "nested": {"k": 4}}
	]`
)

func userColumns(tb *schema.Table) []string {
	var out []string
	for _, c := range tb.Columns {
		if !isMetaName(c.Name) {
			out = append(out, c.Name)
		}
	}
	return out
}

func mustDecode(t *testing.T, reg *Registry, body string, at time.Time, opt Options) result {
	t.Helper()
	res := decodeBody(t, reg, []byte(body), testMeta("orders", at), opt)
	if res.err != nil {
		t.Fatalf("decode: %v", res.err)
	}
	return res
}

func TestEvolution(t *testing.T) {
	dataDir := t.TempDir()
	reg, err := LoadRegistry(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	tA, tB := t0, t0.Add(time.Hour)
	resA := mustDecode(t, reg, snapA, tA, Options{})
	colsA := userColumns(reg.Table("orders"))
	wantA := []string{"id", "amount", "status", "gone", "nested__k"}
	if !reflect.DeepEqual(colsA, wantA) {
		t.Fatalf("columns after A: %v, want %v", colsA, wantA)
	}
	if got := resA.changes; len(got) != 2 || got[0].Kind != ChangeTable || got[1].Table != "orders__legs" {
		t.Fatalf("changes of A: %v", got)
	}
	if err := reg.Save(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, SchemaDir, "orders.json")); err != nil {
		t.Fatal(err)
	}
	tableA := reg.Table("orders")

	resB := mustDecode(t, reg, snapB, tB, Options{})
	tbB := reg.Table("orders")
	if tbB == tableA {
		t.Fatal("Table returned the old pointer after an evolving Decode")
	}
	colsB := userColumns(tbB)
	if !reflect.DeepEqual(colsB[:len(colsA)], colsA) {
		t.Fatalf("old columns moved: %v -> %v", colsA, colsB)
	}
	wantNew := []string{"amount__v_text", "added", "nested__extra"}
	if !reflect.DeepEqual(colsB[len(colsA):], wantNew) {
		t.Fatalf("new columns %v, want %v", colsB[len(colsA):], wantNew)
	}
	type ch struct{ table, column, kind string }
	var got []ch
	for _, c := range resB.changes {
		got = append(got, ch{c.Table, c.Column, c.Kind})
	}
	want := []ch{
		{"orders", "amount__v_text", ChangeVariant},
		{"orders", "added", ChangeColumn},
		{"orders", "nested__extra", ChangeColumn},
		{"orders__legs", "ratio", ChangeColumn},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("changes of B: %v, want %v", got, want)
	}
	rows := resB.tables["orders"].rows
	// amount: a non-numeric text → null + variant; numeric text → both.
	if rows[0]["amount"] != nil || rows[0]["amount__v_text"] != "n/a" {
		t.Errorf("row 0: amount %v, amount__v_text %v", rows[0]["amount"], rows[0]["amount__v_text"])
	}
	if rows[1]["amount"] != int64(40) || rows[1]["amount__v_text"] != "40" {
		t.Errorf("row 1: amount %v, amount__v_text %v", rows[1]["amount"], rows[1]["amount__v_text"])
	}
	if rows[0]["gone"] != nil || rows[1]["gone"] != nil {
		t.Errorf("disappeared field not null: %v %v", rows[0]["gone"], rows[1]["gone"])
	}
	if rows[0]["added"] != true || rows[1]["added"] != false {
		t.Errorf("added: %v %v", rows[0]["added"], rows[1]["added"])
	}
	// A replay of snapshot A now carries the new columns, null.
	replay := mustDecode(t, reg, snapA, tA, Options{})
	if len(replay.changes) != 0 {
		t.Fatalf("replaying A changed the schema: %v", replay.changes)
	}
	for _, r := range replay.tables["orders"].rows {
		if r["added"] != nil || r["amount__v_text"] != nil || r["nested__extra"] != nil {
			t.Errorf("replayed old row has values in new columns: %v", r)
		}
	}
	legs := replay.tables["orders__legs"].rows
	if len(legs) != 1 || legs[0]["ratio"] != nil || legs[0]["parent_index"] != int64(0) {
		t.Errorf("replayed legs: %v", legs)
	}

	// Save + LoadRegistry keeps columns, order, types and first-seen times.
	if err := reg.Save(context.Background()); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadRegistry(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"orders", "orders__legs"} {
		if !reflect.DeepEqual(loaded.Columns(name), reg.Columns(name)) {
			t.Errorf("%s after reload:\n%v\nbefore:\n%v", name, loaded.Columns(name), reg.Columns(name))
		}
	}
	first := map[string]time.Time{}
	for _, c := range loaded.Columns("orders") {
		first[c.Name] = c.FirstSeen
	}
	if !first["gone"].Equal(tA) || !first["added"].Equal(tB) || !first["amount__v_text"].Equal(tB) {
		t.Errorf("first seen: %v", first)
	}
	// The loaded registry continues where the old one stopped.
	again := mustDecode(t, loaded, snapB, tB, Options{Mode: Freeze})
	if len(again.changes) != 0 {
		t.Errorf("loaded registry re-evolved: %v", again.changes)
	}
	var sb strings.Builder
	if err := loaded.Print(&sb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"table orders ", "amount__v_text", "2026-11-20T01:00:00Z", "orders__legs", "parent_index"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("Print lacks %q:\n%s", want, sb.String())
		}
	}
}

// TestTypeFixedOnceCommitted: widening happens within one Decode only.
func TestTypeFixedOnceCommitted(t *testing.T) {
	reg := NewRegistry()
	mustDecode(t, reg, `[{"x": 1}, {"x": 2.5}]`, t0, Options{})
	if c := reg.Table("orders").Columns[reg.Table("orders").Index("x")]; c.Type != schema.Float64 {
		t.Fatalf("x widened within a Decode: %v", c.Type)
	}
	reg = NewRegistry()
	mustDecode(t, reg, `[{"x": 1}]`, t0, Options{})
	res := mustDecode(t, reg, `[{"x": 2.5}, {"x": 3}]`, t0.Add(time.Hour), Options{})
	tb := reg.Table("orders")
	if tb.Columns[tb.Index("x")].Type != schema.Int64 {
		t.Fatalf("committed column changed type")
	}
	rows := res.tables["orders"].rows
	if rows[0]["x"] != nil || rows[0]["x__v_float"] != 2.5 || rows[1]["x"] != int64(3) {
		t.Fatalf("rows %v", rows)
	}
}

func TestContractFreeze(t *testing.T) {
	reg := NewRegistry()
	// A table that does not exist yet is created whatever the contract.
	mustDecode(t, reg, snapA, t0, Options{Mode: Freeze})
	before := reg.Table("orders")
	for _, tc := range []struct {
		name, body, field, column string
	}{
		{"new field", `[{"id": 5, "added": 1}]`, "added", "column added"},
		{"nested new field", `[{"nested": {"k": 1, "extra": "x"}}]`, "nested.extra", "column nested__extra"},
		{"type conflict", `[{"amount": "n/a"}]`, "amount", "column amount__v_text"},
		{"new child table", `[{"fills": [{"px": 1}]}]`, "fills", "child table orders__fills"},
		{"new field in child", `[{"legs": [{"n": "x", "ratio": 1}]}]`, "ratio", "column ratio"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emitted := 0
			_, changes, err := reg.Decode(context.Background(), strings.NewReader(tc.body), testMeta("orders", t0.Add(time.Hour)),
				Options{Mode: Freeze}, func(*schema.Table, arrow.Record) error { emitted++; return nil })
			var ce *ContractError
			if !errors.As(err, &ce) {
				t.Fatalf("err %v, want a ContractError", err)
			}
			if ce.Field != tc.field || ce.Column != tc.column || !strings.Contains(err.Error(), "orders") || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q (field %q column %q), want field %q column %q", err, ce.Field, ce.Column, tc.field, tc.column)
			}
			if errors.Is(err, values.ErrBadInput) {
				t.Error("a contract violation is not the body's fault")
			}
			if emitted != 0 || changes != nil {
				t.Errorf("freeze emitted %d records, changes %v", emitted, changes)
			}
			if reg.Table("orders") != before || reg.Table("orders__fills") != nil {
				t.Error("freeze changed the registry")
			}
		})
	}
	// Known columns only: fine.
	mustDecode(t, reg, `[{"id": 9, "amount": 3, "legs": []}]`, t0.Add(time.Hour), Options{Mode: Freeze})
}

func TestContractDiscardColumns(t *testing.T) {
	reg := NewRegistry()
	mustDecode(t, reg, snapA, t0, Options{})
	before := reg.Table("orders")
	res := mustDecode(t, reg, snapB, t0.Add(time.Hour), Options{Mode: DiscardColumns})
	if len(res.changes) != 0 || reg.Table("orders") != before {
		t.Fatalf("discard changed the schema: %v", res.changes)
	}
	var disc []string
	for _, c := range res.stats.Discarded {
		disc = append(disc, c.Table+"."+c.Column)
	}
	want := []string{"orders.amount__v_text", "orders.added", "orders.nested__extra", "orders__legs.ratio"}
	if !reflect.DeepEqual(disc, want) {
		t.Errorf("discarded %v, want %v", disc, want)
	}
	rows := res.tables["orders"].rows
	if len(rows) != 2 || rows[0]["id"] != int64(3) || rows[0]["amount"] != nil || rows[1]["amount"] != int64(40) || rows[0]["nested__k"] != int64(3) {
		t.Errorf("rows %v", rows)
	}
	if _, ok := rows[0]["added"]; ok {
		t.Error("discarded column emitted")
	}
	if l := res.tables["orders__legs"].rows; len(l) != 1 || l[0]["n"] != "b" {
		t.Errorf("legs %v", l)
	}
}

func TestRowIndexesAndOffsets(t *testing.T) {
	reg := NewRegistry()
	body := `{"a": 1, "orders": [{"id": 1, "fills": [{"px": 1}, {"px": 2}]}, {"id": 2}, {"id": 3, "fills": [{"px": 3}]}]}`
	meta := testMeta("book", t0)
	meta.RowOffsets = map[string]int64{"book": 10, "book__orders__fills": 100}
	res := decodeBody(t, reg, []byte(body), meta, Options{BatchRows: 1})
	if res.err != nil {
		t.Fatal(res.err)
	}
	idx := func(table, col string) []any {
		var out []any
		for _, r := range res.tables[table].rows {
			out = append(out, r[col])
		}
		return out
	}
	for _, tc := range []struct {
		table, col string
		want       []any
	}{
		{"book", "row_index", []any{int64(10)}},
		{"book__orders", "row_index", []any{int64(0), int64(1), int64(2)}},
		{"book__orders", "parent_index", []any{int64(10), int64(10), int64(10)}},
		{"book__orders__fills", "row_index", []any{int64(100), int64(101), int64(102)}},
		{"book__orders__fills", "parent_index", []any{int64(0), int64(0), int64(2)}},
	} {
		if got := idx(tc.table, tc.col); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s.%s = %v, want %v", tc.table, tc.col, got, tc.want)
		}
	}
	if e := res.tables["book__orders"]; e.records != 3 {
		t.Errorf("BatchRows 1: %d records for 3 rows", e.records)
	}
	if !reflect.DeepEqual(res.order, []string{"book", "book__orders", "book__orders__fills"}) {
		t.Errorf("emit order %v", res.order)
	}
	want := map[string]int64{"book": 1, "book__orders": 3, "book__orders__fills": 3}
	if !reflect.DeepEqual(res.stats.Rows, want) {
		t.Errorf("stats %v", res.stats.Rows)
	}
	// Stats list known child tables without rows too.
	res = decodeBody(t, reg, []byte(`{"a": 2}`), testMeta("book", t0), Options{})
	want = map[string]int64{"book": 1, "book__orders": 0, "book__orders__fills": 0}
	if res.err != nil || !reflect.DeepEqual(res.stats.Rows, want) {
		t.Errorf("stats %v (%v)", res.stats.Rows, res.err)
	}
}

func TestOnChanges(t *testing.T) {
	reg := NewRegistry()
	mustDecode(t, reg, snapA, t0, Options{})
	var seen []Change
	emitted := false
	_, changes, err := reg.Decode(context.Background(), strings.NewReader(snapB), testMeta("orders", t0), Options{
		OnChanges: func(ch []Change) error {
			if emitted {
				t.Error("OnChanges after the first record")
			}
			seen = ch
			return nil
		},
	}, func(*schema.Table, arrow.Record) error { emitted = true; return nil })
	if err != nil || !reflect.DeepEqual(seen, changes) || len(seen) == 0 {
		t.Fatalf("OnChanges saw %v, Decode returned %v, %v", seen, changes, err)
	}
	// An error from OnChanges aborts the Decode and keeps the registry.
	reg = NewRegistry()
	mustDecode(t, reg, snapA, t0, Options{})
	before := reg.Table("orders")
	stop := errors.New("alter failed")
	_, _, err = reg.Decode(context.Background(), strings.NewReader(snapB), testMeta("orders", t0),
		Options{OnChanges: func([]Change) error { return stop }}, discard)
	if !errors.Is(err, stop) || reg.Table("orders") != before {
		t.Fatalf("err %v", err)
	}
}

// TestStringsAsEncodingJSON: invalid UTF-8 and escapes decode as with
// encoding/json.
func TestStringsAsEncodingJSON(t *testing.T) {
	body := "{\"k\xff\": \"a\xc3\x28b\", \"e\": \"\\ud83d\\ude00 \\udc00 \\u00e9\\n\"}"
	res := decodeBody(t, NewRegistry(), []byte(body), testMeta("s", t0), Options{})
	if res.err != nil {
		t.Fatal(res.err)
	}
	var want map[string]string
	if err := json.Unmarshal([]byte(body), &want); err != nil {
		t.Fatal(err)
	}
	row := res.tables["s"].rows[0]
	if row["k"] != want["k\ufffd"] || row["e"] != want["e"] {
		t.Fatalf("got %q %q, want %q %q", row["k"], row["e"], want["k\ufffd"], want["e"])
	}
	if cols := reg0Fields(res.tables["s"].table); !strings.Contains(cols, "k\ufffd") {
		t.Fatalf("field path of the invalid key: %s", cols)
	}
}

func reg0Fields(tb *schema.Table) string {
	var out []string
	for _, c := range tb.Columns {
		out = append(out, c.Doc)
	}
	return strings.Join(out, "|")
}

func TestDecodeFailuresLeaveRegistry(t *testing.T) {
	reg := NewRegistry()
	mustDecode(t, reg, snapA, t0, Options{})
	before := reg.Table("orders")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	boom := errors.New("sink down")
	_, _, err := reg.Decode(context.Background(), strings.NewReader(snapB), testMeta("orders", t0), Options{Mem: mem},
		func(*schema.Table, arrow.Record) error { return boom })
	mem.AssertSize(t, 0)
	if !errors.Is(err, boom) || errors.Is(err, values.ErrBadInput) {
		t.Fatalf("err %v", err)
	}
	if reg.Table("orders") != before {
		t.Fatal("a failed Decode changed the registry")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := reg.Decode(ctx, strings.NewReader(snapB), testMeta("orders", t0), Options{}, discard); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"a": [1, 2`, "malformed JSON"},
		{`{"a": 1} {"b": 2}`, "after the top-level value"},
		{`"text"`, "JSON string"},
		{``, "malformed JSON"},
	} {
		_, _, err := reg.Decode(context.Background(), strings.NewReader(tc.body), testMeta("orders", t0), Options{}, discard)
		if !errors.Is(err, values.ErrBadInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("body %.30q: err %v, want an input error with %q", tc.body, err, tc.want)
		}
	}
	// A reader failure is not the body's fault.
	_, _, err = reg.Decode(context.Background(), &failingReader{}, testMeta("orders", t0), Options{}, discard)
	if err == nil || errors.Is(err, values.ErrBadInput) {
		t.Fatalf("reader failure: %v", err)
	}
	if _, _, err := reg.Decode(context.Background(), strings.NewReader(`{}`), testMeta("orders", t0), Options{}, nil); err == nil {
		t.Fatal("Decode without emit accepted")
	}
	// Endpoint names are normalised as one key: they never look like a
	// child table ("__" collapses).
	if TableName("orders__legs") != "orders_legs" {
		t.Fatal(TableName("orders__legs"))
	}
}

// TestRowsRejected: a record that is not an object, or that holds a value
// nested deeper than MaxNesting, is one rejected row (reason, row_index
// from RecordOffset, its JSON as received) and the other records load;
// a map body's entry likewise. (Before, each failed the whole body.)
func TestRowsRejected(t *testing.T) {
	deep := strings.Repeat("[", MaxNesting+5) + strings.Repeat("]", MaxNesting+5)
	deepObj := strings.Repeat(`{"a":`, MaxNesting+5) + "1" + strings.Repeat("}", MaxNesting+5)
	for _, tc := range []struct {
		name, body string
		rows       int64
		rejects    []int64 // row_index of each reject (RecordOffset 10)
		reason     string
		raw        string // of the first reject
	}{
		{"not an object", `[{"a": 1}, [1], "x", {"a": 2}]`, 2, []int64{11, 12}, "a JSON array, not an object: rows must be objects", `[1]`},
		{"too deep", `[{"a": 1}, {"a": ` + deep + `}, {"a": 3}]`, 2, []int64{11}, ReasonTooDeep, `{"a":` + deep + `}`},
		{"too deep object", `{"data": [{"a": 1}, ` + deepObj + `]}`, 1, []int64{11}, ReasonTooDeep, deepObj},
		{"every row", deep, 0, []int64{10}, ReasonTooDeep, deep[1 : len(deep)-1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := NewRegistry()
			meta := testMeta("orders", t0)
			meta.RecordOffset = 10
			res := decodeBody(t, reg, []byte(tc.body), meta, Options{})
			if res.err != nil {
				t.Fatal(res.err)
			}
			if res.stats.Rows["orders"] != tc.rows || res.stats.Rejects != int64(len(tc.rejects)) || res.stats.Records != tc.rows+int64(len(tc.rejects)) {
				t.Fatalf("stats %+v", res.stats)
			}
			if res.stats.TopReason != tc.reason || res.stats.TopRejects < 1 {
				t.Fatalf("top reason %q (%d), want %q", res.stats.TopReason, res.stats.TopRejects, tc.reason)
			}
			rj := res.tables["rejects"]
			if rj == nil || len(rj.rows) != len(tc.rejects) {
				t.Fatalf("rejects emitted: %+v", rj)
			}
			for i, want := range tc.rejects {
				if got := rj.rows[i]["row_index"]; got != want {
					t.Errorf("reject %d: row_index %+v, want %d", i, got, want)
				}
				if got := rj.rows[i]["endpoint"]; got != "orders" {
					t.Errorf("reject %d: endpoint %+v", i, got)
				}
			}
			if got, _ := rj.rows[0]["raw"].(string); got != tc.raw {
				t.Errorf("raw %.60q, want %.60q", got, tc.raw)
			}
		})
	}
	// A map body: the entry whose value is too deep is rejected.
	reg := NewRegistry()
	var b strings.Builder
	b.WriteString("{")
	for i := range 12 {
		fmt.Fprintf(&b, `"BTC-%d": {"qty": %d},`, i, i)
	}
	b.WriteString(`"ETH-1": {"qty": ` + deep + `}}`)
	res := decodeBody(t, reg, []byte(b.String()), testMeta("positions", t0), Options{})
	if res.err != nil || res.stats.Rejects != 1 || res.stats.Records != 13 {
		t.Fatalf("map body: %v %+v", res.err, res.stats)
	}
	if raw, _ := res.tables["rejects"].rows[0]["raw"].(string); !strings.HasPrefix(raw, `{"ETH-1":{"qty":[[[`) {
		t.Fatalf("map body reject raw %.40q", raw)
	}
}

// A key that occurs twice in one record is not a reason to reject it: the
// record keeps the key's first position and its last value (encoding/json's
// rule), as a listing's row does; the raw archive has both.
func TestDuplicateMemberLastValueWins(t *testing.T) {
	res := decodeBody(t, NewRegistry(), []byte(`[{"a": 1, "b": 2, "a": 3}]`), testMeta("orders", t0), Options{})
	if res.err != nil || res.stats.Rejects != 0 || res.stats.Rows["orders"] != 1 {
		t.Fatalf("%v %+v", res.err, res.stats)
	}
	row := res.tables["orders"].rows[0]
	if row["a"] != int64(3) || row["b"] != int64(2) {
		t.Fatalf("row %v, want a=3 b=2", row)
	}
	if cols := res.tables["orders"].table.Columns; cols[len(cols)-2].Name != "a" || cols[len(cols)-1].Name != "b" {
		t.Fatalf("columns %v, want a before b", cols)
	}
}

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		f.n++
		return copy(p, `{"a": [1, `), nil
	}
	return 0, errors.New("connection reset")
}

func TestLoadRegistryErrors(t *testing.T) {
	write := func(t *testing.T, files map[string]string) string {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, SchemaDir), 0o755); err != nil {
			t.Fatal(err)
		}
		for n, b := range files {
			if err := os.WriteFile(filepath.Join(dir, SchemaDir, n), []byte(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	good := `{"version":1,"name":"t","root":"t","first_seen":"2026-11-20T00:00:00Z","columns":[{"name":"a","type":"int64","path":["a"],"role":"value","first_seen":"2026-11-20T00:00:00Z"}],"stems":[{"path":["a"],"stem":"a"}]}`
	if reg, err := LoadRegistry(write(t, map[string]string{"t.json": good, ".tmp-x.json-1": "garbage", "README": "x"})); err != nil || reg.Table("t") == nil {
		t.Fatalf("good registry: %v", err)
	}
	if reg, err := LoadRegistry(filepath.Join(t.TempDir(), "missing")); err != nil || len(reg.Tables()) != 0 {
		t.Fatalf("missing dir: %v", err)
	}
	for name, files := range map[string]map[string]string{
		"not json":      {"t.json": "{"},
		"wrong name":    {"u.json": good},
		"bad version":   {"t.json": strings.Replace(good, `"version":1`, `"version":9`, 1)},
		"bad type":      {"t.json": strings.Replace(good, `"int64"`, `"decimal"`, 1)},
		"bad column":    {"t.json": strings.Replace(good, `"name":"a"`, `"name":"A b"`, 1)},
		"meta column":   {"t.json": strings.Replace(good, `"name":"a"`, `"name":"row_index"`, 1)},
		"missing stem":  {"t.json": strings.Replace(good, `"stem":"a"`, `"stem":"b"`, 1)},
		"orphan child":  {"t__c.json": strings.Replace(good, `"name":"t"`, `"name":"t__c","parent":"p","path":["c"],"depth":1`, 1)},
		"bad role":      {"t.json": strings.Replace(good, `"role":"value"`, `"role":"other"`, 1)},
		"two for stems": {"t.json": strings.Replace(good, `"columns":[`, `"columns":[{"name":"b","type":"int64","path":["a"],"role":"value","first_seen":"2026-11-20T00:00:00Z"},`, 1)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadRegistry(write(t, files))
			if err == nil || !strings.Contains(err.Error(), SchemaDir) {
				t.Fatalf("err %v, want an error naming the file", err)
			}
		})
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": Evolve, "evolve": Evolve, "FREEZE": Freeze, "discard-columns": DiscardColumns} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v", in, got, err)
		}
		if in != "" && in != "FREEZE" && want.String() != in {
			t.Errorf("%v.String() = %q", want, want.String())
		}
	}
	if _, err := ParseMode("loose"); err == nil {
		t.Error("ParseMode accepted loose")
	}
}

func TestNormalizeKey(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"camelCase", "camel_case"},
		{"PascalCase", "pascal_case"},
		{"userID", "user_id"},
		{"HTTPServer", "http_server"},
		{"already_snake", "already_snake"},
		{"with space", "with_space"},
		{"a-b.c", "a_b_c"},
		{"__proto__", "proto"},
		{"a__b", "a_b"},
		{"version2Name", "version2_name"},
		{"1day", "1day"},
		{"ünïcödé", "n_c_d"},
		{"", "k_811c9dc5"},
		{"价格", "k_de34ae9d"},
	} {
		if got := NormalizeKey(tc.in); got != tc.want {
			t.Errorf("NormalizeKey(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	long := strings.Repeat("x", 300)
	if n := finalName(long); len(n) != MaxNameLen || n == finalName(long+"y") {
		t.Errorf("long names: %q", n)
	}
	taken := map[string]bool{}
	for i := 0; i < 12; i++ {
		n := resolve(finalName(long), func(s string) bool { return taken[s] })
		if len(n) > MaxNameLen || taken[n] {
			t.Fatalf("resolve gave %q", n)
		}
		taken[n] = true
	}
	for _, tc := range []struct{ in, want string }{
		{"row_index", "f_row_index"}, {"9lives", "_9lives"}, {"source", "f_source"}, {"sources", "sources"},
	} {
		if got := finalName(tc.in); got != tc.want {
			t.Errorf("finalName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if TableName("Account Balance") != "account_balance" || TableName("2fa") != "_2fa" {
		t.Error("TableName")
	}
}

// TestConcurrentUse runs Decodes of several endpoints alongside readers.
func TestConcurrentUse(t *testing.T) {
	dataDir := t.TempDir()
	reg, err := LoadRegistry(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				ep := []string{"a", "b", "c", "d"}[(g+i)%4]
				_, _, err := reg.Decode(context.Background(), strings.NewReader(snapB), testMeta(ep, t0), Options{},
					func(tb *schema.Table, rec arrow.Record) error {
						if reg.Table(tb.Name) == nil && tb.Name == "" {
							t.Error("no table")
						}
						return nil
					})
				if err != nil {
					t.Error(err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				_ = reg.Tables()
				_ = reg.Print(&strings.Builder{})
				if err := reg.Save(context.Background()); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if err := reg.Save(context.Background()); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadRegistry(dataDir)
	if err != nil || len(loaded.Tables()) != 8 {
		t.Fatalf("loaded %d tables: %v", len(loaded.Tables()), err)
	}
}

func discard(*schema.Table, arrow.Record) error { return nil }

// A number too small for float64 is kept as its text, like one too large:
// never a 0.0 (or a subnormal's rounding) standing for another value.
func TestUnderflowKeptAsText(t *testing.T) {
	reg := NewRegistry()
	res := mustDecode(t, reg, `[{"big": 1e400, "tiny": 1e-400, "sub": 7e-324, "zero": 0e-400, "x": 2.5}]`, t0, Options{})
	tb := reg.Table("orders")
	row := res.tables["orders"].rows[0]
	for name, want := range map[string]any{"big": "1e400", "tiny": "1e-400", "sub": "7e-324"} {
		if c := tb.Columns[tb.Index(name)]; c.Type != schema.String || row[name] != want {
			t.Errorf("%s: %v column, value %#v; want the text %q", name, c.Type, row[name], want)
		}
	}
	if row["zero"] != 0.0 && row["zero"] != int64(0) {
		t.Errorf("zero: %#v", row["zero"])
	}
}
