package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"golang.org/x/time/rate"

	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/infer"
	"github.com/optlake/optlake/pipeline/transform"
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
				v, err := j.validate()
				if err != nil {
					return err
				}
				if err := printEffective(c.App.Writer, j, v.red); err != nil {
					return err
				}
				fmt.Fprintln(c.App.ErrWriter, "configuration ok")
				return nil
			},
		}},
	}
}

// validJob is a job that validate checked, with what it parsed: build
// consumes it and parses nothing again.
type validJob struct {
	*job
	red       *redact.Redactor
	headers   http.Header
	accounts  []pipeline.Account
	source    string // --source, or the API URL's host
	unit      transform.TimeUnit
	endpoints []pipeline.Endpoint
	params    map[string]url.Values
	mode      infer.Mode
	rate      rate.Limit
	sinks     []string // names, split and without repeats
}

// validate checks everything that can be checked without touching the
// network or the disk, and returns the job with its parsed settings and the
// redactor of its secrets.
func (j *job) validate() (*validJob, error) {
	v := &validJob{job: j, source: j.Source}
	headers, secrets, err := parseHeaders(j.Headers)
	if err != nil {
		return nil, err
	}
	accounts, accSecrets, err := parseAccounts(j.Accounts, j.AccountHeaders)
	if err != nil {
		return nil, err
	}
	v.headers, v.accounts = headers, accounts
	red := redact.New(append(secrets, accSecrets...)...)
	red.Add(redact.DSNPassword(j.ClickHouseDSN))
	v.red = red
	if _, err := newLogger(io.Discard, j.LogFormat, j.LogLevel, red); err != nil {
		return nil, err
	}
	if !j.Replay {
		if j.APIURL == "" {
			return nil, usagef("--api-url is required (or OPTLAKE_API_URL)")
		}
		u, err := url.Parse(j.APIURL)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, usagef("--api-url %q: want http(s)://host[:port]", red.String(j.APIURL))
		}
		if v.source == "" {
			v.source = u.Hostname()
		}
	}
	if v.unit, err = transform.ParseTimeUnit(j.TimestampUnit); err != nil {
		return nil, usagef("--timestamp-unit: %v", err)
	}
	if v.endpoints, err = pipeline.SelectEndpoints(j.Endpoints, j.Paths); err != nil {
		return nil, usageError{err}
	}
	if v.params, err = pipeline.ParseParams(j.Params); err != nil {
		return nil, usageError{err}
	}
	for ep := range v.params {
		if _, err := pipeline.SelectEndpoints([]string{ep}, nil); err != nil {
			return nil, usagef("--param: %v", err)
		}
	}
	if v.mode, err = infer.ParseMode(j.SchemaContract); err != nil {
		return nil, usagef("--schema-contract: %v", err)
	}
	if v.rate, err = j.validateLimits(); err != nil {
		return nil, err
	}
	st, err := openStore(context.Background(), j.DataDir, false)
	if err != nil {
		return nil, err
	}
	st.Close()
	if v.sinks, err = checkSinks(j, red); err != nil {
		return nil, err
	}
	if j.Every < 0 || j.Timeout < 0 || j.Deadline < 0 {
		return nil, usagef("durations must not be negative")
	}
	if j.BatchRows <= 0 || (!j.Replay && (j.MaxAttempts <= 0 || j.MaxBodyBytes <= 0)) {
		return nil, usagef("--batch-rows, --max-attempts and --max-body-size must be positive")
	}
	return v, nil
}
