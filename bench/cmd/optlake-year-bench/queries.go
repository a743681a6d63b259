package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// readmeQueries are the README's questions over the lake, as DuckDB
// (read_parquet) and ClickHouse (chDB, file() or icebergLocal()) ask
// them; FROM names the table (%s: its instruments or instrument_events
// source).
var readmeQueries = []struct {
	name, table, sql string
}{
	{"instrument history", "instruments", "SELECT snapshot_time, index_price, is_active FROM %s WHERE instrument_name = 'BTC-PERPETUAL' ORDER BY snapshot_time"},
	{"events by type", "instrument_events", "SELECT event, count(*) AS n FROM %s GROUP BY event ORDER BY event"},
	{"latest listing", "instruments", "SELECT instrument_name, index_price, is_active FROM %[1]s WHERE snapshot_time = (SELECT max(snapshot_time) FROM %[1]s) ORDER BY instrument_name"},
}

func init() {
	for _, q := range readmeQueries {
		rowNames = append(rowNames, "DuckDB: "+q.name, "ClickHouse (chDB): "+q.name)
	}
}

// measureQueries times the README's queries over lake (a Parquet lake's
// day files, or with iceberg its Iceberg tables: chDB's icebergLocal, as
// DuckDB's iceberg extension cannot be installed here), each a new node
// process (its start-up included), keeping the fastest of the runs as
// row key of lake.
func measureQueries(ctx context.Context, key, lake string, iceberg bool, cfg config, rep *Report) error {
	if cfg.noDuck {
		return nil
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	tools, err := filepath.Abs(filepath.Join(cfg.repo, "tools"))
	if err != nil {
		return err
	}
	for _, q := range readmeQueries {
		engines := []struct {
			row, dir, from string
		}{
			{"DuckDB: " + q.name, "duckdb", fmt.Sprintf("read_parquet('%s')", filepath.Join(lake, q.table, "*", "*.parquet"))},
			{"ClickHouse (chDB): " + q.name, "chdb", fmt.Sprintf("file('%s', Parquet)", filepath.Join(lake, q.table, "*", "*.parquet"))},
		}
		cwd := filepath.Join(tools, "duckdb")
		if iceberg {
			// chDB's icebergLocal reads only under its user_files_path,
			// ".": the lake is the working folder.
			engines = engines[1:]
			engines[0].from = fmt.Sprintf("icebergLocal('%s')", q.table)
			cwd = lake
		}
		for _, e := range engines {
			sql := fmt.Sprintf(q.sql, e.from)
			for r := range cfg.runs {
				args := []string{filepath.Join(tools, e.dir, "query.mjs"), sql}
				var session string
				if e.dir == "chdb" {
					if session, err = os.MkdirTemp("", "year-bench-chdb-"); err != nil {
						return err
					}
					args = []string{filepath.Join(tools, e.dir, "query.mjs"), session}
				}
				p, err := timedIn(ctx, cwd, strings.NewReader(sql+";"), node, args...)
				if session != "" {
					os.RemoveAll(session)
				}
				if err != nil {
					return fmt.Errorf("%s: %w", e.row, err)
				}
				keep(rep, e.row, key, p, r == 0)
			}
		}
	}
	return nil
}
