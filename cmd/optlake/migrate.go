package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/sinks/clickhouse"
)

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:  "migrate",
		Usage: "create or upgrade the ClickHouse database, tables and views (re-running is a no-op)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "clickhouse-dsn", Usage: "clickhouse://user:pass@host:9000/db", EnvVars: envs("clickhouse-dsn"), Required: true},
			&cli.StringFlag{Name: "cluster", Usage: "create Replicated + Distributed tables ON CLUSTER `NAME`", EnvVars: envs("cluster")},
			&cli.StringFlag{Name: "log-format", Value: "text", EnvVars: envs("log-format")},
			&cli.StringFlag{Name: "log-level", Value: "warn", EnvVars: envs("log-level")},
		},
		Action: func(c *cli.Context) error {
			red := redact.New()
			red.Add(dsnPassword(c.String("clickhouse-dsn")))
			log, err := newLogger(c.App.ErrWriter, c.String("log-format"), c.String("log-level"), red)
			if err != nil {
				return err
			}
			s, err := clickhouse.New(clickhouse.Options{DSN: c.String("clickhouse-dsn"), Cluster: c.String("cluster"), Logger: log, Redactor: red})
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
