package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/venuesim"
)

// Offset pages that are not the size asked, or a listing that moves under
// a walk, load every instrument once; a listing that keeps moving fails
// the run (exit 3, one line naming the endpoint and why) with nothing
// committed, and a replay of the archive gives the lake as it is.
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
			if wantCode := map[bool]int{true: 0, false: exitPartial}[tc.want == ""]; rep.code != wantCode {
				t.Errorf("replay: exit %d, want %d: %s", rep.code, wantCode, rep.stderr)
			}
			if after := lakeCounts(t, dir, "instruments", "instrument_name"); !slices.Equal(after, before) || len(after) != 1 {
				t.Errorf("replay changed the lake: %v, before %v", after, before)
			}
		})
	}
}
