package main

import (
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/venuesim"
)

// realSim starts the simulator behaving like a real exchange (frozen
// state: the same seed gives the same rows in every run).
func realSim(t *testing.T, seed int64, rv venuesim.RealVenue) (*venuesim.Sim, string) {
	t.Helper()
	return startSim(t, venuesim.Config{Seed: seed, Instruments: 1200, Real: rv})
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// listingDigest is the count and an order-independent hash of the
// instruments a data directory holds (DuckDB over the Parquet lake).
func listingDigest(t *testing.T, dir string) string {
	t.Helper()
	glob := filepath.Join(dir, "instruments", "*", "*.parquet")
	return duckScalar(t, "SELECT count(*)::VARCHAR || ' ' || coalesce(sum(hash(instrument_name, strike, index_price_raw, is_active, expiration_time, extra)), 0)::VARCHAR FROM read_parquet('"+glob+"')")
}

func pageFiles(t *testing.T, dir, endpoint string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(filepath.Join(dir, "raw", endpoint), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(p, "-p0") && strings.HasSuffix(p, ".json.zst") {
			n++
		}
		return nil
	})
	return n
}

// Each paginator, walked over the simulator's pages, loads the rows of the
// unpaginated body; a replay of the paginated snapshot loads them again.
func TestPaginatorsLoadTheUnpaginatedRows(t *testing.T) {
	t.Parallel()
	_, plain := startSim(t, venuesim.Config{Seed: 5, Instruments: 1200})
	base := t.TempDir()
	if res := optlake(t, "run", "--api-url", plain, "--data-dir", base, "--endpoints", "instruments"); res.code != 0 {
		t.Fatalf("unpaginated run: exit %d: %s", res.code, res.stderr)
	}
	want := listingDigest(t, base)
	if strings.HasPrefix(want, "0 ") {
		t.Fatalf("unpaginated run loaded nothing: %s", want)
	}
	for _, tc := range []struct{ style, config string }{
		{venuesim.PageCursor, "records: data\n    pagination: {type: cursor, cursor_path: next_cursor, cursor_param: cursor, limit_param: limit, limit: 250}"},
		{venuesim.PageNextURL, "records: data\n    pagination: {type: next_url, next_path: next}"},
		{venuesim.PageLink, "pagination: {type: link_header}"},
		{venuesim.PageOffset, "records: data\n    pagination: {type: offset, offset_param: offset, limit_param: limit, limit: 250, total_path: total}"},
		{venuesim.PagePage, "records: data\n    pagination: {type: page, page_param: page, limit_param: per_page, limit: 250}"},
	} {
		t.Run(tc.style, func(t *testing.T) {
			_, url := realSim(t, 5, venuesim.RealVenue{Paginate: tc.style, PageSize: 250})
			dir := t.TempDir()
			cfg := writeFile(t, dir, "c.yaml", "endpoints:\n  instruments:\n    "+tc.config+"\n")
			res := optlake(t, "run", "--config", cfg, "--api-url", url, "--data-dir", dir)
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			if got := listingDigest(t, dir); got != want {
				t.Errorf("paginated rows %s, unpaginated %s", got, want)
			}
			if n := pageFiles(t, dir, "instruments"); n < 5 {
				t.Errorf("%d pages archived, want each of the 1200/250 pages", n)
			}
			// Replay rebuilds the same rows from the archived pages.
			os.RemoveAll(filepath.Join(dir, "instruments"))
			if res := optlake(t, "replay", "--data-dir", dir); res.code != 0 {
				t.Fatalf("replay: exit %d: %s", res.code, res.stderr)
			}
			if got := listingDigest(t, dir); got != want {
				t.Errorf("replayed rows %s, run's %s", got, want)
			}
		})
	}
}

// A page that fails after the first ones were decoded loads nothing of the
// endpoint, in Parquet and in ClickHouse (rows are staged until the last
// page); the other endpoints load (exit 3).
func TestPageFailureLoadsNothing(t *testing.T) {
	t.Parallel()
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	_, url := realSim(t, 6, venuesim.RealVenue{Paginate: venuesim.PageCursor, PageSize: 100, FailPage: 4})
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", "endpoints:\n  instruments:\n    records: data\n    pagination: {type: cursor, cursor_path: next_cursor, cursor_param: cursor}\n  account_summary:\n")
	if res := optlake(t, "migrate", "--clickhouse-dsn", c.DSN(db)); res.code != 0 {
		t.Fatalf("migrate: %s", res.stderr)
	}
	res := optlake(t, "run", "--config", cfg, "--api-url", url, "--data-dir", dir, "--max-attempts", "2",
		"--sink", "parquet", "--sink", "clickhouse", "--clickhouse-dsn", c.DSN(db), "--batch-rows", "50")
	if res.code != exitPartial {
		t.Fatalf("exit %d, want %d: %s", res.code, exitPartial, res.stderr)
	}
	if !strings.Contains(res.stderr, "instruments: page 4: HTTP 500") {
		t.Errorf("stderr does not name the endpoint and the page:\n%s", res.stderr)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "instruments", "*", "*.parquet")); len(files) != 0 {
		t.Errorf("Parquet has instruments of the failed snapshot: %v", files)
	}
	out, err := c.Query(context.Background(), "SELECT count() FROM "+db+".instruments")
	if err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("ClickHouse has %q instruments of the failed snapshot (%v)", out, err)
	}
	if n := pageFiles(t, dir, "instruments"); n < 3 {
		t.Errorf("%d pages archived; the three good pages and the failed one are kept", n)
	}
}

// A cursor that comes back, and a listing longer than max_pages, fail the
// endpoint with one line that says why.
func TestPageLoopAndMaxPages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rv   venuesim.RealVenue
		max  string
		want string
	}{
		{"loop", venuesim.RealVenue{Paginate: venuesim.PageCursor, PageSize: 100, PageLoop: true}, "", "instruments: page 2: pagination loops: the same cursor came back after page 2"},
		{"max_pages", venuesim.RealVenue{Paginate: venuesim.PageCursor, PageSize: 100}, ", max_pages: 5", "instruments: more than max_pages (5) pages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, url := realSim(t, 7, tc.rv)
			dir := t.TempDir()
			cfg := writeFile(t, dir, "c.yaml", "endpoints:\n  instruments:\n    records: data\n    pagination: {type: cursor, cursor_path: next_cursor, cursor_param: cursor"+tc.max+"}\n  account_summary:\n")
			listingFailed(t, optlake(t, "run", "--config", cfg, "--api-url", url, "--data-dir", dir), dir, tc.want)
		})
	}
}

// listingFailed checks a run that failed its instruments endpoint: exit 3,
// the last line of stderr says want, and no instruments are in the lake.
func listingFailed(t *testing.T, res result, dir, want string) {
	t.Helper()
	if res.code != exitPartial {
		t.Fatalf("exit %d, want %d: %s", res.code, exitPartial, res.stderr)
	}
	lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, want) {
		t.Errorf("last line %q, want %q", last, want)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "instruments", "*", "*.parquet")); len(files) != 0 {
		t.Errorf("instruments loaded: %v", files)
	}
}

// Error bodies in 200 answers: a retry code is retried (and loads), any
// other code fails the endpoint at once; neither is loaded as rows.
func TestVenueErrorBodies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		retry string
		code  int
		want  int
	}{
		{"retried", "[10028]", 0, exitOK},
		{"not retried", "[13009]", 0, exitFailure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, url := realSim(t, 8, venuesim.RealVenue{Envelope: venuesim.EnvelopeJSONRPC, VenueErrorFirst: 1})
			dir := t.TempDir()
			cfg := writeFile(t, dir, "c.yaml", "errors: {path: error, code: error.code, message: error.message, retry_codes: "+tc.retry+"}\nendpoints:\n  instruments: {records: result}\n")
			res := optlake(t, "run", "--config", cfg, "--api-url", url, "--data-dir", dir, "--log-level", "info")
			if res.code != tc.want {
				t.Fatalf("exit %d, want %d: %s", res.code, tc.want, res.stderr)
			}
			if tc.want == exitOK {
				if !strings.Contains(res.stderr, "venue error 10028: too_many_requests") || !strings.Contains(res.stderr, "retrying") {
					t.Errorf("the retry is not logged:\n%s", res.stderr)
				}
				if got := listingDigest(t, dir); strings.HasPrefix(got, "0 ") || !strings.HasPrefix(got, "1200 ") {
					t.Errorf("rows %s, want the 1200 instruments", got)
				}
				return
			}
			if !strings.Contains(res.stderr, "instruments: venue error 10028: too_many_requests") || strings.Contains(res.stderr, "retrying") {
				t.Errorf("stderr:\n%s", res.stderr)
			}
			if files, _ := filepath.Glob(filepath.Join(dir, "instruments", "*", "*.parquet")); len(files) != 0 {
				t.Errorf("an error body was loaded: %v", files)
			}
		})
	}
}

// secretNowhere fails when any of secrets is in the output or in any file
// of the data directory.
func secretNowhere(t *testing.T, res result, dir string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(res.stdout+res.stderr, s) {
			t.Errorf("secret %q in the output", s)
		}
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		if strings.HasSuffix(p, ".zst") {
			return nil // response bodies as received (the venue's, no request secret)
		}
		for _, s := range secrets {
			if strings.Contains(string(b), s) {
				t.Errorf("secret %q in %s", s, p)
			}
		}
		return nil
	})
}

// Each authentication type: the right credentials load the account
// endpoint; wrong ones fail it (named, 401) and no secret, right or wrong,
// is in any output or file. A session is logged in again after a 401; an
// oauth2 token is reused.
func TestAuthTypes(t *testing.T) {
	const key, secret = "k3y-right-1234", "s3cret-right-5678"
	const badKey, badSecret = "k3y-wrong-4321", "s3cret-wrong-8765"
	for _, tc := range []struct {
		scheme string
		rv     venuesim.RealVenue
		config string // with KEY and SECRET for the credentials' ${ENV} names
		logins int64  // logins or tokens the good run needs (-1: not counted)
	}{
		{"headers", venuesim.RealVenue{Auth: venuesim.AuthBearer}, "{type: headers, headers: {Authorization: 'Bearer ${KEY}'}}", -1},
		{"bearer", venuesim.RealVenue{Auth: venuesim.AuthBearer}, "{type: bearer, token: '${KEY}'}", -1},
		{"basic", venuesim.RealVenue{Auth: venuesim.AuthBasic}, "{type: basic, user: '${KEY}', password: '${SECRET}'}", -1},
		{"query_key", venuesim.RealVenue{Auth: venuesim.AuthQueryKey}, "{type: query_key, name: api_key, value: '${KEY}'}", -1},
		{"oauth2", venuesim.RealVenue{Auth: venuesim.AuthOAuth2}, "{type: oauth2, token_url: /oauth/token, client_id: '${KEY}', client_secret: '${SECRET}'}", 1},
		{"session", venuesim.RealVenue{Auth: venuesim.AuthSession, SessionUses: 1},
			`{type: session, login: {path: /auth/login, body: '{"user": "${KEY}", "password": "${SECRET}"}'}, token: token, expires_in: expires_in}`, 2},
		{"hmac", venuesim.RealVenue{Auth: venuesim.AuthQuerySig},
			"{type: hmac, key: '${KEY}', secret: '${SECRET}', sign: '{query}', headers: {X-MBX-APIKEY: '{key}'}, query: {timestamp: '{timestamp}', signature: '{signature}'}}", -1},
	} {
		t.Run(tc.scheme, func(t *testing.T) {
			rv := tc.rv
			rv.Key, rv.Secret = key, secret
			sim, url := realSim(t, 9, rv)
			cfgDir := t.TempDir()
			cfg := writeFile(t, cfgDir, "c.yaml", "auth: "+tc.config+"\nendpoints:\n  account_summary:\n  positions:\n")
			for _, good := range []bool{true, false} {
				if good {
					t.Setenv("KEY", key)
					t.Setenv("SECRET", secret)
				} else {
					t.Setenv("KEY", badKey)
					t.Setenv("SECRET", badSecret)
				}
				dir := t.TempDir()
				res := optlake(t, "run", "--config", cfg, "--api-url", url, "--data-dir", dir, "--log-level", "debug")
				if good {
					if res.code != 0 {
						t.Fatalf("good credentials: exit %d: %s", res.code, res.stderr)
					}
					if tc.logins >= 0 && sim.Logins() != tc.logins {
						t.Errorf("%d logins or tokens, want %d", sim.Logins(), tc.logins)
					}
				} else if res.code != exitFailure || !strings.Contains(res.stderr, "account_summary: ") || !strings.Contains(res.stderr, "401") {
					t.Errorf("wrong credentials: exit %d, stderr:\n%s", res.code, res.stderr)
				}
				secretNowhere(t, res, dir, key, secret, badKey, badSecret)
			}
		})
	}
}

// The ready profiles of deploy/venues, each against the simulator mode
// that reproduces its venue's style: the right credentials load every
// endpoint of the profile, wrong ones fail the private ones and leave no
// secret anywhere.
func TestVenueProfiles(t *testing.T) {
	for _, tc := range []struct {
		profile   string
		rv        venuesim.RealVenue
		keyEnv    string
		secretEnv string
		endpoints []string // that load rows (the simulator's shapes; the venues' own are in venue_fixtures_test.go)
	}{
		{"deribit", venuesim.RealVenue{Auth: venuesim.AuthDeri, Envelope: venuesim.EnvelopeJSONRPC, VenueErrorFirst: 1},
			"DERIBIT_CLIENT_ID", "DERIBIT_CLIENT_SECRET", []string{"instruments", "account_summary", "positions"}},
		{"binance", venuesim.RealVenue{Auth: venuesim.AuthQuerySig}, "BINANCE_API_KEY", "BINANCE_API_SECRET", []string{"account_summary", "positions"}},
		{"okx", venuesim.RealVenue{Auth: venuesim.AuthB64Sig, Envelope: venuesim.EnvelopeData}, "OKX_API_KEY", "OKX_API_SECRET", []string{"account_balance", "positions"}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			const key, secret, pass = "prof-key-2468", "prof-secret-1357", "prof-pass-9999"
			rv := tc.rv
			rv.Key, rv.Secret = key, secret
			_, url := realSim(t, 10, rv)
			profile := filepath.Join("..", "..", "deploy", "venues", tc.profile+".yaml")
			t.Setenv("OKX_PASSPHRASE", pass)
			for _, good := range []bool{true, false} {
				t.Setenv(tc.keyEnv, key)
				t.Setenv(tc.secretEnv, secret)
				if !good {
					t.Setenv(tc.secretEnv, "prof-wrong-0000")
				}
				dir := t.TempDir()
				sum := filepath.Join(t.TempDir(), "summary.json")
				res := optlake(t, "run", "--config", profile, "--api-url", url, "--data-dir", dir, "--summary-json", sum, "--endpoints", strings.Join(tc.endpoints, ","))
				secretNowhere(t, res, dir, key, secret, pass, "prof-wrong-0000")
				if !good {
					if res.code == exitOK || !strings.Contains(res.stderr, "401") {
						t.Errorf("wrong secret: exit %d: %s", res.code, res.stderr)
					}
					continue
				}
				if res.code != exitOK {
					t.Fatalf("exit %d: %s", res.code, res.stderr)
				}
				b, _ := os.ReadFile(sum)
				for _, ep := range tc.endpoints {
					if !strings.Contains(string(b), `"endpoint": "`+ep+`"`) && !strings.Contains(string(b), `"endpoint":"`+ep+`"`) {
						t.Errorf("%s not in the summary: %s", ep, b)
					}
				}
				var s struct {
					Endpoints []struct {
						Endpoint string
						Rows     int64
						Status   string
					}
				}
				if err := json.Unmarshal(b, &s); err != nil {
					t.Fatal(err)
				}
				for _, e := range s.Endpoints {
					if e.Status != "ok" || e.Rows == 0 {
						t.Errorf("%s: %s with %d rows", e.Endpoint, e.Status, e.Rows)
					}
				}
			}
		})
	}
}

// accountDigest is the count and hash of a table's rows with their
// row_index (DuckDB over the Parquet lake).
func accountDigest(t *testing.T, dir, table string) string {
	t.Helper()
	glob := filepath.Join(dir, table, "*", "*.parquet")
	return duckScalar(t, "SELECT count(*)::VARCHAR || ' ' || coalesce(sum(hash(row_index, instrument_name, size, account)), 0)::VARCHAR FROM read_parquet('"+glob+"', union_by_name = true)")
}

// An account endpoint beyond the seed's (kind: account), its rows in an
// envelope over several pages, loads the rows of the one-page body with the
// same row_index; replay (which has no config) rebuilds them.
func TestPaginatedAccountEndpoint(t *testing.T) {
	t.Parallel()
	_, plain := realSim(t, 11, venuesim.RealVenue{Envelope: venuesim.EnvelopeJSONRPC})
	base := t.TempDir()
	cfg := writeFile(t, t.TempDir(), "c.yaml", "endpoints:\n  my_positions: {kind: account, path: /api/v2/private/get_positions, records: result.positions}\n")
	if res := optlake(t, "run", "--config", cfg, "--api-url", plain, "--data-dir", base); res.code != 0 {
		t.Fatalf("one page: exit %d: %s", res.code, res.stderr)
	}
	want := accountDigest(t, base, "my_positions")
	t.Logf("one page: %s", want)
	if strings.HasPrefix(want, "0 ") || strings.HasPrefix(want, "1 ") {
		t.Fatalf("the one-page body has %s rows: the test needs several", want)
	}
	_, paged := realSim(t, 11, venuesim.RealVenue{Envelope: venuesim.EnvelopeJSONRPC, Paginate: venuesim.PageCursor})
	dir := t.TempDir()
	cfg = writeFile(t, t.TempDir(), "c.yaml", "endpoints:\n  my_positions:\n    kind: account\n    path: /api/v2/private/get_positions\n    records: result.data\n    pagination: {type: cursor, cursor_path: result.next_cursor, cursor_param: cursor, limit_param: limit, limit: 3}\n")
	if res := optlake(t, "run", "--config", cfg, "--api-url", paged, "--data-dir", dir); res.code != 0 {
		t.Fatalf("pages: exit %d: %s", res.code, res.stderr)
	}
	if got := accountDigest(t, dir, "my_positions"); got != want {
		t.Errorf("paginated rows %s, one page %s", got, want)
	}
	if n := pageFiles(t, dir, "my_positions"); n < 2 {
		t.Errorf("%d pages archived", n)
	}
	os.RemoveAll(filepath.Join(dir, "my_positions"))
	if res := optlake(t, "replay", "--data-dir", dir, "--endpoints", "my_positions"); res.code != 0 {
		t.Fatalf("replay: exit %d: %s", res.code, res.stderr)
	}
	if got := accountDigest(t, dir, "my_positions"); got != want {
		t.Errorf("replayed rows %s, run's %s", got, want)
	}
}

// A paginated snapshot that a sink missed is caught up from its archived
// pages by the next run: the same rows, and the ledger settles.
func TestCatchUpPaginatedSnapshot(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	clk := pinClock(base)
	_, url := realSim(t, 12, venuesim.RealVenue{Paginate: venuesim.PageOffset, PageSize: 100})
	dir := t.TempDir()
	cfg := writeFile(t, t.TempDir(), "c.yaml", "endpoints:\n  instruments:\n    records: data\n    pagination: {type: offset, offset_param: offset, limit_param: limit, limit: 100, total_path: total}\n")
	args := []string{"run", "--config", cfg, "--api-url", url, "--data-dir", dir, "--source", "sim"}
	repair := blockParquet(t, dir)
	if res := clk.optlake(t, args...); res.code != exitPartial {
		t.Fatalf("run with the lake unwritable: exit %d: %s", res.code, res.stderr)
	}
	if st := statusJSON(t, dir)["parquet"]; st.Pending != 1 {
		t.Errorf("status during the fault: %+v", st)
	}
	repair()
	clk.next()
	res := clk.optlake(t, args...)
	if res.code != 0 || !strings.Contains(res.stdout, "caught up 1 of 1 snapshots") {
		t.Fatalf("exit %d: %s %s", res.code, res.stdout, res.stderr)
	}
	got := lakeCounts(t, dir, "instruments", "instrument_name")
	if len(got) != 2 || !strings.HasSuffix(got[0], ":1200") || !strings.HasSuffix(got[1], ":1200") {
		t.Errorf("instruments per snapshot %v, want 1200 in each of two", got)
	}
	if st := statusJSON(t, dir)["parquet"]; st.Pending != 0 || len(st.Failed) != 0 {
		t.Errorf("status after the catch-up: %+v", st)
	}
}

// A venue that lists bare instruments (no {"instruments": [...]} groups, no
// envelope, no pages: the default decoder) loads the rows of the grouped
// listing.
func TestBareListingLoadsTheGroupedRows(t *testing.T) {
	t.Parallel()
	_, grouped := startSim(t, venuesim.Config{Seed: 5, Instruments: 1200})
	base := t.TempDir()
	if res := optlake(t, "run", "--api-url", grouped, "--data-dir", base, "--endpoints", "instruments"); res.code != 0 {
		t.Fatalf("grouped run: exit %d: %s", res.code, res.stderr)
	}
	want := listingDigest(t, base)
	if strings.HasPrefix(want, "0 ") {
		t.Fatalf("grouped run loaded nothing: %s", want)
	}
	_, bare := realSim(t, 5, venuesim.RealVenue{Bare: true})
	dir := t.TempDir()
	if res := optlake(t, "run", "--api-url", bare, "--data-dir", dir, "--endpoints", "instruments"); res.code != 0 {
		t.Fatalf("bare run: exit %d: %s", res.code, res.stderr)
	}
	if got := listingDigest(t, dir); got != want {
		t.Errorf("bare listing loaded %s, grouped %s", got, want)
	}
}

// A request body takes ${VAR} like a header value: the venue gets the
// environment's value, a $ of the body's own stays as written, an unset
// variable fails config check naming it, and the value is redacted like a
// secret (in a debug log, the summary and every file).
func TestBodyTakesEnv(t *testing.T) {
	const sub = "sub-98765-private"
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"result": [{"id": 1, "balance": "2.5"}]}`)
	}))
	defer srv.Close()
	dir := t.TempDir()
	cfg := writeFile(t, t.TempDir(), "c.yaml", `endpoints:
  balances:
    kind: account
    path: /private/get_subaccount
    method: POST
    body: '{"subaccount_id": "${OPTLAKE_TEST_SUBACCOUNT}", "note": "$5 ${not a var}"}'
    records: result
`)
	t.Setenv("OPTLAKE_TEST_SUBACCOUNT", sub)
	sum := filepath.Join(dir, "summary.json")
	res := optlake(t, "run", "--config", cfg, "--api-url", srv.URL, "--data-dir", dir, "--endpoints", "balances", "--log-level", "debug", "--summary-json", sum)
	if res.code != exitOK {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	mu.Lock()
	got := strings.Join(bodies, "\n")
	mu.Unlock()
	if got != `{"subaccount_id": "`+sub+`", "note": "$5 ${not a var}"}` {
		t.Errorf("the venue got %s", got)
	}
	check := optlake(t, "config", "check", "--config", cfg, "--api-url", srv.URL, "--data-dir", dir)
	if check.code != exitOK {
		t.Errorf("config check: exit %d: %s", check.code, check.stderr)
	}
	secretNowhere(t, res, dir, sub)
	secretNowhere(t, check, dir, sub)
	os.Unsetenv("OPTLAKE_TEST_SUBACCOUNT")
	if res := optlake(t, "config", "check", "--config", cfg, "--api-url", srv.URL, "--data-dir", dir); res.code == exitOK || !strings.Contains(res.stderr, "OPTLAKE_TEST_SUBACCOUNT is not set") || !strings.Contains(res.stderr, ":6:") {
		t.Errorf("unset variable: exit %d: %s", res.code, res.stderr)
	}
}
