package testenv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestSharedClickHouseRoundTrip(t *testing.T) {
	ch := testenv.SharedClickHouse(t)
	t.Logf("clickhouse %s at %s, started in %s", ch.Version(), ch.Addr(), ch.StartupTime())
	if ch.Version() == "" {
		t.Fatal("no version")
	}
	if again := testenv.SharedClickHouse(t); again != ch {
		t.Fatal("SharedClickHouse returned a different server the second time")
	}
	db := testenv.FreshDatabase(t, ch)
	if !strings.HasPrefix(db, "t_testsharedclickhouseroundtrip_") {
		t.Fatalf("database name %q", db)
	}
	c := ctx(t)
	if err := ch.Exec(c, "CREATE TABLE "+db+".t (id UInt64, name String, ts DateTime) ENGINE = MergeTree ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	if err := ch.Exec(c, "INSERT INTO "+db+".t (id, name, ts) VALUES (2, 'b', '2026-11-20 08:00:00'), (1, 'a\\tx', '2026-11-20 09:30:00')"); err != nil {
		t.Fatal(err)
	}
	got, err := ch.Query(c, "SELECT id, name, ts FROM "+db+".t ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	want := "1\ta\\tx\t2026-11-20 09:30:00\n2\tb\t2026-11-20 08:00:00"
	if got != want {
		t.Fatalf("Query = %q, want %q", got, want)
	}
	// Several statements in one call; the server's time zone is UTC.
	got, err = ch.Query(c, "SELECT 1; SELECT toUnixTimestamp(toDateTime('2026-11-20 08:00:00'))")
	if err != nil {
		t.Fatal(err)
	}
	if got != "1\n1795161600" {
		t.Fatalf("multi-statement Query = %q", got)
	}
	if _, err := ch.Query(c, "SELECT * FROM "+db+".nope"); err == nil || !strings.Contains(err.Error(), "doesn't exist") {
		t.Fatalf("query of a missing table: err = %v", err)
	}
	if !strings.HasSuffix(ch.DSN(db), "@"+ch.Addr()+"/"+db) || !strings.HasPrefix(ch.DSN(db), "clickhouse://default@127.0.0.1:") {
		t.Fatalf("DSN = %q", ch.DSN(db))
	}
}

func TestPasswordUser(t *testing.T) {
	ch := testenv.SharedClickHouse(t)
	c := ctx(t)
	got, err := ch.QueryAs(c, testenv.TestUser, testenv.TestPassword, "SELECT 42")
	if err != nil || got != "42" {
		t.Fatalf("QueryAs(optlake, right password) = %q, %v", got, err)
	}
	if _, err := ch.QueryAs(c, testenv.TestUser, "wrong", "SELECT 1"); err == nil || !strings.Contains(err.Error(), "Wrong password") {
		t.Fatalf("wrong password: err = %v", err)
	}
	if _, err := ch.QueryAs(c, testenv.TestUser, "", "SELECT 1"); err == nil {
		t.Fatal("no password accepted for the optlake user")
	}
	dsn := ch.DSNAs(testenv.TestUser, testenv.TestPassword, "default")
	if want := "clickhouse://optlake:s3cret-test-pw@" + ch.Addr() + "/default"; dsn != want {
		t.Fatalf("DSNAs = %q, want %q", dsn, want)
	}
}

func TestHTTPPort(t *testing.T) {
	ch := testenv.SharedClickHouse(t)
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/?query=SELECT%%2042", ch.HTTPPort()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || strings.TrimSpace(string(body)) != "42" {
		t.Fatalf("HTTP: %d %q", resp.StatusCode, body)
	}
}

func TestServerStaysInItsDir(t *testing.T) {
	ch := testenv.SharedClickHouse(t)
	for _, p := range []string{"config.xml", "users.xml", "data/metadata", "log/clickhouse-server.log"} {
		if _, err := os.Stat(filepath.Join(ch.Dir(), p)); err != nil {
			t.Errorf("expected %s in the server dir: %v", p, err)
		}
	}
	c := ctx(t)
	got, err := ch.Query(c, "SELECT DISTINCT data_path FROM system.tables WHERE database = 'system' AND data_path != ''")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Split(got, "\n") {
		if p != "" && !strings.HasPrefix(p, ch.Dir()) {
			t.Errorf("table data outside the server dir: %s", p)
		}
	}
}

// Kill + Restart on the same ports keeps the data of a MergeTree table.
func TestKillRestartKeepsData(t *testing.T) {
	t.Parallel()
	ch := testenv.NewClickHouse(t)
	c := ctx(t)
	addr, httpPort := ch.Addr(), ch.HTTPPort()
	if err := ch.Exec(c, "CREATE TABLE default.k (id UInt32, s String) ENGINE = MergeTree ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	if err := ch.Exec(c, "INSERT INTO default.k (id, s) VALUES (1, 'one'), (2, 'two'), (3, 'three')"); err != nil {
		t.Fatal(err)
	}
	if err := ch.Kill(); err != nil {
		t.Fatal(err)
	}
	if ch.Running() {
		t.Fatal("still running after Kill")
	}
	if _, err := ch.Query(c, "SELECT 1"); err == nil {
		t.Fatal("query succeeded against a killed server")
	}
	if err := ch.Restart(c); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart after SIGKILL took %s", ch.StartupTime())
	if ch.Addr() != addr || ch.HTTPPort() != httpPort {
		t.Fatalf("ports changed across restart: %s/%d → %s/%d", addr, httpPort, ch.Addr(), ch.HTTPPort())
	}
	got, err := ch.Query(c, "SELECT count(), sum(id), groupArray(s) FROM (SELECT * FROM default.k ORDER BY id)")
	if err != nil {
		t.Fatal(err)
	}
	if want := "3\t6\t['one','two','three']"; got != want {
		t.Fatalf("after restart: %q, want %q", got, want)
	}
	// A clean Stop, then Restart, keeps it too.
	if err := ch.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := ch.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := ch.Restart(c); err != nil {
		t.Fatal(err)
	}
	if got, err := ch.Query(c, "SELECT count() FROM default.k"); err != nil || got != "3" {
		t.Fatalf("after stop+restart: %q, %v", got, err)
	}
}

func TestNewClickHouseInParallelGetsDistinctServers(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		addrs = map[string]bool{}
	)
	// Cleanup runs once both parallel subtests are done.
	t.Cleanup(func() {
		if len(addrs) != 4 {
			t.Errorf("two parallel servers did not get 4 distinct ports: %v", addrs)
		}
	})
	for i := range 2 {
		t.Run(fmt.Sprint("server", i), func(t *testing.T) {
			t.Parallel()
			ch := testenv.NewClickHouse(t)
			mu.Lock()
			addrs[ch.Addr()] = true
			addrs[fmt.Sprint("http:", ch.HTTPPort())] = true
			mu.Unlock()
			c := ctx(t)
			// Each server has its own data: a table created here is not on the other.
			if err := ch.Exec(c, fmt.Sprintf("CREATE TABLE default.only%d (x UInt8) ENGINE = TinyLog", i)); err != nil {
				t.Fatal(err)
			}
			got, err := ch.Query(c, "SELECT name FROM system.tables WHERE database = 'default'")
			if err != nil {
				t.Fatal(err)
			}
			if got != fmt.Sprintf("only%d", i) {
				t.Fatalf("tables on server %d: %q", i, got)
			}
		})
	}
}

func TestStartClickHouseDirect(t *testing.T) {
	t.Parallel()
	c := ctx(t)
	dir := t.TempDir()
	var log strings.Builder
	var mu sync.Mutex
	ch, err := testenv.StartClickHouse(c, dir, lockedWriter{&mu, &log})
	if err != nil {
		if os.Getenv("CI") == "" && strings.Contains(err.Error(), "not installed") {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	defer ch.Stop()
	if got, err := ch.Query(c, "SELECT 1"); err != nil || got != "1" {
		t.Fatalf("SELECT 1 = %q, %v", got, err)
	}
	if err := ch.Stop(); err != nil {
		t.Fatal(err)
	}
	if ch.Running() {
		t.Fatal("running after Stop")
	}
	// The data dir is kept.
	if _, err := os.Stat(filepath.Join(dir, "data", "metadata")); err != nil {
		t.Fatal(err)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// chDB reads the columns a query names, whatever the folders above the
// files are called: a test's temporary folder named after a subtest
// ".../bucket=false" (truncated, random digits appended) is no column, and
// its value, which ClickHouse would infer as a Bool and fail to parse when a
// filter on _file (as icebergDigests has) evaluates the path's columns,
// fails no read.
func TestChDBReadsNoColumnFromThePath(t *testing.T) {
	for _, folder := range []string{"bucket=fal2140439", "bucket=tru4279554", "bucket=f93893987"} {
		t.Run(folder, func(t *testing.T) {
			ch := testenv.NewChDB(t)
			ch.Workdir = filepath.Join(t.TempDir(), folder)
			if err := os.MkdirAll(filepath.Join(ch.Workdir, "t", "date=2026-11-24"), 0o755); err != nil {
				t.Fatal(err)
			}
			if _, err := ch.Query(ctx(t), "INSERT INTO FUNCTION file('t/date=2026-11-24/0.parquet', Parquet, 'a Int64') SELECT number + 1 FROM numbers(2);"); err != nil {
				t.Fatal(err)
			}
			got, err := ch.Query(ctx(t), "SELECT count(), sum(a) FROM file('t/date=*/*.parquet', Parquet, 'a Int64') WHERE _file = '0.parquet' FORMAT TSV;")
			if err != nil || got != "2\t3" {
				t.Errorf("count and sum of the file under %s: %q, %v; want 2 and 3", folder, got, err)
			}
		})
	}
}

func TestDuckDBQuery(t *testing.T) {
	t.Parallel()
	r := testenv.DuckDBQuery(t, `SELECT 1::BIGINT AS a, 'x' AS b, TIMESTAMPTZ '2026-11-20 08:00:00+00' AS t, NULL AS n, [1,2] AS l`)
	wantCols := []testenv.Column{
		{Name: "a", Type: "BIGINT"},
		{Name: "b", Type: "VARCHAR"},
		{Name: "t", Type: "TIMESTAMP WITH TIME ZONE"},
		{Name: "n", Type: "INTEGER"},
		{Name: "l", Type: "INTEGER[]"},
	}
	if !reflect.DeepEqual(r.Columns, wantCols) {
		t.Fatalf("columns = %+v, want %+v", r.Columns, wantCols)
	}
	wantRows := [][]any{{"1", "x", "2026-11-20T08:00:00.000Z", nil, []any{json.Number("1"), json.Number("2")}}}
	if !reflect.DeepEqual(r.Rows, wantRows) {
		t.Fatalf("rows = %#v, want %#v", r.Rows, wantRows)
	}
	if got := r.Col("t"); !reflect.DeepEqual(got, []any{"2026-11-20T08:00:00.000Z"}) {
		t.Fatalf("Col(t) = %#v", got)
	}
	if r.Type("l") != "INTEGER[]" {
		t.Fatalf("Type(l) = %q", r.Type("l"))
	}
}

func TestDuckDBValues(t *testing.T) {
	t.Parallel()
	r := testenv.DuckDBQuery(t, `
		SELECT 9223372036854775807::BIGINT AS big,
		       170141183460469231731687303715884105727::HUGEINT AS huge,
		       0.1::DOUBLE AS d, 'nan'::DOUBLE AS nan, 'inf'::DOUBLE AS inf, '-inf'::DOUBLE AS ninf,
		       true AS yes, 12.340::DECIMAL(10,3) AS dec,
		       TIMESTAMP '2026-11-20 08:00:00.123' AS ts,
		       TIMESTAMP '2026-11-20 08:00:00.123456' AS ts_us,
		       TIMESTAMPTZ '2026-11-20 10:00:00+02' AS tstz,
		       TIMESTAMP '1969-12-31 23:59:59.999' AS pre_epoch,
		       DATE '2026-11-20' AS day,
		       {'k': 'v', 'ts': TIMESTAMP '2026-01-01 00:00:00'} AS st,
		       [NULL, 'a'] AS lst`)
	row := r.Rows[0]
	want := []any{
		"9223372036854775807",
		"170141183460469231731687303715884105727",
		json.Number("0.1"), "NaN", "Infinity", "-Infinity",
		true, "12.340",
		"2026-11-20T08:00:00.123Z",
		"2026-11-20T08:00:00.123456Z",
		"2026-11-20T08:00:00.000Z",
		"1969-12-31T23:59:59.999Z",
		"2026-11-20",
		map[string]any{"k": "v", "ts": "2026-01-01T00:00:00.000Z"},
		[]any{nil, "a"},
	}
	if len(row) != len(want) {
		t.Fatalf("got %d values, want %d", len(row), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(row[i], want[i]) {
			t.Errorf("%s (%s) = %#v, want %#v", r.Columns[i].Name, r.Columns[i].Type, row[i], want[i])
		}
	}
}

func TestDuckDBParquetRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := testenv.DuckDBQuery(t, fmt.Sprintf(`
		COPY (SELECT i AS id, '2026-11-0' || (i %% 2 + 1) AS date FROM range(4) t(i))
		  TO '%s' (FORMAT parquet, PARTITION_BY (date));
		SELECT date::VARCHAR AS date, count(*) AS n FROM read_parquet('%s/*/*.parquet', hive_partitioning = true)
		GROUP BY ALL ORDER BY date`, dir, dir))
	if got := fmt.Sprint(r.Rows); got != "[[2026-11-01 2] [2026-11-02 2]]" {
		t.Fatalf("rows = %s", got)
	}
	if n := len(r.Col("n")); n != 2 {
		t.Fatalf("Col(n) has %d values", n)
	}
}

func TestDuckDBQueryErr(t *testing.T) {
	t.Parallel()
	_, err := testenv.DuckDBQueryErr(t, "SELECT * FROM read_parquet('/nonexistent/x.parquet')")
	if err == nil || !strings.Contains(err.Error(), "No files found") {
		t.Fatalf("err = %v", err)
	}
	r, err := testenv.DuckDBQueryErr(t, "SELECT 1 AS one WHERE false")
	if err != nil || len(r.Rows) != 0 || len(r.Columns) != 1 {
		t.Fatalf("empty result = %+v, %v", r, err)
	}
}

// The DuckDB readers are kept between queries (query.mjs --serve): each
// query still runs in a fresh DuckDB, seeing nothing of the one before on
// the same reader, also after a query that failed; an answer spans lines
// of SQL and of values.
func TestDuckDBQueriesShareNothing(t *testing.T) {
	for i := range 3 {
		r := testenv.DuckDBQuery(t, "CREATE TABLE kept AS SELECT 'a\nb' AS v;\nSELECT v FROM kept")
		if len(r.Rows) != 1 || r.Rows[0][0] != "a\nb" {
			t.Fatalf("query %d: %+v", i, r)
		}
		_, err := testenv.DuckDBQueryErr(t, "SELECT v FROM kept")
		if err == nil || !strings.Contains(err.Error(), "kept") {
			t.Fatalf("query %d: a table of the query before is seen (err %v)", i, err)
		}
	}
}

func TestColPanicsOnUnknownColumn(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Col of an unknown column did not panic")
		}
	}()
	testenv.Result{Columns: []testenv.Column{{Name: "a"}}}.Col("b")
}

func TestQueryLargeSQL(t *testing.T) {
	ch := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, ch)
	c := ctx(t)
	if err := ch.Exec(c, "CREATE TABLE "+db+".big (id UInt32, s String) ENGINE = MergeTree ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("INSERT INTO " + db + ".big (id, s) VALUES ")
	for i := range 20000 {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%d, 'row %d; with ''quotes''')", i, i)
	}
	if b.Len() < 256<<10 {
		t.Fatalf("SQL only %d bytes", b.Len())
	}
	if err := ch.Exec(c, b.String()); err != nil {
		t.Fatal(err)
	}
	got, err := ch.Query(c, "SELECT count(), sum(id), anyIf(s, id = 7) FROM "+db+".big")
	if err != nil {
		t.Fatal(err)
	}
	// 18.16's TabSeparated output escapes ' as \'.
	if got != "20000\t199990000\trow 7; with \\'quotes\\'" {
		t.Fatalf("got %q", got)
	}
}
