package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// status and history open the Iceberg catalog read-only: a missing sqlite
// catalog file is an error, not a new catalog; against a catalog that
// lacks the lake's tables, status shows each table not registered and
// history reads the lake's own metadata, the same timeline as without a
// catalog. Neither creates the catalog, registers a table, writes the
// binding or changes a file of the lake.
func TestStatusAndHistoryReadOnlyCatalog(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, venuesim.Config{Seed: 5})
	dir := t.TempDir()
	if res := optlake(t, "run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments", "--table-format", "iceberg"); res.code != 0 {
		t.Fatalf("run: exit %d\n%s", res.code, res.stderr)
	}
	r := testenv.DuckDBQuery(t, fmt.Sprintf(`SELECT instrument_name FROM read_parquet('%s') ORDER BY 1 LIMIT 1`,
		filepath.Join(dir, "instruments", "*", "*.parquet")))
	if len(r.Rows) != 1 {
		t.Fatal("no instrument in the lake")
	}
	name := r.Rows[0][0].(string)
	plain := optlake(t, "history", "--data-dir", dir, "--format", "csv", name)
	if plain.code != 0 || strings.Count(plain.stdout, "\n") < 2 {
		t.Fatalf("history without a catalog: exit %d\n%s%s", plain.code, plain.stdout, plain.stderr)
	}
	files := lakeFiles(t, dir)
	db := filepath.Join(t.TempDir(), "catalog.db")
	cat := []string{"--iceberg-catalog", "sql", "--iceberg-catalog-uri", "sqlite:" + db}
	unchanged := func(when string) {
		t.Helper()
		if after := lakeFiles(t, dir); !slices.Equal(after, files) {
			t.Errorf("%s: the lake's files changed:\nbefore %v\nafter  %v", when, files, after)
		}
		if _, err := os.Stat(filepath.Join(dir, iceberg.BindingName)); err == nil {
			t.Errorf("%s: the lake's catalog binding was written", when)
		}
	}

	for _, cmd := range [][]string{{"status", "--data-dir", dir}, {"history", "--data-dir", dir, name}} {
		if res := optlake(t, append(cmd, cat...)...); res.code == 0 {
			t.Errorf("optlake %s with a missing sqlite catalog: exit 0\n%s", cmd[0], res.stdout)
		}
		if _, err := os.Stat(db); err == nil {
			t.Fatalf("optlake %s created the sqlite catalog", cmd[0])
		}
	}
	unchanged("with a missing catalog")

	// A catalog with its tables and namespace but no table of the lake.
	wh, err := iceberg.Open(context.Background(), storage.NewLocal(t.TempDir()), iceberg.CatalogConfig{Kind: "sql", URI: "sqlite:" + db}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wh.Close()
	for range 2 { // the second time: the first status and history registered nothing
		res := optlake(t, append([]string{"status", "--data-dir", dir}, cat...)...)
		if res.code != 0 || !strings.Contains(res.stdout, "iceberg table instruments: not registered in the catalog (metadata v") {
			t.Errorf("status through a catalog without the lake's tables: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		res = optlake(t, append([]string{"history", "--data-dir", dir, "--format", "csv", name}, cat...)...)
		if res.code != 0 || res.stdout != plain.stdout {
			t.Errorf("history through a catalog without the lake's tables: exit %d\n%s%s\nwant\n%s", res.code, res.stdout, res.stderr, plain.stdout)
		}
	}
	unchanged("through a catalog without the lake's tables")
}
