package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/internal/testenv/icebergrest"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/venuesim"
)

// The REST catalog's credentials in these tests.
const (
	restClient = "optlake-e2e"
	restSecret = "rest-secret-e2e-4d1c"
	restToken  = "rest-token-e2e-93b7"
)

// An Iceberg lake made without a catalog moves into a REST catalog (our
// test server, internal/testenv/icebergrest): `lake convert --iceberg-catalog
// rest` registers every table, later runs (one in a separate process, its
// OAuth2 credentials from the environment) and a compaction commit through
// the catalog's CommitTable, status shows the catalog's versions, and
// ClickHouse (chDB) reads each table through its own REST catalog client,
// once with the OAuth2 client credentials and once with the bearer token:
// the rows of its Parquet files, four snapshots each once. Commands without
// the catalog refuse, naming the flags. Neither the token nor the client
// secret shows in any output or file of the lake.
func TestIcebergRESTCatalogEndToEnd(t *testing.T) {
	t.Parallel()
	sim, api := startSim(t, venuesim.Config{Seed: 46, Instruments: 300})
	dir := t.TempDir()
	srv := icebergrest.Start(t, icebergrest.Options{Token: restToken, ClientID: restClient, ClientSecret: restSecret})
	cred := restClient + ":" + restSecret
	cat := []string{"--iceberg-catalog", "rest", "--iceberg-catalog-uri", srv.URL, "--iceberg-catalog-credential", cred}
	var outputs []string
	run := func(want int, args ...string) result {
		t.Helper()
		res := optlake(t, args...)
		outputs = append(outputs, res.stdout, res.stderr)
		if res.code != want && (want >= 0 || res.code == 0) {
			t.Fatalf("optlake %s: exit %d, want %d\n%s%s", args[0], res.code, want, res.stdout, res.stderr)
		}
		return res
	}
	args := []string{"run", "--api-url", api, "--data-dir", dir, "--endpoints", "instruments"}
	run(0, append(args, "--table-format", "iceberg")...)
	sim.Advance(1)
	run(0, args...)
	res := run(0, append([]string{"lake", "convert", "--to", "iceberg", "--data-dir", dir}, cat...)...)
	tables := icebergTables(t, dir, 3)
	for _, name := range tables {
		if !strings.Contains(res.stdout, name) {
			t.Errorf("lake convert registered no %s in the catalog:\n%s", name, res.stdout)
		}
	}
	sim.Advance(1)
	run(0, append(args, cat...)...)
	// A run in its own process, its catalog settings from the environment.
	sim.Advance(1)
	env := []string{"OPTLAKE_ICEBERG_CATALOG=rest", "OPTLAKE_ICEBERG_CATALOG_URI=" + srv.URL, "OPTLAKE_ICEBERG_CATALOG_CREDENTIAL=" + cred}
	proc := optlakeProcess(t, env, args...)
	outputs = append(outputs, proc.stdout, proc.stderr)
	if proc.code != 0 {
		t.Fatalf("run in a process: exit %d\n%s", proc.code, proc.stderr)
	}

	for _, name := range tables {
		// Two commits through the catalog after its registration at v3.
		loc, err := srv.MetadataLocation(t.Context(), iceberg.DefaultNamespace, name)
		if err != nil || !strings.Contains(loc, "/metadata/00005-") || !strings.HasPrefix(loc, "file:///") {
			t.Errorf("%s: the catalog names %q (%v), want the 5th version, written by the catalog, at an absolute URI", name, loc, err)
		}
	}
	ch := testenv.NewChDB(t)
	ch.Workdir = dir
	check := func(when string) {
		t.Helper()
		for _, c := range []testenv.RESTCatalog{{URL: srv.URL, Credential: cred}, {URL: srv.URL, Token: restToken}} {
			src := func(table string) string {
				s, err := ch.IcebergRESTSource(t.Context(), c, iceberg.DefaultNamespace, table)
				if err != nil {
					t.Fatalf("%s: %v", table, err)
				}
				return s
			}
			checkEachRowOnce(t, ch, tables, src, 4, when+" (read through the REST catalog)")
		}
	}
	check("after two runs in the catalog")

	res = run(0, append([]string{"status", "--data-dir", dir, "--format", "json"}, cat...)...)
	var doc struct {
		Tables []iceberg.TableStatus `json:"iceberg_tables"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(doc.Tables, func(s iceberg.TableStatus) bool { return s.Table == "instruments" })
	if i < 0 || doc.Tables[i].MetadataVersion != 5 || doc.Tables[i].Snapshots != 4 {
		t.Errorf("status in the catalog: %+v; want instruments at metadata version 5 with 4 snapshots", doc.Tables)
	}

	before, _ := srv.MetadataLocation(t.Context(), iceberg.DefaultNamespace, "instruments")
	run(0, append([]string{"compact", "--data-dir", dir, "--to", "2100-01-01", "--iceberg-keep-snapshots", "0s"}, cat...)...)
	if after, _ := srv.MetadataLocation(t.Context(), iceberg.DefaultNamespace, "instruments"); after == before {
		t.Errorf("compaction did not move the catalog's instruments from %s", before)
	}
	check("after a compaction in the catalog")

	files := lakeFiles(t, dir)
	for _, cmd := range [][]string{
		{"compact", "--data-dir", dir, "--to", "2100-01-01", "--iceberg-keep-snapshots", "0s", "--iceberg-orphan-grace", "0s"},
		append(slices.Clone(args), "--iceberg-catalog", "none"),
		{"status", "--data-dir", dir},
		append(slices.Clone(args), "--iceberg-catalog", "sql", "--iceberg-catalog-uri", "sqlite:"+filepath.Join(t.TempDir(), "c.db")),
	} {
		res := run(-1, cmd...)
		if !strings.Contains(res.stderr, "--iceberg-catalog rest --iceberg-catalog-uri") {
			t.Errorf("optlake %s without the rest catalog: %s", cmd[0], lastLine(res.stderr))
		}
	}
	if after := lakeFiles(t, dir); !slices.Equal(after, files) {
		t.Errorf("the refused commands changed the lake's files:\nbefore %v\nafter  %v", files, after)
	}

	// The secrets: config check shows the settings redacted; a wrong
	// credential or token fails in one line that shows neither.
	res = run(0, append([]string{"config", "check", "--api-url", api, "--data-dir", dir, "--iceberg-catalog-token", restToken}, cat...)...)
	for _, key := range []string{"iceberg-catalog-credential:", "iceberg-catalog-token:"} {
		if !strings.Contains(res.stdout, key) {
			t.Errorf("config check shows no %s\n%s", key, res.stdout)
		}
	}
	for _, bad := range [][]string{
		{"--iceberg-catalog-credential", restClient + ":wrong-" + restSecret},
		{"--iceberg-catalog-token", "wrong-" + restToken},
	} {
		res := run(-1, append(append(slices.Clone(args), "--iceberg-catalog", "rest", "--iceberg-catalog-uri", srv.URL), bad...)...)
		if !strings.Contains(lastLine(res.stderr), "iceberg catalog "+srv.URL) {
			t.Errorf("a run with %s: %s", bad[0], lastLine(res.stderr))
		}
	}
	for _, out := range outputs {
		if strings.Contains(out, restSecret) || strings.Contains(out, restToken) {
			t.Errorf("a REST catalog secret is in an output:\n%s", out)
		}
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && (strings.Contains(string(b), restSecret) || strings.Contains(string(b), restToken)) {
			t.Errorf("a REST catalog secret is in %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, denied := srv.Stats(); denied < 2 {
		t.Errorf("the server refused %d requests, want the two with wrong credentials at least", denied)
	}
}
