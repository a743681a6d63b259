package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/archive"
	"github.com/optlake/optlake/venuesim"
)

const testSecret = "sk-live-e2e-7f3a9c1d5b"

type result struct {
	code           int
	stdout, stderr string
}

// optlake runs the CLI in-process at the real time.
func optlake(t *testing.T, args ...string) result {
	t.Helper()
	return optlakeOn(t, testHost(nil), args...)
}

// testHost is the host of an in-process CLI: clock (nil: the real one),
// and the test binary's heap settings left alone (the in-process runs of
// parallel tests share the binary's heap; a run's settings are its
// process's).
func testHost(clock func() time.Time) host {
	return host{clock: clock, keepHeap: true}
}

func optlakeOn(t *testing.T, h host, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(h, append([]string{"optlake"}, args...), &out, &errb)
	return result{code, out.String(), errb.String()}
}

func startSim(t *testing.T, cfg venuesim.Config) (*venuesim.Sim, string) {
	t.Helper()
	sim := venuesim.New(cfg)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	return sim, srv.URL
}

func duckScalar(t *testing.T, sql string) string {
	t.Helper()
	r := testenv.DuckDBQuery(t, sql)
	if len(r.Rows) != 1 || len(r.Rows[0]) != 1 {
		t.Fatalf("%s: want one value, got %v", sql, r.Rows)
	}
	return fmt.Sprint(r.Rows[0][0])
}

// The simulator's listing, through `optlake run`, into Parquet, read back by
// DuckDB: same rows, same values, bad rows in rejects, raw body archived.
func TestRunEndToEnd(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t, venuesim.Config{Seed: 7, Faults: venuesim.Faults{IndexPriceVariants: true, WrongTypes: true, ExtraFields: true}})
	want := sim.Instruments()
	dir := t.TempDir()
	sumPath := filepath.Join(dir, "summary.json")
	res := optlake(t, "run", "--api-url", url, "--data-dir", dir, "--summary-json", sumPath, "--source", "sim")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}

	var good, bad int
	byName := map[string]venuesim.Instrument{}
	for _, in := range want {
		if len(in.WrongType) > 0 || in.InstrumentName == "" {
			bad++
			continue
		}
		good++
		byName[in.InstrumentName] = in
	}
	if bad == 0 || good < 1000 {
		t.Fatalf("simulator listing: %d good, %d bad: the test needs both", good, bad)
	}

	glob := filepath.Join(dir, "instruments", "*", "*.parquet")
	from := fmt.Sprintf("read_parquet('%s', hive_partitioning = true)", glob)
	if n := duckScalar(t, "SELECT count(*) FROM "+from); n != fmt.Sprint(good) {
		t.Errorf("parquet rows = %s, simulator listed %d loadable instruments", n, good)
	}
	if n := duckScalar(t, fmt.Sprintf("SELECT count(*) FROM read_parquet('%s')", filepath.Join(dir, "rejects", "*", "*.parquet"))); n != fmt.Sprint(bad) {
		t.Errorf("rejects = %s, want %d", n, bad)
	}
	// index_price is the parsed raw text, checked by DuckDB's own parser.
	if n := duckScalar(t, "SELECT count(*) FROM "+from+" WHERE index_price IS DISTINCT FROM TRY_CAST(index_price_raw AS DOUBLE)"); n != "0" {
		t.Errorf("%s rows where index_price differs from DuckDB's parse of index_price_raw", n)
	}
	if n := duckScalar(t, "SELECT count(DISTINCT index_price_raw) FILTER (WHERE index_price IS NULL) FROM "+from); n == "0" {
		t.Error("no unparseable index_price variant reached the table: the check above proved nothing")
	}

	// Sampled values equal the simulator's.
	r := testenv.DuckDBQuery(t, `SELECT instrument_name, strike, is_active, deployed, expiration_time, creation_timestamp,
		maker_commission, tick_size, option_type, index_price_raw, extra, source FROM `+from+` ORDER BY hash(instrument_name) LIMIT 200`)
	if len(r.Rows) != 200 {
		t.Fatalf("sample has %d rows", len(r.Rows))
	}
	for _, row := range r.Rows {
		in, ok := byName[row[0].(string)]
		if !ok {
			t.Fatalf("parquet has %v, which the simulator did not list", row[0])
		}
		check := func(col string, got, want any) {
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s %s = %v, simulator sent %v", in.InstrumentName, col, got, want)
			}
		}
		if in.Strike == nil {
			check("strike", row[1], nil)
		} else {
			check("strike", row[1], *in.Strike)
		}
		check("is_active", row[2], in.IsActive)
		check("deployed", row[3], in.Deployed)
		check("expiration_time", row[4], time.UnixMilli(in.ExpirationTimestamp).UTC().Format("2006-01-02T15:04:05.000Z"))
		check("creation_timestamp", row[5], in.CreationTimestamp)
		check("maker_commission", row[6], in.MakerCommission)
		check("tick_size", row[7], in.TickSize)
		if in.OptionType == nil {
			check("option_type", row[8], nil)
		} else {
			check("option_type", row[8], *in.OptionType)
		}
		if in.IndexPrice != nil {
			check("index_price_raw", row[9], *in.IndexPrice)
		}
		if len(in.Extra) == 0 && row[10] != nil {
			t.Errorf("%s extra = %v, simulator sent none", in.InstrumentName, row[10])
		}
		if len(in.Extra) > 0 {
			var extra map[string]json.RawMessage
			if err := json.Unmarshal([]byte(row[10].(string)), &extra); err != nil || len(extra) != len(in.Extra) {
				t.Errorf("%s extra = %v, simulator sent %d fields", in.InstrumentName, row[10], len(in.Extra))
			}
		}
		check("source", row[11], "sim")
	}

	// Summary: one line on stdout, JSON file.
	if !strings.Contains(res.stdout, fmt.Sprintf("instruments ok: %d rows, %d rejects", good, bad)) {
		t.Errorf("summary line: %q", res.stdout)
	}
	var sum pipeline.Summary
	b, err := os.ReadFile(sumPath)
	if err != nil || json.Unmarshal(b, &sum) != nil || !sum.OK || sum.Endpoints[0].Rows != int64(good) || sum.Endpoints[0].Rejects != int64(bad) {
		t.Errorf("summary json: %s (%v)", b, err)
	}

	// The raw body is archived, complete, and identical to what was served.
	metas, _ := filepath.Glob(filepath.Join(dir, "raw", "instruments", "date=*", "*.meta.json"))
	if len(metas) != 1 {
		t.Fatalf("raw metas: %v", metas)
	}
	m, err := archive.ReadMeta(metas[0])
	if err != nil || !m.Complete || m.Status != 200 || m.RunID != sum.RunID {
		t.Fatalf("meta %+v %v", m, err)
	}
	rc, err := archive.Open(dir, m.File)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var served bytes.Buffer
	sim.WriteInstruments(&served)
	raw, _ := io.ReadAll(rc)
	if !bytes.Equal(raw, served.Bytes()) || int64(len(raw)) != m.Bytes {
		t.Errorf("archived body (%d bytes) differs from the served body (%d bytes)", len(raw), served.Len())
	}
}

// Retries against the simulator's fault switches: 503 then 200, and 429 with
// Retry-After waited out. Every attempt is archived.
func TestRunRetriesFaults(t *testing.T) {
	t.Parallel()
	t.Run("503 then 200", func(t *testing.T) {
		_, url := startSim(t, venuesim.Config{Seed: 1, Faults: venuesim.Faults{FailFirst: 2}})
		dir := t.TempDir()
		res := optlake(t, "run", "--api-url", url, "--data-dir", dir)
		if res.code != 0 || strings.Count(res.stderr, "retrying") != 2 {
			t.Fatalf("exit %d: %s", res.code, res.stderr)
		}
		metas, _ := filepath.Glob(filepath.Join(dir, "raw", "instruments", "*", "*.meta.json"))
		statuses := map[int]int{}
		for _, p := range metas {
			m, _ := archive.ReadMeta(p)
			statuses[m.Status]++
		}
		if statuses[503] != 2 || statuses[200] != 1 {
			t.Errorf("archived attempts by status: %v", statuses)
		}
	})
	t.Run("429 Retry-After", func(t *testing.T) {
		_, url := startSim(t, venuesim.Config{Seed: 1, Faults: venuesim.Faults{RateLimitFirst: 1, RetryAfter: 2 * time.Second}})
		start := time.Now()
		res := optlake(t, "run", "--api-url", url, "--data-dir", t.TempDir())
		if res.code != 0 {
			t.Fatalf("exit %d: %s", res.code, res.stderr)
		}
		if d := time.Since(start); d < 2*time.Second {
			t.Errorf("run took %s: did not wait for Retry-After: 2", d)
		}
	})
	t.Run("always 503", func(t *testing.T) {
		_, url := startSim(t, venuesim.Config{Seed: 1, Faults: venuesim.Faults{ErrorRate: 1}})
		res := optlake(t, "run", "--api-url", url, "--data-dir", t.TempDir(), "--max-attempts", "2")
		lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
		last := lines[len(lines)-1]
		if res.code != exitFailure || !strings.HasPrefix(last, "optlake: instruments: HTTP 5") || !strings.Contains(last, "after 2 attempts") {
			t.Errorf("exit %d, last line %q", res.code, last)
		}
	})
}

// Bad bodies fail the run with a one-line reason, keep the raw body whole,
// and write no instrument file.
func TestRunBadBodies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		faults   venuesim.Faults
		reason   string
		attempts int // a body cut off is retried; broken JSON is not
	}{
		{"malformed JSON", venuesim.Faults{MalformedRate: 1}, "invalid JSON", 1},
		{"truncated body", venuesim.Faults{TruncateRate: 1}, "read body", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, url := startSim(t, venuesim.Config{Seed: 3, Faults: tc.faults})
			dir := t.TempDir()
			res := optlake(t, "run", "--api-url", url, "--data-dir", dir, "--max-attempts", "2")
			lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
			last := lines[len(lines)-1]
			if res.code != exitFailure || !strings.HasPrefix(last, "optlake: instruments: ") || !strings.Contains(last, tc.reason) {
				t.Fatalf("exit %d, last line %q", res.code, last)
			}
			if files, _ := filepath.Glob(filepath.Join(dir, "instruments", "*", "*")); len(files) != 0 {
				t.Errorf("instrument files written for a bad body: %v", files)
			}
			metas, _ := filepath.Glob(filepath.Join(dir, "raw", "instruments", "*", "*.meta.json"))
			if len(metas) != tc.attempts {
				t.Fatalf("want %d attempts archived, got %v", tc.attempts, metas)
			}
			for _, p := range metas {
				m, _ := archive.ReadMeta(p)
				if m.Error == "" || m.Bytes == 0 {
					t.Errorf("meta %+v", m)
				}
				if tc.name == "malformed JSON" && !m.Complete {
					t.Errorf("malformed body was not archived whole: %+v", m)
				}
			}
		})
	}
}

// A secret header value appears nowhere: not in the data directory (raw
// bodies decompressed, metadata, Parquet), logs, stdout or the summary.
func TestSecretsNeverWritten(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, venuesim.Config{Seed: 5, RequireHeader: "X-Api-Key: " + testSecret, Faults: venuesim.Faults{FailFirst: 1}})
	dir := t.TempDir()
	res := optlake(t, "run", "--api-url", url+"/", "--data-dir", dir, "--header", "X-Api-Key: "+testSecret,
		"--endpoints", "instruments,account_summary,positions", "--summary-json", filepath.Join(dir, "summary.json"),
		"--log-level", "debug", "--log-format", "json", "--clickhouse-dsn", "clickhouse://u:"+testSecret+"x@127.0.0.1:1/db")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if !strings.Contains(res.stdout, "account_summary ok: 1 rows") {
		t.Errorf("account endpoint not fetched with the header: %s", res.stdout)
	}
	leaks := []string{}
	check := func(where string, b []byte) {
		if bytes.Contains(b, []byte(testSecret)) {
			leaks = append(leaks, where)
		}
	}
	check("stdout", []byte(res.stdout))
	check("stderr", []byte(res.stderr))
	files := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		b, _ := os.ReadFile(p)
		check(p, b)
		if strings.HasSuffix(p, ".json.zst") {
			rel, _ := filepath.Rel(dir, p)
			rc, err := archive.Open(dir, rel)
			if err == nil {
				raw, _ := io.ReadAll(rc)
				rc.Close()
				check(p+" (decompressed)", raw)
			}
		}
		return nil
	})
	if files < 5 {
		t.Errorf("only %d files written: the grep proved little", files)
	}
	if len(leaks) > 0 {
		t.Errorf("secret found in: %v", leaks)
	}
}

// A wrong header is refused by the venue: the run fails, saying so, without
// echoing the value.
func TestRunUsageErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"run"}, exitUsage, "--api-url is required"},
		{[]string{"run", "--api-url", "http://x", "--sink", "s3"}, exitUsage, `--sink "s3"`},
		{[]string{"run", "--api-url", "http://x", "--endpoints", "nope"}, exitUsage, `unknown endpoint "nope"`},
		{[]string{"run", "--api-url", "http://x", "--endpoints", "position"}, exitUsage, "endpoint position needs --param position.instrument_name=VALUE"},
		{[]string{"run", "--api-url", "http://x", "--param", "bad"}, exitUsage, "want endpoint.key=value"},
		{[]string{"run", "--api-url", "http://x", "--timestamp-unit", "days"}, exitUsage, "unknown timestamp unit"},
		{[]string{"run", "--api-url", "http://x", "--header", testSecret}, exitUsage, "--header: want 'Name: value'"},
		{[]string{"run", "--nope"}, exitUsage, "flag provided but not defined"},
		{[]string{"run", "--api-url", "http://x", "--sink", "clickhouse", "--clickhouse-dsn", "clickhouse://u@h:9000/db", "--clickhouse-max-attempts", "0"}, exitUsage, "--clickhouse-max-attempts must be positive"},
	}
	for _, tc := range cases {
		// A usage error leaves the data directory untouched (it wrote
		// the lake's table format before checking --param).
		dir := filepath.Join(t.TempDir(), "data")
		res := optlake(t, append(tc.args, "--data-dir", dir)...)
		if res.code != tc.code || !strings.Contains(res.stderr, tc.msg) || strings.Contains(res.stderr, testSecret) {
			t.Errorf("%v: exit %d, stderr %q", tc.args, res.code, res.stderr)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%v: the data directory was made (%v)", tc.args, err)
		}
	}
}

// --param with a comma list fans out into one request (and one file) per value.
func TestRunParamFanOut(t *testing.T) {
	t.Parallel()
	sim, url := startSim(t, venuesim.Config{Seed: 2})
	dir := t.TempDir()
	res := optlake(t, "run", "--api-url", url, "--data-dir", dir, "--param", "instruments.currency=BTC,ETH")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	var want int
	for _, in := range sim.Instruments() {
		if in.BaseCurrency == "BTC" || in.BaseCurrency == "ETH" {
			want++
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "instruments", "*", "*.parquet"))
	if len(files) != 2 {
		t.Fatalf("files: %v", files)
	}
	got := duckScalar(t, fmt.Sprintf("SELECT count(*) FILTER (WHERE base_currency IN ('BTC','ETH')) || '/' || count(*) FROM read_parquet('%s')", filepath.Join(dir, "instruments", "*", "*.parquet")))
	if got != fmt.Sprintf("%d/%d", want, want) {
		t.Errorf("rows BTC+ETH/all = %s, want %d/%d", got, want, want)
	}
	// A filtered listing derives no events (SOL would look delisted).
	if ev, _ := filepath.Glob(filepath.Join(dir, "instrument_events", "*", "*.parquet")); len(ev) != 0 {
		t.Errorf("events from a filtered listing: %v", ev)
	}
}

// --cpuprofile and --memprofile write pprof files.
func TestProfiles(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, venuesim.Config{Seed: 1})
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "mem.pprof")
	res := optlake(t, "run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments", "--cpuprofile", cpu, "--memprofile", mem)
	if res.code != 0 {
		t.Fatal(res.stderr)
	}
	for _, p := range []string{cpu, mem} {
		b, err := os.ReadFile(p)
		if err != nil || len(b) < 10 || b[0] != 0x1f || b[1] != 0x8b { // pprof files are gzipped protobufs
			t.Errorf("%s: %d bytes, %v", p, len(b), err)
		}
	}
}

// A notebook user other than the service account can read the lake: files
// are 0644 and folders 0755 (less the umask), never 0600.
func TestLakeReadableByOthers(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	_, url := startSim(t, venuesim.Config{Seed: 3})
	dir := t.TempDir()
	if res := optlake(t, "run", "--api-url", url, "--data-dir", dir); res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	files := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o644)
		if d.IsDir() {
			want = 0o755
		} else {
			files++
		}
		if p != dir && st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil || files < 5 {
		t.Fatalf("walked %d files of the lake (%v): the run wrote too little to check", files, err)
	}
}
