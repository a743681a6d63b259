package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/archive"
	"github.com/optlake/optlake/pipeline/extract"
	"github.com/optlake/optlake/pipeline/infer"
	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/memsink"
	"github.com/optlake/optlake/storage"
)

// fakeFetcher answers each endpoint path with a fixed body, or fails it
// with a fixed error before any body is read (as the venue client does
// after its last attempt).
type fakeFetcher struct {
	bodies map[string]string // path -> body
	fail   map[string]error  // path -> error
	calls  []string          // paths asked for, in order
	params []url.Values      // their parameters
}

func (f *fakeFetcher) Do(ctx context.Context, r extract.Request, _ extract.Hooks, handle func(context.Context, *extract.Response) error) error {
	f.calls = append(f.calls, r.Path)
	f.params = append(f.params, r.Params)
	if err := f.fail[r.Path]; err != nil {
		return err
	}
	body, ok := f.bodies[r.Path]
	if !ok {
		return fmt.Errorf("fake fetcher: no body for %s", r.Path)
	}
	return handle(ctx, &extract.Response{Attempt: 1, Status: 200, ContentType: "application/json", URL: "https://venue.test" + r.Path, Body: strings.NewReader(body)})
}

// fakeRig is a runner over a fakeFetcher with one in-memory sink, an
// archive, a ledger and an in-memory schema registry.
type fakeRig struct {
	dir   string
	fetch *fakeFetcher
	mem   *memsink.Sink
	r     *pipeline.Runner
}

func newFakeRig(t *testing.T, endpoints []string, f *fakeFetcher) *fakeRig {
	t.Helper()
	return newFakeRigWith(t, endpoints, f, func(*pipeline.Config) {})
}

// newFakeRigWith is newFakeRig with the config as set changes it.
func newFakeRigWith(t *testing.T, endpoints []string, f *fakeFetcher, set func(*pipeline.Config)) *fakeRig {
	t.Helper()
	eps, err := pipeline.SelectEndpoints(endpoints, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mem := memsink.New("mem")
	at := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	cfg := pipeline.Config{
		Client: f, Store: storage.NewLocal(dir), Sinks: []sinks.Sink{mem}, Endpoints: eps, Source: "fake",
		Ledger: true, Schemas: infer.NewRegistry(),
		Now:      func() time.Time { return at },
		NewRunID: func() string { return "run-1" },
	}
	set(&cfg)
	r, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeRig{dir: dir, fetch: f, mem: mem, r: r}
}

func pathOf(t *testing.T, name string) string {
	t.Helper()
	eps, err := pipeline.SelectEndpoints([]string{name}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return eps[0].Path
}

// listingOf is a get_instruments body holding the given instrument objects.
func listingOf(insts ...string) string {
	return `[{"instruments":[` + strings.Join(insts, ",") + `]}]`
}

// ledgerOf is what the ledger holds for sink s: pending snapshots and
// failed loads.
func ledgerOf(t *testing.T, r *pipeline.Runner, s string) (pending int, failed []ledger.Failure) {
	t.Helper()
	st, err := r.Pending(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range st {
		if x.Sink == s {
			return x.Pending, x.Failed
		}
	}
	return 0, nil
}

func endpointResult(t *testing.T, sum *pipeline.Summary, name string) pipeline.EndpointResult {
	t.Helper()
	for _, e := range sum.Endpoints {
		if e.Endpoint == name {
			return e
		}
	}
	t.Fatalf("no result for endpoint %s in %+v", name, sum.Endpoints)
	return pipeline.EndpointResult{}
}

// An endpoint whose fetch fails fails the run with that endpoint's error;
// the endpoints before and after it are still fetched and loaded.
func TestRunOneFetchFails(t *testing.T) {
	f := &fakeFetcher{bodies: map[string]string{}, fail: map[string]error{}}
	f.bodies[pathOf(t, "instruments")] = listingOf(`{"instrument_name":"BTC-A","strike":1}`, `{"instrument_name":"BTC-B","strike":2}`)
	f.fail[pathOf(t, "account_balance")] = &extract.StatusError{Status: 503, Attempts: 3}
	f.bodies[pathOf(t, "account_summary")] = `{"equity":12.5,"currency":"USDC"}`
	rig := newFakeRig(t, []string{"instruments", "account_balance", "account_summary"}, f)

	sum := rig.r.Run(context.Background())
	if sum.OK || !strings.HasPrefix(sum.Error, "account_balance: ") || !strings.Contains(sum.Error, "503") {
		t.Fatalf("run with a failed fetch: ok=%v error %q", sum.OK, sum.Error)
	}
	if len(f.calls) != 3 {
		t.Errorf("fetched %v, want all three endpoints", f.calls)
	}
	if e := endpointResult(t, sum, "account_balance"); e.Status != "failed" || !strings.Contains(e.Error, "503") || e.Rows != 0 {
		t.Errorf("failed endpoint: %+v", e)
	}
	if sum.OnlySinksFailed() {
		t.Error("a failed fetch is reported as a sink failure (it would be caught up from an archive that has no body)")
	}
	if e := endpointResult(t, sum, "instruments"); e.Status != "ok" || e.Rows != 2 {
		t.Errorf("instruments: %+v", e)
	}
	if e := endpointResult(t, sum, "account_summary"); e.Status != "ok" || e.Rows != 1 {
		t.Errorf("account_summary: %+v", e)
	}
	if n := rig.mem.Rows(schema.Instruments.Name); n != 2 {
		t.Errorf("instruments loaded: %d, want 2", n)
	}
	if n := rig.mem.Rows("account_summary"); n != 1 {
		t.Errorf("account_summary loaded: %d, want 1", n)
	}
	if n := rig.mem.Rows("account_balance"); n != 0 {
		t.Errorf("account_balance loaded: %d rows from a failed fetch", n)
	}
	got := runsRows(t, rig.mem)
	want := []string{"|instruments|ok|rows=2|", "|account_balance|failed|rows=0|", "|account_summary|ok|rows=1|"}
	if len(got) != len(want) {
		t.Fatalf("runs rows: %q", got)
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("runs row %d: %q, want it to contain %q", i, got[i], want[i])
		}
	}
	if p, failed := ledgerOf(t, rig.r, "mem"); p != 0 || len(failed) != 0 {
		t.Errorf("ledger: %d pending, failed %+v (a failed fetch has nothing to load)", p, failed)
	}
}

// A body that is bad input: a row of the wrong type goes to rejects and the
// rest loads; a body that is not a listing fails its endpoint without
// committing a row, is archived whole for replay, and is marked failed in
// the ledger (not pending: loading it again would fail the same way).
func TestRunBadInputBody(t *testing.T) {
	good := `{"instrument_name":"BTC-A","strike":1}`
	t.Run("rejected row", func(t *testing.T) {
		f := &fakeFetcher{bodies: map[string]string{pathOf(t, "instruments"): listingOf(good, `{"instrument_name":"BTC-B","strike":"two"}`)}}
		// One row of two rejected is more than the default share allows.
		rig := newFakeRigWith(t, []string{"instruments"}, f, func(c *pipeline.Config) { c.MaxRejectShare = 0.5 })
		sum := rig.r.Run(context.Background())
		if !sum.OK {
			t.Fatalf("run: %s", sum.Error)
		}
		if e := endpointResult(t, sum, "instruments"); e.Rows != 1 || e.Rejects != 1 {
			t.Errorf("instruments: %+v, want 1 row and 1 reject", e)
		}
		if n := rig.mem.Rows(schema.Instruments.Name); n != 1 {
			t.Errorf("instruments loaded: %d, want 1", n)
		}
		rj := rowsOf(rig.mem, schema.Rejects)
		if len(rj) != 1 || !strings.Contains(rj[0], "strike") || !strings.Contains(rj[0], "BTC-B") {
			t.Errorf("rejects: %q, want the BTC-B row with a reason naming strike", rj)
		}
	})
	t.Run("not a listing", func(t *testing.T) {
		bad := `{"instruments":[` + good + `]}` // an object, not an array of groups
		f := &fakeFetcher{bodies: map[string]string{
			pathOf(t, "instruments"):     bad,
			pathOf(t, "account_summary"): `{"equity":3}`,
		}}
		rig := newFakeRig(t, []string{"instruments", "account_summary"}, f)
		sum := rig.r.Run(context.Background())
		if sum.OK || !strings.HasPrefix(sum.Error, "instruments: decode listing: ") {
			t.Fatalf("run with a bad listing: ok=%v error %q", sum.OK, sum.Error)
		}
		e := endpointResult(t, sum, "instruments")
		if e.Status != "failed" || e.Rows != 0 || len(e.Raw) != 1 {
			t.Fatalf("instruments: %+v", e)
		}
		if sum.OnlySinksFailed() {
			t.Error("a bad body is reported as a sink failure")
		}
		for _, tb := range []*schema.Table{schema.Instruments, schema.Rejects} {
			if n := rig.mem.Rows(tb.Name); n != 0 {
				t.Errorf("%s: %d rows committed from a bad body", tb.Name, n)
			}
		}
		if n := rig.mem.Rows("account_summary"); n != 1 {
			t.Errorf("account_summary loaded: %d, want 1", n)
		}
		m, err := archive.ReadMeta(filepath.Join(rig.dir, strings.TrimSuffix(e.Raw[0], ".json.zst")+".meta.json"))
		if err != nil {
			t.Fatal(err)
		}
		if !m.Complete || m.Bytes != int64(len(bad)) || !strings.Contains(m.Error, "decode listing") {
			t.Errorf("archived body: complete=%v bytes=%d (want %d) error %q", m.Complete, m.Bytes, len(bad), m.Error)
		}
		if _, err := os.Stat(filepath.Join(rig.dir, e.Raw[0])); err != nil {
			t.Errorf("archived body file: %v", err)
		}
		p, failed := ledgerOf(t, rig.r, "mem")
		if p != 0 || len(failed) != 1 || failed[0].Endpoint != "instruments" || !strings.Contains(failed[0].Reason, "decode listing") {
			t.Errorf("ledger: %d pending, failed %+v; want the bad body's load failed, not pending", p, failed)
		}
	})
}

// An endpoint that needs a parameter is refused by New with a
// *MissingParamError naming it (the CLI adds which flag gives it); given the
// parameter, New accepts it. ParseParams refuses a malformed spec with a
// *ParamError.
func TestParamErrors(t *testing.T) {
	eps, err := pipeline.SelectEndpoints([]string{"instruments", "position"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := pipeline.Config{Client: &fakeFetcher{}, Store: storage.NewLocal(t.TempDir()), Endpoints: eps, Source: "fake"}
	_, err = pipeline.New(cfg)
	var mp *pipeline.MissingParamError
	if !errors.As(err, &mp) || mp.Endpoint != "position" || mp.Key != "instrument_name" {
		t.Fatalf("New without the parameter: %v, want a MissingParamError for position.instrument_name", err)
	}
	if strings.Contains(err.Error(), "--") {
		t.Errorf("the library's message names a flag: %s", err)
	}
	// An unsplit parameter of the endpoint (params: {instrument_name:
	// {value: …, split: false}}) is the parameter too.
	eps[1].Params = url.Values{"instrument_name": {"BTC-A,BTC-B"}}
	if _, err := pipeline.New(cfg); err != nil {
		t.Errorf("New with the endpoint's unsplit parameter: %v", err)
	}
	eps[1].Params = nil
	cfg.Params, err = pipeline.ParseParams([]string{"position.instrument_name=BTC-A"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.New(cfg); err != nil {
		t.Errorf("New with the parameter: %v", err)
	}

	for _, spec := range []string{"bad", "position=1", ".key=1", "position.=1"} {
		_, err := pipeline.ParseParams([]string{"instruments.currency=BTC", spec})
		var pe *pipeline.ParamError
		if !errors.As(err, &pe) || pe.Spec != spec || strings.Contains(err.Error(), "--") {
			t.Errorf("ParseParams(%q): %v, want a flag-free ParamError for it", spec, err)
		}
	}
}

// A parameter given with --param (Config.Params) wins over the endpoint's
// unsplit one of the same key (params: {k: {value: …, split: false}}), as
// every flag wins over the config file; the other unsplit ones are sent.
func TestParamOverridesUnsplit(t *testing.T) {
	f := &fakeFetcher{bodies: map[string]string{pathOf(t, "instruments"): listingOf(`{"instrument_name":"BTC-A"}`)}}
	rig := newFakeRigWith(t, []string{"instruments"}, f, func(cfg *pipeline.Config) {
		cfg.Endpoints[0].Params = url.Values{"currency": {"BTC,ETH"}, "kind": {"option,future"}}
		var err error
		if cfg.Params, err = pipeline.ParseParams([]string{"instruments.currency=SOL"}); err != nil {
			t.Fatal(err)
		}
	})
	if sum := rig.r.Run(context.Background()); !sum.OK {
		t.Fatalf("run: %s", sum.Error)
	}
	if len(f.params) != 1 || f.params[0].Get("currency") != "SOL" || f.params[0].Get("kind") != "option,future" {
		t.Errorf("requests' parameters %v, want one with currency=SOL (the flag's) and kind=option,future (unsplit)", f.params)
	}
}
