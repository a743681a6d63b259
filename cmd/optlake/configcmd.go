package main

import (
	"fmt"
	"net/url"

	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/infer"
	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/sinks/clickhouse"
)

func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "work with the configuration file",
		Subcommands: []*cli.Command{{
			Name:  "check",
			Usage: "validate the configuration (file, environment and flags) and print the effective settings with secrets redacted",
			Flags: jobFlags(),
			Action: func(c *cli.Context) error {
				j, err := configure(c)
				if err != nil {
					return err
				}
				red, err := j.validate()
				if err != nil {
					return err
				}
				if err := printEffective(c.App.Writer, j, red); err != nil {
					return err
				}
				fmt.Fprintln(c.App.ErrWriter, "configuration ok")
				return nil
			},
		}},
	}
}

// validate checks everything that can be checked without touching the
// network or the disk, and returns the redactor of the job's secrets.
func (j *job) validate() (*redact.Redactor, error) {
	_, secrets, err := parseHeaders(j.Headers)
	if err != nil {
		return nil, err
	}
	_, accSecrets, err := parseAccounts(j.Accounts, j.AccountHeaders)
	if err != nil {
		return nil, err
	}
	red := redact.New(append(secrets, accSecrets...)...)
	red.Add(dsnPassword(j.ClickHouseDSN))
	if !j.Replay {
		if j.APIURL == "" {
			return nil, usagef("--api-url is required (or OPTLAKE_API_URL)")
		}
		if u, err := url.Parse(j.APIURL); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, usagef("--api-url %q: want http(s)://host[:port]", red.String(j.APIURL))
		}
	}
	if _, err := transform.ParseTimeUnit(j.TimestampUnit); err != nil {
		return nil, usagef("--timestamp-unit: %v", err)
	}
	if _, err := pipeline.SelectEndpoints(j.Endpoints, j.Paths); err != nil {
		return nil, usageError{err}
	}
	params, err := pipeline.ParseParams(j.Params)
	if err != nil {
		return nil, usageError{err}
	}
	for ep := range params {
		if _, err := pipeline.SelectEndpoints([]string{ep}, nil); err != nil {
			return nil, usagef("--param: %v", err)
		}
	}
	if _, err := infer.ParseMode(j.SchemaContract); err != nil {
		return nil, usagef("--schema-contract: %v", err)
	}
	if err := j.validateLimits(); err != nil {
		return nil, err
	}
	if _, err := openDataDir(j.DataDir, false); err != nil {
		return nil, err
	}
	for _, s := range splitList(j.Sinks) {
		switch s {
		case "parquet":
		case "clickhouse":
			if _, err := clickhouse.New(clickhouse.Options{DSN: j.ClickHouseDSN, Cluster: j.Cluster, Redactor: red}); err != nil {
				return nil, usageError{err}
			}
		default:
			return nil, usagef("--sink %q: want parquet or clickhouse", s)
		}
	}
	if j.Every < 0 || j.Timeout < 0 || j.Deadline < 0 {
		return nil, usagef("durations must not be negative")
	}
	if j.BatchRows <= 0 || (!j.Replay && (j.MaxAttempts <= 0 || j.MaxBodyBytes <= 0)) {
		return nil, usagef("--batch-rows, --max-attempts and --max-body-size must be positive")
	}
	return red, nil
}
