package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/pipeline"
)

func replayCommand() *cli.Command {
	return &cli.Command{
		Name:  "replay",
		Usage: "rebuild tables from the raw archive (backfill, schema change, a sink that was down)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data-dir", Value: "./data", Usage: "the data directory whose raw/ archive is replayed", EnvVars: envs("data-dir")},
			&cli.StringFlag{Name: "from", Usage: "first snapshot time, inclusive (RFC 3339 or YYYY-MM-DD)", EnvVars: envs("replay-from")},
			&cli.StringFlag{Name: "to", Usage: "end of the range, exclusive (RFC 3339 or YYYY-MM-DD)", EnvVars: envs("replay-to")},
			&cli.StringSliceFlag{Name: "endpoints", Usage: "endpoints to replay (default: instruments)", EnvVars: envs("endpoints")},
			&cli.StringSliceFlag{Name: "sink", Value: cli.NewStringSlice("parquet"), Usage: "parquet and/or clickhouse", EnvVars: envs("sink")},
			&cli.StringFlag{Name: "clickhouse-dsn", Usage: "clickhouse://user:pass@host:9000/db", EnvVars: envs("clickhouse-dsn")},
			&cli.BoolFlag{Name: "migrate", Usage: "apply pending ClickHouse migrations first", EnvVars: envs("migrate")},
			&cli.StringFlag{Name: "cluster", Usage: "ClickHouse cluster `NAME`", EnvVars: envs("cluster")},
			&cli.StringFlag{Name: "timestamp-unit", Value: "auto", EnvVars: envs("timestamp-unit")},
			&cli.IntFlag{Name: "batch-rows", Value: 32768, EnvVars: envs("batch-rows")},
			&cli.StringFlag{Name: "summary-json", Usage: "write the replay summary as JSON", EnvVars: envs("summary-json")},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the replay to this file (go tool pprof)", EnvVars: envs("cpuprofile")},
			&cli.StringFlag{Name: "memprofile", Usage: "write a heap profile at the end of the replay to this file", EnvVars: envs("memprofile")},
			&cli.IntFlag{Name: "column-budget", Value: defaultColumnBudget, Usage: "account tables: most columns per table; further fields go to extra (as optlake run)", EnvVars: envs("column-budget")},
			&cli.StringFlag{Name: "log-format", Value: "text", EnvVars: envs("log-format")},
			&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: envs("log-level")},
		},
		Action: func(c *cli.Context) error {
			from, err := parseTimeFlag(c.String("from"))
			if err != nil {
				return usagef("--from: %v", err)
			}
			to, err := parseTimeFlag(c.String("to"))
			if err != nil {
				return usagef("--to: %v", err)
			}
			j := &job{Replay: true, DataDir: c.String("data-dir"), Endpoints: splitList(c.StringSlice("endpoints")),
				Sinks: c.StringSlice("sink"), ClickHouseDSN: c.String("clickhouse-dsn"), Migrate: c.Bool("migrate"), Cluster: c.String("cluster"),
				TimestampUnit: c.String("timestamp-unit"), BatchRows: c.Int("batch-rows"), ColumnBudget: c.Int("column-budget"),
				LogFormat: c.String("log-format"), LogLevel: c.String("log-level")}
			if j.DataDir, err = openDataDir(j.DataDir, true); err != nil {
				return err
			}
			stopProfile, err := startProfiles(c.String("cpuprofile"), c.String("memprofile"))
			if err != nil {
				return err
			}
			defer stopProfile()
			b, release, err := j.start(c.Context, c.App.ErrWriter)
			if err != nil {
				return err
			}
			defer release()
			progress := progressPrinter(c.App.ErrWriter, b)
			res, err := b.runner.Replay(c.Context, pipeline.ReplayOptions{DataDir: j.DataDir, From: from, To: to, Progress: progress})
			if err != nil {
				return err
			}
			out := c.App.Writer
			fmt.Fprintf(out, "replayed %d snapshots: %d rows, %d rejects, %d events; %d failed, %d files skipped\n",
				len(res.Snapshots), res.Rows, res.Rejects, res.Events, res.Failed, len(res.Problems))
			for _, p := range res.Problems {
				fmt.Fprintln(out, "  skipped "+b.redactor.String(p))
			}
			if sj := c.String("summary-json"); sj != "" {
				if err := writeJSON(sj, res, b.redactor); err != nil {
					return fmt.Errorf("write summary: %w", err)
				}
			}
			switch {
			case res.OK():
				return nil
			case len(res.Snapshots) > res.Failed:
				return codedError{exitPartial, fmt.Errorf("replay incomplete: %d snapshot(s) failed, %d file(s) skipped", res.Failed, len(res.Problems))}
			default:
				return codedError{exitFailure, fmt.Errorf("replay failed: %d snapshot(s) failed, %d file(s) skipped", res.Failed, len(res.Problems))}
			}
		},
	}
}

// parseTimeFlag accepts RFC 3339 or a date (UTC midnight); "" is open.
func parseTimeFlag(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor YYYY-MM-DD", s)
}

// progressPrinter shows a one-line progress bar on a terminal and plain
// log lines otherwise.
func progressPrinter(w interface{ Write([]byte) (int, error) }, b *built) func(int, int, *pipeline.Summary) {
	tty := false
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return func(done, total int, s *pipeline.Summary) {
		var rows int64
		for _, e := range s.Endpoints {
			rows += e.Rows
		}
		if tty {
			width := 30
			fill := width * done / total
			fmt.Fprintf(w, "\r[%s%s] %d/%d %s %d rows ", strings.Repeat("#", fill), strings.Repeat(".", width-fill), done, total, s.SnapshotTime.Format(time.RFC3339), rows)
			if done == total {
				fmt.Fprintln(w)
			}
			return
		}
		b.log.Info("replayed", "snapshot", s.SnapshotTime.Format(time.RFC3339Nano), "run_id", s.RunID, "ok", s.OK, "rows", rows, "progress", fmt.Sprintf("%d/%d", done, total))
	}
}
