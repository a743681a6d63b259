package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
			res := optlake(t, "run", "--config", cfg, "--api-url", url, "--data-dir", dir)
			if res.code != exitPartial {
				t.Fatalf("exit %d, want %d: %s", res.code, exitPartial, res.stderr)
			}
			lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
			if last := lines[len(lines)-1]; !strings.Contains(last, tc.want) {
				t.Errorf("last line %q, want %q", last, tc.want)
			}
			if files, _ := filepath.Glob(filepath.Join(dir, "instruments", "*", "*.parquet")); len(files) != 0 {
				t.Errorf("instruments loaded: %v", files)
			}
		})
	}
}

// Error bodies in 200 answers: a retry code is retried (and loads), any
// other code fails the endpoint at once; neither is loaded as rows.
func TestVenueErrorBodies(t *testing.T) {
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
