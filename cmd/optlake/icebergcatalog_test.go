package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/lake/iceberg"
	"github.com/optlake/optlake/venuesim"
)

// An Iceberg lake made without a catalog moves into a SQL catalog on
// PostgreSQL: `lake convert --iceberg-catalog sql` registers every table,
// later runs and a compaction commit through the catalog, status shows the
// catalog's versions, and ClickHouse (chDB) reads each table at the version
// the catalog's row names (read by chDB itself with postgresql()) with the
// rows of its Parquet files, four snapshots each once. The DSN's password
// shows up in no output, error or file of the lake, and config check shows
// the setting redacted.
func TestIcebergCatalogEndToEnd(t *testing.T) {
	t.Parallel()
	sim, api := startSim(t, venuesim.Config{Seed: 45, Instruments: 300})
	dir := t.TempDir()
	dsn := testenv.PostgresDSN(t)
	cat := []string{"--iceberg-catalog", "sql", "--iceberg-catalog-uri", dsn}
	var outputs []string
	// run runs optlake and wants exit want (-1: any failure).
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
	if !strings.Contains(res.stdout, "registered in the catalog") {
		t.Errorf("lake convert:\n%s", res.stdout)
	}
	for range 2 {
		sim.Advance(1)
		run(0, append(args, cat...)...)
	}

	ch := testenv.NewChDB(t)
	ch.Workdir = dir
	pointer := testenv.PostgresTable(t, dsn, "iceberg_tables")
	versions := catalogVersions(t, ch, pointer)
	src := func(table string) string {
		return fmt.Sprintf("icebergLocal('%s', SETTINGS iceberg_metadata_file_path = '%s')", table, versions[table])
	}
	for _, name := range tables {
		// Two commits through the catalog after its registration at v3
		// (a table's v1 is its creation).
		if !strings.HasPrefix(versions[name], "metadata/00005-") {
			t.Errorf("%s: the catalog names %q, want the 5th version, written by the catalog", name, versions[name])
		}
	}
	check := func(when string) {
		t.Helper()
		checkEachRowOnce(t, ch, tables, src, 4, when+" (read through the catalog)")
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

	run(0, append([]string{"compact", "--data-dir", dir, "--to", "2100-01-01", "--iceberg-keep-snapshots", "0s"}, cat...)...)
	before := versions["instruments"]
	versions = catalogVersions(t, ch, pointer)
	if versions["instruments"] == before {
		t.Errorf("compaction did not move the catalog's instruments row from %s", before)
	}
	check("after a compaction in the catalog")

	// Commands without the catalog (a cron missing its settings) refuse,
	// naming the flags, and change no file: before the lake recorded its
	// catalog, such a compact expired every file of the catalog's tables
	// and a run dropped every catalog commit, exit 0.
	files := lakeFiles(t, dir)
	for _, cmd := range [][]string{
		{"compact", "--data-dir", dir, "--to", "2100-01-01", "--iceberg-keep-snapshots", "0s", "--iceberg-orphan-grace", "0s"},
		append(slices.Clone(args), "--iceberg-catalog", "none"),
		{"status", "--data-dir", dir},
	} {
		res := run(-1, cmd...)
		if !strings.Contains(res.stderr, "--iceberg-catalog sql --iceberg-catalog-uri") {
			t.Errorf("optlake %s without the catalog: %s", cmd[0], lastLine(res.stderr))
		}
	}
	if after := lakeFiles(t, dir); !slices.Equal(after, files) {
		t.Errorf("the refused commands changed the lake's files:\nbefore %v\nafter  %v", files, after)
	}
	check("after the refused commands")

	// The password: redacted by config check, absent from a failure to
	// reach the catalog, from every output and every file of the lake.
	res = run(0, append([]string{"config", "check", "--api-url", api, "--data-dir", dir}, cat...)...)
	if !strings.Contains(res.stdout, "iceberg-catalog-uri:") {
		t.Errorf("config check shows no iceberg-catalog-uri:\n%s", res.stdout)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.Host = ln.Addr().String() // a port no server listens on
	ln.Close()
	down := u.String()
	res = run(-1, append(args, "--iceberg-catalog", "sql", "--iceberg-catalog-uri", down)...)
	if !strings.Contains(res.stderr, "catalog") {
		t.Errorf("a run whose catalog is down: %s", lastLine(res.stderr))
	}
	for _, out := range outputs {
		if strings.Contains(out, testenv.PostgresPassword) {
			t.Errorf("the catalog's password is in an output:\n%s", out)
		}
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), testenv.PostgresPassword) {
			t.Errorf("the catalog's password is in %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// lakeFiles is every file of the lake in dir with its size, sorted.
func lakeFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if !strings.HasPrefix(rel, "_") && !strings.HasPrefix(rel, ".") {
			out = append(out, fmt.Sprintf("%s %d", rel, info.Size()))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// The catalog URI's password shows nowhere in config check's output nor in
// a run's failure to reach the catalog, whatever the URI's shape: a
// password in the userinfo, ?password=, ?sslpassword=, a keyword/value
// DSN, a JDBC URL (Redacted masked only the first, and config check and
// the run's redactor knew only that one).
func TestIcebergCatalogURINeverShown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String() // closed below: nothing listens there
	ln.Close()
	for _, c := range []struct{ uri, secret string }{
		{"postgres://u:s3cretA@" + addr + "/db", "s3cretA"},
		{"postgres://u@" + addr + "/db?password=s3cretB", "s3cretB"},
		{"postgresql://u@" + addr + "/db?sslmode=disable&sslpassword=s3cretC", "s3cretC"},
		{"host=127.0.0.1 user=u password=s3cretD dbname=db", "s3cretD"},
		{"jdbc:postgresql://" + addr + "/db?user=u&password=s3cretE", "s3cretE"},
	} {
		dir := t.TempDir()
		cat := []string{"--iceberg-catalog", "sql", "--iceberg-catalog-uri", c.uri}
		check := optlake(t, append([]string{"config", "check", "--api-url", "http://" + addr, "--data-dir", dir}, cat...)...)
		if check.code != 0 || !strings.Contains(check.stdout, "iceberg-catalog-uri:") {
			t.Errorf("config check (%s): exit %d\n%s%s", c.secret, check.code, check.stdout, check.stderr)
		}
		run := optlake(t, append([]string{"run", "--api-url", "http://" + addr, "--data-dir", dir, "--endpoints", "instruments", "--table-format", "iceberg"}, cat...)...)
		if run.code == 0 || !strings.Contains(run.stderr, "iceberg catalog") {
			t.Errorf("a run with an unreachable catalog (%s): exit %d: %s", c.secret, run.code, lastLine(run.stderr))
		}
		for _, out := range []string{check.stdout, check.stderr, run.stdout, run.stderr} {
			if strings.Contains(out, c.secret) {
				t.Errorf("the catalog's password %s is in an output:\n%s", c.secret, out)
			}
		}
	}
}
