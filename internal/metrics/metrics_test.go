package metrics

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var (
	t1 = time.Date(2026, 11, 22, 10, 15, 0, 250e6, time.UTC)
	t2 = t1.Add(5 * time.Minute)
)

// okRun: the listing loaded into both sinks, one account endpoint archived.
func okRun() *Run {
	return &Run{
		SnapshotTime: t1, DurationMS: 1200, OK: true,
		Endpoints: []EndpointRun{
			{Endpoint: "instruments", Status: "ok", Requests: 1, Rows: 3000, Rejects: 4, Duplicates: 2, Events: 41, Bytes: 2_000_000, DurationMS: 1100,
				Sinks: map[string]SinkRun{
					"parquet":    {Rows: 3000, Rejects: 4, Bytes: 500_000},
					"clickhouse": {Rows: 3000, Rejects: 4},
				}},
			{Endpoint: "account_balance", Status: "archived", Requests: 2, Bytes: 300, DurationMS: 40, Sinks: map[string]SinkRun{}},
			{Endpoint: "account_summary", Status: "ok", Requests: 1, Rows: 1, Overflow: 4006, Bytes: 90_000, DurationMS: 60,
				Sinks: map[string]SinkRun{"parquet": {Rows: 1}}},
		},
	}
}

// failedRun: ClickHouse down; Parquet still loaded; the account endpoint
// archived again.
func failedRun() *Run {
	return &Run{
		SnapshotTime: t2, DurationMS: 45_000, OK: false,
		Error: "instruments: clickhouse: connection refused",
		Endpoints: []EndpointRun{
			{Endpoint: "instruments", Status: "failed", Requests: 1, Rows: 3010, Rejects: 1, Events: 3, Bytes: 2_100_000, DurationMS: 44_000,
				Error: "clickhouse: connection refused",
				Sinks: map[string]SinkRun{
					"parquet":    {Rows: 3010, Rejects: 1},
					"clickhouse": {Error: "connection refused"},
				}},
			{Endpoint: "account_balance", Status: "archived", Requests: 2, Bytes: 310, DurationMS: 35, Sinks: map[string]SinkRun{}},
		},
	}
}

// families is a parsed exposition, with helpers to look values up.
type families map[string]*dto.MetricFamily

func parse(t *testing.T, r io.Reader) families {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	return mfs
}

// series finds the series of name whose labels are exactly those given as
// name=value pairs.
func (f families) series(t *testing.T, name string, labels ...string) *dto.Metric {
	t.Helper()
	mf, ok := f[name]
	if !ok {
		t.Fatalf("metric %s missing", name)
	}
	want := map[string]string{}
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		want[k] = v
	}
next:
	for _, m := range mf.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		for _, lp := range m.GetLabel() {
			if want[lp.GetName()] != lp.GetValue() {
				continue next
			}
		}
		return m
	}
	t.Fatalf("%s%v: no such series", name, labels)
	return nil
}

func (f families) value(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	m := f.series(t, name, labels...)
	switch f[name].GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	}
	t.Fatalf("%s: not a counter or gauge", name)
	return 0
}

func (f families) expect(t *testing.T, want float64, name string, labels ...string) {
	t.Helper()
	if got := f.value(t, name, labels...); math.Abs(got-want) > 1e-9 {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func (f families) expectHistogram(t *testing.T, count uint64, sum float64, name string, labels ...string) {
	t.Helper()
	h := f.series(t, name, labels...).GetHistogram()
	if h.GetSampleCount() != count || math.Abs(h.GetSampleSum()-sum) > 1e-9 {
		t.Errorf("%s%v: count %d sum %v, want %d and %v", name, labels, h.GetSampleCount(), h.GetSampleSum(), count, sum)
	}
	var prev uint64
	for _, b := range h.GetBucket() {
		if b.GetCumulativeCount() < prev || b.GetCumulativeCount() > count {
			t.Errorf("%s%v: bucket le=%v holds %d (previous %d, count %d)", name, labels, b.GetUpperBound(), b.GetCumulativeCount(), prev, count)
		}
		prev = b.GetCumulativeCount()
	}
}

// checkTwoRuns asserts the metrics after okRun then failedRun, times runs
// (1 when checking one process of a cron pair, and so on).
func checkTwoRuns(t *testing.T, f families) {
	t.Helper()
	f.expect(t, 1, "optlake_runs_total", "status=ok")
	f.expect(t, 1, "optlake_runs_total", "status=failed")
	f.expect(t, 1, "optlake_run_failures_total")
	f.expect(t, 1, "optlake_endpoint_runs_total", "endpoint=instruments", "status=ok")
	f.expect(t, 1, "optlake_endpoint_runs_total", "endpoint=instruments", "status=failed")
	f.expect(t, 2, "optlake_endpoint_runs_total", "endpoint=account_balance", "status=archived")
	f.expect(t, 2, "optlake_requests_total", "endpoint=instruments")
	f.expect(t, 4, "optlake_requests_total", "endpoint=account_balance")
	f.expect(t, 6010, "optlake_rows_total", "table=instruments", "sink=parquet")
	f.expect(t, 3000, "optlake_rows_total", "table=instruments", "sink=clickhouse")
	f.expect(t, 0, "optlake_sink_failures_total", "endpoint=instruments", "sink=parquet")
	f.expect(t, 1, "optlake_sink_failures_total", "endpoint=instruments", "sink=clickhouse")
	f.expect(t, 5, "optlake_rejects_total", "endpoint=instruments")
	f.expect(t, 0, "optlake_rejects_total", "endpoint=account_balance")
	f.expect(t, 2, "optlake_duplicates_total", "endpoint=instruments")
	f.expect(t, 44, "optlake_events_total", "endpoint=instruments")
	f.expect(t, 4_100_000, "optlake_response_bytes_total", "endpoint=instruments")
	f.expect(t, 610, "optlake_response_bytes_total", "endpoint=account_balance")
	f.expect(t, 4006, "optlake_column_budget_overflow_total", "endpoint=account_summary")
	f.expect(t, 0, "optlake_column_budget_overflow_total", "endpoint=instruments")
	f.expectHistogram(t, 2, 46.2, "optlake_run_duration_seconds")
	f.expectHistogram(t, 2, 45.1, "optlake_endpoint_duration_seconds", "endpoint=instruments")
	f.expectHistogram(t, 2, 0.075, "optlake_endpoint_duration_seconds", "endpoint=account_balance")
	// The listing last succeeded in the first run; the archive in the second.
	f.expect(t, float64(t1.UnixMilli())/1e3, "optlake_last_success_timestamp_seconds", "endpoint=instruments")
	f.expect(t, float64(t2.UnixMilli())/1e3, "optlake_last_success_timestamp_seconds", "endpoint=account_balance")
	f.expect(t, float64(t2.UnixMilli())/1e3, "optlake_last_run_timestamp_seconds")
	f.expect(t, 0, "optlake_last_run_ok")
	f.expect(t, 45, "optlake_last_run_duration_seconds")
	for name, mf := range f {
		if !strings.HasPrefix(name, "optlake_") {
			// node_exporter's own families (node_textfile_mtime_seconds
			// carries the textfile's path, a temp folder whose random
			// digits may hold "0193") are not optlake's labels.
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), "0193") || strings.Contains(l.GetValue(), "refused") {
					t.Errorf("%s: unbounded label value %s=%q", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
}

func scrape(t *testing.T, url string) families {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return parse(t, resp.Body)
}

// Two runs observed, /metrics scraped over HTTP and parsed: every counter,
// histogram and gauge holds what the summaries said.
func TestObserveScrape(t *testing.T) {
	m := New()
	srv := httptest.NewServer(m.Handler(nil))
	defer srv.Close()

	before := scrape(t, srv.URL+"/metrics")
	before.expect(t, 0, "optlake_runs_total", "status=ok")
	before.expect(t, 0, "optlake_runs_total", "status=failed")
	before.expect(t, 0, "optlake_run_failures_total")

	m.Observe(okRun())
	f := scrape(t, srv.URL+"/metrics")
	f.expect(t, 1, "optlake_runs_total", "status=ok")
	f.expect(t, 1, "optlake_last_run_ok")
	f.expect(t, 3000, "optlake_rows_total", "table=instruments", "sink=clickhouse")

	m.Observe(failedRun())
	m.Observe(nil)
	f = scrape(t, srv.URL+"/metrics")
	checkTwoRuns(t, f)
	for _, name := range []string{"go_goroutines", "process_start_time_seconds"} {
		if _, ok := f[name]; !ok {
			t.Errorf("/metrics: runtime metric %s missing", name)
		}
	}
}

// The metric names and help texts follow the Prometheus conventions.
func TestLint(t *testing.T) {
	m := New(WithBuildInfo("0.1.0", "0123456789abcdef0123456789abcdef01234567", "2026-12-07T01:00:00Z", "go1.26.8"))
	m.Observe(okRun())
	m.Observe(failedRun())
	mfs, err := m.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "optlake_") {
			t.Errorf("%s: not in the optlake_ namespace", mf.GetName())
		}
	}
}

// The textfile holds the same metrics, parses, is 0644, and leaves no temp
// file behind; replacing it is a rename (a reader holding the old file keeps
// reading the old content whole).
func TestWriteTextfile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "textfile", "optlake.prom")
	m := New()
	m.Observe(okRun())
	if err := m.WriteTextfile(path); err != nil {
		t.Fatal(err)
	}
	old, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	m.Observe(failedRun())
	if err := m.WriteTextfile(path); err != nil {
		t.Fatal(err)
	}

	oldf := parse(t, old) // the first file, whole, though replaced meanwhile
	oldf.expect(t, 1, "optlake_last_run_ok")
	oldf.expect(t, 0, "optlake_runs_total", "status=failed")

	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	f := parse(t, fh)
	checkTwoRuns(t, f)
	for name := range f {
		if !strings.HasPrefix(name, "optlake_") {
			t.Errorf("textfile holds %s: only optlake_ metrics belong there", name)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 || entries[0].Name() != "optlake.prom" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only optlake.prom", names)
	}
}

// A textfile that cannot be written is an error, and leaves neither a temp
// file nor a changed target.
func TestWriteTextfileError(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "optlake.prom")
	if err := os.Mkdir(target, 0o755); err != nil { // a directory where the file should go
		t.Fatal(err)
	}
	m := New()
	m.Observe(okRun())
	if err := m.WriteTextfile(target); err == nil {
		t.Fatal("writing over a directory: want an error")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the target", len(entries))
	}
	if err := m.WriteTextfile(filepath.Join(dir, "optlake.prom", "x", "\x00bad")); err == nil {
		t.Error("invalid path: want an error")
	}
}

// One-shot runs: each process loads the previous textfile, observes its run
// and writes the file. The counters add up across processes, histograms
// too, and the last success of an endpoint survives a failed run.
func TestTextfileMonotonic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "optlake.prom")
	for i, sum := range []*Run{okRun(), failedRun()} {
		m := New()
		if err := m.LoadTextfile(path); err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
		m.Observe(sum)
		if err := m.WriteTextfile(path); err != nil {
			t.Fatal(err)
		}
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	checkTwoRuns(t, parse(t, fh))
}

// A previous file that does not parse is an error and loads nothing; series
// of other programs, of changed types, labels or buckets are skipped.
func TestLoadTextfileBad(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.prom")
	os.WriteFile(bad, []byte("optlake_runs_total{status=\"ok\"} 5\noptlake_rows_total{table=\"instruments\" 7 oops\n"), 0o644)
	m := New()
	if err := m.LoadTextfile(bad); err == nil {
		t.Error("unparseable textfile: want an error")
	}
	f := gathered(t, m)
	f.expect(t, 0, "optlake_runs_total", "status=ok")

	odd := filepath.Join(dir, "odd.prom")
	os.WriteFile(odd, []byte(strings.Join([]string{
		`# TYPE optlake_runs_total counter`,
		`optlake_runs_total{status="ok"} 7`,
		`optlake_runs_total{status="ok",extra="x"} 100`,
		`# TYPE optlake_rejects_total gauge`,
		`optlake_rejects_total{endpoint="instruments"} 9`,
		`# TYPE optlake_run_duration_seconds histogram`,
		`optlake_run_duration_seconds_bucket{le="1"} 1`,
		`optlake_run_duration_seconds_bucket{le="+Inf"} 2`,
		`optlake_run_duration_seconds_sum 3`,
		`optlake_run_duration_seconds_count 2`,
		`# TYPE node_cpu_seconds_total counter`,
		`node_cpu_seconds_total{cpu="0"} 1`,
		``,
	}, "\n")), 0o644)
	m = New()
	if err := m.LoadTextfile(odd); err != nil {
		t.Fatal(err)
	}
	if err := m.LoadTextfile(filepath.Join(dir, "missing.prom")); err != nil {
		t.Errorf("missing textfile: %v, want nil", err)
	}
	f = gathered(t, m)
	f.expect(t, 7, "optlake_runs_total", "status=ok")
	if _, ok := f["optlake_rejects_total"]; ok {
		t.Error("a gauge in the file seeded the rejects counter")
	}
	if _, ok := f["optlake_run_duration_seconds"]; ok {
		t.Error("a histogram with other buckets was loaded")
	}
	if _, ok := f["node_cpu_seconds_total"]; ok {
		t.Error("a foreign metric was loaded")
	}
}

// Constant labels go on every series; a previous file with other values of
// them belongs to another job and is not loaded.
func TestConstLabels(t *testing.T) {
	path := filepath.Join(t.TempDir(), "optlake.prom")
	a := New(WithConstLabels(prometheus.Labels{"job_name": "a"}))
	a.Observe(okRun())
	if err := a.WriteTextfile(path); err != nil {
		t.Fatal(err)
	}
	again := New(WithConstLabels(prometheus.Labels{"job_name": "a"}))
	if err := again.LoadTextfile(path); err != nil {
		t.Fatal(err)
	}
	gathered(t, again).expect(t, 1, "optlake_runs_total", "status=ok", "job_name=a")
	gathered(t, again).expectHistogram(t, 1, 1.2, "optlake_run_duration_seconds", "job_name=a")

	b := New(WithConstLabels(prometheus.Labels{"job_name": "b"}))
	if err := b.LoadTextfile(path); err != nil {
		t.Fatal(err)
	}
	gathered(t, b).expect(t, 0, "optlake_runs_total", "status=ok", "job_name=b")
}

// A run without a snapshot time is stamped with the clock.
func TestObserveWithoutSnapshotTime(t *testing.T) {
	now := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	m := New(WithClock(func() time.Time { return now }))
	sum := okRun()
	sum.SnapshotTime = time.Time{}
	m.Observe(sum)
	gathered(t, m).expect(t, float64(now.Unix()), "optlake_last_run_timestamp_seconds")
}

func gathered(t *testing.T, m *Metrics) families {
	t.Helper()
	mfs, err := m.Gather()
	if err != nil {
		t.Fatal(err)
	}
	f := families{}
	for _, mf := range mfs {
		f[mf.GetName()] = mf
	}
	return f
}

func TestHealthz(t *testing.T) {
	var mu sync.Mutex
	var healthErr error
	m := New()
	srv := httptest.NewServer(m.Handler(func() error {
		mu.Lock()
		defer mu.Unlock()
		return healthErr
	}))
	defer srv.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("healthy: %d %q, want 200 \"ok\\n\"", code, body)
	}
	mu.Lock()
	healthErr = errors.New("last snapshot failed:\n  instruments: clickhouse: connection refused")
	mu.Unlock()
	if code, body := get("/healthz"); code != 503 || body != "last snapshot failed: instruments: clickhouse: connection refused\n" {
		t.Errorf("unhealthy: %d %q, want 503 and the reason on one line", code, body)
	}
	if code, _ := get("/nope"); code != 404 {
		t.Errorf("/nope: %d, want 404", code)
	}
	if code, body := get("/"); code != 200 || !strings.Contains(body, "/metrics") {
		t.Errorf("/: %d %q", code, body)
	}

	nilHealth := httptest.NewServer(New().Handler(nil))
	defer nilHealth.Close()
	resp, err := http.Get(nilHealth.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("nil health: %d, want 200", resp.StatusCode)
	}
}

func TestHealthCheck(t *testing.T) {
	now := t1
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	m := New(WithClock(clock))
	stale := m.HealthCheck(10*time.Minute, false)
	strict := m.HealthCheck(10*time.Minute, true)
	check := func(h func() error, want string) {
		t.Helper()
		err := h()
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("health: %v, want %q", err, want)
		}
	}
	check(stale, "")
	check(strict, "")
	advance(11 * time.Minute)
	check(stale, "no run finished in 11m0s since start")
	m.Observe(failedRun())
	check(stale, "")
	check(strict, "last run failed: instruments: clickhouse: connection refused")
	m.Observe(okRun())
	check(strict, "")
	advance(10*time.Minute + time.Second)
	check(stale, "no run finished in 10m1s (limit 10m0s)")
	check(m.HealthCheck(0, false), "")

	srv := httptest.NewServer(m.Handler(strict))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || string(b) != "no run finished in 10m1s (limit 10m0s)\n" {
		t.Errorf("/healthz: %d %q", resp.StatusCode, b)
	}
}

// Runs observed while /metrics is scraped and the textfile written (run
// with -race): every scrape sees whole runs only.
func TestConcurrent(t *testing.T) {
	m := New()
	srv := httptest.NewServer(m.Handler(nil))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "optlake.prom")
	const runs = 40
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range runs {
			m.Observe(okRun())
		}
	}()
	for range 10 {
		f := scrape(t, srv.URL+"/metrics")
		ok := f.value(t, "optlake_runs_total", "status=ok")
		if ok > 0 {
			// rows and runs are updated under one lock
			f.expect(t, 3000*ok, "optlake_rows_total", "table=instruments", "sink=parquet")
		}
		if err := m.WriteTextfile(path); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	gathered(t, m).expect(t, runs, "optlake_runs_total", "status=ok")
}

func Example() {
	// A one-shot run with --metrics-file: keep the counters of the earlier
	// runs, add this one, replace the file.
	path := filepath.Join(os.TempDir(), fmt.Sprintf("optlake-example-%d.prom", os.Getpid()))
	defer os.Remove(path)
	m := New()
	if err := m.LoadTextfile(path); err != nil {
		fmt.Println("metrics: previous textfile ignored:", err)
	}
	m.Observe(&Run{OK: true, SnapshotTime: t1, DurationMS: 900})
	if err := m.WriteTextfile(path); err != nil {
		fmt.Println(err)
	}
	b, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "optlake_runs_total") || strings.HasPrefix(line, "optlake_last_run_ok") {
			fmt.Println(line)
		}
	}
	// Output:
	// optlake_last_run_ok 1
	// optlake_runs_total{status="failed"} 0
	// optlake_runs_total{status="ok"} 1
}

// The load ledger's state after a run: snapshots pending per sink, the age
// of the oldest (on the pinned clock), and the loads catch-up did.
func TestPendingLoads(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	m := New(WithClock(func() time.Time { return now }))
	oldest := now.Add(-90 * time.Second)
	sum := okRun()
	sum.Pending = []Pending{{Sink: "clickhouse", Pending: 3, Oldest: &oldest}, {Sink: "parquet"}}
	sum.CaughtUp = []CaughtUp{{OK: true, Sinks: []string{"parquet"}}, {OK: false, Sinks: []string{"clickhouse"}}}
	m.Observe(sum)
	path := filepath.Join(t.TempDir(), "optlake.prom")
	if err := m.WriteTextfile(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fam := parse(t, f)
	fam.expect(t, 3, "optlake_pending_loads", "sink=clickhouse")
	fam.expect(t, 0, "optlake_pending_loads", "sink=parquet")
	fam.expect(t, 90, "optlake_oldest_pending_load_age_seconds", "sink=clickhouse")
	fam.expect(t, 0, "optlake_oldest_pending_load_age_seconds", "sink=parquet")
	fam.expect(t, 1, "optlake_caught_up_loads_total", "sink=parquet")
}

// build_info names the binary that wrote the metrics; after an upgrade the
// textfile of the previous binary does not leave its build_info behind
// beside the new one (the counters still carry on).
func TestBuildInfo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "optlake.prom")
	old := New(WithBuildInfo("0.1.0", "aaaa", "2026-01-01T00:00:00Z", "go1.26.0"))
	old.Observe(okRun())
	if err := old.WriteTextfile(path); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	f := parse(t, fh)
	fh.Close()
	f.expect(t, 1, "optlake_build_info", "version=0.1.0", "revision=aaaa", "build_date=2026-01-01T00:00:00Z", "goversion=go1.26.0")

	upgraded := New(WithBuildInfo("0.2.0", "bbbb", "2026-02-01T00:00:00Z", "go1.26.8"))
	if err := upgraded.LoadTextfile(path); err != nil {
		t.Fatal(err)
	}
	upgraded.Observe(okRun())
	g := gathered(t, upgraded)
	g.expect(t, 1, "optlake_build_info", "version=0.2.0", "revision=bbbb", "build_date=2026-02-01T00:00:00Z", "goversion=go1.26.8")
	if n := len(g["optlake_build_info"].GetMetric()); n != 1 {
		t.Errorf("optlake_build_info: %d series after an upgrade, want 1 (the running binary's)", n)
	}
	g.expect(t, 2, "optlake_runs_total", "status=ok")

	if _, ok := gathered(t, New())["optlake_build_info"]; ok {
		t.Error("optlake_build_info without WithBuildInfo")
	}
}
