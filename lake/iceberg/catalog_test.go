package iceberg_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/internal/testenv/icebergrest"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/storage"
)

func TestMain(m *testing.M) { testenv.Main(m) } // stops the shared PostgreSQL

// catalogKind is a catalog the Iceberg conformance tests run with
// (forEachCatalog).
type catalogKind struct {
	name string
	// open makes a fresh catalog for one test. nil: no catalog.
	open func(t *testing.T) testCatalog
}

var catalogKinds = []catalogKind{
	{name: "none"},
	{name: "sqlite", open: func(t *testing.T) testCatalog {
		f := filepath.Join(t.TempDir(), "catalog.db")
		return testCatalog{cfg: iceberg.CatalogConfig{Kind: iceberg.CatalogSQL, URI: "sqlite:" + f}, pointer: fmt.Sprintf("sqlite('%s', 'iceberg_tables')", f)}
	}},
	{name: "postgres", open: func(t *testing.T) testCatalog {
		dsn := testenv.PostgresDSN(t)
		return testCatalog{cfg: iceberg.CatalogConfig{Kind: iceberg.CatalogSQL, URI: dsn}, pointer: testenv.PostgresTable(t, dsn, "iceberg_tables")}
	}},
	// rest: our REST catalog server (internal/testenv/icebergrest); optlake
	// authenticates with OAuth2 client credentials, chDB's own REST client
	// reads through it with the same credentials.
	{name: "rest", open: func(t *testing.T) testCatalog {
		srv := icebergrest.Start(t, icebergrest.Options{ClientID: restClient, ClientSecret: restSecret, Token: restToken})
		cred := restClient + ":" + restSecret
		return testCatalog{
			cfg:  iceberg.CatalogConfig{Kind: iceberg.CatalogREST, URI: srv.URL, REST: iceberg.RESTConfig{Credential: cred}},
			rest: &testenv.RESTCatalog{URL: srv.URL, Credential: cred},
			srv:  srv,
		}
	}},
}

// The REST catalog's credentials in the tests.
const (
	restClient = "optlake-test"
	restSecret = "rest-secret-5b0d"
	restToken  = "rest-token-a41c"
)

// testCatalog is the catalog of one test (and its subtests).
type testCatalog struct {
	cfg     iceberg.CatalogConfig
	pointer string // a sql catalog: chDB's table function over iceberg_tables
	// A rest catalog: how chDB reaches it, and the server.
	rest *testenv.RESTCatalog
	srv  *icebergrest.Server
}

var catalogs sync.Map // test name → testCatalog

// forEachCatalog runs test once per catalog kind, each a subtest with a
// fresh catalog, so that every check of the catalog-less lake is made of
// each catalog too.
func forEachCatalog(t *testing.T, test func(t *testing.T)) {
	for _, k := range catalogKinds {
		t.Run(k.name, func(t *testing.T) {
			if k.open != nil {
				catalogs.Store(t.Name(), k.open(t))
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
	if c.srv != nil && storage.LocalDir(st) == "" {
		// The REST server writes a bucket lake's metadata through the
		// lake's store (its own IO reads and writes local files only).
		c.srv.SetFileIO(iceberg.StoreIO(st))
	}
	l, err := iceberg.Open(context.Background(), st, c.cfg, nil)
	if err != nil {
		t.Fatalf("open the lake: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// icebergSource is how chDB opens table name (a folder of Workdir): with
// icebergLocal at the newest metadata file without a catalog; with a sql
// one, at the metadata file the catalog names, which chDB reads from the
// catalog's database itself (postgresql() or sqlite()); with a rest one,
// through chDB's own REST catalog client.
func icebergSource(t testing.TB, ch *testenv.ChDB, name string) string {
	t.Helper()
	c, ok := catalogOf(t)
	if !ok {
		return fmt.Sprintf("icebergLocal('%s')", name)
	}
	var src string
	var err error
	if c.rest != nil {
		src, err = ch.IcebergRESTSource(context.Background(), *c.rest, iceberg.DefaultNamespace, name)
	} else {
		src, err = ch.IcebergCatalogSource(context.Background(), c.pointer, iceberg.DefaultNamespace, name, name)
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return src
}
