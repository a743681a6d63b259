package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"

	"golang.org/x/time/rate"

	"github.com/urfave/cli/v2"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/extract"
	"github.com/optlake/optlake/pipeline/extract/auth"
	"github.com/optlake/optlake/pipeline/infer"
	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/pipeline/venueconf"
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
	sinks     []string           // names, split and without repeats
	auth      auth.Authenticator // the run's (top-level auth:), built by authenticate
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
	red.Add(j.Venue.Secrets()...)
	red.Add(redact.DSNPassword(j.ClickHouseDSN))
	red.Add(redact.URISecrets(j.IcebergCatalogURI)...)
	red.Add(j.restConfig().Secrets()...)
	v.red = red
	if err := checkCatalogKind(j.IcebergCatalog); err != nil {
		return nil, err
	}
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
	reg, err := venueRegistry(j.Venue, j.Replay, j.Endpoints)
	if err != nil {
		return nil, usageError{err}
	}
	if v.endpoints, err = pipeline.Select(reg, j.Endpoints, j.Paths); err != nil {
		return nil, usageError{err}
	}
	configureEndpoints(v.endpoints, j.Venue)
	if v.params, err = pipeline.ParseParams(j.Params); err != nil {
		return nil, usageError{err}
	}
	for ep := range v.params {
		if _, err := pipeline.Select(reg, []string{ep}, nil); err != nil {
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
	if j.Every < 0 || j.Timeout < 0 || j.Deadline < 0 || j.IcebergKeep < 0 || j.IcebergGrace < 0 {
		return nil, usagef("durations must not be negative")
	}
	if j.BatchRows <= 0 || (!j.Replay && (j.MaxAttempts <= 0 || j.MaxBodyBytes <= 0)) {
		return nil, usagef("--batch-rows, --max-attempts and --max-body-size must be positive")
	}
	if !(j.MaxRejectShare > 0 && j.MaxRejectShare <= 1) {
		return nil, usagef("--max-reject-share must be more than 0 and at most 1")
	}
	if j.CHMaxAttempts <= 0 && slices.Contains(j.Sinks, "clickhouse") {
		return nil, usagef("--clickhouse-max-attempts must be positive")
	}
	return v, nil
}

// venueRegistry is the venue's endpoints plus those of the config file
// with a kind (account or public). A replay, which reads no config file,
// takes any other name it is asked for as an inferred table: its archived
// bodies say how they were fetched.
func venueRegistry(v venueconf.Venue, replay bool, names []string) ([]pipeline.Endpoint, error) {
	extra := map[string]bool{}
	for name, e := range v.Endpoints {
		if e.Kind != "" {
			extra[name] = e.Kind == "public"
		}
	}
	if replay {
		known := map[string]bool{}
		for _, e := range pipeline.DefaultEndpoints() {
			known[e.Name] = true
		}
		for _, n := range names {
			if !known[n] {
				extra[n] = false
			}
		}
	}
	return pipeline.Extra(pipeline.DefaultEndpoints(), extra)
}

// configureEndpoints applies the config file's real-venue keys to the
// selected endpoints (top-level errors to those without their own).
func configureEndpoints(eps []pipeline.Endpoint, v venueconf.Venue) {
	for i := range eps {
		ep := &eps[i]
		ep.Errors = v.Errors
		e := v.Endpoints[ep.Name]
		if e == nil {
			continue
		}
		ep.Method, ep.Records, ep.Pagination = e.Method, e.Records, e.Pagination
		ep.Shape, ep.Fields, ep.Params = e.Shape, e.Fields, e.Params
		if e.Body != "" {
			ep.Body = []byte(e.Body)
		}
		if e.Errors != nil {
			ep.Errors = e.Errors
		}
		ep.NoAuth = e.Auth != nil && e.Auth.Type == auth.None
	}
}

// authenticate builds the authenticators of the run, its accounts and its
// endpoints; the login and token requests go through the client's
// transport (TLS settings, CA file).
func (v *validJob) authenticate(c *extract.Client) error {
	env := auth.Env{Base: c.Base(), Client: c.HTTP()}
	build := func(s *auth.Spec, where string) (auth.Authenticator, error) {
		if s == nil {
			return nil, nil
		}
		a, err := auth.New(*s, env)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		return a, nil
	}
	var err error
	if v.auth, err = build(v.Venue.Auth, "auth"); err != nil {
		return err
	}
	for label, s := range v.Venue.AccountAuth {
		a, err := build(s, "accounts."+label+".auth")
		if err != nil {
			return err
		}
		found := false
		for i := range v.accounts {
			if v.accounts[i].Label == label {
				v.accounts[i].Auth, found = a, true
			}
		}
		if !found {
			v.accounts = append(v.accounts, pipeline.Account{Label: label, Auth: a})
		}
	}
	for i := range v.endpoints {
		e := v.Venue.Endpoints[v.endpoints[i].Name]
		if e == nil || e.Auth == nil || e.Auth.Type == auth.None {
			continue
		}
		if v.endpoints[i].Auth, err = build(e.Auth, "endpoints."+v.endpoints[i].Name+".auth"); err != nil {
			return err
		}
	}
	return nil
}
