package testenv

import (
	"context"
	"fmt"
	"hash/crc32"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// ChDB is a current ClickHouse (chDB: libchdb, embedded in node through
// tools/chdb/query.mjs) whose databases live in a session directory for the
// test's lifetime. It speaks SQL only: no native protocol, no clusters, so
// optlake's own client cannot reach it; its DDL, views and queries can.
type ChDB struct {
	t                 testing.TB
	node, script, dir string
	// Workdir, when set, is the queries' working directory: chDB's
	// user_files_path is ".", and the table functions that check it
	// (icebergLocal) read only relative paths under it.
	Workdir string

	mu   sync.Mutex
	made map[string]bool // the REST catalogs' databases made in the session
}

// NewChDB returns a chDB with an empty session directory. When node or the
// chdb module (scripts/deps.sh installs it) is missing, the test is skipped
// locally and fails in CI.
func NewChDB(t testing.TB) *ChDB {
	t.Helper()
	node, script, err := chdbTool()
	if err != nil {
		unavailable(t, "%v: run `make deps`", err)
		return nil
	}
	return &ChDB{t: t, node: node, script: script, dir: t.TempDir()}
}

// Query runs sql (one or more statements, each ended by ";") in the session
// and returns every result, TabSeparated as clickhouse-client prints it,
// without the final newline. DateTime('UTC') and DateTime64(3, 'UTC')
// columns print in UTC.
//
// When the reader process dies of a signal (libchdb crashes, rarely, on a
// loaded machine) on SQL that only reads, the crash is logged in the test's
// output and the SQL runs once more in a new process; a crash while changing
// the session (or twice) is the query's error. A query that ClickHouse
// answers, or refuses, is never run again.
func (c *ChDB) Query(ctx context.Context, sql string) (string, error) {
	out, crashed, err := c.run(ctx, sql)
	if crashed && readOnlySQL(sql) {
		c.t.Logf("chdb crashed (%v), running the query again in a new process", err)
		out, _, err = c.run(ctx, sql)
	}
	if err != nil {
		return "", fmt.Errorf("chdb: %w", err)
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

// run runs sql in one reader process; crashed: the process died of a
// signal that the context did not send.
func (c *ChDB) run(ctx context.Context, sql string) (out []byte, crashed bool, err error) {
	cmd := exec.CommandContext(ctx, c.node, c.script, c.dir)
	cmd.Dir = filepath.Dir(c.script)
	if c.Workdir != "" {
		cmd.Dir = c.Workdir
	}
	out, err = runSQL(cmd, sql)
	crashed = err != nil && ctx.Err() == nil && cmd.ProcessState != nil && !cmd.ProcessState.Exited()
	return out, crashed, err
}

// readOnlySQL reports whether every statement of sql only reads (or sets a
// setting), so that running it again cannot change what the session holds.
// A ";" inside a string literal splits a statement in two, whose second half
// reads as not read-only: unsure counts as a change.
func readOnlySQL(sql string) bool {
	for _, stmt := range strings.Split(sql, ";") {
		f := strings.Fields(stmt)
		if len(f) == 0 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "SELECT", "WITH", "DESCRIBE", "DESC", "SHOW", "EXPLAIN", "SET":
		default:
			return false
		}
	}
	return true
}

// chdbTool locates node and tools/chdb/query.mjs, and checks that the chdb
// module and its libchdb are installed.
func chdbTool() (node, script string, err error) {
	return nodeTool("chdb", "chdb/package.json", "@chdb/lib-linux-x64-gnu/libchdb.so")
}

// IcebergDigest reads the Iceberg table at path (relative to Workdir) with
// icebergLocal and its Parquet files (path/date=*/*.parquet) with file()
// under the same column types, and returns each one's row count and
// order-free hash of every row ("count\thash"), filtered by where ("" for
// none) on the Iceberg side.
func (c *ChDB) IcebergDigest(ctx context.Context, path, where string) (iceberg, files string, err error) {
	return c.icebergDigest(ctx, fmt.Sprintf("icebergLocal('%s')", path), path, where)
}

// IcebergS3Digest is IcebergDigest with the Iceberg table read from an S3
// server with icebergS3 (url: http://host:port/bucket/prefix/table/, with
// the root account's keys of versitygw) and its Parquet files from path
// (relative to Workdir: the server's folder of the same objects).
func (c *ChDB) IcebergS3Digest(ctx context.Context, url, path, where string) (iceberg, files string, err error) {
	return c.icebergDigest(ctx, fmt.Sprintf("icebergS3('%s', '%s', '%s')", url, S3AccessKey, S3SecretKey), path, where)
}

func (c *ChDB) icebergDigest(ctx context.Context, table, path, where string) (iceberg, files string, err error) {
	structs, err := c.Structures(ctx, []string{table})
	if err != nil {
		return "", "", err
	}
	const digest = "SELECT count(), sum(cityHash64(formatRow('TSV', *))) FROM %s %s FORMAT TSV;\n"
	out, err := c.Query(ctx, fmt.Sprintf(digest, fmt.Sprintf("file('%s/date=*/*.parquet', Parquet, '%s')", path, structs[0]), "")+fmt.Sprintf(digest, table, where))
	if err != nil {
		return "", "", err
	}
	files, iceberg, ok := strings.Cut(out, "\n")
	if !ok || strings.Contains(iceberg, "\n") {
		return "", "", fmt.Errorf("digests of %s: %q", path, out)
	}
	return iceberg, files, nil
}

// Structures returns the columns of each of srcs (a table or table
// function) as file()'s structure argument reads them ("name Type, …",
// quotes escaped for a '…' literal), all read in one process.
func (c *ChDB) Structures(ctx context.Context, srcs []string) ([]string, error) {
	const end = "end-of-describe"
	var q strings.Builder
	for _, src := range srcs {
		fmt.Fprintf(&q, "DESCRIBE %s FORMAT TSV;\nSELECT '%s' FORMAT TSV;\n", src, end)
	}
	desc, err := c.Query(ctx, q.String())
	if err != nil {
		return nil, fmt.Errorf("describe: %w", err)
	}
	descs := strings.Split(strings.TrimSuffix(desc, end), "\n"+end+"\n")
	if len(descs) != len(srcs) {
		return nil, fmt.Errorf("describe: %d results for %d tables:\n%s", len(descs), len(srcs), desc)
	}
	out := make([]string, len(srcs))
	for i, d := range descs {
		var cols []string
		for _, line := range strings.Split(strings.TrimSpace(d), "\n") {
			f := strings.Split(line, "\t")
			if len(f) < 2 {
				return nil, fmt.Errorf("describe %s: %q", srcs[i], line)
			}
			cols = append(cols, f[0]+" "+strings.ReplaceAll(f[1], `\'`, "''"))
		}
		out[i] = strings.Join(cols, ", ")
	}
	return out, nil
}

// IcebergCatalogSource is the table function that opens the version of
// the Iceberg table at path (relative to Workdir) that a SQL catalog
// names: chDB reads the pointer itself from the catalog's iceberg_tables
// (pointer is the table function that reads it: postgresql(…) or
// sqlite(…)), where namespace and name identify the table, and
// icebergLocal opens that metadata file (iceberg_metadata_file_path).
func (c *ChDB) IcebergCatalogSource(ctx context.Context, pointer, namespace, name, path string) (string, error) {
	loc, err := c.Query(ctx, fmt.Sprintf("SELECT metadata_location FROM %s WHERE table_namespace = '%s' AND table_name = '%s' FORMAT TSV;", pointer, namespace, name))
	if err != nil {
		return "", err
	}
	i := strings.Index(loc, "/metadata/")
	if i < 0 || strings.Contains(loc, "\n") {
		return "", fmt.Errorf("catalog row of %s.%s: %q", namespace, name, loc)
	}
	return fmt.Sprintf("icebergLocal('%s', SETTINGS iceberg_metadata_file_path = '%s')", path, loc[i+1:]), nil
}

// IcebergCatalogDigest is IcebergDigest of the version of the table that
// a SQL catalog names (IcebergCatalogSource).
func (c *ChDB) IcebergCatalogDigest(ctx context.Context, pointer, namespace, name, path, where string) (iceberg, files string, err error) {
	table, err := c.IcebergCatalogSource(ctx, pointer, namespace, name, path)
	if err != nil {
		return "", "", err
	}
	return c.icebergDigest(ctx, table, path, where)
}

// RESTCatalog is how chDB reaches an Iceberg REST catalog (its base URL,
// without /v1): with OAuth2 client credentials (Credential, CLIENT:SECRET)
// or a static bearer token (Token).
type RESTCatalog struct {
	URL, Credential, Token, Warehouse string
}

// IcebergRESTSource is the table that opens table name of namespace
// through the REST catalog c: a database of chDB's own REST catalog
// client (DataLakeCatalog, catalog_type 'rest'), which asks the catalog
// for the table's current metadata file and reads the table from there.
// The database is made in the session by the first call per catalog and
// kept; chDB resolves the table's file:// location under Workdir.
func (c *ChDB) IcebergRESTSource(ctx context.Context, cat RESTCatalog, namespace, name string) (string, error) {
	db := fmt.Sprintf("rest_%08x", crc32.ChecksumIEEE([]byte(cat.URL+"\x00"+cat.Credential+"\x00"+cat.Token)))
	auth := fmt.Sprintf("catalog_credential = '%s'", cat.Credential)
	if cat.Token != "" {
		auth = fmt.Sprintf("auth_header = 'Authorization: Bearer %s'", cat.Token)
	}
	wh := cat.Warehouse
	if wh == "" {
		wh = "optlake"
	}
	// The second argument (the local storage's format) stands for the
	// storage credentials chDB otherwise insists on for a local table.
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.made[db] {
		if _, err := c.Query(ctx, fmt.Sprintf("SET allow_database_iceberg = 1; CREATE DATABASE IF NOT EXISTS %s ENGINE = DataLakeCatalog('%s/v1', 'Parquet') SETTINGS catalog_type = 'rest', warehouse = '%s', %s;", db, cat.URL, wh, auth)); err != nil {
			return "", err
		}
		if c.made == nil {
			c.made = map[string]bool{}
		}
		c.made[db] = true
	}
	return fmt.Sprintf("%s.`%s.%s`", db, namespace, name), nil
}

// IcebergRESTDigest is IcebergDigest of table name read through the REST
// catalog c (IcebergRESTSource); path is its folder under Workdir.
func (c *ChDB) IcebergRESTDigest(ctx context.Context, cat RESTCatalog, namespace, name, path, where string) (iceberg, files string, err error) {
	table, err := c.IcebergRESTSource(ctx, cat, namespace, name)
	if err != nil {
		return "", "", err
	}
	return c.icebergDigest(ctx, table, path, where)
}
