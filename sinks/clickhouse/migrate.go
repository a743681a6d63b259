package clickhouse

import (
	"context"
	"fmt"
	"log/slog"
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
		return 0, fmt.Errorf("database %s is set up on a cluster (Distributed tables): pass its cluster name (--cluster)", tg.DB)
	case !distributed && tg.OnCluster():
		return 0, fmt.Errorf("database %s is set up for a single server, not for cluster %s: migrate into another database on the cluster and copy the history over (replay, or INSERT ... SELECT), or leave out --cluster", tg.DB, tg.Cluster)
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
		for _, stmt := range m.Render(tg) {
			if err := conn.Exec(ctx, stmt); err != nil {
				return done, fmt.Errorf("migration %d (%s): %w\n%s", m.Version, m.Name, err, firstLine(stmt))
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
	if err := withRetry(ctx, s.opt.MaxAttempts, s.opt.Backoff, func() error { return conn.Ping(ctx) }); err != nil {
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
