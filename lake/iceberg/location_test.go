package iceberg_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks/sinktest"
	"github.com/optlake/optlake/storage"
)

// locations is the table's location and the locations of its current
// snapshot's data files.
func locations(t *testing.T, lake *iceberg.Warehouse, name string) (string, []string) {
	t.Helper()
	tbl, ok, err := lake.Table(context.Background(), name)
	if err != nil || !ok {
		t.Fatalf("table %s: %v %v", name, ok, err)
	}
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, task := range tasks {
		files = append(files, task.File.FilePath())
	}
	return tbl.Location(), files
}

// checkAbsolute: the tables' locations and their files' are file:// URIs
// under dir.
func checkAbsolute(t *testing.T, lake *iceberg.Warehouse, dir string) {
	t.Helper()
	want := "file://" + filepath.ToSlash(dir) + "/"
	for _, tb := range sinktest.Tables {
		loc, files := locations(t, lake, tb.Name)
		if loc != want+tb.Name {
			t.Errorf("%s: location %q, want %q", tb.Name, loc, want+tb.Name)
		}
		for _, f := range files {
			if !strings.HasPrefix(f, want+tb.Name+"/") {
				t.Errorf("%s: data file %q is not under %s", tb.Name, f, want+tb.Name)
			}
		}
	}
}

// TestRelativeDataDir: a lake made with a relative data directory (the
// default ./data) has absolute locations: it opens by its absolute path,
// and ClickHouse reads it from another folder.
func TestRelativeDataDir(t *testing.T) {
	ch := testenv.NewChDB(t) // finds the module from the package's folder
	top := t.TempDir()
	t.Chdir(top)
	st := storage.NewLocal("./data")
	load(t, st, 1, 2)
	dir := filepath.Join(top, "data")
	abs := iceberg.New(storage.NewLocal(dir), nil)
	checkAbsolute(t, abs, dir)
	t.Chdir(t.TempDir()) // elsewhere: the same lake by its absolute path
	loadLake(t, storage.NewLocal(dir), abs, 3)
	checkFiles(t, storage.NewLocal(dir), sinktest.Tables)
	// From the folder above, by a relative path.
	ch.Workdir = top
	ice, files, err := ch.IcebergDigest(context.Background(), "data/instruments", "")
	if err != nil || ice != files {
		t.Errorf("instruments read from %s: icebergLocal %s, files %s (%v)", top, ice, files, err)
	}
}

// TestRelativeLakeRelocated: a lake whose metadata has relative locations
// (made with ./data before locations were absolute) reads as it is, and
// its next write registers each table at its absolute location first,
// with the same rows.
func TestRelativeLakeRelocated(t *testing.T) {
	ch := testenv.NewChDB(t) // finds the module from the package's folder
	top := t.TempDir()
	t.Chdir(top)
	dir := filepath.Join(top, "data")
	old := loadLake(t, storage.NewLocal("data"), iceberg.NewAt(storage.NewLocal("data"), "data"), 1, 2)
	if loc, _ := locations(t, old, schema.Instruments.Name); loc != "data/instruments" {
		t.Fatalf("the old lake's location is %q, want data/instruments", loc)
	}
	ch.Workdir = dir
	want := map[string]string{}
	for _, tb := range sinktest.Tables {
		want[tb.Name] = digest(t, ch, tb.Name, 0)
	}
	t.Chdir(t.TempDir()) // elsewhere, by its absolute path
	lake := iceberg.New(storage.NewLocal(dir), nil)
	if _, files := locations(t, lake, schema.Instruments.Name); len(files) != 2 {
		t.Fatalf("the relative lake read by its absolute path: %d files, want 2", len(files))
	}
	compactLake(t, lake, nil)
	checkAbsolute(t, lake, dir)
	checkFiles(t, storage.NewLocal(dir), sinktest.Tables)
	for _, tb := range sinktest.Tables {
		if got := digest(t, ch, tb.Name, 0); got != want[tb.Name] {
			t.Errorf("%s after relocation and compaction: %s, want %s", tb.Name, got, want[tb.Name])
		}
	}
	loadLake(t, storage.NewLocal(dir), lake, 3)
	checkAbsolute(t, lake, dir)
	checkFiles(t, storage.NewLocal(dir), sinktest.Tables)
}

// TestCopiedLakeRefused: a lake copied to another folder names its old
// location in every table's metadata: a write is refused with an error
// that says so and how to go on, until Relocate registers the copy's
// tables where they are.
func TestCopiedLakeRefused(t *testing.T) {
	orig := filepath.Join(t.TempDir(), "data")
	load(t, storage.NewLocal(orig), 1, 2)
	cp := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", orig, cp).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	lake := iceberg.New(storage.NewLocal(cp), nil)
	_, _, err := lake.Table(context.Background(), schema.Instruments.Name)
	var moved *iceberg.MovedError
	if !errors.As(err, &moved) || !strings.Contains(err.Error(), "copied or moved") || !strings.Contains(err.Error(), "lake convert --to iceberg") {
		t.Fatalf("opening a copied lake: %v, want a MovedError saying what to do", err)
	}
	if err := os.RemoveAll(orig); err != nil { // the original is gone: the copy must stand alone
		t.Fatal(err)
	}
	got, err := lake.Relocate(context.Background())
	if err != nil || len(got) != len(sinktest.Tables) {
		t.Fatalf("relocate: %v %v", got, err)
	}
	checkAbsolute(t, lake, cp)
	loadLake(t, storage.NewLocal(cp), iceberg.New(storage.NewLocal(cp), nil), 3)
	checkFiles(t, storage.NewLocal(cp), sinktest.Tables)
	checkTables(t, cp, []*schema.Table{schema.Instruments}, "")
}
