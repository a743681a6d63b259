package clickhouse

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/optlake/optlake/schema"
)

// currentVersion reads the highest applied migration (0 when the database
// or the migrations table does not exist). It refuses a database laid out
// for the other mode: a cluster schema (a Distributed migrations table)
// without tg.Cluster, or a single-server schema with it.
func currentVersion(ctx context.Context, conn driver.Conn, tg schema.Target) (int, error) {
	var engines []string
	rows, err := conn.Query(ctx, "SELECT engine FROM system.tables WHERE database = ? AND name = ?", tg.DB, schema.MigrationsTable)
	if err != nil {
		return 0, err
	}
	for rows.Next() {
		var e string
		if err := rows.Scan(&e); err != nil {
			rows.Close()
			return 0, err
		}
		engines = append(engines, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(engines) == 0 {
		return 0, nil
	}
	switch distributed := engines[0] == "Distributed"; {
	case distributed && !tg.OnCluster():
		return 0, &ClusterMismatchError{Database: tg.DB}
	case !distributed && tg.OnCluster():
		return 0, &ClusterMismatchError{Database: tg.DB, Cluster: tg.Cluster}
	}
	var v uint32
	if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT max(version) FROM %s.%s", schema.Quote(tg.DB), schema.MigrationsTable)).Scan(&v); err != nil {
		return 0, err
	}
	return int(v), nil
}

// checkCluster makes sure the connected server knows tg's cluster.
func checkCluster(ctx context.Context, conn driver.Conn, tg schema.Target) error {
	if !tg.OnCluster() {
		return nil
	}
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.clusters WHERE cluster = ?", tg.Cluster).Scan(&n); err != nil {
		return fmt.Errorf("look up cluster %s: %w", tg.Cluster, err)
	}
	if n == 0 {
		return fmt.Errorf("cluster %s is not defined on the server (remote_servers in its config)", tg.Cluster)
	}
	return nil
}

// Applied is one migration applied by Migrate.
type Applied struct {
	Version int
	Name    string
}

// migrate creates the database and applies every pending migration in
// order, recording each one. Statements are idempotent, so a migration
// interrupted half-way is completed by the next migrate. On a cluster
// every statement runs ON CLUSTER (the server waits until every node has
// run it, at most distributed_ddl_task_timeout, 180s by default) and the
// record goes into the Distributed migrations table, once for the cluster.
func migrate(ctx context.Context, conn driver.Conn, tg schema.Target, log *slog.Logger) ([]Applied, error) {
	if err := checkCluster(ctx, conn, tg); err != nil {
		return nil, err
	}
	// Before creating anything: refuse a database of the other mode.
	if _, err := currentVersion(ctx, conn, tg); err != nil {
		return nil, err
	}
	if err := conn.Exec(ctx, schema.CreateDatabaseDDL(tg)); err != nil {
		return nil, fmt.Errorf("create database: %w", err)
	}
	for _, stmt := range schema.MigrationsTableStatements(tg) {
		if err := conn.Exec(ctx, stmt); err != nil {
			return nil, fmt.Errorf("create migrations table: %w", err)
		}
	}
	have, err := currentVersion(ctx, conn, tg)
	if err != nil {
		return nil, err
	}
	var done []Applied
	for _, m := range schema.Migrations() {
		if m.Version <= have {
			continue
		}
		for _, a := range m.Actions(tg) {
			var err error
			if a.Rebuild != nil {
				err = rebuild(ctx, conn, tg, *a.Rebuild, log)
			} else if err = conn.Exec(ctx, a.SQL); err != nil {
				err = fmt.Errorf("%w\n%s", err, firstLine(a.SQL))
			}
			if err != nil {
				return done, fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
			}
		}
		if schema.RekeysAccountTables(m.Version) {
			if err := rekeyAccountTables(ctx, conn, tg, log); err != nil {
				return done, fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
			}
		}
		// An INSERT ... VALUES sent as a query waits forever on 18.16's
		// native protocol: insert as a one-row batch.
		batch, err := conn.PrepareBatch(ctx, fmt.Sprintf("INSERT INTO %s.%s (%s)", schema.Quote(tg.DB), schema.MigrationsTable, schema.MigrationsColumns()))
		if err == nil {
			if err = batch.Append(uint32(m.Version), m.Name, m.ChecksumFor(tg), time.Now().UTC()); err == nil {
				err = batch.Send()
			} else {
				batch.Abort()
			}
		}
		if err != nil {
			return done, fmt.Errorf("record migration %d: %w", m.Version, err)
		}
		log.Info("migration applied", "version", m.Version, "name", m.Name, "database", tg.DB)
		done = append(done, Applied{m.Version, m.Name})
	}
	return done, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Migrate brings the database to the latest schema version and returns the
// migrations it applied (none when up to date). With Options.Cluster it
// migrates the database on every node of the cluster.
func (s *Sink) Migrate(ctx context.Context) ([]Applied, int, error) {
	o := *s.chOpts
	o.Auth.Database = "default"
	conn, err := openConn(&o)
	if err != nil {
		return nil, 0, s.wrap("connect", err)
	}
	defer conn.Close()
	if err := s.retry(ctx, "connect", func() error { return conn.Ping(ctx) }); err != nil {
		return nil, 0, s.wrap("connect", err)
	}
	v, err := conn.ServerVersion()
	if err != nil {
		return nil, 0, s.wrap("server version", err)
	}
	f := schema.FeaturesFor(int(v.Version.Major), int(v.Version.Minor))
	applied, err := migrate(ctx, conn, s.target(f), s.log)
	if err != nil {
		return applied, 0, s.wrap("migrate", err)
	}
	return applied, schema.LatestVersion(), nil
}

// rebuild runs r (schema.Rebuild) from wherever an earlier, interrupted
// attempt left the table, judged by the stored (local, on a cluster)
// tables' columns on the connected server:
//
//   - the table has schema.SnapshotMs: rebuilt; on a cluster the
//     Distributed table is made anew if it lacks the column; leftovers are
//     dropped;
//   - the table is missing and the copy is there: the crash came between
//     the swap's two renames (or after a Rename of its own failed): the
//     copy takes the name, then as above;
//   - the table is missing and there is no copy: nothing to rebuild;
//   - otherwise (the old layout): the whole rebuild; a copy half-filled by
//     an interrupted attempt is dropped and made again.
func rebuild(ctx context.Context, conn driver.Conn, tg schema.Target, r schema.Rebuild, log *slog.Logger) error {
	stored, copyStored := r.Table, r.New
	if tg.OnCluster() {
		stored, copyStored = r.Table+schema.LocalSuffix, r.New+schema.LocalSuffix
	}
	cols, err := columnsOf(ctx, conn, tg.DB, stored)
	if err != nil {
		return fmt.Errorf("rebuild %s: list columns: %w", r.Table, err)
	}
	var stmts []string
	switch {
	case cols[schema.SnapshotMs]:
		if tg.OnCluster() {
			dist, err := columnsOf(ctx, conn, tg.DB, r.Table)
			if err != nil {
				return fmt.Errorf("rebuild %s: list columns: %w", r.Table, err)
			}
			if !dist[schema.SnapshotMs] {
				stmts = append(stmts, r.Redistribute...)
			}
		}
		stmts = append(stmts, r.Cleanup...)
	case len(cols) == 0:
		cp, err := columnsOf(ctx, conn, tg.DB, copyStored)
		if err != nil {
			return fmt.Errorf("rebuild %s: list columns: %w", r.Table, err)
		}
		if !cp[schema.SnapshotMs] {
			return nil
		}
		log.Warn("finishing the rebuild of a table an interrupted migrate left renamed away", "table", r.Table, "database", tg.DB)
		stmts = slices.Concat(r.Rename, r.Redistribute, r.Cleanup)
	default:
		log.Info("rebuilding table with the millisecond key", "table", r.Table, "database", tg.DB)
		stmts = r.All()
	}
	for _, st := range stmts {
		if err := conn.Exec(ctx, st); err != nil {
			return fmt.Errorf("rebuild %s: %w\n%s", r.Table, err, firstLine(st))
		}
	}
	return nil
}

// rekeyAccountTables rebuilds every inferred (account) table of the
// database (those with the columns of schema.AccountKey, under any name
// but the fixed tables') with the millisecond key, where the server's time
// columns have second precision. Their columns are the server's: whatever
// the payloads made them.
func rekeyAccountTables(ctx context.Context, conn driver.Conn, tg schema.Target, log *slog.Logger) error {
	if !schema.AccountTable("x").HasSnapshotMs(tg.Features) {
		return nil
	}
	names, err := accountTables(ctx, conn, tg)
	if err != nil {
		return fmt.Errorf("list account tables: %w", err)
	}
	for _, name := range names {
		t := schema.AccountTable(name)
		// The public table's columns: on a cluster the Distributed table,
		// which keeps the comments 18.16's Replicated tables lack.
		cols, err := serverColumns(ctx, conn, tg.DB, name)
		if err != nil {
			return fmt.Errorf("rebuild %s: list columns: %w", name, err)
		}
		if len(cols) == 0 {
			// Renamed away by an interrupted attempt: the copy has the
			// columns (rebuild only finishes the swap then).
			cols, err = serverColumns(ctx, conn, tg.DB, name+"__v5")
			if err != nil {
				return fmt.Errorf("rebuild %s: list columns: %w", name, err)
			}
		}
		cols = slices.DeleteFunc(cols, func(c schema.CHColumn) bool { return c.Name == schema.SnapshotMs })
		if err := rebuild(ctx, conn, tg, schema.Rekey(tg, t, cols), log); err != nil {
			return err
		}
	}
	return nil
}

// accountTables lists the public names of the database's inferred tables,
// including one an interrupted rebuild left only as its copy.
func accountTables(ctx context.Context, conn driver.Conn, tg schema.Target) ([]string, error) {
	fixed := map[string]bool{}
	for _, t := range schema.Tables() {
		fixed[t.Name] = true
	}
	key := schema.AccountKey
	rows, err := conn.Query(ctx, fmt.Sprintf(
		"SELECT table FROM system.columns WHERE database = ? AND name IN (%s) GROUP BY table HAVING count() = %d ORDER BY table",
		strings.TrimSuffix(strings.Repeat("?, ", len(key)), ", "), len(key)), append([]any{tg.DB}, anys(key)...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	seen := map[string]bool{}
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		if tg.OnCluster() {
			n = strings.TrimSuffix(n, schema.LocalSuffix)
		}
		n = strings.TrimSuffix(strings.TrimSuffix(n, "__v5"), "__v4")
		if fixed[n] || seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
	}
	return out, rows.Err()
}

func anys(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// serverColumns are db.table's columns as the server declares them, in
// order.
func serverColumns(ctx context.Context, conn driver.Conn, db, table string) ([]schema.CHColumn, error) {
	rows, err := conn.Query(ctx, "SELECT name, type, comment FROM system.columns WHERE database = ? AND table = ?", db, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []schema.CHColumn
	for rows.Next() {
		var c schema.CHColumn
		if err := rows.Scan(&c.Name, &c.Type, &c.Doc); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// ClusterMismatchError is returned when a database was set up on a
// cluster (Distributed tables) and the sink has none (Cluster ""), or the
// other way round.
type ClusterMismatchError struct {
	Database string
	Cluster  string // the sink's cluster; "" when the database is the cluster's
}

func (e *ClusterMismatchError) Error() string {
	if e.Cluster == "" {
		return fmt.Sprintf("database %s is set up on a cluster (Distributed tables): %s", e.Database, ClusterRemedy)
	}
	return fmt.Sprintf("database %s is set up for a single server, not for cluster %s: migrate into another database on the cluster and copy the history over (replay, or INSERT ... SELECT), %s", e.Database, e.Cluster, NoClusterRemedy)
}
