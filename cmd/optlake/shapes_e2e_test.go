package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/venuesim"
)

// shapeBodies are account bodies keyed by data (issue 17), by endpoint path.
func shapeBodies() map[string]string {
	var pos strings.Builder
	pos.WriteString(`{"positions":{`)
	for i := range 20000 {
		if i > 0 {
			pos.WriteByte(',')
		}
		fmt.Fprintf(&pos, `"BTC-25DEC26-%d-C":{"size":"%d.5","delta":0.%02d}`, 10000+i, i, i%100)
	}
	pos.WriteString(`}}`)
	var bal strings.Builder
	bal.WriteString(`{"balances":{`)
	for i := range 30 {
		if i > 0 {
			bal.WriteByte(',')
		}
		fmt.Fprintf(&bal, `"C%c%c":{"available":"%d.25","total":"%d"}`, 'A'+i/26, 'A'+i%26, i, i+1)
	}
	bal.WriteString(`}}`)
	var flat strings.Builder
	flat.WriteByte('{')
	for i := range 300 {
		if i > 0 {
			flat.WriteByte(',')
		}
		fmt.Fprintf(&flat, `"field_%03d":%d`, i, i)
	}
	flat.WriteByte('}')
	return map[string]string{
		"/v1/public/get_positions":            pos.String(),
		"/v1/public/get_all_account_balances": bal.String(),
		"/v1/public/get_account_summary":      flat.String(),
	}
}

// Maps become rows and a wide object stops at the column budget, in
// ClickHouse and in Parquet (read by DuckDB), through `optlake run`.
func TestAccountShapesEndToEnd(t *testing.T) {
	t.Parallel()
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	bodies := shapeBodies()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := bodies[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, b)
	}))
	defer srv.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "optlake.yaml")
	// The flat body at the top level has 300 same-shaped members: a map by
	// shape; the config forbids that, so it meets the column budget.
	if err := os.WriteFile(cfg, []byte("endpoints:\n  positions:\n  all_account_balances:\n  account_summary: {maps: {forbid: [\"$\"]}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	metricsFile := filepath.Join(dir, "metrics.prom")
	res := optlake(t, "run", "--config", cfg, "--api-url", srv.URL, "--data-dir", dir, "--sink", "parquet", "--sink", "clickhouse",
		"--clickhouse-dsn", c.DSN(db), "--migrate", "--column-budget", "50", "--metrics-file", metricsFile)
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	if strings.Contains(res.stderr, `column=""`) || strings.Contains(res.stderr, `field=""`) {
		t.Errorf("a log line with empty names:\n%s", res.stderr)
	}
	if !strings.Contains(res.stderr, "column budget reached") {
		t.Errorf("no log line for the column budget:\n%s", res.stderr)
	}
	pq := func(table string) string {
		return fmt.Sprintf("read_parquet('%s', union_by_name = true)", filepath.Join(dir, table, "*", "*.parquet"))
	}

	// 20,000 positions keyed by instrument: 20,000 rows, the name in key,
	// each linked to the one parent row.
	const posQ = "SELECT count(), uniqExact(key), countIf(parent_index = 0), max(size__num), countIf(key = 'BTC-25DEC26-10007-C' AND size = '7.5' AND delta = 0.07) FROM positions__positions FINAL"
	if got := chQuery(t, c, db, posQ); got != "20000\t20000\t20000\t19999.5\t1" {
		t.Errorf("clickhouse positions__positions = %q", got)
	}
	got := duckScalar(t, "SELECT count(*) || chr(9) || count(DISTINCT key) || chr(9) || count(*) FILTER (WHERE parent_index = 0) || chr(9) || max(size__num) || chr(9) || count(*) FILTER (WHERE key = 'BTC-25DEC26-10007-C' AND size = '7.5' AND delta = 0.07) FROM "+pq("positions__positions"))
	if got != "20000\t20000\t20000\t19999.5\t1" {
		t.Errorf("parquet positions__positions = %q", got)
	}
	// Currencies as keys: 30 rows, not 60 columns.
	if got := chQuery(t, c, db, "SELECT count(), sum(total__num) FROM all_account_balances__balances FINAL WHERE key LIKE 'C%'"); got != "30\t465" {
		t.Errorf("clickhouse balances = %q", got)
	}
	if got := duckScalar(t, "SELECT count(*) || chr(9) || sum(total__num)::BIGINT FROM "+pq("all_account_balances__balances")); got != "30\t465" {
		t.Errorf("parquet balances = %q", got)
	}

	// The wide object: 50 columns, the other fields as JSON in extra
	// (snapshot_ms, the millisecond part of the key where time columns
	// have seconds, is ClickHouse's own and not counted in the budget).
	if got := chQuery(t, c, db, fmt.Sprintf("SELECT count() FROM system.columns WHERE database = '%s' AND table = 'account_summary' AND name != '%s'", db, schema.SnapshotMs)); got != "50" {
		t.Errorf("clickhouse account_summary has %s columns, want the budget, 50", got)
	}
	const want = `"field_299":299`
	if got := chQuery(t, c, db, "SELECT field_000, field_043, position(extra, '"+want+"') > 0, position(extra, '\"field_044\":44') > 0 FROM account_summary FINAL"); got != "0\t43\t1\t1" {
		t.Errorf("clickhouse account_summary (first, last column, extra holds the rest) = %q", got)
	}
	if got := duckScalar(t, "SELECT field_043 || chr(9) || contains(extra, '"+want+"') || chr(9) || (SELECT count(*) FROM (DESCRIBE SELECT * FROM "+strings.Replace(pq("account_summary"), "union_by_name = true", "hive_partitioning = false", 1)+")) FROM "+pq("account_summary")); got != "43\ttrue\t50" {
		t.Errorf("parquet account_summary = %q", got)
	}
	m, err := os.ReadFile(metricsFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m), `optlake_column_budget_overflow_total{endpoint="account_summary"} 256`) {
		t.Errorf("metrics file lacks the overflow count (256 fields):\n%s", grepLines(string(m), "overflow"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// --rate-limit holds for the whole run: every endpoint, both accounts, the
// fanned-out parameter and the retries of 503s, measured where it matters,
// at the simulator. The bound counts from a time taken before the run, so
// a slow machine only makes requests later; an early one is a real failure.
func TestRateLimitAtSimulator(t *testing.T) {
	t.Parallel()
	const perSec = 25
	sim := venuesim.New(venuesim.Config{Seed: 5, Faults: venuesim.Faults{FailFirst: 3}})
	var mu sync.Mutex
	var arrivals []time.Time
	h := sim.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	dir := t.TempDir()
	start := time.Now()
	res := optlake(t, "run", "--api-url", srv.URL, "--data-dir", dir, "--rate-limit", fmt.Sprintf("%d/s", perSec),
		"--account-header", "main:X-Account: main", "--account-header", "alt:X-Account: alt",
		"--param", "instruments.currency=BTC,ETH")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	// 2 listings + 6 account endpoints x 2 accounts + 3 retries.
	if len(arrivals) < 2+12+3 {
		t.Fatalf("the simulator saw %d requests, want at least 17", len(arrivals))
	}
	sort.Slice(arrivals, func(i, j int) bool { return arrivals[i].Before(arrivals[j]) })
	interval := time.Second / perSec
	for k, at := range arrivals {
		earliest := start.Add(time.Duration(k) * interval) // burst 1
		if at.Before(earliest.Add(-2 * time.Millisecond)) {
			t.Errorf("request %d arrived %s after the start, before the limit allows (%s)", k+1, at.Sub(start).Round(time.Millisecond), earliest.Sub(start))
		}
	}
}
