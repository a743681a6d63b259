package main

import (
	"bufio"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/internal/settings"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks/clickhouse"
)

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:  "migrate",
		Usage: "create or upgrade the ClickHouse database, tables and views (re-running is a no-op)",
		Description: "With --print it connects to nothing: it prints the statements, each ended by \";\", that bring an\n" +
			"empty database to the latest schema version on a server of --server-version, with the INSERTs\n" +
			"that record each migration (idempotent: the script also upgrades an older database).\n" +
			"--clickhouse-dsn then only names the database, --cluster the cluster. Apply it with\n" +
			"clickhouse-client --multiquery < schema.sql.",
		Flags: append(settings.Flags(settings.Migrate),
			&cli.BoolFlag{Name: "print", Usage: "print the DDL instead of running it (no connection)"},
			&cli.StringFlag{Name: "server-version", Usage: "with --print: the ClickHouse `X.Y` to render for", Value: schema.NewestKnownVersion},
		),
		Action: func(c *cli.Context) error {
			if c.Bool("print") {
				return printMigrations(c)
			}
			if c.IsSet("server-version") {
				return usagef("--server-version goes with --print (migrate reads the server's own version)")
			}
			dsn, err := dsnSetting(c)
			if err != nil {
				return err
			}
			red := redact.New(redact.DSNPassword(dsn))
			log, err := newLogger(c.App.ErrWriter, c.String("log-format"), c.String("log-level"), red)
			if err != nil {
				return err
			}
			s, err := clickhouse.New(clickhouse.Options{DSN: dsn, Cluster: c.String("cluster"), Logger: log, Redactor: red})
			if err != nil {
				return usageError{err}
			}
			defer s.Close(c.Context)
			applied, version, err := s.Migrate(c.Context)
			for _, a := range applied {
				fmt.Fprintf(c.App.Writer, "applied migration %d: %s\n", a.Version, a.Name)
			}
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				fmt.Fprintf(c.App.Writer, "database %s is up to date (schema version %d)\n", s.Database(), version)
			} else {
				fmt.Fprintf(c.App.Writer, "database %s is at schema version %d\n", s.Database(), version)
			}
			return nil
		},
	}
}

// printMigrations writes schema.Script for --server-version, the DSN's
// database and --cluster to stdout, one ";"-terminated statement after
// another. It does not connect.
func printMigrations(c *cli.Context) error {
	f, err := schema.ParseVersion(c.String("server-version"))
	if err != nil {
		return usageError{err}
	}
	db := "default"
	dsn, err := dsnSetting(c)
	if err != nil {
		return err
	}
	if dsn != "" {
		s, err := clickhouse.New(clickhouse.Options{DSN: dsn, Redactor: redact.New(redact.DSNPassword(dsn))})
		if err != nil {
			return usageError{err}
		}
		db = s.Database()
	}
	w := bufio.NewWriter(c.App.Writer)
	fmt.Fprintf(w, "-- optlake schema version %d for ClickHouse %d.%d", schema.LatestVersion(), f.Major, f.Minor)
	if cl := c.String("cluster"); cl != "" {
		fmt.Fprintf(w, ", cluster %s", cl)
	}
	fmt.Fprintln(w)
	for _, st := range schema.Script(schema.Target{DB: db, Cluster: c.String("cluster"), Features: f}) {
		fmt.Fprintf(w, "%s;\n\n", st)
	}
	return w.Flush()
}
