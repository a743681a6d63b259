package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The commands ask the lake's table format (lake.Open, lake.Read) and
// never branch on it: no file of cmd/optlake but lake.go, which parses
// `lake convert --to` and the Iceberg catalog's settings, names a format
// (lake.Parquet, lake.Iceberg), and none but it imports a format's package
// (lake/iceberg, for the catalog; lake/hive never). A new format is a
// package and its entry in package lake, not an edit here.
func TestCommandsDoNotKnowTheFormats(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	formatPkgs := map[string]bool{"github.com/optlake/optlake/lake/iceberg": true, "github.com/optlake/optlake/lake/hive": true}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); formatPkgs[p] && !(name == "lake.go" && p == "github.com/optlake/optlake/lake/iceberg") {
				t.Errorf("%s imports the format package %s", fset.Position(im.Pos()), p)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "lake" && (sel.Sel.Name == "Parquet" || sel.Sel.Name == "Iceberg") && name != "lake.go" {
				t.Errorf("%s: lake.%s: a format check outside the flag's parsing", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}
