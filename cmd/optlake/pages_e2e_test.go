package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/venuesim"
)

// Offset pages that are not the size asked, or a listing that moves under
// a walk, load every instrument once; a listing that keeps moving fails
// the run (exit 3, one line naming the endpoint and why) with nothing
// committed, and a replay of the archive gives the lake as it is (exit 0,
// the failed snapshot listed as never loaded).
func TestPagedListingFaultsE2E(t *testing.T) {
	t.Parallel()
	const offset = "endpoints:\n  instruments:\n    records: data\n    pagination: {type: offset, offset_param: offset, limit_param: limit, limit: 100, total_path: total}\n"
	for _, tc := range []struct {
		name string
		rv   venuesim.RealVenue
		want string // the last line of a failed run; "": exit 0 with every row
	}{
		{"pages capped at 60", venuesim.RealVenue{Paginate: venuesim.PageOffset, PageCap: 60}, ""},
		{"pages one row long", venuesim.RealVenue{Paginate: venuesim.PageOffset, PageSkew: 1}, ""},
		{"listed under the first walk", venuesim.RealVenue{Paginate: venuesim.PageOffset, ShiftWalks: 1}, ""},
		{"listed under every walk", venuesim.RealVenue{Paginate: venuesim.PageOffset, ShiftWalks: 99},
			"instruments: page 13: incomplete listing: the venue's total is 1201 rows, 1201 received (its total was 1200 on the first page: the listing changed during the walk) (after 3 walks of the pages)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := pinClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
			_, url := realSim(t, 12, tc.rv)
			dir := t.TempDir()
			cfg := writeFile(t, t.TempDir(), "c.yaml", offset)
			res := clk.optlake(t, "run", "--config", cfg, "--api-url", url, "--data-dir", dir, "--source", "sim")
			if tc.want == "" {
				if res.code != 0 {
					t.Fatalf("exit %d: %s", res.code, res.stderr)
				}
				if got := lakeCounts(t, dir, "instruments", "instrument_name"); len(got) != 1 || !strings.HasSuffix(got[0], ":1200") {
					t.Fatalf("instruments %v, want the 1200 of the listing, each once", got)
				}
			} else {
				listingFailed(t, res, dir, tc.want)
				if n := pageFiles(t, dir, "instruments"); n != 3*13 {
					t.Errorf("%d pages archived, want the three walks' 13 each", n)
				}
				if st := statusJSON(t, dir)["parquet"]; st.Pending != 0 || len(st.Failed) != 0 {
					t.Errorf("status: %+v (nothing of an incomplete listing is to be caught up)", st)
				}
				// The next snapshot, the venue settled, loads.
				_, good := realSim(t, 12, venuesim.RealVenue{Paginate: venuesim.PageOffset})
				clk.next()
				if res := clk.optlake(t, "run", "--config", cfg, "--api-url", good, "--data-dir", dir, "--source", "sim"); res.code != 0 {
					t.Fatalf("next run: exit %d: %s", res.code, res.stderr)
				}
			}
			before := lakeCounts(t, dir, "instruments", "instrument_name")
			rep := clk.optlake(t, "replay", "--data-dir", dir)
			// The failed snapshot never loaded live: listed, no problem.
			if rep.code != 0 || (tc.want != "") != strings.Contains(rep.stdout, "never loaded") {
				t.Errorf("replay: exit %d, want 0 (the failed snapshot listed as never loaded): %s\n%s", rep.code, rep.stdout, lastLine(rep.stderr))
			}
			if after := lakeCounts(t, dir, "instruments", "instrument_name"); !slices.Equal(after, before) || len(after) != 1 {
				t.Errorf("replay changed the lake: %v, before %v", after, before)
			}
		})
	}
}

// A listing that holds an instrument twice (the second time with another
// tick_size) loads the first row in Parquet and ClickHouse alike, and the
// later one in rejects of both: the stores hold the same rows (ClickHouse's
// ReplacingMergeTree would otherwise keep one of the two, Parquet both).
func TestDuplicateKeySinksAgree(t *testing.T) {
	t.Parallel()
	c := testenv.SharedClickHouse(t)
	db := testenv.FreshDatabase(t, c)
	sim := venuesim.New(venuesim.Config{Seed: 5, Instruments: 300})
	var body bytes.Buffer
	if err := sim.WriteInstruments(&body); err != nil {
		t.Fatal(err)
	}
	listing := bytes.TrimSpace(body.Bytes())
	var groups []struct {
		Instruments []map[string]any `json:"instruments"`
	}
	if err := json.Unmarshal(listing, &groups); err != nil {
		t.Fatal(err)
	}
	first := groups[0].Instruments[0]
	first["tick_size"] = 123456.0
	again, _ := json.Marshal(first)
	dup := append(listing[:len(listing)-1:len(listing)-1], []byte(`,{"instruments":[`+string(again)+`]}]`)...)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(dup)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	res := optlake(t, "run", "--api-url", srv.URL, "--data-dir", dir, "--endpoints", "instruments", "--migrate",
		"--sink", "parquet", "--sink", "clickhouse", "--clickhouse-dsn", c.DSN(db), "--summary-json", filepath.Join(dir, "sum.json"))
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	name := fmt.Sprint(first["instrument_name"])
	lake := duckScalar(t, fmt.Sprintf(`SELECT count(*) || ' ' || count(DISTINCT instrument_name) || ' ' || max(tick_size) FILTER (WHERE instrument_name = '%s')
		FROM read_parquet('%s')`, name, filepath.Join(dir, "instruments", "*", "*.parquet")))
	ch := chQuery(t, c, db, fmt.Sprintf(`SELECT toString(count()) || ' ' || toString(uniqExact(instrument_name)) || ' ' || toString(maxIf(tick_size, instrument_name = '%s')) FROM instruments`, name))
	if lake != ch || !strings.HasPrefix(lake, "300 300 ") || strings.HasSuffix(lake, " 123456") {
		t.Errorf("Parquet holds %q, ClickHouse (without FINAL) %q; want the 300 instruments once, the first row of the duplicate", lake, ch)
	}
	if got := chQuery(t, c, db, "SELECT count() FROM instruments FINAL"); got != "300" {
		t.Errorf("ClickHouse FINAL holds %s rows, want 300", got)
	}
	reason := `duplicate key within snapshot: instrument_name came earlier in the listing`
	if got := chQuery(t, c, db, "SELECT count(), any(reason) FROM rejects"); got != "1\t"+reason {
		t.Errorf("ClickHouse rejects: %q", got)
	}
	if got := duckScalar(t, fmt.Sprintf(`SELECT count(*) || ' ' || any_value(reason) FROM read_parquet('%s')`, filepath.Join(dir, "rejects", "*", "*.parquet"))); got != "1 "+reason {
		t.Errorf("Parquet rejects: %q", got)
	}
	sum, err := os.ReadFile(filepath.Join(dir, "sum.json"))
	if err != nil || !strings.Contains(string(sum), `"duplicates": 1`) {
		t.Errorf("summary does not count the duplicate (%v): %s", err, sum)
	}
}
