package sinks_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// wrappers are the module's sinks that wrap another sink (package path
// in the module, type), each with the test of its package that runs
// sinktest.Forwarding on it.
var wrappers = map[string]string{
	"pipeline.stage":                "TestStageForwards",
	"cmd/optlake.crashSink":         "TestCrashSinkForwards",
	"lake/iceberg.Sink":             "TestSinkForwards",
	"sinks/parquet/compact.DaySink": "TestDaySinkForwards",
}

// TestEveryWrapperForwards finds, in the module's sources, every sink
// type (it has an Open method) that holds a sinks.Sink (a field of that
// type, directly or in a struct of its package), and wants each listed in
// wrappers with a test of its package that calls sinktest.Forwarding: a
// new wrapper is checked for the capabilities it might hide.
func TestEveryWrapperForwards(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no module root above sinks: %v", err)
	}
	var found []string
	tests := map[string][]string{} // package path: its test files' sources
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "third_party" || d.Name() == "testdata" || d.Name() == "node_modules"):
			return filepath.SkipDir
		case d.IsDir():
			found = append(found, sinkWrappers(t, root, rel)...)
		case strings.HasSuffix(p, "_test.go"):
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			pkg := path.Dir(rel)
			tests[pkg] = append(tests[pkg], string(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(found)
	var want []string
	for w := range wrappers {
		want = append(want, w)
	}
	slices.Sort(want)
	if !slices.Equal(found, want) {
		t.Errorf("the sinks that wrap a sink are %v; the list checked is %v: add each new one to wrappers with its sinktest.Forwarding test", found, want)
	}
	for w, test := range wrappers {
		pkg := w[:strings.LastIndex(w, ".")]
		ok := false
		for _, src := range tests[pkg] {
			i := strings.Index(src, "func "+test+"(")
			if i >= 0 && strings.Contains(src[i:], "sinktest.Forwarding(") {
				ok = true
			}
		}
		if !ok {
			t.Errorf("%s: package %s has no test %s that calls sinktest.Forwarding", w, pkg, test)
		}
	}
}

// sinkWrappers returns the sink types of the package in root/rel that
// hold a sinks.Sink, as "rel.Type".
func sinkWrappers(t *testing.T, root, rel string) []string {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, filepath.Join(root, rel), func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	structs := map[string]*ast.StructType{}
	opens := map[string]bool{} // types with an Open method
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.GenDecl:
					for _, s := range d.Specs {
						if ts, ok := s.(*ast.TypeSpec); ok {
							if st, ok := ts.Type.(*ast.StructType); ok {
								structs[ts.Name.Name] = st
							}
						}
					}
				case *ast.FuncDecl:
					if d.Recv != nil && d.Name.Name == "Open" {
						opens[recvName(d.Recv.List[0].Type)] = true
					}
				}
			}
		}
	}
	inSinks := rel == "sinks"
	var holds func(name string, seen map[string]bool) bool
	holds = func(name string, seen map[string]bool) bool {
		st, ok := structs[name]
		if !ok || seen[name] {
			return false
		}
		seen[name] = true
		for _, f := range st.Fields.List {
			switch x := f.Type.(type) {
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && id.Name == "sinks" && x.Sel.Name == "Sink" {
					return true
				}
			case *ast.Ident:
				if (inSinks && x.Name == "Sink") || holds(x.Name, seen) {
					return true
				}
			}
		}
		return false
	}
	var out []string
	for name := range structs {
		if opens[name] && holds(name, map[string]bool{}) {
			out = append(out, rel+"."+name)
		}
	}
	return out
}

// recvName is the type name of a method's receiver.
func recvName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return recvName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return ""
}
