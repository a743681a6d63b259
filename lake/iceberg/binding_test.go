package iceberg_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/lake/tableformat"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/storage"
)

func runsSnapshots(t *testing.T, l *iceberg.Warehouse) int {
	t.Helper()
	tbl, ok, err := l.Table(context.Background(), schema.Runs.Name)
	if err != nil || !ok {
		t.Fatalf("runs: %v %v", ok, err)
	}
	return len(tbl.Metadata().Snapshots())
}

func sqliteCatalog(t *testing.T) iceberg.CatalogConfig {
	return iceberg.CatalogConfig{Kind: iceberg.CatalogSQL, URI: "sqlite:" + filepath.Join(t.TempDir(), "c.db")}
}

func openCatalog(t *testing.T, st storage.Store, cfg iceberg.CatalogConfig) *iceberg.Warehouse {
	t.Helper()
	l, err := iceberg.Open(context.Background(), st, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// wantErr fails unless err is an error whose message holds every one of
// parts.
func wantErr(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %q lacks %q", what, err, p)
		}
	}
}

// A lake whose tables are kept in a catalog, read without it (a compact
// or a run missing the catalog settings): it refuses, naming the flags,
// and its expiry deletes nothing (before the binding it saw every table at
// its registration's v1 and deleted all the catalog's files, exit 0).
func TestCatalogLessOnBoundLakeRefuses(t *testing.T) {
	ctx := context.Background()
	st := storage.NewLocal(t.TempDir())
	cfg := sqliteCatalog(t)
	loadLake(t, st, openCatalog(t, st, cfg), 1, 2, 3)
	before, err := st.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}

	none := iceberg.New(st, nil)
	_, err = none.Expire(ctx, nil, 0, 0)
	wantErr(t, "catalog-less expiry", err, "--iceberg-catalog sql", "--iceberg-catalog-name optlake", "--iceberg-namespace optlake")
	_, _, err = none.Table(ctx, schema.Runs.Name)
	wantErr(t, "catalog-less load", err, "--iceberg-catalog sql")
	_, err = none.Tables(ctx)
	wantErr(t, "catalog-less tables", err, "--iceberg-catalog sql")

	after, err := st.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("the lake held %d objects, %d after the refused commands", len(before), len(after))
	}
	l := openCatalog(t, st, cfg)
	if n, ok, err := l.CheckFiles(ctx, schema.Runs.Name); err != nil || !ok {
		t.Errorf("the catalog's runs table: %d files checked, ok=%v, err=%v", n, ok, err)
	}
	if n := runsSnapshots(t, l); n != 3 {
		t.Errorf("runs through the catalog: %d snapshots, want 3", n)
	}
}

// A catalog of another name, namespace or table prefix than the one the
// lake's tables are kept in is refused before anything is registered.
func TestOtherCatalogOnBoundLakeRefuses(t *testing.T) {
	ctx := context.Background()
	st := storage.NewLocal(t.TempDir())
	cfg := sqliteCatalog(t)
	loadLake(t, st, openCatalog(t, st, cfg), 1)
	for _, c := range []iceberg.CatalogConfig{
		{Name: "other"}, {Namespace: "elsewhere"}, {Prefix: "p_"},
	} {
		c.Kind, c.URI = cfg.Kind, cfg.URI
		l, err := iceberg.Open(ctx, st, c, nil)
		if err == nil {
			l.Close()
		}
		wantErr(t, "open "+c.Name+c.Namespace+c.Prefix, err, `kept in the sql catalog "optlake"`, "--iceberg-catalog-name optlake")
	}
}

// A lake registered (lake convert), then run without the catalog (as
// before the binding, whose file is removed to make that lake): the
// catalog holds an older version than the lake's newest vN, and a run
// through it used to build on it, dropping ticks 2 and 3, exit 0. Now
// loading and Register refuse.
func TestStaleCatalogRefuses(t *testing.T) {
	ctx := context.Background()
	st := storage.NewLocal(t.TempDir())
	cfg := sqliteCatalog(t)
	loadLake(t, st, iceberg.New(st, nil), 1)
	l := openCatalog(t, st, cfg)
	if _, err := l.Register(ctx); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := st.Delete(ctx, iceberg.BindingName); err != nil {
		t.Fatal(err)
	}
	loadLake(t, st, iceberg.New(st, nil), 2, 3)

	l = openCatalog(t, st, cfg)
	_, _, err := l.Table(ctx, schema.Runs.Name)
	wantErr(t, "load through the stale catalog", err, "metadata.json is not in the catalog's history")
	_, err = openCatalog(t, st, cfg).Register(ctx)
	wantErr(t, "register on the stale catalog", err, "not in the catalog's history")
	if err := st.Delete(ctx, iceberg.BindingName); err != nil {
		t.Fatal(err)
	}
	if n := runsSnapshots(t, iceberg.New(st, nil)); n != 3 {
		t.Errorf("the lake's runs: %d snapshots, want 3", n)
	}
}

// A catalog row dropped (by hand) is not registered again at the stale
// vN the catalog commits superseded (which rolled back every commit made
// through the catalog, exit 0).
func TestReRegisterAfterDropRefuses(t *testing.T) {
	ctx := context.Background()
	st := storage.NewLocal(t.TempDir())
	cfg := sqliteCatalog(t)
	l := openCatalog(t, st, cfg)
	loadLake(t, st, l, 1, 2, 3)
	l.Close()
	db, err := sql.Open("sqlite", strings.TrimPrefix(cfg.URI, "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM iceberg_tables WHERE table_name = ?`, schema.Runs.Name); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, _, err = openCatalog(t, st, cfg).Table(ctx, schema.Runs.Name)
	wantErr(t, "load after the row was dropped", err, "v1.metadata.json is superseded by metadata a catalog wrote", "register the table by hand")
}

// A read-only lake (status, history) writes nothing: no binding, no
// catalog tables or namespace, no registration; a table the catalog
// lacks is reported as not registered; a missing sqlite file is an error,
// not a new catalog.
func TestReadOnlyCatalogWritesNothing(t *testing.T) {
	ctx := context.Background()
	st := storage.NewLocal(t.TempDir())
	loadLake(t, st, iceberg.New(st, nil), 1)
	own, err := iceberg.New(st, nil).Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ownFiles, _, err := iceberg.New(st, nil).Files(ctx, schema.Runs.Name)
	if err != nil || len(ownFiles) == 0 {
		t.Fatalf("runs files: %v %v", ownFiles, err)
	}
	cfg := sqliteCatalog(t)
	cfg.ReadOnly = true
	if l, err := iceberg.Open(ctx, st, cfg, nil); err == nil {
		l.Close()
		t.Fatal("a read-only open of a missing sqlite catalog succeeded")
	}
	if _, err := storage.NewLocal(filepath.Dir(strings.TrimPrefix(cfg.URI, "sqlite:"))).Stat(ctx, "c.db"); err == nil {
		t.Error("a read-only open created the sqlite catalog")
	}
	db, err := sql.Open("sqlite", strings.TrimPrefix(cfg.URI, "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err = db.Exec(`CREATE TABLE keep (x int)`); err != nil {
		t.Fatal(err)
	}
	if l, err := iceberg.Open(ctx, st, cfg, nil); err == nil {
		l.Close()
		t.Fatal("a read-only open of a database with no catalog succeeded")
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name LIKE 'iceberg%'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the read-only lake made %d iceberg tables in the database (%v)", n, err)
	}
	w := cfg
	w.ReadOnly = false
	openCatalog(t, st, w).Close() // the catalog's tables and namespace, no table
	l := openCatalog(t, st, cfg)
	tables, err := l.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != len(own) {
		t.Fatalf("%d tables through the read-only catalog, %d in the lake", len(tables), len(own))
	}
	for i, ts := range tables {
		if !ts.NotRegistered || ts.MetadataVersion != own[i].MetadataVersion {
			t.Errorf("%+v: want not registered, at v%d", ts, own[i].MetadataVersion)
		}
	}
	files, ok, err := l.Files(ctx, schema.Runs.Name)
	if !ok || err != nil || strings.Join(files, ",") != strings.Join(ownFiles, ",") {
		t.Errorf("files of an unregistered table through a read-only catalog: %v ok=%v err=%v, want the lake's %v", files, ok, err, ownFiles)
	}
	f, err := iceberg.NewFormat(ctx, st, tableformat.Options{}, iceberg.WithCatalog(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	status, err := f.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(status.Lines) != len(own) {
		t.Fatalf("status lines %q, want one for each of %d tables", status.Lines, len(own))
	}
	for i, line := range status.Lines {
		want := fmt.Sprintf("iceberg table %s: not registered in the catalog (metadata v%d in the lake)", own[i].Table, own[i].MetadataVersion)
		if line != want {
			t.Errorf("status line %q, want %q", line, want)
		}
	}
	if err := db.QueryRow(`SELECT count(*) FROM iceberg_tables`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the read-only lake registered %d tables (%v)", n, err)
	}
	if _, err := st.Stat(ctx, iceberg.BindingName); err == nil {
		t.Error("the read-only lake wrote the binding")
	}
}
