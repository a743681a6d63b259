package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Result is the result of a DuckDB query as printed by tools/duckdb/query.mjs.
//
// Values are as decoded from its JSON with json.Decoder.UseNumber:
//   - BIGINT, UBIGINT, HUGEINT, DECIMAL        → string ("12345678901234567890")
//   - TINYINT..UINTEGER, FLOAT, DOUBLE          → json.Number (exact text)
//   - DOUBLE NaN / ±Inf                         → string "NaN", "Infinity", "-Infinity"
//   - TIMESTAMP, TIMESTAMPTZ (and _S/_MS/_NS)   → string, ISO-8601 UTC with milliseconds,
//     "2026-11-20T08:00:00.000Z" (finer digits only when the value has them)
//   - DATE → "2026-11-20"; VARCHAR → string; BOOLEAN → bool; NULL → nil
//   - LIST/ARRAY → []any; STRUCT → map[string]any; MAP → []any of {"key","value"}
type Result struct {
	Columns []Column
	Rows    [][]any
}

// Column is a result column: its name and DuckDB type as DuckDB spells it
// ("VARCHAR", "BIGINT", "TIMESTAMP WITH TIME ZONE", "INTEGER[]", ...).
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Col returns the values of the named column, one per row. It panics (failing
// the test) when the result has no such column, so a typo cannot make a check
// pass vacuously.
func (r Result) Col(name string) []any {
	for i, c := range r.Columns {
		if c.Name == name {
			out := make([]any, len(r.Rows))
			for j, row := range r.Rows {
				out[j] = row[i]
			}
			return out
		}
	}
	names := make([]string, len(r.Columns))
	for i, c := range r.Columns {
		names[i] = c.Name
	}
	panic(fmt.Sprintf("testenv: DuckDB result has no column %q (columns: %s)", name, strings.Join(names, ", ")))
}

// Type returns the DuckDB type of the named column, or "" when there is none.
func (r Result) Type(name string) string {
	for _, c := range r.Columns {
		if c.Name == name {
			return c.Type
		}
	}
	return ""
}

// duckDBTimeout bounds one query; generous, a test's own deadline still applies.
const duckDBTimeout = 5 * time.Minute

// DuckDBQuery runs sql in a fresh in-memory DuckDB through tools/duckdb/query.mjs
// (located from the module root) and returns its result. Several statements
// separated by ";" run in order and the last one's result is returned. The
// session time zone is UTC. It fails the test when DuckDB reports an error;
// when node or the node module is missing it skips the test (fails it in CI).
func DuckDBQuery(t testing.TB, sql string) Result {
	t.Helper()
	r, err := DuckDBQueryErr(t, sql)
	if err != nil {
		t.Fatalf("duckdb: %v\nSQL: %s", err, sql)
	}
	return r
}

// DuckDBQueryErr is DuckDBQuery for tests that expect DuckDB to fail (say, on a
// corrupt file): it returns DuckDB's error instead of failing the test. Missing
// node or node module still skips (fails in CI).
func DuckDBQueryErr(t testing.TB, sql string) (Result, error) {
	t.Helper()
	node, script, err := duckDBTool()
	if err != nil {
		unavailable(t, "%v: run `make deps`", err)
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), duckDBTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = filepath.Dir(script)
	stdout, err := runSQL(cmd, sql)
	if err != nil {
		return Result{}, err
	}
	var raw struct {
		Columns []Column `json:"columns"`
		Rows    [][]any  `json:"rows"`
	}
	dec := json.NewDecoder(bytes.NewReader(stdout))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return Result{}, fmt.Errorf("decoding query.mjs output: %v", err)
	}
	if raw.Rows == nil {
		raw.Rows = [][]any{}
	}
	return Result{Columns: raw.Columns, Rows: raw.Rows}, nil
}

// duckDBTool locates node and tools/duckdb/query.mjs, and checks that the node
// module is installed.
func duckDBTool() (node, script string, err error) {
	return nodeTool("duckdb", "@duckdb/node-api/package.json")
}

// nodeTool locates node and tools/<tool>/query.mjs, and checks that each of
// modules (paths under the tool's node_modules) is installed.
func nodeTool(tool string, modules ...string) (node, script string, err error) {
	return nodeScript(tool, "query.mjs", modules...)
}

// nodeScript locates node and tools/<tool>/<name>, and checks that the
// node modules are installed.
func nodeScript(tool, name string, modules ...string) (node, script string, err error) {
	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", fmt.Errorf("node is not installed")
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", "", err
	}
	dir := filepath.Join(root, "tools", tool)
	script = filepath.Join(dir, name)
	if _, err := os.Stat(script); err != nil {
		return "", "", fmt.Errorf("%s is missing", script)
	}
	for _, m := range modules {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", m)); err != nil {
			return "", "", fmt.Errorf("node module %s is not installed in %s", m, dir)
		}
	}
	return node, script, nil
}

// runSQL runs cmd with sql on its stdin (no argv size limit) and returns its
// stdout; on failure the error is its stderr (or how it failed, when that is
// empty).
func runSQL(cmd *exec.Cmd, sql string) ([]byte, error) {
	cmd.Stdin = strings.NewReader(sql)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, errors.New(msg)
	}
	return stdout.Bytes(), nil
}
