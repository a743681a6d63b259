package pipeline_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/infer"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/memsink"
	"github.com/optlake/optlake/storage"
)

// An account endpoint's record that cannot be a row (not an object, or
// holding a value nested deeper than infer.MaxNesting) is rejected with the
// reason and the other records load; too many rejects, or every record
// rejected, fail the endpoint (exit 3) with the reason most rows gave and
// commit nothing: the same threshold and message as a listing's.
func TestAccountRejects(t *testing.T) {
	var good []string
	for i := 0; i < 20; i++ {
		good = append(good, fmt.Sprintf(`{"currency":"C%d","balance":%d}`, i, i))
	}
	deep := `{"currency":"X","balance":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`
	body := func(extra ...string) string {
		return "[" + strings.Join(append(slices.Clone(good), extra...), ",") + "]"
	}
	const notObject = "a JSON array, not an object: rows must be objects"
	const tooDeep = "JSON nested deeper than 512 levels"
	for _, tc := range []struct {
		name    string
		body    string
		share   float64
		err     string
		loaded  int64
		rejects []string // reasons in the rejects table
	}{
		{"not an object, below the share", body(`[1]`), 0, "", 20, []string{notObject}},
		{"not an object, above the share", body(`[1]`, `[2]`, `"x"`), 0,
			"account_balance: 3 of 23 rows rejected (13.0%, more than the 0.1 allowed by --max-reject-share), 2 with: " + notObject, 0, nil},
		{"not an object, within a higher share", body(`[1]`, `[2]`, `"x"`), 0.5, "", 20,
			[]string{notObject, notObject, "a JSON string, not an object: rows must be objects"}},
		{"too deep, below the share", body(deep), 0, "", 20, []string{tooDeep}},
		{"too deep, above the share", body(deep, deep, deep), 0,
			"account_balance: 3 of 23 rows rejected (13.0%, more than the 0.1 allowed by --max-reject-share), 3 with: " + tooDeep, 0, nil},
		{"every row rejected", `[1, 2, "x"]`, 1,
			"account_balance: every row rejected (3), 2 with: a JSON number, not an object: rows must be objects", 0, nil},
		{"one object too deep", deep, 1, "account_balance: every row rejected (1), 1 with: " + tooDeep, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeFetcher{bodies: map[string]string{pathOf(t, "account_balance"): tc.body}}
			rig := newFakeRigWith(t, []string{"account_balance"}, f, func(c *pipeline.Config) { c.MaxRejectShare = tc.share })
			sum := rig.r.Run(context.Background())
			if sum.Error != tc.err || (tc.err != "") != !sum.OK {
				t.Fatalf("run: ok %v, error\n%s\nwant\n%s", sum.OK, sum.Error, tc.err)
			}
			if tc.err != "" && !sum.OnlySinksFailed() {
				t.Error("an endpoint with too many rejects is not reported as incomplete (exit 3)")
			}
			if n := rig.mem.Rows("account_balance"); n != tc.loaded {
				t.Errorf("%d rows loaded, want %d", n, tc.loaded)
			}
			e := endpointResult(t, sum, "account_balance")
			if tc.err == "" && (e.Rows != tc.loaded || e.Rejects != int64(len(tc.rejects))) {
				t.Errorf("summary: %d rows, %d rejects", e.Rows, e.Rejects)
			}
			rj := rowsOf(rig.mem, schema.Rejects)
			if len(rj) != len(tc.rejects) {
				t.Fatalf("rejects table: %q, want %d", rj, len(tc.rejects))
			}
			for i, reason := range tc.rejects {
				if !strings.Contains(rj[i], reason) || !strings.Contains(rj[i], "account_balance") {
					t.Errorf("reject %d: %s, want the reason %q", i, rj[i], reason)
				}
			}
			if p, _ := ledgerOf(t, rig.r, "mem"); p != 0 {
				t.Errorf("%d snapshots pending", p)
			}
			// A replay of the archive gives the live rows and rejects, and
			// reports a failed endpoint as never loaded (exit 0).
			again := memsink.New("again")
			r, err := pipeline.New(pipeline.Config{
				Client: f, Store: storage.NewLocal(rig.dir), Sinks: []sinks.Sink{again}, Endpoints: endpoints(t, "account_balance"), Source: "fake",
				Schemas: infer.NewRegistry(), MaxRejectShare: tc.share,
			})
			if err != nil {
				t.Fatal(err)
			}
			res, err := r.Replay(context.Background(), pipeline.ReplayOptions{})
			if err != nil || !res.OK() || (len(res.NeverLoaded) > 0) != (tc.err != "") {
				t.Fatalf("replay: %v ok %v, problems %q, never loaded %q", err, res.OK(), res.Problems, res.NeverLoaded)
			}
			if n := again.Rows("account_balance"); n != tc.loaded || !slices.Equal(rowsOf(again, schema.Rejects), rj) {
				t.Errorf("replay: %d rows, rejects %q; live %d, %q", n, rowsOf(again, schema.Rejects), tc.loaded, rj)
			}
		})
	}
}

// The rejects of an account endpoint fanned out over accounts number on
// across them: their keys (source, endpoint, snapshot_time, row_index)
// never collide, so a ClickHouse sink keeps every one.
func TestAccountRejectsAcrossAccounts(t *testing.T) {
	var rows []string
	for i := 0; i < 20; i++ {
		rows = append(rows, fmt.Sprintf(`{"currency":"C%d","balance":%d}`, i, i))
	}
	f := &fakeFetcher{bodies: map[string]string{pathOf(t, "account_balance"): "[" + strings.Join(append(rows, `"x"`), ",") + "]"}}
	rig := newFakeRigWith(t, []string{"account_balance"}, f, func(c *pipeline.Config) {
		c.Accounts = []pipeline.Account{{Label: "a"}, {Label: "b"}}
	})
	if sum := rig.r.Run(context.Background()); !sum.OK {
		t.Fatal(sum.Error)
	}
	rj := rowsOf(rig.mem, schema.Rejects)
	if len(rj) != 2 || !strings.Contains(rj[0], "|account_balance|20|") || !strings.Contains(rj[1], "|account_balance|41|") {
		t.Fatalf("rejects %q, want row_index 20 and 41", rj)
	}
}

// An enveloped account endpoint (records at a path) passes a record nested
// past the scanner's depth on as received, and its decoder rejects that
// one row: the body does not fail.
func TestAccountRejectsEnveloped(t *testing.T) {
	var rows []string
	for i := 0; i < 20; i++ {
		rows = append(rows, fmt.Sprintf(`{"currency":"C%d","balance":%d}`, i, i))
	}
	deep := `{"currency":"X","balance":` + strings.Repeat(`[1,{"k":`, 5000) + `"end"` + strings.Repeat("}]", 5000) + `}`
	f := &fakeFetcher{bodies: map[string]string{pathOf(t, "account_balance"): `{"result":[` + strings.Join(append(rows, deep), ",") + `]}`}}
	rig := newFakeRigWith(t, []string{"account_balance"}, f, func(c *pipeline.Config) { c.Endpoints[0].Records = "result" })
	if sum := rig.r.Run(context.Background()); !sum.OK {
		t.Fatal(sum.Error)
	}
	rj := rowsOf(rig.mem, schema.Rejects)
	if n := rig.mem.Rows("account_balance"); n != 20 || len(rj) != 1 || !strings.Contains(rj[0], "|20|JSON nested deeper than 512 levels|") {
		t.Fatalf("%d rows, rejects %.200q", n, rj)
	}
}

func endpoints(t *testing.T, names ...string) []pipeline.Endpoint {
	t.Helper()
	eps, err := pipeline.SelectEndpoints(names, nil)
	if err != nil {
		t.Fatal(err)
	}
	return eps
}
