package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/internal/testenv/icebergrest"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/venuesim"
)

// kill -9 at every step of an instruments snapshot's Iceberg commit, on a
// local disk and on a bucket (a real versitygw), in the catch-up of a
// snapshot the Parquet sink missed (its raw body is archived, so the next
// run loads it again): before the file is opened, the data file written
// (not appended yet), the manifest, the manifest list, the metadata
// version (the commit done, not yet in the load ledger). After the kill
// ClickHouse (chDB) reads the table at its last commit: the first run's
// rows, and the caught-up snapshot's too once its metadata was written.
// The next run catches up again: every table then reads the rows of its
// Parquet files (count and hash), each of the three snapshots exactly once.
//
// The same for each kind of catalog (--iceberg-catalog sql on SQLite and on
// PostgreSQL), where the commit has one more step: the metadata file is
// written (not committed yet), then the catalog's pointer swapped to it
// (committed); chDB reads each table at the version the catalog names,
// from the catalog's database itself. On the bucket the catalogs run the
// steps around the swap (the others are the same code as on the disk).
func TestIcebergKill9AtEachStep(t *testing.T) {
	t.Parallel()
	type step struct {
		step      string
		committed bool // the killed run's instruments commit is visible
	}
	steps := []step{
		{"opened", false},
		{"iceberg-file", false},
		{"iceberg-manifest", false},
		{"iceberg-manifest-list", false},
		{"iceberg-metadata", true},
	}
	for _, cat := range crashCatalogs {
		steps := steps
		switch {
		case cat.name == "rest":
			// The REST server writes the metadata file: the client's
			// steps end with the catalog's answer to its commit.
			steps = append(steps[:len(steps)-1:len(steps)-1], step{"iceberg-catalog", true})
		case cat.open != nil:
			steps = append(steps[:len(steps)-1:len(steps)-1], step{"iceberg-metadata", false}, step{"iceberg-catalog", true})
		}
		for _, onBucket := range []bool{false, true} {
			if onBucket && cat.name == "rest" {
				continue // lake/iceberg's TestCompactOnBucket/rest: the server writes through the lake's store
			}
			for _, s := range steps {
				if onBucket && (s.step == "opened" || cat.open != nil && !strings.HasSuffix(s.step, "metadata") && !strings.HasSuffix(s.step, "catalog")) {
					continue // no Iceberg step, or the same code as on the disk
				}
				t.Run(fmt.Sprintf("%s/%s/bucket=%v", cat.name, s.step, onBucket), func(t *testing.T) {
					t.Parallel()
					icebergKillAt(t, cat, s.step, s.committed, onBucket)
				})
			}
		}
	}
}

// crashCatalog is a catalog kind TestIcebergKill9AtEachStep runs with.
type crashCatalog struct {
	name string
	// open makes a fresh catalog: optlake's arguments that use it, and
	// the chDB table function that reads its iceberg_tables, or (rest) how
	// chDB's REST client reaches it. nil: none.
	open func(t *testing.T) (args []string, pointer string, rest *testenv.RESTCatalog)
}

var crashCatalogs = []crashCatalog{
	{name: "none"},
	{name: "sqlite", open: func(t *testing.T) ([]string, string, *testenv.RESTCatalog) {
		f := filepath.Join(t.TempDir(), "catalog.db")
		return []string{"--iceberg-catalog", "sql", "--iceberg-catalog-uri", "sqlite:" + f}, fmt.Sprintf("sqlite('%s', 'iceberg_tables')", f), nil
	}},
	{name: "postgres", open: func(t *testing.T) ([]string, string, *testenv.RESTCatalog) {
		dsn := testenv.PostgresDSN(t)
		return []string{"--iceberg-catalog", "sql", "--iceberg-catalog-uri", dsn}, testenv.PostgresTable(t, dsn, "iceberg_tables"), nil
	}},
	{name: "rest", open: func(t *testing.T) ([]string, string, *testenv.RESTCatalog) {
		srv := icebergrest.Start(t, icebergrest.Options{Token: restToken})
		return []string{"--iceberg-catalog", "rest", "--iceberg-catalog-uri", srv.URL, "--iceberg-catalog-token", restToken}, "",
			&testenv.RESTCatalog{URL: srv.URL, Token: restToken}
	}},
}

// catalogVersions reads, with chDB, the metadata file (relative to its
// table's folder) that the catalog pointer names for each table.
func catalogVersions(t *testing.T, ch *testenv.ChDB, pointer string) map[string]string {
	t.Helper()
	out, err := ch.Query(context.Background(), "SELECT table_name, metadata_location FROM "+pointer+" FORMAT TSV;")
	if err != nil {
		t.Fatalf("the catalog's rows: %v", err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		name, loc, _ := strings.Cut(line, "\t")
		if i := strings.Index(loc, "/metadata/"); i >= 0 {
			m[name] = loc[i+1:]
		}
	}
	return m
}

func icebergKillAt(t *testing.T, cat crashCatalog, step string, committed, onBucket bool) {
	// The second snapshot is the first of a new day, whose folder a file
	// blocks: its Parquet load fails and stays pending in the ledger.
	clk := pinClock(time.Date(2026, 11, 23, 23, 59, 0, 0, time.UTC))
	sim, api := startSim(t, venuesim.Config{Seed: 4, Instruments: 400})
	dir := t.TempDir()
	dataDir := dir
	ch := testenv.NewChDB(t)
	// With a catalog, each table is read at the version it names
	// (refresh reads them again).
	var catArgs []string
	var pointer string
	var rest *testenv.RESTCatalog
	if cat.open != nil {
		catArgs, pointer, rest = cat.open(t)
	}
	versions := map[string]string{}
	refresh := func() {
		if pointer != "" {
			versions = catalogVersions(t, ch, pointer)
		}
	}
	at := func(table string) string {
		if pointer == "" {
			return ""
		}
		if versions[table] == "" {
			t.Fatalf("the catalog has no row of %s: %v", table, versions)
		}
		return fmt.Sprintf(", SETTINGS iceberg_metadata_file_path = '%s'", versions[table])
	}
	src := func(table string) string { return fmt.Sprintf("icebergLocal('%s'%s)", table, at(table)) }
	if rest != nil {
		// chDB's REST client asks the catalog for the current version.
		src = func(table string) string {
			s, err := ch.IcebergRESTSource(context.Background(), *rest, iceberg.DefaultNamespace, table)
			if err != nil {
				t.Fatalf("%s: %v", table, err)
			}
			return s
		}
	}
	if onBucket {
		g := testenv.StartVersityGW(t, "lake")
		g.SetCredentials(t)
		dataDir, dir = g.URL("lake", "ice"), filepath.Join(g.Dir(), "lake", "ice")
		src = func(table string) string {
			return fmt.Sprintf("icebergS3('%s/lake/ice/%s/', '%s', '%s'%s)", g.Endpoint(), table, testenv.S3AccessKey, testenv.S3SecretKey, at(table))
		}
	}
	ch.Workdir = dir
	const ttl = time.Second // the killed run's lease keeps the bucket prefix this long
	args := append([]string{"run", "--api-url", api, "--data-dir", dataDir, "--endpoints", "instruments", "--catch-up-budget", "0", "--lease-ttl", ttl.String()}, catArgs...)
	if res := clk.optlake(t, append(args, "--table-format", "iceberg")...); res.code != 0 {
		t.Fatalf("first run: exit %d\n%s", res.code, res.stderr)
	}
	// The rows of instruments at its current Iceberg snapshot.
	rows := func() string {
		t.Helper()
		refresh()
		n, err := ch.Query(context.Background(), "SELECT count() FROM "+src("instruments")+" FORMAT TSV;")
		if err != nil {
			t.Fatalf("instruments after the kill at %s: %v", step, err)
		}
		return n
	}
	first := rows()

	block := filepath.Join(dir, "instruments", "date=2026-11-24")
	if err := os.WriteFile(block, []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	sim.Advance(1)
	clk.next()
	if res := clk.optlake(t, args...); res.code == 0 {
		t.Fatalf("the run with the day's folder blocked succeeded:\n%s", res.stdout)
	}
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}

	cmd, _, stderr := startCLICrashing(t, step, args...)
	if err := cmd.Wait(); exitCode(err) != -1 {
		t.Fatalf("the catch-up was not killed at %s: %v\n%s", step, err, stderr)
	}
	if got := rows(); committed == (got == first) {
		t.Errorf("instruments rows after the kill at %s: %s (the first run's %s); want the caught-up commit visible: %v", step, got, first, committed)
	}

	time.Sleep(ttl)
	sim.Advance(1)
	clk.next()
	if res := clk.optlake(t, args...); res.code != 0 || !strings.Contains(res.stdout, "caught up 1 of 1") {
		t.Fatalf("run after the kill at %s: exit %d\n%s%s", step, res.code, res.stdout, res.stderr)
	}
	// Three snapshots, each row once.
	tables := icebergTables(t, dir, 3)
	refresh()
	checkEachRowOnce(t, ch, tables, src, 3, "after the kill at "+step+" and a run")
}

// checkEachRowOnce checks that each table (src opens it) reads the rows of
// the Parquet files it references, and that instruments holds snaps
// snapshots, no row twice.
func checkEachRowOnce(t *testing.T, ch *testenv.ChDB, tables []string, src func(string) string, snaps int, when string) {
	t.Helper()
	digests := icebergDigests(t, ch, tables, src, "SELECT uniqExact(snapshot_time, run_id), count() - uniqExact(snapshot_time, run_id, instrument_name) FROM "+src("instruments")+" FORMAT TSV;")
	for i, table := range tables {
		if ice, files := digests[2*i+1], digests[2*i]; ice != files || strings.HasPrefix(ice, "0\t") {
			t.Errorf("%s %s: Iceberg %s, Parquet files %s", table, when, ice, files)
		}
	}
	if got, want := digests[len(digests)-1], fmt.Sprintf("%d\t0", snaps); got != want {
		t.Errorf("instruments %s: (snapshots, rows twice) = %q, want %d and 0", when, got, snaps)
	}
}

// icebergDigests is testenv's IcebergDigest of each table (its Iceberg
// table src(table); its Parquet files under table/ in ch.Workdir) in two
// chDB processes instead of three per table (chDB's start-ups were most
// of TestIcebergKill9AtEachStep's time): the digest of the Parquet files
// the table references and the Iceberg table's, table after table, then
// the result of more (one line each).
func icebergDigests(t *testing.T, ch *testenv.ChDB, tables []string, src func(string) string, more ...string) []string {
	t.Helper()
	srcs := make([]string, len(tables))
	for i, table := range tables {
		srcs[i] = src(table)
	}
	structs, err := ch.Structures(context.Background(), srcs)
	if err != nil {
		t.Fatal(err)
	}
	var q strings.Builder
	const digest = "SELECT count(), sum(cityHash64(formatRow('TSV', *))) FROM %s FORMAT TSV;\n"
	for i, table := range tables {
		// The files the table references: a snapshot loaded again after a
		// kill is a new version of its file, the killed run's stays
		// unreferenced until the upkeep deletes it.
		fmt.Fprintf(&q, digest, fmt.Sprintf("file('%s/date=*/*.parquet', Parquet, '%s') WHERE _file IN (SELECT DISTINCT _file FROM %s)", table, structs[i], srcs[i]))
		fmt.Fprintf(&q, digest, srcs[i])
	}
	for _, m := range more {
		q.WriteString(m + "\n")
	}
	out, err := ch.Query(context.Background(), q.String())
	if err != nil {
		t.Fatalf("digests: %v", err)
	}
	lines := strings.Split(out, "\n")
	if len(lines) != 2*len(tables)+len(more) {
		t.Fatalf("digests: %d lines, want %d:\n%s", len(lines), 2*len(tables)+len(more), out)
	}
	return lines
}
