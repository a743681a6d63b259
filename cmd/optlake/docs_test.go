package main

import (
	"os"
	"path/filepath"
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
