package main

import (
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// jobFlags are the flags of `optlake run`; every flag also reads an
// OPTLAKE_* variable and a key of the same name in the --config YAML file
// (see config.go). Precedence: flag > environment > config file > default.
func jobFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "YAML file with any of these flags as keys", EnvVars: envs("config")},
		&cli.StringFlag{Name: "api-url", Usage: "venue base URL, e.g. https://api.venue.example", EnvVars: envs("api-url")},
		&cli.StringSliceFlag{Name: "header", Usage: "`'Name: value'` sent with every request (repeatable; values are secrets, never logged)", EnvVars: envs("header")},
		&cli.StringSliceFlag{Name: "param", Usage: "`endpoint.key=value` query parameter (repeatable; a comma list fans out into one request per value)", EnvVars: envs("param")},
		&cli.StringSliceFlag{Name: "endpoints", Usage: "endpoints to snapshot (default: every endpoint that needs no parameter)", EnvVars: envs("endpoints")},
		&cli.StringSliceFlag{Name: "account", Usage: "account `LABEL` snapshotted by the account endpoints (repeatable; default one account, \"default\")", EnvVars: envs("account")},
		&cli.StringSliceFlag{Name: "account-header", Usage: "`'label:Name: value'` header of one account (repeatable; value may be ${ENV} or @file)", EnvVars: envs("account-header")},
		&cli.StringFlag{Name: "schema-contract", Value: "evolve", Usage: "account tables: evolve (new fields become columns), freeze (new fields fail the endpoint) or discard-columns", EnvVars: envs("schema-contract")},
		&cli.StringSliceFlag{Name: "sink", Value: cli.NewStringSlice("parquet"), Usage: "parquet and/or clickhouse (repeatable)", EnvVars: envs("sink")},
		&cli.StringFlag{Name: "data-dir", Value: "./data", Usage: "Parquet lake and raw archive", EnvVars: envs("data-dir")},
		&cli.StringFlag{Name: "clickhouse-dsn", Usage: "clickhouse://user:pass@host:9000/db", EnvVars: envs("clickhouse-dsn")},
		&cli.StringFlag{Name: "cluster", Usage: "ClickHouse cluster `NAME`: Replicated tables per shard behind Distributed ones (see README, Running on a cluster)", EnvVars: envs("cluster")},
		&cli.BoolFlag{Name: "migrate", Usage: "apply pending ClickHouse migrations before loading (otherwise an out-of-date schema is an error)", EnvVars: envs("migrate")},
		&cli.StringFlag{Name: "source", Usage: "venue name stored in every row (default: the API URL's host)", EnvVars: envs("source")},
		&cli.StringFlag{Name: "timestamp-unit", Value: "auto", Usage: "unit of creation/expiration timestamps: auto, s, ms, us, ns", EnvVars: envs("timestamp-unit")},
		&cli.DurationFlag{Name: "timeout", Value: 60 * time.Second, Usage: "per request: wait for headers and for each chunk of the body", EnvVars: envs("timeout")},
		&cli.DurationFlag{Name: "deadline", Value: 30 * time.Minute, Usage: "overall limit of one snapshot (0 = none)", EnvVars: envs("deadline")},
		&cli.StringFlag{Name: "ca-file", Usage: "PEM certificates to trust besides the system roots (a venue behind a private CA)", EnvVars: envs("ca-file")},
		&cli.BoolFlag{Name: "insecure-skip-verify", Usage: "turn TLS certificate verification off (tests only; logged loudly)", EnvVars: envs("insecure-skip-verify")},
		&cli.IntFlag{Name: "max-attempts", Value: 5, Usage: "attempts per request (network errors, 429, 5xx)", EnvVars: envs("max-attempts")},
		&cli.Int64Flag{Name: "max-body-size", Value: 4 << 30, Usage: "largest response body accepted, bytes", EnvVars: envs("max-body-size")},
		// Request rate and account table width (issue 17).
		&cli.StringFlag{Name: "rate-limit", Usage: "at most `N/s` requests (or N/m, N/h) for the whole run: every endpoint, account, parameter and retry (default unlimited)", EnvVars: envs("rate-limit")},
		&cli.IntFlag{Name: "rate-burst", Value: 1, Usage: "with --rate-limit: requests allowed at once before the rate applies", EnvVars: envs("rate-burst")},
		&cli.IntFlag{Name: "column-budget", Value: defaultColumnBudget, Usage: "account tables: most columns per table (meta columns included); further fields go to the JSON column extra", EnvVars: envs("column-budget")},
		&cli.IntFlag{Name: "batch-rows", Value: 32768, Usage: "rows per Arrow record batch", EnvVars: envs("batch-rows")},
		&cli.StringFlag{Name: "summary-json", Usage: "write the run summary as JSON to this file", EnvVars: envs("summary-json")},
		&cli.DurationFlag{Name: "every", Usage: "stay up and snapshot on this interval, aligned to the clock (e.g. 5m)", EnvVars: envs("every")},
		&cli.DurationFlag{Name: "jitter", Usage: "with --every: wait a random extra delay up to this long before each snapshot (spreads many jobs)", EnvVars: envs("jitter")},
		&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the run to this file (go tool pprof)", EnvVars: envs("cpuprofile")},
		&cli.StringFlag{Name: "memprofile", Usage: "write a heap profile at the end of the run to this file", EnvVars: envs("memprofile")},
		&cli.StringFlag{Name: "metrics-file", Usage: "after each run, write Prometheus metrics to this file (node_exporter textfile collector); counters carry on across runs", EnvVars: envs("metrics-file")},
		&cli.StringFlag{Name: "listen", Usage: "with --every: serve /metrics and /healthz on this `ADDR` (e.g. :9464)", EnvVars: envs("listen")},
		&cli.DurationFlag{Name: "catch-up-budget", Value: time.Minute, Usage: "before each snapshot, load what a sink missed (load ledger) for at most this long; the rest waits for the next run (0 = no limit; with --every at most half the interval)", EnvVars: envs("catch-up-budget")},
		&cli.BoolFlag{Name: "compact", Usage: "after each snapshot, compact the Parquet lake's closed days (as optlake compact), starting none after 10 minutes (with --every half the interval)", EnvVars: envs("compact")},
		&cli.IntFlag{Name: "catch-up-max", Value: 100, Usage: "load at most this many missed snapshots per run (0 = no limit)", EnvVars: envs("catch-up-max")},
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json", EnvVars: envs("log-format")},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn, error", EnvVars: envs("log-level")},
	}
}

func jobFromFlags(c *cli.Context) *job {
	return &job{
		APIURL: c.String("api-url"), Headers: c.StringSlice("header"), Params: c.StringSlice("param"),
		Endpoints: splitList(c.StringSlice("endpoints")), Accounts: splitList(c.StringSlice("account")),
		AccountHeaders: c.StringSlice("account-header"), SchemaContract: c.String("schema-contract"), Sinks: c.StringSlice("sink"), DataDir: c.String("data-dir"),
		ClickHouseDSN: c.String("clickhouse-dsn"), Migrate: c.Bool("migrate"), Cluster: c.String("cluster"), Source: c.String("source"), TimestampUnit: c.String("timestamp-unit"),
		Timeout: c.Duration("timeout"), CAFile: c.String("ca-file"), InsecureSkipVerify: c.Bool("insecure-skip-verify"), Deadline: c.Duration("deadline"), MaxAttempts: c.Int("max-attempts"),
		MaxBodyBytes: c.Int64("max-body-size"), BatchRows: c.Int("batch-rows"), SummaryJSON: c.String("summary-json"),
		RateLimit: c.String("rate-limit"), RateBurst: c.Int("rate-burst"), ColumnBudget: c.Int("column-budget"),
		CatchUpBudget: c.Duration("catch-up-budget"), CatchUpMax: c.Int("catch-up-max"), Compact: c.Bool("compact"),
		Every: c.Duration("every"), Jitter: c.Duration("jitter"), MetricsFile: c.String("metrics-file"), Listen: c.String("listen"), LogFormat: c.String("log-format"), LogLevel: c.String("log-level"),
	}
}

func runCommand() *cli.Command {
	flags := jobFlags()
	return &cli.Command{
		Name:  "run",
		Usage: "take one snapshot of the venue (or one every --every) and exit",
		Flags: flags,
		Action: func(c *cli.Context) error {
			j := jobFromFlags(c)
			if err := configure(c, j, flags); err != nil {
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
			if j.Listen != "" && j.Every <= 0 {
				return usagef("--listen serves metrics in --every mode; a one-shot run writes --metrics-file")
			}
			if j.Every > 0 {
				if j.Listen != "" {
					stop, err := b.serveMetrics(c.Context, j)
					if err != nil {
						return err
					}
					defer stop()
				}
				return b.loop(c.Context, j, c.App.Writer)
			}
			_, err = b.once(c.Context, j, c.App.Writer)
			return err
		},
	}
}

// splitList splits comma lists in repeatable flags: --endpoints a,b --endpoints c.
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
