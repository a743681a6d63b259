package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/optlake/optlake/internal/buildinfo"
	"github.com/optlake/optlake/internal/datadir"
	"github.com/optlake/optlake/internal/metrics"
	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/internal/schedule"
	"github.com/optlake/optlake/internal/secret"
	"github.com/optlake/optlake/internal/settings"
	"github.com/optlake/optlake/lake"
	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/extract"
	"github.com/optlake/optlake/pipeline/infer"
	"github.com/optlake/optlake/pipeline/venueconf"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/storage"
)

// job is the configuration of `optlake run` (and of each demo snapshot,
// and of replay): what to fetch, where to put it. Tagged fields are the
// settings of internal/settings (settings.Decode fills them); the others
// come from the config file's structured keys.
type job struct {
	APIURL             string            `setting:"api-url"`
	Headers            []string          `setting:"header"` // "Name: value"
	Params             []string          `setting:"param"`  // endpoint.key=value
	Endpoints          []string          `setting:"endpoints,split"`
	Paths              map[string]string // endpoint path overrides (config file)
	Sinks              []string          `setting:"sink,split"`
	DataDir            string            `setting:"data-dir"`
	ClickHouseDSN      string            `setting:"clickhouse-dsn"`
	Migrate            bool              `setting:"migrate"`                 // apply pending ClickHouse migrations before loading
	Cluster            string            `setting:"cluster"`                 // ClickHouse cluster name (remote_servers); empty = one server
	CHMaxAttempts      int               `setting:"clickhouse-max-attempts"` // per ClickHouse connect or insert
	Source             string            `setting:"source"`
	TimestampUnit      string            `setting:"timestamp-unit"`
	Timeout            time.Duration     `setting:"timeout"`
	CAFile             string            `setting:"ca-file"`
	InsecureSkipVerify bool              `setting:"insecure-skip-verify"`
	Deadline           time.Duration     `setting:"deadline"`
	MaxAttempts        int               `setting:"max-attempts"`
	MaxBodyBytes       int64             `setting:"max-body-size"`
	BatchRows          int               `setting:"batch-rows"`
	MaxRejectShare     float64           `setting:"max-reject-share"`
	SummaryJSON        string            `setting:"summary-json"`
	MetricsFile        string            `setting:"metrics-file"` // Prometheus textfile after each run
	Jitter             time.Duration     `setting:"jitter"`       // --every: random extra delay before each snapshot
	Listen             string            `setting:"listen"`       // /metrics and /healthz in --every mode
	Every              time.Duration     `setting:"every"`
	LogFormat          string            `setting:"log-format"`
	LogLevel           string            `setting:"log-level"`
	Accounts           []string          `setting:"account,split"`   // account labels
	AccountHeaders     []string          `setting:"account-header"`  // label:Name: value
	SchemaContract     string            `setting:"schema-contract"` // evolve | freeze | discard-columns
	RateLimit          string            `setting:"rate-limit"`      // --rate-limit N/s ("" unlimited)
	RateBurst          int               `setting:"rate-burst"`
	ColumnBudget       int               `setting:"column-budget"` // account tables: most columns per table
	Compact            bool              `setting:"compact"`       // compact closed days after each snapshot
	TableFormat        string            `setting:"table-format"`  // parquet | iceberg ("" = the lake's)
	RawRetention       time.Duration     `setting:"raw-retention"` // raw archive and done records kept (0 = all)
	// An Iceberg lake's upkeep after run --compact compacted a day.
	IcebergKeep  time.Duration `setting:"iceberg-keep-snapshots"`
	IcebergGrace time.Duration `setting:"iceberg-orphan-grace"`
	// An Iceberg lake's catalog (icebergCatalog).
	IcebergCatalog    string `setting:"iceberg-catalog"`
	IcebergCatalogURI string `setting:"iceberg-catalog-uri"`
	IcebergCatalogAs  string `setting:"iceberg-catalog-name"`
	IcebergNamespace  string `setting:"iceberg-namespace"`
	IcebergPrefix     string `setting:"iceberg-table-prefix"`
	// --iceberg-catalog rest (icebergREST).
	IcebergWarehouse    string                    `setting:"iceberg-catalog-warehouse"`
	IcebergToken        string                    `setting:"iceberg-catalog-token"`
	IcebergCredential   string                    `setting:"iceberg-catalog-credential"`
	IcebergOAuth2URI    string                    `setting:"iceberg-catalog-oauth2-uri"`
	IcebergScope        string                    `setting:"iceberg-catalog-scope"`
	IcebergSigV4Region  string                    `setting:"iceberg-catalog-sigv4-region"`
	IcebergSigV4Service string                    `setting:"iceberg-catalog-sigv4-service"`
	Maps                map[string]infer.MapRules // per endpoint: map detection overrides (config file)
	Venue               venueconf.Venue           // auth, errors, envelopes, pagination (config file; configcmd.go)
	// Catch-up of the snapshots the ledger says a sink is missing, before
	// each snapshot: bounded by time and by count (0 = no bound).
	CatchUpBudget time.Duration `setting:"catch-up-budget"`
	LeaseTTL      time.Duration `setting:"lease-ttl"`
	CatchUpMax    int           `setting:"catch-up-max"`
	// Profiles of the process (run, replay).
	CPUProfile string `setting:"cpuprofile"`
	MemProfile string `setting:"memprofile"`
	// Config is the --config file (run, config check).
	Config string `setting:"config"`
	// Replay builds a runner that reads the raw archive instead of the
	// venue (no API URL, no client).
	Replay bool
	// host gives the snapshot times and the heap's soft limit (main.go).
	host host
}

// defaultJob is a job with every setting at its default, for commands
// (demo) that set a few and take the rest from the list.
func defaultJob() *job {
	j := &job{}
	for _, s := range settings.For(settings.Run) {
		if s.Default != nil {
			settings.Set(j, s.Name, s.Default)
		}
	}
	return j
}

// built is a job wired into a runner.
type built struct {
	store    storage.Store  // the data directory
	lake     *lake.Format   // its table format, read once under the lock
	lease    *storage.Lease // held from start to release
	metrics  *metrics.Metrics
	runner   *pipeline.Runner
	sinks    []sinks.Sink
	log      *slog.Logger
	redactor *redact.Redactor
}

// parseHeaders turns "Name: value" specs into a header set, and returns the
// values as secrets.
//
// A value may be a reference (internal/secret): "${VAR}" reads the
// environment variable VAR, "@/path" reads a file.
func parseHeaders(specs []string) (http.Header, []string, error) {
	h := http.Header{}
	var secrets []string
	for _, s := range specs {
		name, value, ok := strings.Cut(s, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, nil, usagef("--header: want 'Name: value', got a value without a name (the value is not shown)")
		}
		v, err := secret.Resolve(value)
		if err != nil {
			return nil, nil, usagef("--header %s: %v", name, err)
		}
		h.Add(name, v)
		secrets = append(secrets, v)
	}
	return h, secrets, nil
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

// open validates the job and opens its logger and data directory: what
// can be checked before the data directory is taken.
func (j *job) open(ctx context.Context, stderr io.Writer) (*validJob, *slog.Logger, storage.Store, error) {
	v, err := j.validate()
	if err != nil {
		return nil, nil, nil, err
	}
	if err := pipeline.CheckParams(v.endpoints, v.params); err != nil {
		return nil, nil, nil, usageError{err} // before the data directory is touched
	}
	log, err := newLogger(stderr, j.LogFormat, j.LogLevel, v.red)
	if err != nil {
		return nil, nil, nil, err
	}
	if _, err := lake.ParseFormat(j.TableFormat); err != nil {
		return nil, nil, nil, usageError{err}
	}
	st, err := openStore(ctx, j.DataDir, j.Replay)
	if err != nil {
		return nil, nil, nil, err
	}
	if dir := storage.LocalDir(st); dir != "" {
		j.DataDir = dir // a file:// URL is its path
	}
	return v, log, st, nil
}

// client is the venue's HTTP client (nil for a replay).
func (j *job) client(v *validJob, log *slog.Logger) (pipeline.Fetcher, error) {
	if j.Replay {
		return nil, nil
	}
	opt := extract.Options{
		BaseURL: j.APIURL, Headers: v.headers, Timeout: j.Timeout, MaxAttempts: j.MaxAttempts,
		MaxBodyBytes: j.MaxBodyBytes, UserAgent: "optlake/" + buildInfo().Version, Redactor: v.red, Logger: log,
		CAFile: j.CAFile, InsecureSkipVerify: j.InsecureSkipVerify,
		RateLimit: v.rate, RateBurst: j.RateBurst, // burst 0: the client's default, 1
	}
	c, err := extract.New(opt)
	if err != nil {
		return nil, usageError{err}
	}
	if err := v.authenticate(c); err != nil {
		return nil, usageError{err}
	}
	return c, nil
}

// wire builds the sinks and the runner on the data directory st, whose
// lock the process holds: the lake's table format is read there, once
// (openLake), and gives the Parquet sink its files, its live sink and a
// replay's sink.
func (j *job) wire(ctx context.Context, st storage.Store, v *validJob, client pipeline.Fetcher, log *slog.Logger) (*built, error) {
	asked, _ := lake.ParseFormat(j.TableFormat) // checked by open
	// Without the Parquet sink there is no lake to settle: its format is
	// read, not recorded.
	f, err := openLake(ctx, st, asked, slices.Contains(v.sinks, "parquet"), lakeOptions(log, j.host, j.icebergCatalog()))
	if err != nil {
		return nil, err
	}
	b, err := j.wireSinks(ctx, st, f, v, client, log)
	if err != nil {
		f.Close()
		return nil, err
	}
	return b, nil
}

// wireSinks is wire's part after the lake's format is read.
func (j *job) wireSinks(ctx context.Context, st storage.Store, f *lake.Format, v *validJob, client pipeline.Fetcher, log *slog.Logger) (*built, error) {
	red := v.red
	ss, err := openSinks(v.sinks, j, st, f, log, red)
	if err != nil {
		return nil, err
	}
	var schemas *infer.Registry
	for _, ep := range v.endpoints {
		if ep.Kind == pipeline.KindAccount {
			if schemas, err = infer.LoadRegistryFrom(ctx, st); err != nil {
				closeSinks(ss)
				return nil, err
			}
			if err := j.setInferPolicy(schemas); err != nil {
				closeSinks(ss)
				return nil, err
			}
			break
		}
	}
	runner, err := pipeline.New(pipeline.Config{
		Accounts: v.accounts, Auth: v.auth, Schemas: schemas, SchemaMode: v.mode,
		Client: client, Store: st, Events: true, Ledger: true, Sinks: ss, Endpoints: v.endpoints, Params: v.params,
		Source: v.source, TimestampUnit: v.unit, BatchRows: j.BatchRows, Redactor: red, Logger: log,
		Now: j.host.now, MaxRejectShare: j.MaxRejectShare, Step: stepHook(),
	})
	if err != nil {
		closeSinks(ss)
		return nil, usageError{err}
	}
	bi := buildInfo()
	m := metrics.New(metrics.WithBuildInfo(bi.Version, bi.Commit, bi.Date, bi.GoVersion))
	if j.MetricsFile != "" {
		// Counters carry on from the previous run's file (cron, timers).
		if err := m.LoadTextfile(j.MetricsFile); err != nil {
			log.Warn("previous metrics file not loaded; counters restart", "err", err)
		}
	}
	return &built{store: st, lake: f, runner: runner, sinks: ss, log: log, redactor: red, metrics: m}, nil
}

// once takes one snapshot, prints the summary line and writes the summary
// JSON. It returns an error (one line, redacted) when the snapshot failed.
func (b *built) once(ctx context.Context, j *job, stdout io.Writer) (*pipeline.Summary, error) {
	if j.Deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, j.Deadline)
		defer cancel()
	}
	cu, err := b.runner.CatchUp(ctx, pipeline.CatchUpOptions{Budget: j.catchUpBudget(), Max: j.CatchUpMax})
	if err != nil && ctx.Err() == nil {
		b.log.Error("catch-up failed", "err", err)
	}
	if line := cu.Line(); line != "" {
		fmt.Fprintln(stdout, b.redactor.String(line))
	}
	sum := b.runner.Run(ctx)
	sum.CatchUp = cu
	pending, err := b.runner.Pending(ctx)
	if err != nil {
		b.log.Error("load ledger not read", "err", err)
	}
	sum.Pending = pending
	fmt.Fprintln(stdout, b.redactor.String(sum.Line()))
	mr := metricsRun(sum)
	if comps, err := unfinishedCompactions(ctx, b.store); err == nil {
		mr.UnfinishedCompactions = len(comps)
	}
	b.metrics.Observe(mr)
	if j.MetricsFile != "" {
		if err := b.metrics.WriteTextfile(j.MetricsFile); err != nil {
			b.log.Error("metrics file not written", "err", err)
		}
	}
	if j.SummaryJSON != "" {
		if err := writeJSON(j.SummaryJSON, runSummary{Optlake: buildInfo(), Summary: sum}, b.redactor); err != nil {
			return sum, fmt.Errorf("write summary: %w", err)
		}
	}
	b.compactClosedDays(ctx, j, stdout, sum)
	b.pruneRaw(ctx, j)
	b.foldLedger(ctx, j)
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

// start validates the job, takes its data directory (lockStore) and
// wires it there; release frees both (the lease first). The returned
// context is ctx, cancelled if the lease of a bucket prefix is lost (taken
// over after a renewal failed for longer than its TTL): the process must
// stop writing then.
func (j *job) start(ctx context.Context, errw io.Writer) (b *built, runCtx context.Context, release func(), err error) {
	v, log, st, err := j.open(ctx, errw)
	if err != nil {
		return nil, nil, nil, err
	}
	client, err := j.client(v, log)
	if err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	lease, err := lockStore(ctx, st, j.LeaseTTL, log)
	if err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	if b, err = j.wire(ctx, st, v, client, log); err != nil {
		if rerr := lease.Release(context.WithoutCancel(ctx)); rerr != nil {
			log.Warn("releasing the data directory", "err", rerr)
		}
		st.Close()
		return nil, nil, nil, err
	}
	b.lease = lease
	// A bucket run holds upload buffers (a few parts per open object)
	// besides the heap (about 64 MiB more than the heap's limit): a
	// soft limit keeps a 1,000,000-instrument run within 256 MiB of RSS
	// (measured 193–194 MiB at 128 MiB, 252–258 at 192, 285 without;
	// the wall time was the same). A local run without a limit peaked
	// at 248–264 MiB (the heap doubling past the live set while the
	// events merge beside the Parquet writers); at 160 MiB, 223–226,
	// at the same CPU (alternating A/B, docs/PERFORMANCE.md).
	limit := int64(localMemoryLimit)
	if storage.LocalDir(b.store) == "" {
		limit = bucketMemoryLimit
	}
	j.host.lowerMemoryLimit(limit)
	j.host.raiseGCPercent()
	runCtx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-b.lease.Lost():
			b.log.Error("lost the data directory's lease; stopping", "store", b.store.String(), "err", b.lease.Err())
			cancel()
		case <-runCtx.Done():
		}
	}()
	return b, runCtx, func() {
		cancel()
		if err := b.lease.Release(context.WithoutCancel(ctx)); err != nil {
			b.log.Warn("releasing the data directory", "err", err)
		}
		b.close(ctx)
	}, nil
}

// lowerMemoryLimit sets the Go heap's soft limit to limit, unless
// GOMEMLIMIT is set or a lower limit is already in place: a replay into a
// bucket keeps the bucket run's limit when its day writer asks for
// compaction's higher one.
func lowerMemoryLimit(limit int64) {
	if os.Getenv("GOMEMLIMIT") != "" || debug.SetMemoryLimit(-1) <= limit {
		return
	}
	debug.SetMemoryLimit(limit)
}

// raiseGCPercent lets the heap grow to three times the live set between
// collections (GOGC=200) instead of twice, unless GOGC is set: the soft
// limit above, not GOGC, then bounds the heap of a large listing. A 1M
// listing's run keeps 41–55 MB live and collected ~60 times at GOGC=100
// (4–6% of its CPU); at 200, about 0.2 CPU-s less for a few MiB of RSS
// (docs/PERFORMANCE.md, issue 33).
func raiseGCPercent() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}

// gcPercent is a run's GOGC (see raiseGCPercent).
const gcPercent = 200

// bucketMemoryLimit and localMemoryLimit are the Go heap's soft limit of a
// run, replay or demo on a bucket or a local data directory (unless
// GOMEMLIMIT is set).
const (
	bucketMemoryLimit = 128 << 20
	localMemoryLimit  = 160 << 20
)

// leaseErr is the error of a run whose lease was lost (nil if it was not).
func (b *built) leaseErr() error {
	select {
	case <-b.lease.Lost():
		return codedError{exitLocked, fmt.Errorf("data directory %s: stopped writing, its lease is lost: %v", b.store, b.lease.Err())}
	default:
		return nil
	}
}

func (b *built) close(ctx context.Context) {
	for _, s := range b.sinks {
		s.Close(ctx)
	}
	b.runner.Close()
	if b.lake != nil {
		b.lake.Close()
	}
	b.store.Close()
}

// closeSinks closes the sinks opened before a later one failed.
func closeSinks(ss []sinks.Sink) {
	for _, s := range ss {
		s.Close(context.Background())
	}
}

// runSummary is the --summary-json document: the run's summary, led by
// which optlake took it ("optlake": version, commit, date, Go version).
type runSummary struct {
	Optlake buildinfo.Info `json:"optlake"`
	*pipeline.Summary
}

// writeJSON writes v atomically and durably (datadir.WriteFile), redacted.
func writeJSON(path string, v any, r *redact.Redactor) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	return datadir.WriteFile(path, []byte(r.String(string(data))+"\n"))
}

// loop runs snapshots every --every, aligned to the wall clock, until ctx
// is cancelled (internal/schedule): the first SIGINT/SIGTERM lets the
// snapshot in flight finish and flush, then returns nil; a second one
// aborts it.
func (b *built) loop(ctx context.Context, j *job, stdout io.Writer) error {
	err := schedule.Run(ctx, schedule.Options{Every: j.Every, Jitter: j.Jitter, Logger: b.log}, func(ctx context.Context) error {
		_, err := b.once(ctx, j, stdout)
		return err
	})
	if errors.Is(err, schedule.ErrAborted) {
		return codedError{exitFailure, err}
	}
	return err
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
