package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/extract/paginate"
	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/memsink"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// pagedRig is a runner over a simulator that pages its listing as rv says,
// walked as spec says, loading into one in-memory sink.
type pagedRig struct {
	dir  string
	mem  *memsink.Sink
	cfg  pipeline.Config
	r    *pipeline.Runner
	want []string // the listing's instrument names, sorted
}

func newPagedRig(t *testing.T, instruments int, rv venuesim.RealVenue, spec paginate.Spec) *pagedRig {
	t.Helper()
	sim := venuesim.New(venuesim.Config{Seed: 21, Instruments: instruments, Real: rv})
	client, eps := simClient(t, sim.Handler())
	eps[0].Records, eps[0].Pagination = "data", &spec
	rig := &pagedRig{dir: t.TempDir(), mem: memsink.New("mem")}
	rig.cfg = pipeline.Config{
		Client: client, Store: storage.NewLocal(rig.dir), Sinks: []sinks.Sink{rig.mem}, Endpoints: eps, Source: "sim",
		Events: true, Ledger: true, BatchRows: 64,
		Now:      func() time.Time { return memT0 },
		NewRunID: func() string { return "run-1" },
	}
	var err error
	if rig.r, err = pipeline.New(rig.cfg); err != nil {
		t.Fatal(err)
	}
	// The listing as one unpaged body gives every name once.
	rec := httptest.NewRecorder()
	venuesim.New(venuesim.Config{Seed: 21, Instruments: instruments}).Handler().ServeHTTP(rec, httptest.NewRequest("GET", venuesim.PathInstruments, nil))
	var groups []struct {
		Instruments []struct {
			Name string `json:"instrument_name"`
		} `json:"instruments"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &groups); err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		for _, in := range g.Instruments {
			rig.want = append(rig.want, in.Name)
		}
	}
	slices.Sort(rig.want)
	return rig
}

// names are the instrument names sink s holds, sorted.
func names(s *memsink.Sink) []string {
	var out []string
	for _, rec := range s.Records(schema.Instruments.Name) {
		col := rec.Column(schema.Instruments.MustIndex("instrument_name")).(*array.String)
		for i := 0; i < col.Len(); i++ {
			out = append(out, col.Value(i))
		}
	}
	slices.Sort(out)
	return out
}

// Offset and page walks load every row of a venue whose pages are not the
// size asked, or whose listing moves under a walk (walked again); a
// listing that stays moved fails its endpoint with one line, loads
// nothing, keeps its pages archived, and replays to the same: nothing.
func TestPagedListingFaults(t *testing.T) {
	offset := func(limit int, total bool) paginate.Spec {
		s := paginate.Spec{Type: paginate.Offset, OffsetParam: "offset", LimitParam: "limit", Limit: limit}
		if total {
			s.TotalPath = "total"
		}
		return s
	}
	page := paginate.Spec{Type: paginate.Page, PageParam: "page", LimitParam: "per_page", Limit: 50, TotalPath: "total"}
	for _, tc := range []struct {
		name string
		rv   venuesim.RealVenue
		spec paginate.Spec
		err  string // "": every row loads once
	}{
		{"pages capped below the limit", venuesim.RealVenue{Paginate: venuesim.PageOffset, PageCap: 30}, offset(50, true), ""},
		{"pages one row short", venuesim.RealVenue{Paginate: venuesim.PageOffset, PageSkew: -1}, offset(50, true), ""},
		{"pages one row long", venuesim.RealVenue{Paginate: venuesim.PageOffset, PageSkew: 1}, offset(50, true), ""},
		{"page numbers, pages capped", venuesim.RealVenue{Paginate: venuesim.PagePage, PageCap: 30}, page, ""},
		{"listed under the first walk", venuesim.RealVenue{Paginate: venuesim.PageOffset, ShiftWalks: 1}, offset(50, true), ""},
		{"delisted under two walks", venuesim.RealVenue{Paginate: venuesim.PageOffset, ShiftWalks: 2, ShiftDelist: true}, offset(50, true), ""},
		{"listed under a walk, no total", venuesim.RealVenue{Paginate: venuesim.PageOffset, ShiftWalks: 1}, offset(50, false), ""},
		{"listed under every walk", venuesim.RealVenue{Paginate: venuesim.PageOffset, ShiftWalks: 9}, offset(50, true),
			"instruments: page 5: incomplete listing: the venue's total is 231 rows, 231 received (its total was 230 on the first page: the listing changed during the walk) (after 3 walks of the pages)"},
		{"listed under every walk, no total", venuesim.RealVenue{Paginate: venuesim.PageOffset, ShiftWalks: 9}, offset(50, false),
			"instruments: listing shifted between page requests: 1 instrument(s) received twice (after 3 walks of the pages)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := newPagedRig(t, 230, tc.rv, tc.spec)
			ctx := context.Background()
			sum := rig.r.Run(ctx)
			if tc.err == "" {
				if !sum.OK {
					t.Fatalf("run: %s", sum.Error)
				}
				if got := names(rig.mem); !slices.Equal(got, rig.want) {
					t.Fatalf("loaded %d rows, want the listing's %d, each once", len(got), len(rig.want))
				}
				if e := sum.Endpoints[0]; e.Events == 0 || e.Rows != int64(len(rig.want)) || e.Rejects != 0 {
					t.Errorf("summary: %d rows, %d rejects, %d events", e.Rows, e.Rejects, e.Events)
				}
			} else {
				if sum.OK || sum.Error != tc.err || !sum.OnlySinksFailed() {
					t.Fatalf("run: ok %v, only sinks failed %v, error\n%s\nwant\n%s", sum.OK, sum.OnlySinksFailed(), sum.Error, tc.err)
				}
				if n := rig.mem.Rows(schema.Instruments.Name); n != 0 {
					t.Fatalf("%d rows of an incomplete listing committed", n)
				}
				if p, _ := ledgerOf(t, rig.r, "mem"); p != 0 {
					t.Errorf("%d snapshots pending: nothing of an incomplete listing is to be caught up", p)
				}
				pages, _ := filepath.Glob(filepath.Join(rig.dir, "raw", "instruments", "*", "*.json.zst"))
				if len(pages) < 3*5 {
					t.Errorf("%d pages archived, want the three walks'", len(pages))
				}
			}
			// A replay of the archive gives the live rows: the last walk's.
			again := memsink.New("again")
			cfg := rig.cfg
			cfg.Sinks, cfg.Ledger = []sinks.Sink{again}, false
			// Without the pagination config (replay takes the archive's word).
			var err error
			if cfg.Endpoints, err = pipeline.SelectEndpoints([]string{"instruments"}, nil); err != nil {
				t.Fatal(err)
			}
			r, err := pipeline.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Replay(ctx, pipeline.ReplayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// A listing that failed live never loaded: listed, no problem.
			if !res.OK() || (len(res.NeverLoaded) > 0) != (tc.err != "") {
				t.Errorf("replay ok %v: %d failed, problems %q, never loaded %q", res.OK(), res.Failed, res.Problems, res.NeverLoaded)
			}
			if got, live := names(again), names(rig.mem); !slices.Equal(got, live) {
				t.Errorf("replay loaded %d rows, the live run %d", len(got), len(live))
			}
		})
	}
}

// A listing of one body that holds an instrument twice loads its first row
// and rejects the later one with the reason; too many rejects, or every
// row rejected, fail the endpoint with the reason most rows gave and
// commit nothing.
func TestListingRejects(t *testing.T) {
	row := func(name, strike string) string {
		return fmt.Sprintf(`{"instrument_name":%q,"strike":%s}`, name, strike)
	}
	var good []string
	for i := 0; i < 20; i++ {
		good = append(good, row(fmt.Sprintf("BTC-%d", i), "1"))
	}
	for _, tc := range []struct {
		name       string
		rows       []string
		share      float64
		err        string
		loaded     int64
		duplicates int64
	}{
		{"a duplicate", append(slices.Clone(good), row("BTC-3", "2")), 0, "", 20, 1},
		{"rejects below the share", append(slices.Clone(good), row("X", `"two"`)), 0, "", 20, 0},
		{"rejects above the share", append(slices.Clone(good), row("X", `"two"`), row("Y", `"two"`), row("Z", `"3"`)), 0,
			"instruments: 3 of 23 rows rejected (13.0%, more than the 0.1 allowed by --max-reject-share), 3 with: strike: expected number, got string", 0, 0},
		{"rejects within a higher share", append(slices.Clone(good), row("X", `"two"`), row("Y", `"two"`)), 0.5, "", 20, 0},
		{"every row rejected", []string{row("X", `"1"`), row("Y", `"2"`), `{"strike":1}`}, 1,
			"instruments: every row rejected (3), 2 with: strike: expected number, got string", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeFetcher{bodies: map[string]string{pathOf(t, "instruments"): listingOf(tc.rows...)}}
			rig := newFakeRig(t, []string{"instruments"}, f)
			if tc.share != 0 {
				rig = newFakeRigWith(t, []string{"instruments"}, f, func(c *pipeline.Config) { c.MaxRejectShare = tc.share })
			}
			sum := rig.r.Run(context.Background())
			if sum.Error != tc.err || (tc.err != "") != !sum.OK {
				t.Fatalf("run: ok %v, error\n%s\nwant\n%s", sum.OK, sum.Error, tc.err)
			}
			if tc.err != "" && !sum.OnlySinksFailed() {
				t.Error("an endpoint with too many rejects is not reported as incomplete (exit 3)")
			}
			if n := rig.mem.Rows(schema.Instruments.Name); n != tc.loaded {
				t.Errorf("%d rows loaded, want %d", n, tc.loaded)
			}
			e := endpointResult(t, sum, "instruments")
			if e.Duplicates != tc.duplicates {
				t.Errorf("summary: %d duplicates, want %d", e.Duplicates, tc.duplicates)
			}
			if tc.duplicates > 0 {
				rj := rowsOf(rig.mem, schema.Rejects)
				if len(rj) != 1 || !strings.Contains(rj[0], transform.ReasonDuplicate) || !strings.Contains(rj[0], `"strike":2`) {
					t.Errorf("rejects: %q, want the later BTC-3 row with the duplicate reason", rj)
				}
				if !strings.Contains(sum.Line(), "(1 duplicates)") {
					t.Errorf("summary line: %s", sum.Line())
				}
			}
			// A replay gives the live rows; a listing with too many
			// rejects never loaded: listed as such, not a problem.
			again := memsink.New("again")
			r, err := pipeline.New(pipeline.Config{Client: f, Store: storage.NewLocal(rig.dir), Sinks: []sinks.Sink{again},
				Endpoints: endpoints(t, "instruments"), Source: "fake", MaxRejectShare: tc.share})
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Replay(context.Background(), pipeline.ReplayOptions{})
			if err != nil || !res.OK() || (len(res.NeverLoaded) > 0) != (tc.err != "") {
				t.Fatalf("replay: %v ok %v, problems %q, never loaded %q", err, res.OK(), res.Problems, res.NeverLoaded)
			}
			if n := again.Rows(schema.Instruments.Name); n != tc.loaded {
				t.Errorf("replay: %d rows, live %d", n, tc.loaded)
			}
		})
	}
}

// A listing walked again (it moved under the first walk) that a sink
// missed is caught up from the last walk's pages only: every instrument
// once (the first walk had a sixth page, of the 251st row; the last has
// five).
func TestShiftedWalkCaughtUp(t *testing.T) {
	spec := paginate.Spec{Type: paginate.Offset, OffsetParam: "offset", LimitParam: "limit", Limit: 50, TotalPath: "total"}
	rig := newPagedRig(t, 250, venuesim.RealVenue{Paginate: venuesim.PageOffset, ShiftWalks: 1}, spec)
	f := &flaky{Sink: memsink.New("mem")}
	f.down.Store(true)
	cfg := rig.cfg
	cfg.Sinks = []sinks.Sink{f}
	r, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if sum := r.Run(ctx); sum.OK || !sum.OnlySinksFailed() {
		t.Fatalf("run with the sink down: ok %v: %s", sum.OK, sum.Error)
	}
	if p := pendingOf(t, r, "mem"); p != 1 {
		t.Fatalf("%d pending, want the snapshot", p)
	}
	f.down.Store(false)
	res, err := r.CatchUp(ctx, pipeline.CatchUpOptions{})
	if err != nil || res.Failed != 0 || len(res.Snapshots) != 1 || !res.Snapshots[0].OK {
		t.Fatalf("catch-up: %+v %v", res, err)
	}
	if got := names(f.Sink); !slices.Equal(got, rig.want) {
		t.Errorf("caught up %d rows, want the listing's %d, each once", len(got), len(rig.want))
	}
}
