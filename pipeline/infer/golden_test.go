package infer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/pipeline/values"
)

var update = flag.Bool("update", false, "rewrite testdata: simulator captures (testdata/sim_*) and tables.golden files")

// caseInputs returns a case's bodies in decode order: input.json, then
// input.2.json, input.3.json, ...
func caseInputs(t testing.TB, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "input*.json"))
	if err != nil {
		t.Fatal(err)
	}
	num := func(p string) int {
		s := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "input"), ".json")
		if s == "" {
			return 1
		}
		n, err := strconv.Atoi(strings.TrimPrefix(s, "."))
		if err != nil {
			t.Fatalf("bad input name %s", p)
		}
		return n
	}
	sort.Slice(paths, func(i, j int) bool { return num(paths[i]) < num(paths[j]) })
	return paths
}

func caseDirs(t testing.TB) []string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("testdata", "*", "input.json"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range dirs {
		dirs[i] = filepath.Dir(dirs[i])
	}
	sort.Strings(dirs)
	return dirs
}

// TestGolden decodes each testdata case (its inputs in order, one snapshot
// per input an hour apart, into one registry) and compares the changes,
// emitted rows and final schema with tables.golden. Every leaf of every
// body must be found among the emitted cells, and the registry must survive
// Save and LoadRegistry unchanged. Run with -update to recapture the
// simulator payloads and rewrite the golden files.
func TestGolden(t *testing.T) {
	if *update {
		writeSimCaptures(t)
	}
	dirs := caseDirs(t)
	if len(dirs) < 20 {
		t.Fatalf("only %d cases in testdata", len(dirs))
	}
	for _, dir := range dirs {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			dataDir := t.TempDir()
			reg, err := LoadRegistry(dataDir)
			if err != nil {
				t.Fatal(err)
			}
			if err := reg.SetPolicy(casePolicy(t, dir, name)); err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for i, in := range caseInputs(t, dir) {
				body, err := os.ReadFile(in)
				if err != nil {
					t.Fatal(err)
				}
				at := t0.Add(time.Duration(i) * time.Hour)
				res := decodeBody(t, reg, body, testMeta(name, at), Options{BatchRows: 3})
				fmt.Fprintf(&b, "== %s (snapshot %s)\n", filepath.Base(in), at.Format(time.RFC3339))
				if res.err != nil {
					fmt.Fprintf(&b, "error (input error: %v): %v\n", errors.Is(res.err, values.ErrBadInput), res.err)
					continue
				}
				writeResult(&b, res, 4)
				lc := newLeafChecker(false)
				lc.add(res)
				miss, err := lc.missing(body)
				if err != nil {
					t.Fatal(err)
				}
				if len(miss) > 0 {
					t.Errorf("%s: values not loaded: %v", in, miss)
				}
			}
			b.WriteString("== schema\n")
			if err := reg.Print(&b); err != nil {
				t.Fatal(err)
			}
			checkRoundTrip(t, reg, dataDir)
			compareGolden(t, filepath.Join(dir, "tables.golden"), b.String())
		})
	}
}

// casePolicy reads a case's optional policy.json: {"column_budget": N,
// "force": [paths], "forbid": [paths]} (the map rules of the case's endpoint).
func casePolicy(t *testing.T, dir, endpoint string) Policy {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "policy.json"))
	if os.IsNotExist(err) {
		return Policy{}
	}
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		ColumnBudget int      `json:"column_budget"`
		Force        []string `json:"force"`
		Forbid       []string `json:"forbid"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s/policy.json: %v", dir, err)
	}
	return Policy{ColumnBudget: f.ColumnBudget, Maps: map[string]MapRules{endpoint: {Force: f.Force, Forbid: f.Forbid}}}
}

// writeResult renders one Decode: changes, then each emitted table's rows.
func writeResult(b *strings.Builder, res result, maxRows int) {
	if len(res.changes) == 0 {
		b.WriteString("changes: none\n")
	} else {
		b.WriteString("changes:\n")
		for _, c := range res.changes {
			fmt.Fprintf(b, "  %s\n", c)
		}
	}
	var names []string
	for n := range res.stats.Rows {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if o := res.stats.Overflow[n]; o > 0 {
			fmt.Fprintf(b, "overflow %s: %d fields in extra\n", n, o)
		}
	}
	for _, n := range names {
		e := res.tables[n]
		if e == nil {
			fmt.Fprintf(b, "rows %s: 0\n", n)
			continue
		}
		fmt.Fprintf(b, "rows %s: %d (%d records)\n", n, len(e.rows), e.records)
		renderRows(b, e, maxRows)
	}
	if e := res.tables["rejects"]; e != nil {
		fmt.Fprintf(b, "rejects: %d\n", len(e.rows))
		renderRows(b, e, maxRows)
	}
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pipeline/infer -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run go test ./pipeline/infer -update and review the diff):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff shows the first lines where two texts differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for i := 0; i < max(len(w), len(g)) && len(out) < 20; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			out = append(out, fmt.Sprintf("line %d\n  want %q\n  got  %q", i+1, wl, gl))
		}
	}
	return strings.Join(out, "\n")
}

// checkRoundTrip saves the registry to a temp data directory and loads it
// back: same tables, columns, order, types and first-seen times.
func checkRoundTrip(t *testing.T, reg *Registry, dataDir string) {
	t.Helper()
	if err := reg.Save(context.Background()); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadRegistry(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	var a, b bytes.Buffer
	if err := reg.Print(&a); err != nil {
		t.Fatal(err)
	}
	if err := loaded.Print(&b); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Errorf("registry after Save+LoadRegistry differs:\n%s", lineDiff(a.String(), b.String()))
	}
	for _, tb := range reg.Tables() {
		lt := loaded.Table(tb.Name)
		if lt == nil {
			t.Errorf("table %s lost", tb.Name)
			continue
		}
		if !lt.ArrowSchema().Equal(tb.ArrowSchema()) {
			t.Errorf("table %s: schema after reload %v, before %v", tb.Name, lt.ArrowSchema(), tb.ArrowSchema())
		}
	}
}

// indentJSON pretty-prints a captured body for review (order and number
// literals unchanged).
func indentJSON(t testing.TB, body []byte) []byte {
	var b bytes.Buffer
	if err := json.Indent(&b, body, "", "  "); err != nil {
		t.Fatalf("captured body is not JSON: %v", err)
	}
	b.WriteByte('\n')
	return b.Bytes()
}
