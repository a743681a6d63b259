// Package metrics exports what optlake's runs did as Prometheus metrics,
// with the Prometheus Go client library and a registry of its own (never
// the global default one).
//
// A Metrics value accumulates finished runs (Observe) and exposes them in
// two ways:
//
//   - WriteTextfile writes them in the text exposition format for
//     node_exporter's textfile collector (one-shot runs: --metrics-file);
//   - Handler serves /metrics and /healthz (optlake run --every with --listen);
//     HealthCheck builds a health function for it.
//
// A one-shot process lives for one run, so on its own its counters would
// restart at every run. To keep them monotonic across cron runs, call
// LoadTextfile with the previous file before Observe: it adds the previous
// counters and histograms back and keeps the gauges (such as the last success
// time of an endpoint that failed this time). A missing file starts from zero;
// an unreadable one is reported and may be ignored (Prometheus treats the
// restart from zero as an ordinary counter reset).
//
// Metrics (all prefixed optlake_; endpoint is a logical endpoint name,
// table the endpoint's table, sink parquet or clickhouse):
//
//	runs_total{status="ok|failed"}                 counter   finished runs
//	run_failures_total                             counter   failed runs
//	endpoint_runs_total{endpoint,status}           counter   status ok|failed|archived
//	requests_total{endpoint}                       counter   parameter sets requested (not retries)
//	rows_total{table,sink}                         counter   rows committed to a sink
//	sink_failures_total{endpoint,sink}             counter   endpoint snapshots a sink failed to load
//	rejects_total{endpoint}                        counter   rows rejected (in the rejects table)
//	duplicates_total{endpoint}                     counter   of them, rows whose key came earlier in the snapshot
//	events_total{endpoint}                         counter   instrument events derived
//	response_bytes_total{endpoint}                 counter   response body bytes received
//	column_budget_overflow_total{endpoint}         counter   account fields stored in extra (table at its column budget)
//	run_duration_seconds                           histogram duration of whole runs
//	endpoint_duration_seconds{endpoint}            histogram duration per endpoint
//	last_run_timestamp_seconds                     gauge     snapshot time of the last run
//	last_run_ok                                    gauge     1 when the last run succeeded, else 0
//	last_run_duration_seconds                      gauge     duration of the last run
//	last_success_timestamp_seconds{endpoint}       gauge     snapshot time of the endpoint's last success
//	pending_loads{sink}                            gauge     snapshots the load ledger holds pending for the sink
//	oldest_pending_load_age_seconds{sink}          gauge     age of the oldest of them at the end of the run (0: none)
//	caught_up_loads_total{sink}                    counter   loads of missed snapshots done by catch-up
//	build_info{version,revision,build_date,goversion} gauge   always 1: which optlake wrote the metrics (WithBuildInfo)
//
// The duration histograms have buckets from 0.1 s to 1800 s (the default
// --deadline). No label holds an unbounded value (run ids, errors, URLs never
// appear).
package metrics

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/optlake/optlake/internal/datadir"
)

// Namespace prefixes every metric name.
const Namespace = "optlake"

// durationBuckets are the upper bounds, in seconds, of the duration
// histograms: from a fast local snapshot to the default 30-minute deadline.
var durationBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}

// Metrics holds the metrics of the runs observed so far. It is safe for
// concurrent use: a scrape never sees half of a run.
type Metrics struct {
	// mu is held for writing by Observe and LoadTextfile and for reading
	// by every gather, so a scrape or a textfile sees whole runs only.
	mu          sync.RWMutex
	reg         *prometheus.Registry
	constLabels prometheus.Labels
	now         func() time.Time

	// For HealthCheck: when m was made, when the last run was observed,
	// and its outcome.
	created, observed time.Time
	lastOK            bool
	lastErr           string

	runs             *prometheus.CounterVec
	runFailures      *prometheus.CounterVec
	endpointRuns     *prometheus.CounterVec
	requests         *prometheus.CounterVec
	rows             *prometheus.CounterVec
	sinkFailures     *prometheus.CounterVec
	rejects          *prometheus.CounterVec
	duplicates       *prometheus.CounterVec
	events           *prometheus.CounterVec
	bytes            *prometheus.CounterVec
	overflow         *prometheus.CounterVec
	runDuration      *histogramVec
	endpointDuration *histogramVec
	lastRun          *prometheus.GaugeVec
	lastRunOK        *prometheus.GaugeVec
	lastRunDuration  *prometheus.GaugeVec
	lastSuccess      *prometheus.GaugeVec
	pendingLoads     *prometheus.GaugeVec
	oldestPending    *prometheus.GaugeVec
	unfinished       *prometheus.GaugeVec
	eventsSkipped    *prometheus.CounterVec
	caughtUp         *prometheus.CounterVec

	// families maps a full metric name to what LoadTextfile needs to seed it.
	families map[string]family

	// build holds the label values of build_info (nil: no such metric).
	build []string
}

// family describes one metric family for LoadTextfile.
type family struct {
	typ    dto.MetricType
	labels []string
	seed   func(lvs []string, m *dto.Metric) error
}

// Option configures New.
type Option func(*Metrics)

// WithConstLabels adds labels with fixed values to every metric, to tell
// apart several optlake jobs whose textfiles one node_exporter reads (e.g.
// {"job_name": "venue-a"}). Values must be bounded; never a run id.
func WithConstLabels(l prometheus.Labels) Option {
	return func(m *Metrics) {
		m.constLabels = prometheus.Labels{}
		for k, v := range l {
			m.constLabels[k] = v
		}
	}
}

// WithClock sets the clock (default time.Now) that HealthCheck measures ages
// with and that stamps a run without a snapshot time; tests pin it.
func WithClock(now func() time.Time) Option {
	return func(m *Metrics) { m.now = now }
}

// WithBuildInfo adds the gauge optlake_build_info, always 1, labelled with
// the binary's version, git revision, build date and Go version (the
// Prometheus convention for telling which build is running, e.g.
// count by (version) (optlake_build_info)). LoadTextfile never carries a
// previous file's build_info over: after an upgrade the textfile names only
// the binary that wrote it.
func WithBuildInfo(version, revision, buildDate, goVersion string) Option {
	return func(m *Metrics) { m.build = []string{version, revision, buildDate, goVersion} }
}

// New returns metrics with every counter of a run at zero, registered in a
// registry of their own.
func New(opts ...Option) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), now: time.Now, families: map[string]family{}}
	for _, o := range opts {
		o(m)
	}
	m.created = m.now()
	m.runs = m.counter("runs_total", "Finished runs, by status (ok or failed).", "status")
	m.runFailures = m.counter("run_failures_total", "Runs that failed (any endpoint or sink failed).")
	m.endpointRuns = m.counter("endpoint_runs_total", "Endpoint snapshots, by status (ok, failed, or archived: body kept raw only).", "endpoint", "status")
	m.requests = m.counter("requests_total", "Requests made per endpoint: one per parameter set; retries are not counted.", "endpoint")
	m.rows = m.counter("rows_total", "Rows committed to a sink, per table.", "table", "sink")
	m.sinkFailures = m.counter("sink_failures_total", "Endpoint snapshots that a sink failed to load.", "endpoint", "sink")
	m.rejects = m.counter("rejects_total", "Rows rejected (written to the rejects table with a reason), per endpoint.", "endpoint")
	m.duplicates = m.counter("duplicates_total", "Rows rejected because their key (instrument_name) came earlier in the same snapshot, per endpoint.", "endpoint")
	m.events = m.counter("events_total", "Instrument events derived (listings, delistings, changes), per endpoint.", "endpoint")
	m.bytes = m.counter("response_bytes_total", "Response body bytes received and archived, per endpoint.", "endpoint")
	m.overflow = m.counter("column_budget_overflow_total", "Account fields stored in a table's extra JSON column because the table reached its column budget, per endpoint.", "endpoint")
	m.runDuration = m.histogram("run_duration_seconds", "Duration of whole runs.")
	m.endpointDuration = m.histogram("endpoint_duration_seconds", "Duration of one endpoint's snapshot, all its requests and loads.", "endpoint")
	m.lastRun = m.gauge("last_run_timestamp_seconds", "Snapshot time of the last finished run, as a Unix time.")
	m.lastRunOK = m.gauge("last_run_ok", "1 when the last finished run succeeded, 0 when it failed.")
	m.lastRunDuration = m.gauge("last_run_duration_seconds", "Duration of the last finished run.")
	m.lastSuccess = m.gauge("last_success_timestamp_seconds", "Snapshot time of the endpoint's last successful snapshot, as a Unix time.", "endpoint")
	m.pendingLoads = m.gauge("pending_loads", "Snapshots the load ledger holds pending for the sink (to be caught up) at the end of the last run.", "sink")
	m.oldestPending = m.gauge("oldest_pending_load_age_seconds", "Age of the oldest snapshot pending for the sink at the end of the last run (0 when none).", "sink")
	m.eventsSkipped = m.counter("events_skipped_total", "Snapshots whose instrument events were not written (older than the events state: a clock gone backwards or a late load; or the state could not be saved), per endpoint.", "endpoint")
	m.unfinished = m.gauge("unfinished_compactions", "Compaction journals left in the data directory at the end of the last run (a crash mid-publish; on a bucket readers may see rows twice until a command recovers it).")
	m.caughtUp = m.counter("caught_up_loads_total", "Loads of missed snapshots (snapshot x sink) committed by catch-up.", "sink")

	// Series that exist before the first run, so rate() and absent() alerts
	// work from the start.
	m.runs.WithLabelValues("ok")
	m.runs.WithLabelValues("failed")
	m.runFailures.WithLabelValues()
	if m.build != nil {
		// Not in m.families: LoadTextfile must not seed another build's series.
		info := prometheus.NewGaugeVec(prometheus.GaugeOpts(m.opts("build_info", "Always 1; the labels say which optlake build wrote these metrics.")),
			[]string{"version", "revision", "build_date", "goversion"})
		m.reg.MustRegister(info)
		info.WithLabelValues(m.build...).Set(1)
	}
	return m
}

func (m *Metrics) opts(name, help string) prometheus.Opts {
	return prometheus.Opts{Namespace: Namespace, Name: name, Help: help, ConstLabels: m.constLabels}
}

func (m *Metrics) counter(name, help string, labels ...string) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts(m.opts(name, help)), labels)
	m.reg.MustRegister(v)
	m.families[Namespace+"_"+name] = family{typ: dto.MetricType_COUNTER, labels: labels, seed: func(lvs []string, dm *dto.Metric) error {
		x := dm.GetCounter().GetValue()
		if x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("counter value %v", x)
		}
		c, err := v.GetMetricWithLabelValues(lvs...)
		if err != nil {
			return err
		}
		c.Add(x)
		return nil
	}}
	return v
}

func (m *Metrics) gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts(m.opts(name, help)), labels)
	m.reg.MustRegister(v)
	m.families[Namespace+"_"+name] = family{typ: dto.MetricType_GAUGE, labels: labels, seed: func(lvs []string, dm *dto.Metric) error {
		g, err := v.GetMetricWithLabelValues(lvs...)
		if err != nil {
			return err
		}
		g.Set(dm.GetGauge().GetValue())
		return nil
	}}
	return v
}

func (m *Metrics) histogram(name, help string, labels ...string) *histogramVec {
	full := Namespace + "_" + name
	h := &histogramVec{
		desc:    prometheus.NewDesc(full, help, labels, m.constLabels),
		buckets: durationBuckets,
		series:  map[string]*histSeries{},
	}
	m.reg.MustRegister(h)
	m.families[full] = family{typ: dto.MetricType_HISTOGRAM, labels: labels, seed: func(lvs []string, dm *dto.Metric) error {
		return h.seed(lvs, dm.GetHistogram())
	}}
	return h
}

// Observe records one finished run. A nil run is ignored.
func (m *Metrics) Observe(sum *Run) {
	if sum == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	snap := sum.SnapshotTime
	if snap.IsZero() {
		snap = m.now()
	}
	ts := float64(snap.UnixMilli()) / 1e3
	dur := seconds(sum.DurationMS)
	m.observed, m.lastOK, m.lastErr = m.now(), sum.OK, sum.Error

	status, ok := "ok", 1.0
	if !sum.OK {
		status, ok = "failed", 0
		m.runFailures.WithLabelValues().Inc()
	}
	m.runs.WithLabelValues(status).Inc()
	m.runDuration.observe(dur)
	m.lastRun.WithLabelValues().Set(ts)
	m.lastRunOK.WithLabelValues().Set(ok)
	m.lastRunDuration.WithLabelValues().Set(dur)

	m.unfinished.WithLabelValues().Set(float64(sum.UnfinishedCompactions))
	for _, p := range sum.Pending {
		m.pendingLoads.WithLabelValues(p.Sink).Set(float64(p.Pending))
		age := 0.0
		if p.Oldest != nil {
			age = math.Max(0, m.now().Sub(*p.Oldest).Seconds())
		}
		m.oldestPending.WithLabelValues(p.Sink).Set(age)
	}
	for _, s := range sum.CaughtUp {
		if s.OK {
			for _, sink := range s.Sinks {
				m.caughtUp.WithLabelValues(sink).Inc()
			}
		}
	}
	for _, e := range sum.Endpoints {
		ep := e.Endpoint
		st := e.Status
		if st == "" {
			st = "unknown"
		}
		m.endpointRuns.WithLabelValues(ep, st).Inc()
		add(m.requests.WithLabelValues(ep), e.Requests)
		add(m.rejects.WithLabelValues(ep), e.Rejects)
		add(m.duplicates.WithLabelValues(ep), e.Duplicates)
		add(m.events.WithLabelValues(ep), e.Events)
		if e.EventsSkipped != "" {
			m.eventsSkipped.WithLabelValues(ep).Inc()
		}
		add(m.bytes.WithLabelValues(ep), e.Bytes)
		add(m.overflow.WithLabelValues(ep), e.Overflow)
		m.endpointDuration.observe(seconds(e.DurationMS), ep)
		if st != "failed" {
			m.lastSuccess.WithLabelValues(ep).Set(ts)
		}
		table := TableOf(ep)
		for sink, sr := range e.Sinks {
			add(m.rows.WithLabelValues(table, sink), sr.Rows)
			if sr.Error != "" {
				m.sinkFailures.WithLabelValues(ep, sink).Inc()
			} else {
				m.sinkFailures.WithLabelValues(ep, sink).Add(0)
			}
		}
	}
}

// HealthCheck returns a health function for Handler. It reports an error
// when no run has finished within maxAge (counted from New before the
// first run; 0 disables the check): the loop is stuck, and restarting the
// process helps. With failed set, it also reports an error while the last
// run failed, with the run's one-line reason; that suits a status page or
// an alert more than a liveness probe, since restarting does not mend a venue
// or a database that is down.
func (m *Metrics) HealthCheck(maxAge time.Duration, failed bool) func() error {
	return func() error {
		m.mu.RLock()
		defer m.mu.RUnlock()
		last := m.observed
		if last.IsZero() {
			last = m.created
		}
		if age := m.now().Sub(last); maxAge > 0 && age > maxAge {
			if m.observed.IsZero() {
				return fmt.Errorf("no run finished in %s since start", age.Round(time.Second))
			}
			return fmt.Errorf("no run finished in %s (limit %s)", age.Round(time.Second), maxAge)
		}
		if failed && !m.observed.IsZero() && !m.lastOK {
			if m.lastErr == "" {
				return errors.New("last run failed")
			}
			return fmt.Errorf("last run failed: %s", m.lastErr)
		}
		return nil
	}
}

// TableOf names the table an endpoint's rows go to: its logical name
// (instruments, account_balance, ...). Rows of an account endpoint's child
// tables are counted under it, as the run summary reports them per endpoint.
func TableOf(endpoint string) string { return endpoint }

func seconds(ms int64) float64 { return float64(ms) / 1e3 }

// add adds a count to a counter; a negative count (never reported by the
// pipeline) is ignored rather than panicking.
func add[N int | int64](c prometheus.Counter, n N) {
	if n > 0 {
		c.Add(float64(n))
	} else {
		c.Add(0) // the series exists, at its value so far
	}
}

// Gather returns the current metrics of the runs, sorted by name (the
// runtime metrics that Handler adds are not included).
func (m *Metrics) Gather() ([]*dto.MetricFamily, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.reg.Gather()
}

// Registry returns the private registry, to register more collectors.
// Whatever is registered there also goes into the textfile.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// WriteTextfile writes every metric in the Prometheus text exposition
// format, as node_exporter's textfile collector reads it (name the file
// *.prom in its --collector.textfile.directory). The file is replaced
// atomically: the text goes to a hidden temp file in the same directory
// (whose name does not end in .prom), is synced, made 0644 and renamed over
// path, so a collector never reads a partial file. The directory is created
// when missing.
func (m *Metrics) WriteTextfile(path string) error {
	mfs, err := m.Gather()
	if err != nil {
		return fmt.Errorf("metrics: gather: %w", err)
	}
	tmp, err := datadir.TempFor(path)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	defer tmp.Close()
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(tmp, mf); err != nil {
			os.Remove(tmp.Name())
			return fmt.Errorf("metrics: write %s: %w", tmp.Name(), err)
		}
	}
	if err := datadir.Publish(tmp, path); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// LoadTextfile adds the metrics of a textfile written by an earlier process
// (WriteTextfile) to m, so that counters and histograms stay monotonic across
// one-shot runs and gauges keep their last values. Call it once, on a fresh
// Metrics, before Observe.
//
// A missing file is not an error. A file that cannot be read or parsed is
// an error and nothing of it is loaded (m is unchanged); the caller should
// log it and go on: the counters then restart from zero, which Prometheus
// handles as a counter reset. Families that are not optlake's, and series
// whose type, labels or histogram buckets differ from this version's, are
// skipped, as are series whose constant labels (WithConstLabels) differ.
func (m *Metrics) LoadTextfile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	defer f.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(f)
	if err != nil {
		return fmt.Errorf("metrics: previous textfile %s: %w", path, err)
	}
	names := make([]string, 0, len(mfs))
	for name := range mfs {
		names = append(names, name)
	}
	sort.Strings(names)

	type seed struct {
		fam family
		lvs []string
		m   *dto.Metric
	}
	var seeds []seed
	for _, name := range names {
		mf := mfs[name]
		fam, ok := m.families[name]
		if !ok || mf.GetType() != fam.typ {
			continue
		}
		for _, dm := range mf.GetMetric() {
			if lvs, ok := m.labelValues(fam.labels, dm.GetLabel()); ok {
				seeds = append(seeds, seed{fam, lvs, dm})
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range seeds {
		_ = s.fam.seed(s.lvs, s.m) // a series that does not fit is skipped
	}
	return nil
}

// labelValues orders a series' labels as the family's variable labels, after
// checking the constant ones; ok is false when the series does not fit.
func (m *Metrics) labelValues(names []string, pairs []*dto.LabelPair) ([]string, bool) {
	if len(pairs) != len(names)+len(m.constLabels) {
		return nil, false
	}
	got := map[string]string{}
	for _, p := range pairs {
		got[p.GetName()] = p.GetValue()
	}
	for k, v := range m.constLabels {
		if w, ok := got[k]; !ok || w != v {
			return nil, false
		}
	}
	lvs := make([]string, len(names))
	for i, n := range names {
		v, ok := got[n]
		if !ok {
			return nil, false
		}
		lvs[i] = v
	}
	return lvs, true
}

// Handler serves, for a long-running process (optlake run --every):
//
//	GET /metrics  the metrics of the runs, plus the Go runtime and process
//	              metrics (go_*, process_*) of this process
//	GET /healthz  200 "ok" when health returns nil (or health is nil); 503
//	              and the error on one line otherwise
//
// Anything else is 404.
func (m *Metrics) Handler(health func() error) http.Handler {
	runtime := prometheus.NewRegistry()
	runtime.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	g := prometheus.Gatherers{prometheus.GathererFunc(m.Gather), runtime}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		var err error
		if health != nil {
			err = health()
		}
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			msg := strings.Join(strings.Fields(err.Error()), " ")
			if msg == "" {
				msg = "unhealthy"
			}
			fmt.Fprintln(w, msg)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<html><head><title>optlake</title></head><body><h1>optlake</h1><p><a href="/metrics">/metrics</a> · <a href="/healthz">/healthz</a></p></body></html>`+"\n")
	})
	return mux
}

// histogramVec is a histogram whose state can be seeded from a previous
// textfile (client_golang's own histograms can only be observed). It is a
// prometheus.Collector that exports constant histograms.
type histogramVec struct {
	desc    *prometheus.Desc
	buckets []float64

	mu     sync.Mutex
	series map[string]*histSeries // by label values joined with \xff
}

type histSeries struct {
	lvs    []string
	counts []uint64 // per bucket, not cumulative; len(buckets)+1, the last is +Inf
	count  uint64
	sum    float64
}

func (h *histogramVec) get(lvs []string) *histSeries {
	key := strings.Join(lvs, "\xff")
	s, ok := h.series[key]
	if !ok {
		s = &histSeries{lvs: append([]string(nil), lvs...), counts: make([]uint64, len(h.buckets)+1)}
		h.series[key] = s
	}
	return s
}

func (h *histogramVec) observe(v float64, lvs ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.get(lvs)
	i := sort.SearchFloat64s(h.buckets, v) // first bound >= v
	s.counts[i]++
	s.count++
	s.sum += v
}

// seed adds a parsed histogram with the same finite bucket bounds.
func (h *histogramVec) seed(lvs []string, dh *dto.Histogram) error {
	if dh == nil {
		return errors.New("no histogram")
	}
	var finite []*dto.Bucket
	for _, b := range dh.GetBucket() {
		if !math.IsInf(b.GetUpperBound(), +1) {
			finite = append(finite, b)
		}
	}
	if len(finite) != len(h.buckets) {
		return errors.New("buckets differ")
	}
	count := dh.GetSampleCount()
	counts := make([]uint64, len(h.buckets)+1)
	var prev uint64
	for i, b := range finite {
		c := b.GetCumulativeCount()
		if b.GetUpperBound() != h.buckets[i] || c < prev || c > count {
			return errors.New("buckets differ")
		}
		counts[i] = c - prev
		prev = c
	}
	counts[len(h.buckets)] = count - prev
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.get(lvs)
	for i, c := range counts {
		s.counts[i] += c
	}
	s.count += count
	s.sum += dh.GetSampleSum()
	return nil
}

// Describe implements prometheus.Collector.
func (h *histogramVec) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

// Collect implements prometheus.Collector.
func (h *histogramVec) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.series {
		cum := make(map[float64]uint64, len(h.buckets))
		var n uint64
		for i, b := range h.buckets {
			n += s.counts[i]
			cum[b] = n
		}
		ch <- prometheus.MustNewConstHistogram(h.desc, s.count, s.sum, cum, s.lvs...)
	}
}
