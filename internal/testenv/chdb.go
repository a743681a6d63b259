package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ChDB is a current ClickHouse (chDB: libchdb, embedded in node through
// tools/chdb/query.mjs) whose databases live in a session directory for the
// test's lifetime. It speaks SQL only: no native protocol, no clusters, so
// optlake's own client cannot reach it; its DDL, views and queries can.
type ChDB struct {
	node, script, dir string
	// Workdir, when set, is the queries' working directory: chDB's
	// user_files_path is ".", and the table functions that check it
	// (icebergLocal) read only relative paths under it.
	Workdir string
}

// NewChDB returns a chDB with an empty session directory. When node or the
// chdb module (scripts/deps.sh installs it) is missing, the test is skipped
// locally and fails in CI.
func NewChDB(t testing.TB) *ChDB {
	t.Helper()
	node, script, err := chdbTool()
	if err != nil {
		unavailable(t, "%v: run `make deps`", err)
		return nil
	}
	return &ChDB{node: node, script: script, dir: t.TempDir()}
}

// Query runs sql (one or more statements, each ended by ";") in the session
// and returns every result, TabSeparated as clickhouse-client prints it,
// without the final newline. DateTime('UTC') and DateTime64(3, 'UTC')
// columns print in UTC.
func (c *ChDB) Query(ctx context.Context, sql string) (string, error) {
	cmd := exec.CommandContext(ctx, c.node, c.script, c.dir)
	cmd.Dir = filepath.Dir(c.script)
	if c.Workdir != "" {
		cmd.Dir = c.Workdir
	}
	out, err := runSQL(cmd, sql)
	if err != nil {
		return "", fmt.Errorf("chdb: %w", err)
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

// chdbTool locates node and tools/chdb/query.mjs, and checks that the chdb
// module and its libchdb are installed.
func chdbTool() (node, script string, err error) {
	return nodeTool("chdb", "chdb/package.json", "@chdb/lib-linux-x64-gnu/libchdb.so")
}
