package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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
	answer, err := duckDBs.query(node, script, sql)
	if err != nil {
		return Result{}, err
	}
	var raw struct {
		Columns []Column `json:"columns"`
		Rows    [][]any  `json:"rows"`
		Error   *string  `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(answer))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return Result{}, fmt.Errorf("decoding query.mjs output: %v", err)
	}
	if raw.Error != nil {
		return Result{}, errors.New(strings.TrimSpace(*raw.Error))
	}
	if raw.Rows == nil {
		raw.Rows = [][]any{}
	}
	return Result{Columns: raw.Columns, Rows: raw.Rows}, nil
}

// duckDBs are the test binary's DuckDB readers: node processes running
// query.mjs --serve, each answering one query at a time, each query in a
// fresh in-memory DuckDB of its own (so a query sees nothing of another's).
// Starting node and DuckDB's library costs about 0.4 CPU-s and a second of
// wall, more than most queries: idle readers are kept for the next query.
// A reader ends when its stdin closes, with the test binary at the latest.
var duckDBs duckDBPool

type duckDBPool struct {
	mu   sync.Mutex
	idle []*duckDBReader
}

// duckDBIdle is how many idle readers are kept (the tests run two at a
// time on 2 cores; a few more for queries from their goroutines).
const duckDBIdle = 4

type duckDBReader struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *lockedBuffer // what the process said before it died
	end    sync.Once
	done   chan struct{} // closed once the process has ended
}

// query answers sql on an idle reader (or a new one) within duckDBTimeout:
// the answer's line. A reader that fails is killed, never reused.
func (p *duckDBPool) query(node, script, sql string) ([]byte, error) {
	r, err := p.get(node, script)
	if err != nil {
		return nil, err
	}
	line, err := json.Marshal(sql)
	if err != nil {
		r.kill()
		return nil, err
	}
	timer := time.AfterFunc(duckDBTimeout, r.kill)
	answer, err := r.ask(append(line, '\n'))
	if !timer.Stop() {
		err = fmt.Errorf("no answer within %v", duckDBTimeout)
	}
	if err != nil {
		r.kill()
		<-r.done
		if msg := strings.TrimSpace(r.stderr.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, msg)
		}
		return nil, fmt.Errorf("the DuckDB reader (query.mjs --serve) failed: %w", err)
	}
	p.put(r)
	return answer, nil
}

func (r *duckDBReader) ask(line []byte) ([]byte, error) {
	if _, err := r.in.Write(line); err != nil {
		return nil, err
	}
	return r.out.ReadBytes('\n')
}

// kill ends the reader at once; close when its stdin ends.
func (r *duckDBReader) kill()  { r.stop(true) }
func (r *duckDBReader) close() { r.stop(false) }

func (r *duckDBReader) stop(kill bool) {
	r.end.Do(func() {
		r.in.Close()
		if kill {
			r.cmd.Process.Kill()
		}
	})
}

func (p *duckDBPool) get(node, script string) (*duckDBReader, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		r := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return r, nil
	}
	p.mu.Unlock()
	cmd := exec.Command(node, script, "--serve")
	cmd.Dir = filepath.Dir(script)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	r := &duckDBReader{cmd: cmd, in: in, out: bufio.NewReader(out), stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stderr = r.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		cmd.Wait()
		close(r.done)
	}()
	return r, nil
}

func (p *duckDBPool) put(r *duckDBReader) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) < duckDBIdle {
		p.idle = append(p.idle, r)
		return
	}
	r.close()
}

// lockedBuffer is a process's stderr: written by the goroutine that copies
// it, read when the process failed.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
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
