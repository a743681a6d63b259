package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/pipeline/archive"
	"github.com/optlake/optlake/venuesim"
)

// rawMetas returns the archive's metadata for an endpoint.
func rawMetas(t *testing.T, dir, ep string) []archive.Meta {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "raw", ep, "*", "*.meta.json"))
	var out []archive.Meta
	for _, p := range paths {
		m, err := archive.ReadMeta(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// The fault matrix: each fault, the exit code, the one-line reason, and
// what the archive and the lake hold afterwards (docs/RELIABILITY.md).
func TestFaultMatrix(t *testing.T) {
	t.Parallel()
	listing := func(n int) string {
		var b strings.Builder
		sim := venuesim.New(venuesim.Config{Seed: 1, Instruments: n})
		sim.WriteInstruments(&b)
		return b.String()
	}
	small := listing(50)
	var resets atomic.Int32
	cases := []struct {
		name    string
		handler http.HandlerFunc
		args    []string
		code    int
		reason  string // in the last stderr line
		rows    int    // instrument rows in the lake afterwards (-1: no file)
		raw     int    // archived bodies with metadata
		rawOK   bool   // the last archived body is complete
	}{
		{
			name: "connection reset mid-body, then ok",
			handler: func(w http.ResponseWriter, r *http.Request) {
				if resets.Add(1) == 1 {
					w.Header().Set("Content-Length", strconv.Itoa(len(small)))
					w.WriteHeader(200)
					io.WriteString(w, small[:len(small)/2])
					w.(http.Flusher).Flush()
					conn, _, _ := w.(http.Hijacker).Hijack()
					conn.(*net.TCPConn).SetLinger(0) // RST, not FIN
					conn.Close()
					return
				}
				io.WriteString(w, small)
			},
			code: 0, rows: 50, raw: 2, rawOK: true,
		},
		{
			name:    "wrong top-level shape",
			handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"instruments":[]}`) },
			code:    exitFailure, reason: "instruments: decode listing: listing is a JSON object, expected an array", rows: -1, raw: 1, rawOK: true,
		},
		{
			name:    "empty listing",
			handler: func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `[]`) },
			code:    0, rows: 0, raw: 1, rawOK: true,
		},
		{
			name: "per-request timeout",
			handler: func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			},
			args: []string{"--timeout", "300ms", "--max-attempts", "2"},
			code: exitFailure, reason: "instruments: no response within 300ms", rows: -1, raw: 0,
		},
		{
			name: "body over the size limit",
			handler: func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, small)
			},
			args: []string{"--max-body-size", "1000"},
			code: exitFailure, reason: "response body exceeds the size limit", rows: -1, raw: 1, rawOK: false,
		},
		{
			name: "401 is not retried",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(401)
				io.WriteString(w, `{"error":"bad key"}`)
			},
			code: exitFailure, reason: `instruments: HTTP 401 Unauthorized: {"error":"bad key"}`, rows: -1, raw: 1, rawOK: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			dir := t.TempDir()
			res := optlake(t, append([]string{"run", "--api-url", srv.URL, "--data-dir", dir, "--endpoints", "instruments"}, tc.args...)...)
			last := lastLine(res.stderr)
			if res.code != tc.code || (tc.reason != "" && !strings.Contains(last, tc.reason)) {
				t.Fatalf("exit %d, last line %q; want %d and %q", res.code, last, tc.code, tc.reason)
			}
			if tc.code != 0 && strings.Count(strings.TrimSpace(res.stderr), "optlake: ") != 1 {
				t.Errorf("want one reason line, got:\n%s", res.stderr)
			}
			files := snapshotsOnDisk(dir)
			if tc.rows < 0 && len(files) != 0 {
				t.Errorf("files written: %v", files)
			}
			if tc.rows >= 0 {
				if got := duckScalar(t, fmt.Sprintf("SELECT count(*) FROM read_parquet('%s')", filepath.Join(dir, "instruments", "*", "*.parquet"))); got != strconv.Itoa(tc.rows) {
					t.Errorf("rows = %s, want %d", got, tc.rows)
				}
			}
			metas := rawMetas(t, dir, "instruments")
			if len(metas) != tc.raw {
				t.Fatalf("archived %d bodies, want %d", len(metas), tc.raw)
			}
			if tc.raw > 0 {
				lastMeta := metas[len(metas)-1]
				if lastMeta.Complete != tc.rawOK {
					t.Errorf("last archived body: %+v", lastMeta)
				}
			}
		})
	}
}

// The data directory cannot be written: the sink fails, the raw archive is
// still complete, the exit code and reason say so.
func TestParquetDirNotWritable(t *testing.T) {
	t.Parallel()
	_, url := startSim(t, venuesim.Config{Seed: 1})
	dir := t.TempDir()
	// A file where the table's folder should be (root ignores permissions).
	if err := os.WriteFile(filepath.Join(dir, "instruments"), []byte("in the way"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := optlake(t, "run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments")
	last := lastLine(res.stderr)
	// Partial: fetched and archived, the load pending in the ledger.
	if res.code != exitPartial || !strings.Contains(last, "instruments: parquet: ") || !strings.Contains(last, "not a directory") {
		t.Fatalf("exit %d, %q", res.code, last)
	}
	if m := rawMetas(t, dir, "instruments"); len(m) != 1 || !m[0].Complete {
		t.Errorf("raw archive: %+v", m)
	}
}

// A listing of 1,000,000 instruments streams through in bounded batches.
func TestMillionInstruments(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	if raceEnabled {
		t.Skip("scale test: make test runs it without -race (go test -run TestMillionInstruments ./cmd/optlake/)")
	}
	sim := venuesim.New(venuesim.Config{Seed: 6, Instruments: 1_000_000})
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	dir := t.TempDir()
	res := optlake(t, "run", "--api-url", srv.URL, "--data-dir", dir, "--endpoints", "instruments")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	got := duckScalar(t, fmt.Sprintf("SELECT count(*) || '/' || count(DISTINCT instrument_name) FROM read_parquet('%s')", filepath.Join(dir, "instruments", "*", "*.parquet")))
	if got != "1000000/1000000" {
		t.Errorf("rows/distinct = %s", got)
	}
}

// ClickHouse killed in the middle of inserting a large snapshot: the run
// fails naming ClickHouse, Parquet and the archive are whole; after a
// restart, replay gives exact counts. The server is killed at a known point
// of the insert, not by timing: a proxy in front of it kills it once the
// run has sent 1 MiB, far less than the snapshot's rows.
func TestClickHouseKilledMidInsert(t *testing.T) {
	t.Parallel()
	c := testenv.NewClickHouse(t)
	if res := optlake(t, "migrate", "--clickhouse-dsn", c.DSN("optlake")); res.code != 0 {
		t.Fatal(res.stderr)
	}
	sim := venuesim.New(venuesim.Config{Seed: 7, Instruments: 200_000})
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	dir := t.TempDir()
	ctx := context.Background()
	proxy := testenv.NewProxy(t, c.Addr())
	var killed atomic.Bool
	proxy.AfterUpstream(1<<20, func() { killed.Store(c.Kill() == nil) })
	res := optlake(t, "run", "--api-url", srv.URL, "--data-dir", dir, "--endpoints", "instruments", "--batch-rows", "2000",
		"--sink", "parquet", "--sink", "clickhouse", "--clickhouse-dsn", "clickhouse://default@"+proxy.Addr()+"/optlake")
	if !killed.Load() {
		t.Fatalf("the run sent %d bytes to ClickHouse and the server was not killed: the test proves nothing", proxy.Upstream())
	}
	last := lastLine(res.stderr)
	// Partial: fetched, archived and in Parquet; ClickHouse's load pending.
	if res.code != exitPartial || !strings.Contains(last, "clickhouse") {
		t.Fatalf("exit %d, %q", res.code, last)
	}
	if got := duckScalar(t, fmt.Sprintf("SELECT count(*) FROM read_parquet('%s')", filepath.Join(dir, "instruments", "*", "*.parquet"))); got != "200000" {
		t.Errorf("parquet rows = %s", got)
	}
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if got := chQuery(t, c, "optlake", "SELECT count() FROM instruments FINAL"); got == "200000" {
		t.Fatalf("ClickHouse held the whole snapshot before the replay: the kill was not mid-insert")
	}
	res = optlake(t, "replay", "--data-dir", dir, "--sink", "clickhouse", "--clickhouse-dsn", c.DSN("optlake"))
	if res.code != 0 {
		t.Fatalf("replay: %s %s", res.stdout, res.stderr)
	}
	if got := chQuery(t, c, "optlake", "SELECT count() FROM instruments FINAL"); got != "200000" {
		t.Errorf("clickhouse rows after replay = %s, want 200000", got)
	}
	// The replay by hand settled the load in the ledger.
	if st := statusJSON(t, dir)["clickhouse"]; st.Pending != 0 {
		t.Errorf("status after the replay: %+v", st)
	}
}
