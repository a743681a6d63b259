package iceberg_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/storage"
)

func TestMain(m *testing.M) { testenv.Main(m) } // stops the shared PostgreSQL

// catalogKind is a catalog the Iceberg conformance tests run with
// (forEachCatalog).
type catalogKind struct {
	name string
	// open makes a fresh catalog for one test: its configuration, and the
	// chDB table function that reads its iceberg_tables. nil: no catalog.
	open func(t *testing.T) (iceberg.CatalogConfig, string)
}

var catalogKinds = []catalogKind{
	{name: "none"},
	{name: "sqlite", open: func(t *testing.T) (iceberg.CatalogConfig, string) {
		f := filepath.Join(t.TempDir(), "catalog.db")
		return iceberg.CatalogConfig{Kind: iceberg.CatalogSQL, URI: "sqlite:" + f}, fmt.Sprintf("sqlite('%s', 'iceberg_tables')", f)
	}},
	{name: "postgres", open: func(t *testing.T) (iceberg.CatalogConfig, string) {
		dsn := testenv.PostgresDSN(t)
		return iceberg.CatalogConfig{Kind: iceberg.CatalogSQL, URI: dsn}, testenv.PostgresTable(t, dsn, "iceberg_tables")
	}},
}

// testCatalog is the catalog of one test (and its subtests).
type testCatalog struct {
	cfg     iceberg.CatalogConfig
	pointer string // chDB's table function over iceberg_tables
}

var catalogs sync.Map // test name → testCatalog

// forEachCatalog runs test once per catalog kind, each a subtest with a
// fresh catalog, so that every check of the catalog-less lake is made of
// each catalog too.
func forEachCatalog(t *testing.T, test func(t *testing.T)) {
	for _, k := range catalogKinds {
		t.Run(k.name, func(t *testing.T) {
			if k.open != nil {
				cfg, pointer := k.open(t)
				catalogs.Store(t.Name(), testCatalog{cfg, pointer})
				t.Cleanup(func() { catalogs.Delete(t.Name()) })
			}
			test(t)
		})
	}
}

// catalogOf is the catalog of test t (a subtest's is its parent's); ok is
// false for none.
func catalogOf(t testing.TB) (testCatalog, bool) {
	for n := t.Name(); ; {
		if c, ok := catalogs.Load(n); ok {
			return c.(testCatalog), true
		}
		i := strings.LastIndex(n, "/")
		if i < 0 {
			return testCatalog{}, false
		}
		n = n[:i]
	}
}

// openLake is the lake of st as the test's catalog registers it (New
// without one), closed when the test ends.
func openLake(t testing.TB, st storage.Store) *iceberg.Warehouse {
	t.Helper()
	c, _ := catalogOf(t)
	l, err := iceberg.Open(context.Background(), st, c.cfg, nil)
	if err != nil {
		t.Fatalf("open the lake: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// icebergSource is how chDB opens table name (a folder of Workdir): with
// icebergLocal at the newest metadata file without a catalog; with one,
// at the metadata file the catalog names, which chDB reads from the
// catalog's database itself (postgresql() or sqlite()).
func icebergSource(t testing.TB, ch *testenv.ChDB, name string) string {
	t.Helper()
	c, ok := catalogOf(t)
	if !ok {
		return fmt.Sprintf("icebergLocal('%s')", name)
	}
	src, err := ch.IcebergCatalogSource(context.Background(), c.pointer, iceberg.DefaultNamespace, name, name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return src
}
