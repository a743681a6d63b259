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
// or the migrations table does not exist).
func currentVersion(ctx context.Context, conn driver.Conn, db string) (int, error) {
	var n uint64
	err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = 'optlake_migrations'", db).Scan(&n)
	if err != nil || n == 0 {
		return 0, err
	}
	var v uint32
	if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT max(version) FROM %s.optlake_migrations", schema.Quote(db))).Scan(&v); err != nil {
		return 0, err
	}
	return int(v), nil
}

// Applied is one migration applied by Migrate.
type Applied struct {
	Version int
	Name    string
}

// migrate creates the database and applies every pending migration in
// order, recording each one. Statements are idempotent, so a migration
// interrupted half-way is completed by the next migrate.
func migrate(ctx context.Context, conn driver.Conn, db string, f schema.Features, log *slog.Logger) ([]Applied, error) {
	if err := conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+schema.Quote(db)); err != nil {
		return nil, fmt.Errorf("create database: %w", err)
	}
	if err := conn.Exec(ctx, schema.MigrationsTableDDL(db)); err != nil {
		return nil, fmt.Errorf("create migrations table: %w", err)
	}
	have, err := currentVersion(ctx, conn, db)
	if err != nil {
		return nil, err
	}
	var done []Applied
	for _, m := range schema.Migrations() {
		if m.Version <= have {
			continue
		}
		for _, stmt := range m.Statements(db, f) {
			if err := conn.Exec(ctx, stmt); err != nil {
				return done, fmt.Errorf("migration %d (%s): %w\n%s", m.Version, m.Name, err, firstLine(stmt))
			}
		}
		// An INSERT ... VALUES sent as a query waits forever on 18.16's
		// native protocol: insert as a one-row batch.
		batch, err := conn.PrepareBatch(ctx, fmt.Sprintf("INSERT INTO %s.optlake_migrations (version, name, checksum, applied_at)", schema.Quote(db)))
		if err == nil {
			if err = batch.Append(uint32(m.Version), m.Name, m.Checksum(db, f), time.Now().UTC()); err == nil {
				err = batch.Send()
			} else {
				batch.Abort()
			}
		}
		if err != nil {
			return done, fmt.Errorf("record migration %d: %w", m.Version, err)
		}
		log.Info("migration applied", "version", m.Version, "name", m.Name, "database", db)
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
// migrations it applied (none when up to date).
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
	applied, err := migrate(ctx, conn, s.db, f, s.log)
	if err != nil {
		return applied, 0, s.wrap("migrate", err)
	}
	return applied, schema.LatestVersion(), nil
}
