package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
)

// docPath is a file of the module's docs, by its path from the module root.
func docPath(t *testing.T, rel string) string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, filepath.FromSlash(rel))
}

// The committed configuration reference is what `optlake docs config`
// prints: a setting added to internal/settings or a command fails this test
// until the page is regenerated.
func TestConfigReferenceUpToDate(t *testing.T) {
	t.Parallel()
	res := optlake(t, "docs", "config")
	if res.code != 0 {
		t.Fatalf("docs config: exit %d: %s", res.code, res.stderr)
	}
	committed, err := os.ReadFile(docPath(t, "docs/configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	if res.stdout != string(committed) {
		got, want := strings.Split(res.stdout, "\n"), strings.Split(string(committed), "\n")
		for i := 0; i < len(got) || i < len(want); i++ {
			var g, w string
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if g != w {
				t.Fatalf("docs/configuration.md is out of date (run `go generate ./cmd/optlake`); line %d:\n generated: %s\n committed: %s", i+1, g, w)
			}
		}
	}
	// Every setting of every command is in it, with its variable.
	for _, want := range []string{"`--api-url VALUE`", "`OPTLAKE_CLICKHOUSE_DSN`", "`--snapshots N`", "## optlake compact", "`endpoints.<name>.maps.force`", "`accounts`"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("the reference lacks %s", want)
		}
	}
}

// docFiles are the Markdown pages whose examples must work: the README and
// every page of docs/.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(docPath(t, "docs/*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{docPath(t, "README.md")}, pages...)
}

// docBlock is one fenced block of a page.
type docBlock struct {
	file, lang, text string
	line             int
}

// fencedBlocks returns the fenced code blocks of a Markdown file.
func fencedBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []docBlock
	var cur *docBlock
	var text strings.Builder
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &docBlock{file: filepath.Base(path), lang: strings.TrimPrefix(line, "```"), line: i + 1}
			text.Reset()
		case cur != nil && line == "```":
			cur.text = text.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			text.WriteString(line + "\n")
		}
	}
	return out
}

// shellLines returns the commands of a shell block: continuation lines
// joined, comments dropped.
func shellLines(text string) []string {
	var out []string
	var cur string
	for _, line := range strings.Split(text, "\n") {
		if i := strings.Index(line, " #"); i >= 0 && !strings.Contains(line[:i], "'") {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		if cur += line; strings.TrimSpace(cur) != "" {
			out = append(out, strings.TrimSpace(cur))
		}
		cur = ""
	}
	return out
}

// readsLocalLake reports whether a command line of the docs works on the
// demo's lake alone: no venue, server, bucket, secret or system path.
func readsLocalLake(args []string) bool {
	if len(args) < 2 {
		return false
	}
	for _, a := range args {
		if strings.Contains(a, "$") || strings.Contains(a, "://") || strings.HasPrefix(a, "/") || strings.HasPrefix(a, "--api-url") || strings.HasPrefix(a, "--clickhouse-dsn") || strings.HasPrefix(a, "--config") {
			return false
		}
	}
	switch args[1] {
	case "history", "status", "schema", "compact", "replay":
		return true
	}
	return false
}

// onDemoLake rewrites the lake paths of an example to the demo's lake.
func onDemoLake(text, data string) string {
	for _, q := range []string{"'", `"`} {
		text = strings.ReplaceAll(text, q+"data/", q+data+"/")
		text = strings.ReplaceAll(text, q+"./data/", q+data+"/")
	}
	return text
}

// Every example of the README and docs/ that reads a local lake works, as
// written, on the lake `optlake demo` writes: the DuckDB queries return
// rows, the command lines exit 0 with output, and the paths the pandas and
// polars snippets read exist.
func TestDocsExamplesOnDemoLake(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	if res := optlake(t, "demo", "--data-dir", data, "--interval", "100ms"); res.code != 0 {
		t.Fatalf("demo: exit %d: %s", res.code, res.stderr)
	}
	var queries, commands, paths int
	for _, page := range docFiles(t) {
		for _, b := range fencedBlocks(t, page) {
			where := b.file + ":" + strconv.Itoa(b.line)
			switch b.lang {
			case "sql":
				if !strings.Contains(b.text, "'data/") {
					continue // ClickHouse's tables, a bucket: other tests
				}
				queries++
				sql := onDemoLake(b.text, data)
				r, err := testenv.DuckDBQueryErr(t, sql)
				if err != nil {
					t.Errorf("%s: DuckDB: %v\n%s", where, err, b.text)
				} else if len(r.Rows) == 0 {
					t.Errorf("%s: no rows on the demo's lake:\n%s", where, b.text)
				}
			case "sh":
				for _, line := range shellLines(b.text) {
					if sql, ok := strings.CutPrefix(line, "duckdb -c "); ok {
						queries++
						sql = onDemoLake(strings.Trim(sql, `"`), data)
						if r, err := testenv.DuckDBQueryErr(t, sql); err != nil || len(r.Rows) == 0 {
							t.Errorf("%s: %s: %v, %d rows", where, line, err, len(r.Rows))
						}
						continue
					}
					args := strings.Fields(line)
					if len(args) == 0 || (args[0] != "optlake" && args[0] != "bin/optlake") || !readsLocalLake(args) {
						continue
					}
					commands++
					res := optlake(t, lakeArgs(args[1:], data)...)
					if res.code != 0 || strings.TrimSpace(res.stdout) == "" {
						t.Errorf("%s: %s: exit %d, stdout %q, stderr %s", where, line, res.code, res.stdout, res.stderr)
					}
					// The demo's snapshots are all of today: compact says why it
					// leaves them, as its page promises.
					if args[1] == "compact" && !strings.Contains(res.stdout, "still open: today (UTC)") {
						t.Errorf("%s: %s does not say today is open:\n%s", where, line, res.stdout)
					}
				}
			case "python":
				for _, m := range pyPath.FindAllStringSubmatch(b.text, -1) {
					if !strings.HasPrefix(m[1], "data/") {
						continue
					}
					paths++
					if got, _ := filepath.Glob(filepath.Join(filepath.Dir(data), m[1])); len(got) == 0 {
						t.Errorf("%s: %s reads %s, which the demo's lake does not have", where, strings.TrimSpace(m[0]), m[1])
					}
				}
			}
		}
	}
	t.Logf("ran %d DuckDB queries and %d commands, checked %d notebook paths", queries, commands, paths)
	// The README's "after the demo" and the notebook page are covered.
	if queries < 6 || commands < 6 || paths < 2 {
		t.Errorf("found %d DuckDB queries, %d commands and %d notebook paths on a local lake in the docs; the docs lost their examples?", queries, commands, paths)
	}
}

// pyPath is a path a pandas or polars snippet reads.
var pyPath = regexp.MustCompile(`(?:read_parquet|scan_parquet|read_table)\("([^"]+)"`)

// lakeArgs points a documented command at the demo's lake: ./data (given
// or the default) becomes data.
func lakeArgs(args []string, data string) []string {
	out := []string{args[0], "--data-dir", data}
	for i := 1; i < len(args); i++ {
		if args[i] == "--data-dir" && i+1 < len(args) {
			i++ // the demo's lake instead
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// The secrets the docs' examples read from the environment are the ones
// deploy/ names (deploy/README.md lists them), so an example and the deploy
// files never disagree on a variable's name; the clouds' own variables
// (AWS_*, AZURE_*, GOOGLE_*) are theirs.
func TestDocsSecretNamesMatchDeploy(t *testing.T) {
	t.Parallel()
	deploy, err := os.ReadFile(docPath(t, "deploy/README.md"))
	if err != nil {
		t.Fatal(err)
	}
	ref := regexp.MustCompile(`\$\{?([A-Z][A-Z0-9_]*(?:PASSWORD|TOKEN|SECRET|_KEY))\}?`)
	seen := 0
	for _, page := range docFiles(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			name := m[1]
			if strings.HasPrefix(name, "AWS_") || strings.HasPrefix(name, "AZURE_") || strings.HasPrefix(name, "GOOGLE_") || strings.HasPrefix(name, "MAIN_") {
				continue
			}
			seen++
			if !strings.Contains(string(deploy), "`"+name+"`") {
				t.Errorf("%s: $%s is not a variable deploy/ uses (deploy/README.md)", filepath.Base(page), name)
			}
		}
	}
	if seen == 0 {
		t.Error("no secret variables found in the docs")
	}
}
