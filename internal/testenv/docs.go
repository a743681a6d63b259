package testenv

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// SQLDoc is the page of the docs whose ClickHouse queries the tests run.
const SQLDoc = "docs/sql-and-clickhouse.md"

// DocSQL returns the ```sql blocks of one section of a Markdown page of the
// module (file relative to the module root; section is the "## " heading,
// exactly), so tests can run the documented queries and the docs cannot rot.
func DocSQL(t testing.TB, file, section string) []string {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	var in, block bool
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## "+section
		case in && line == "```sql":
			block = true
			cur.Reset()
		case in && block && line == "```":
			block = false
			out = append(out, cur.String())
		case block:
			cur.WriteString(line + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
