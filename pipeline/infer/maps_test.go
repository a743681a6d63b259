package infer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/schema"
)

func TestLooksLikeMap(t *testing.T) {
	many := func(n int, val string, key func(int) string) string {
		var b strings.Builder
		b.WriteByte('{')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%q:%s", key(i), val)
		}
		b.WriteByte('}')
		return b.String()
	}
	ident := func(i int) string { return fmt.Sprintf("k%d", i) }
	cases := []struct {
		name string
		body string
		want bool
	}{
		{"greeks", `{"delta": 0.5, "gamma": 0.01, "vega": 1.2}`, false},
		{"currencies", `{"BTC": "1.5", "ETH": "20"}`, true},
		{"currency objects", `{"BTC": {"available": "1"}, "ETH": {"available": "2", "locked": "0"}}`, true},
		{"instrument names", `{"BTC-25DEC26-130000-P": {"size": 1}, "ETH-25DEC26-3500-C": {"size": 2}}`, true},
		{"numeric ids", `{"1001": 5, "1002": 6}`, true},
		{"one data key", `{"BTC": {"available": "1"}}`, false},
		{"data keys, mixed kinds", `{"BTC": "1.5", "ETH": 20}`, false},
		{"data keys, nulls ignored", `{"BTC": "1.5", "ETH": null, "SOL": "3"}`, true},
		{"data keys, objects of other shapes", `{"BTC": {"a": 1, "b": 2}, "ETH": {"c": 1, "d": 2}}`, false},
		{"a mixed key set", `{"ID": 5, "name": "x"}`, false},
		{"upper-case field names, one kind", `{"ID": "5", "URL": "x"}`, true},
		{"15 identifier objects", many(15, `{"q":1}`, ident), false},
		{"16 identifier objects", many(16, `{"q":1}`, ident), true},
		{"63 identifier scalars", many(63, `1`, ident), false},
		{"64 identifier scalars", many(64, `1`, ident), true},
		{"empty", `{}`, false},
		{"all null", `{"BTC": null, "ETH": null}`, false},
	}
	for _, c := range cases {
		n, err := parse(strings.NewReader(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := looksLikeMap(n); got != c.want {
			t.Errorf("%s: looksLikeMap(%s) = %v, want %v", c.name, c.body, got, c.want)
		}
	}
}

func TestIdentLike(t *testing.T) {
	for k, want := range map[string]bool{
		"size": true, "userId": true, "maker_fee": true, "_x1": true, "a": true,
		"BTC": false, "ETH_USDC": false, "42": false, "1d": false, "BTC-25DEC26": false,
		"": false, "a.b": false, "x y": false, "é": false, strings.Repeat("a", 65): false,
	} {
		if got := identLike(k); got != want {
			t.Errorf("identLike(%q) = %v, want %v", k, got, want)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	cases := []struct {
		p   Policy
		err string
	}{
		{Policy{}, ""},
		{Policy{ColumnBudget: 16}, ""},
		{Policy{ColumnBudget: 15}, "at least 16"},
		{Policy{Maps: map[string]MapRules{"e": {Force: []string{"a", "$.b.*.c", "$"}}}}, ""},
		{Policy{Maps: map[string]MapRules{"e": {Force: []string{"a"}, Forbid: []string{"$.a"}}}}, "listed twice"},
		{Policy{Maps: map[string]MapRules{"e": {Forbid: []string{"a..b"}}}}, "empty key"},
	}
	for _, c := range cases {
		err := NewRegistry().SetPolicy(c.p)
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("SetPolicy(%+v) = %v, want %q", c.p, err, c.err)
		}
	}
}

// A path that was a map stays one after Save and LoadRegistry, even when
// a later body alone would not look like one.
func TestMapPersists(t *testing.T) {
	dir := t.TempDir()
	reg, err := LoadRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	mustDecode(t, reg, `{"balances": {"BTC": {"available": "1"}, "ETH": {"available": "2"}}}`, t0, Options{})
	if err := reg.Save(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg, err = LoadRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	res := mustDecode(t, reg, `{"balances": {"btc": {"available": "3"}}}`, t0.Add(time.Hour), Options{Mode: Freeze})
	rows := res.tables["orders__balances"]
	if rows == nil || len(rows.rows) != 1 || rows.rows[0]["key"] != "btc" || rows.rows[0]["available"] != "3" {
		t.Fatalf("orders__balances after reload: %+v", rows)
	}
	if cols := userColumns(reg.Table("orders")); len(cols) != 0 {
		t.Errorf("the map's keys became columns of orders: %v", cols)
	}
}

// Rules address objects by their body path: "*" is one level of map,
// arrays add nothing, "$" is the body.
func TestMapRulesPaths(t *testing.T) {
	reg := NewRegistry()
	err := reg.SetPolicy(Policy{Maps: map[string]MapRules{"orders": {
		Force:  []string{"books.*.levels"},
		Forbid: []string{"$.books[]"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	// books would be a map by shape (data keys); forbidden, its keys are
	// columns. Each book's levels has identifier keys (no map by shape);
	// forced. But levels is under books.B1, not books.*: not a map.
	res := mustDecode(t, reg, `{"books": {"B1": {"levels": {"a": 1, "b": 2}}, "B2": {"levels": {"a": 3, "b": 4}}}}`, t0, Options{})
	if _, ok := res.tables["orders__books"]; ok {
		t.Errorf("forbidden map became a table")
	}
	if got := userColumns(reg.Table("orders")); strings.Join(got, ",") != "books__b1__levels__a,books__b1__levels__b,books__b2__levels__a,books__b2__levels__b" {
		t.Errorf("orders columns = %v", got)
	}
	reg2 := NewRegistry()
	if err := reg2.SetPolicy(Policy{Maps: map[string]MapRules{"orders": {Force: []string{"books.*.levels"}}}}); err != nil {
		t.Fatal(err)
	}
	res = mustDecode(t, reg2, `{"books": {"B1": {"levels": {"a": 1, "b": 2}}, "B2": {"levels": {"a": 3}}}}`, t0, Options{})
	lv := res.tables["orders__books__levels"]
	if lv == nil || len(lv.rows) != 3 {
		t.Fatalf("forced levels map: %+v", lv)
	}
}

// The contracts apply to the table, not to the fields in extra: once a
// table has its extra column, new fields past the budget load there under
// freeze and discard-columns alike; the extra column itself is a change
// (freeze fails, discard-columns drops the fields and lists the column).
func TestBudgetUnderContracts(t *testing.T) {
	body := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"x": {`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"f%02d": %d`, i, i)
		}
		b.WriteString(`}}`)
		return b.String()
	}
	setup := func(t *testing.T, first int) *Registry {
		reg := NewRegistry()
		if err := reg.SetPolicy(Policy{ColumnBudget: 16, Maps: map[string]MapRules{"orders": {Forbid: []string{"x"}}}}); err != nil {
			t.Fatal(err)
		}
		mustDecode(t, reg, body(first), t0, Options{})
		return reg
	}
	at := testMeta("orders", t0.Add(time.Hour))
	for _, mode := range []Mode{Freeze, DiscardColumns} {
		// Extra exists (12 fields: 10 columns + 2 in extra).
		reg := setup(t, 12)
		res := decodeBody(t, reg, []byte(body(13)), at, Options{Mode: mode})
		if res.err != nil {
			t.Fatalf("%s with extra: %v", mode, res.err)
		}
		if extra := res.tables["orders"].rows[0]["extra"]; extra != `{"x.f10":10,"x.f11":11,"x.f12":12}` || len(res.changes) != 0 {
			t.Errorf("%s with extra: extra = %v, changes %v", mode, extra, res.changes)
		}
		// No extra yet (10 fields fill the table).
		reg = setup(t, 10)
		res = decodeBody(t, reg, []byte(body(11)), at, Options{Mode: mode})
		switch mode {
		case Freeze:
			var ce *ContractError
			if !errors.As(res.err, &ce) || ce.Column != "column extra" {
				t.Errorf("freeze without extra: %v", res.err)
			}
		case DiscardColumns:
			if res.err != nil {
				t.Fatal(res.err)
			}
			if len(res.stats.Discarded) != 1 || res.stats.Discarded[0].Column != "extra" {
				t.Errorf("discard without extra: discarded %v", res.stats.Discarded)
			}
			if _, ok := res.tables["orders"].rows[0]["extra"]; ok {
				t.Errorf("discard without extra: the table gained extra")
			}
		}
	}
}

// The registry file of a table at the default budget stays small (it was
// 240 bytes a column), and a version 1 file still loads.
func TestSchemaFileSize(t *testing.T) {
	dir := t.TempDir()
	reg, err := LoadRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.SetPolicy(Policy{Maps: map[string]MapRules{"orders": {Forbid: []string{"$"}}}}); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range 5000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"field_%05d": %d`, i, i)
	}
	b.WriteByte('}')
	res := mustDecode(t, reg, b.String(), t0, Options{})
	if n := len(reg.Table("orders").Columns); n != DefaultColumnBudget {
		t.Errorf("orders has %d columns, want %d", n, DefaultColumnBudget)
	}
	if res.stats.Overflow["orders"] != 5000-(DefaultColumnBudget-6) {
		t.Errorf("overflow = %v", res.stats.Overflow)
	}
	if err := reg.Save(context.Background()); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, SchemaDir, "orders.json"))
	if err != nil {
		t.Fatal(err)
	}
	if perCol := fi.Size() / DefaultColumnBudget; perCol > 80 {
		t.Errorf("_schema/orders.json is %d bytes, %d a column", fi.Size(), perCol)
	}

	v1 := `{"version": 1, "name": "old", "root": "old", "first_seen": "2026-11-20T00:00:00Z",
	  "columns": [{"name": "a", "type": "int64", "path": ["a"], "role": "value", "first_seen": "2026-11-20T01:00:00Z"}],
	  "stems": [{"path": ["a"], "stem": "a"}]}`
	old := t.TempDir()
	if err := os.MkdirAll(filepath.Join(old, SchemaDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, SchemaDir, "old.json"), []byte(v1), 0o644); err != nil {
		t.Fatal(err)
	}
	r1, err := LoadRegistry(old)
	if err != nil {
		t.Fatalf("version 1 file: %v", err)
	}
	cols := r1.Columns("old")
	if len(cols) != 6 || cols[5].Name != "a" || !cols[5].FirstSeen.Equal(t0.Add(time.Hour)) {
		t.Errorf("version 1 columns: %+v", cols)
	}
}

// The "schema changed" log line names only what a change has (a new table
// has no column and no type; a root table no field).
func TestChangeLogAttrs(t *testing.T) {
	cases := []struct {
		c    Change
		want string
	}{
		{Change{Table: "positions", Kind: ChangeTable}, "[change table table positions]"},
		{Change{Table: "positions__positions", Kind: ChangeTable, Field: "positions"}, "[change table table positions__positions field positions]"},
		{Change{Table: "t", Column: "size", Type: schema.String, Kind: ChangeColumn, Field: "size"}, "[change column table t column size type string field size]"},
		{Change{Table: "t", Column: "xs", Type: schema.Int64, List: true, Kind: ChangeColumn, Field: "xs"}, "[change column table t column xs type list<int64> field xs]"},
	}
	for _, c := range cases {
		if got := fmt.Sprint(c.c.LogAttrs()); got != c.want {
			t.Errorf("%v: LogAttrs = %s, want %s", c.c, got, c.want)
		}
	}
}
