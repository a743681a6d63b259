package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/optlake/optlake/internal/datadir"
	"github.com/optlake/optlake/internal/metrics"
	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/archive"
	"github.com/optlake/optlake/pipeline/extract"
	"github.com/optlake/optlake/pipeline/infer"
	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/clickhouse"
	"github.com/optlake/optlake/sinks/parquet"
)

// job is the validated configuration of `optlake run` (and of each demo
// snapshot): what to fetch, where to put it.
type job struct {
	APIURL             string
	Headers            []string // "Name: value"
	Params             []string // endpoint.key=value
	Endpoints          []string
	Paths              map[string]string // endpoint path overrides
	Sinks              []string
	DataDir            string
	ClickHouseDSN      string
	Migrate            bool   // apply pending ClickHouse migrations before loading
	Cluster            string // ClickHouse cluster name (remote_servers); empty = one server
	Source             string
	TimestampUnit      string
	Timeout            time.Duration
	CAFile             string
	InsecureSkipVerify bool
	Deadline           time.Duration
	MaxAttempts        int
	MaxBodyBytes       int64
	BatchRows          int
	SummaryJSON        string
	MetricsFile        string        // Prometheus textfile after each run
	Jitter             time.Duration // --every: random extra delay before each snapshot
	Listen             string        // /metrics and /healthz in --every mode
	Every              time.Duration
	Compact            bool // --compact: compact closed days after each snapshot
	LogFormat          string
	LogLevel           string
	Accounts           []string // account labels
	AccountHeaders     []string // label:Name: value
	SchemaContract     string   // evolve | freeze | discard-columns
	RateLimit          string   // --rate-limit N/s ("" unlimited)
	RateBurst          int
	ColumnBudget       int                       // account tables: most columns per table
	Maps               map[string]infer.MapRules // per endpoint: map detection overrides (config file)
	// Catch-up of the snapshots the ledger says a sink is missing, before
	// each snapshot: bounded by time and by count (0 = no bound).
	CatchUpBudget time.Duration
	CatchUpMax    int
	// Replay builds a runner that reads the raw archive instead of the
	// venue (no API URL, no client).
	Replay bool
}

// snapshotClock gives snapshot times (time.Now). It is the CLI's one clock
// seam: in-process tests pin it to take snapshots at chosen moments
// instead of sleeping.
var snapshotClock = time.Now

// built is a job wired into a runner.
type built struct {
	metrics  *metrics.Metrics
	runner   *pipeline.Runner
	sinks    []sinks.Sink
	log      *slog.Logger
	redactor *redact.Redactor
}

// parseHeaders turns "Name: value" specs into a header set, and returns the
// values as secrets.
//
// A value may come from elsewhere, so secrets stay out of command lines and
// files: "${VAR}" reads the environment variable VAR, "@/path" reads a file
// (trailing newline dropped).
func parseHeaders(specs []string) (http.Header, []string, error) {
	h := http.Header{}
	var secrets []string
	for _, s := range specs {
		name, value, ok := strings.Cut(s, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, nil, usagef("--header: want 'Name: value', got a value without a name (the value is not shown)")
		}
		v, err := secretValue(value)
		if err != nil {
			return nil, nil, usagef("--header %s: %v", name, err)
		}
		h.Add(name, v)
		secrets = append(secrets, v)
	}
	return h, secrets, nil
}

// secretValue resolves "${VAR}" and "@file" references.
func secretValue(v string) (string, error) {
	switch {
	case strings.HasPrefix(v, "${") && strings.HasSuffix(v, "}"):
		name := v[2 : len(v)-1]
		val, ok := os.LookupEnv(name)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
		return val, nil
	case strings.HasPrefix(v, "@"):
		b, err := os.ReadFile(v[1:])
		if err != nil {
			return "", fmt.Errorf("read secret file: %w", err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return v, nil
}

// parseAccounts builds the accounts from --account labels and
// --account-header 'label:Name: value' specs.
func parseAccounts(labels, headerSpecs []string) ([]pipeline.Account, []string, error) {
	byLabel := map[string]*pipeline.Account{}
	var order []string
	add := func(l string) *pipeline.Account {
		if a, ok := byLabel[l]; ok {
			return a
		}
		a := &pipeline.Account{Label: l, Headers: http.Header{}}
		byLabel[l] = a
		order = append(order, l)
		return a
	}
	for _, l := range labels {
		l = strings.TrimSpace(l)
		if l == "" || strings.ContainsAny(l, ":/ ") {
			return nil, nil, usagef("--account %q: a label is a plain word", l)
		}
		add(l)
	}
	var secrets []string
	for _, spec := range headerSpecs {
		label, hdr, ok := strings.Cut(spec, ":")
		if !ok || strings.TrimSpace(label) == "" {
			return nil, nil, usagef("--account-header: want 'label:Name: value'")
		}
		h, sec, err := parseHeaders([]string{hdr})
		if err != nil {
			return nil, nil, err
		}
		a := add(strings.TrimSpace(label))
		for k, vs := range h {
			a.Headers[k] = vs
		}
		secrets = append(secrets, sec...)
	}
	out := make([]pipeline.Account, 0, len(order))
	for _, l := range order {
		out = append(out, *byLabel[l])
	}
	return out, secrets, nil
}

// newLogger builds the run's logger: text or JSON on stderr, secrets
// redacted from every line.
func newLogger(w io.Writer, format, level string, r *redact.Redactor) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch format {
	case "", "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, usagef("--log-format %q: want text or json", format)
	}
	return slog.New(r.Handler(h)), nil
}

// build validates the job and wires extract, archive, sinks and runner.
func (j *job) build(stderr io.Writer) (*built, error) {
	if _, err := j.validate(); err != nil {
		return nil, err
	}
	headers, secrets, err := parseHeaders(j.Headers)
	if err != nil {
		return nil, err
	}
	accounts, accSecrets, err := parseAccounts(j.Accounts, j.AccountHeaders)
	if err != nil {
		return nil, err
	}
	red := redact.New(append(secrets, accSecrets...)...)
	red.Add(dsnPassword(j.ClickHouseDSN))
	log, err := newLogger(stderr, j.LogFormat, j.LogLevel, red)
	if err != nil {
		return nil, err
	}
	source := j.Source
	if !j.Replay {
		if j.APIURL == "" {
			return nil, usagef("--api-url is required (or OPTLAKE_API_URL)")
		}
		u, err := url.Parse(j.APIURL)
		if err != nil || u.Host == "" {
			return nil, usagef("--api-url %q: want scheme://host[:port]", red.String(j.APIURL))
		}
		if source == "" {
			source = u.Hostname()
		}
	}
	unit, err := transform.ParseTimeUnit(j.TimestampUnit)
	if err != nil {
		return nil, usagef("--timestamp-unit: %v", err)
	}
	eps, err := pipeline.SelectEndpoints(j.Endpoints, j.Paths)
	if err != nil {
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
	if j.DataDir == "" {
		return nil, usagef("--data-dir must not be empty")
	}
	var client pipeline.Fetcher
	if !j.Replay {
		opt := extract.Options{
			BaseURL: j.APIURL, Headers: headers, Timeout: j.Timeout, MaxAttempts: j.MaxAttempts,
			MaxBodyBytes: j.MaxBodyBytes, UserAgent: "optlake/" + version, Redactor: red, Logger: log,
			CAFile: j.CAFile, InsecureSkipVerify: j.InsecureSkipVerify,
		}
		if err := j.rateLimit(&opt); err != nil {
			return nil, err
		}
		c, err := extract.New(opt)
		if err != nil {
			return nil, usageError{err}
		}
		client = c
	}
	var ss []sinks.Sink
	seen := map[string]bool{}
	for _, name := range j.Sinks {
		for _, name := range strings.Split(name, ",") {
			name = strings.TrimSpace(name)
			if name == "" || seen[name] {
				continue
			}
			seen[name] = true
			switch name {
			case "parquet":
				s, err := parquet.New(parquet.Options{Dir: j.DataDir, Logger: log})
				if err != nil {
					return nil, err
				}
				ss = append(ss, s)
			case "clickhouse":
				s, err := clickhouse.New(clickhouse.Options{DSN: j.ClickHouseDSN, Cluster: j.Cluster, Migrate: j.Migrate, Logger: log, Redactor: red})
				if err != nil {
					return nil, usageError{err}
				}
				ss = append(ss, s)
			default:
				return nil, usagef("--sink %q: want parquet or clickhouse", name)
			}
		}
	}
	mode, err := infer.ParseMode(j.SchemaContract)
	if err != nil {
		return nil, usagef("--schema-contract: %v", err)
	}
	var schemas *infer.Registry
	for _, ep := range eps {
		if ep.Kind == pipeline.KindAccount {
			if schemas, err = infer.LoadRegistry(j.DataDir); err != nil {
				return nil, err
			}
			if err := j.setInferPolicy(schemas); err != nil {
				return nil, err
			}
			break
		}
	}
	runner, err := pipeline.New(pipeline.Config{
		Accounts: accounts, Schemas: schemas, SchemaMode: mode,
		Client: client, Archive: archive.New(j.DataDir), Sinks: ss, Endpoints: eps, Params: params,
		Source: source, StateDir: j.DataDir, TimestampUnit: unit, BatchRows: j.BatchRows, Redactor: red, Logger: log,
		Ledger: ledger.Open(j.DataDir), Now: func() time.Time { return snapshotClock() },
	})
	if err != nil {
		return nil, usageError{err}
	}
	m := metrics.New()
	if j.MetricsFile != "" {
		// Counters carry on from the previous run's file (cron, timers).
		if err := m.LoadTextfile(j.MetricsFile); err != nil {
			log.Warn("previous metrics file not loaded; counters restart", "err", err)
		}
	}
	return &built{runner: runner, sinks: ss, log: log, redactor: red, metrics: m}, nil
}

// once takes one snapshot, prints the summary line and writes the summary
// JSON. It returns an error (one line, redacted) when the snapshot failed.
func (b *built) once(ctx context.Context, j *job, stdout io.Writer) (*pipeline.Summary, error) {
	if j.Deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, j.Deadline)
		defer cancel()
	}
	cu, err := b.runner.CatchUp(ctx, pipeline.CatchUpOptions{DataDir: j.DataDir, Budget: j.catchUpBudget(), Max: j.CatchUpMax})
	if err != nil && ctx.Err() == nil {
		b.log.Error("catch-up failed", "err", err)
	}
	if line := cu.Line(); line != "" {
		fmt.Fprintln(stdout, b.redactor.String(line))
	}
	sum := b.runner.Run(ctx)
	sum.CatchUp = cu
	pending, err := b.runner.Pending()
	if err != nil {
		b.log.Error("load ledger not read", "err", err)
	}
	sum.Pending = pending
	fmt.Fprintln(stdout, b.redactor.String(sum.Line()))
	b.metrics.Observe(sum)
	if j.MetricsFile != "" {
		if err := b.metrics.WriteTextfile(j.MetricsFile); err != nil {
			b.log.Error("metrics file not written", "err", err)
		}
	}
	if j.SummaryJSON != "" {
		if err := writeJSON(j.SummaryJSON, sum, b.redactor); err != nil {
			return sum, fmt.Errorf("write summary: %w", err)
		}
	}
	b.compactClosedDays(ctx, j, stdout)
	if !sum.OK {
		code := summaryCode(sum)
		if sum.OnlySinksFailed() {
			code = exitPartial // fetched and archived: the sinks catch up
		}
		return sum, codedError{code, fmt.Errorf("%s", sum.Error)}
	}
	for _, p := range pending {
		if p.Pending > 0 {
			return sum, codedError{exitPartial, fmt.Errorf("%s: %d snapshot(s) still pending since %s: %s", p.Sink, p.Pending,
				p.Oldest.Format(time.RFC3339Nano), b.redactor.String(p.LastError))}
		}
	}
	return sum, nil
}

// catchUpBudget is --catch-up-budget, at most half the interval with
// --every: the next snapshot must not wait for a backlog.
func (j *job) catchUpBudget() time.Duration {
	if b := j.Every / 2; j.Every > 0 && (j.CatchUpBudget <= 0 || j.CatchUpBudget > b) {
		return b
	}
	return j.CatchUpBudget
}

// summaryCode is the exit code of a failed snapshot: partial when some
// endpoint loaded everywhere, failure when none did.
func summaryCode(sum *pipeline.Summary) int {
	for _, e := range sum.Endpoints {
		if e.Status != "failed" {
			return exitPartial
		}
	}
	return exitFailure
}

// start builds the job and takes its data directory's lock; release frees
// both (the lock first).
func (j *job) start(ctx context.Context, errw io.Writer) (b *built, release func(), err error) {
	if b, err = j.build(errw); err != nil {
		return nil, nil, err
	}
	lock, err := lockDataDir(j.DataDir, b.log)
	if err != nil {
		b.close(ctx)
		return nil, nil, err
	}
	return b, func() {
		lock.Release()
		b.close(ctx)
	}, nil
}

// lockDataDir takes the data directory's lock (runs never overlap) and
// removes what a crashed run left behind (temp files; a compaction cut
// short is finished or undone).
func lockDataDir(dir string, log *slog.Logger) (*datadir.Lock, error) {
	l, err := datadir.Acquire(dir)
	if err != nil {
		var le *datadir.LockedError
		if errors.As(err, &le) {
			return nil, codedError{exitLocked, err}
		}
		return nil, err
	}
	if n, err := datadir.CleanTemp(dir); err != nil {
		log.Warn("cleaning temp files", "err", err)
	} else if n > 0 {
		log.Info("removed temp files of an interrupted run", "files", n)
	}
	recoverCompaction(dir, log)
	return l, nil
}

func (b *built) close(ctx context.Context) {
	for _, s := range b.sinks {
		s.Close(ctx)
	}
}

// writeJSON writes v atomically, redacted.
func writeJSON(path string, v any, r *redact.Redactor) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	data = []byte(r.String(string(data)) + "\n")
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// loop runs snapshots every interval, aligned to the wall clock (a 5m
// interval snapshots at :00, :05, ...), until ctx is cancelled. A snapshot
// in flight when the signal arrives is finished first.
//
// The first SIGINT/SIGTERM (ctx cancelled) lets the snapshot in flight finish
// and flush, then returns nil; a second one aborts it.
func (b *built) loop(ctx context.Context, j *job, stdout io.Writer) error {
	// Count signals ourselves: the first one cancels ctx (main's
	// NotifyContext) and lets the snapshot finish; the second aborts it.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var mu sync.Mutex
	abort := context.CancelFunc(func() {})
	aborted := false
	done := make(chan struct{})
	defer close(done)
	go func() {
		n := 0
		for {
			select {
			case <-done:
				return
			case <-sigs:
				n++
				if n >= 2 {
					mu.Lock()
					aborted = true
					abort()
					mu.Unlock()
					b.log.Warn("second signal: aborting the snapshot in flight")
				}
			}
		}
	}()
	for {
		sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		mu.Lock()
		abort = cancel
		stop := aborted
		mu.Unlock()
		if stop {
			cancel()
			return codedError{exitFailure, errors.New("aborted by a second signal")}
		}
		_, err := b.once(sctx, j, stdout)
		cancel()
		if err != nil {
			b.log.Error("snapshot failed", "err", err)
		}
		mu.Lock()
		stop = aborted
		mu.Unlock()
		if stop {
			return codedError{exitFailure, errors.New("aborted by a second signal")}
		}
		next := time.Now().Truncate(j.Every).Add(j.Every)
		if j.Jitter > 0 {
			next = next.Add(time.Duration(rand.Int64N(int64(j.Jitter))))
		}
		select {
		case <-ctx.Done():
			b.log.Info("stopping: signal received, last snapshot finished")
			return nil
		case <-time.After(time.Until(next)):
		}
	}
}

// dsnPassword returns the password of a DSN, to redact it.
func dsnPassword(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			return p
		}
	}
	return ""
}

// serveMetrics serves /metrics and /healthz (unhealthy when no snapshot
// finished within three intervals) until stop is called.
func (b *built) serveMetrics(ctx context.Context, j *job) (stop func(), err error) {
	ln, err := net.Listen("tcp", j.Listen)
	if err != nil {
		return nil, usagef("--listen: %v", err)
	}
	b.log.Info("serving metrics", "addr", ln.Addr().String())
	srv := &http.Server{Handler: b.metrics.Handler(b.metrics.HealthCheck(3*j.Every+time.Minute, false)), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}, nil
}

// startProfiles starts a CPU profile and arranges a heap profile; the
// returned func finishes both.
func startProfiles(cpu, mem string) (func(), error) {
	var cpuFile *os.File
	if cpu != "" {
		f, err := os.Create(cpu)
		if err != nil {
			return nil, usagef("--cpuprofile: %v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("cpu profile: %w", err)
		}
		cpuFile = f
	}
	return func() {
		if cpuFile != nil {
			pprof.StopCPUProfile()
			cpuFile.Close()
		}
		if mem != "" {
			if f, err := os.Create(mem); err == nil {
				runtime.GC()
				pprof.WriteHeapProfile(f)
				f.Close()
			}
		}
	}, nil
}
