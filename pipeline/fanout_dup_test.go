package pipeline_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/memsink"
	"github.com/optlake/optlake/storage"
)

// A listing fanned out over two requests (currency=BTC, currency=ETH)
// whose answers share one instrument_name: the later row is a duplicate,
// as within one body (rejected with the reason, counted), so a sink that
// keeps every row and one that keeps one per key hold the same rows; a
// replay of the archive gives the same.
func TestDuplicatesAcrossFannedOutRequests(t *testing.T) {
	const n = 20
	listing := func(cur string, names []string) string {
		var rows []string
		for _, name := range names {
			rows = append(rows, fmt.Sprintf(`{"instrument_name":%q,"base_currency":%q,"kind":"option","strike":1}`, name, cur))
		}
		return `[{"instruments":[` + strings.Join(rows, ",") + `]}]`
	}
	names := func(cur string) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s-%02d", cur, i))
		}
		return out
	}
	btc := names("BTC")
	eth := append(names("ETH")[:n-1], btc[3]) // one name both answers hold
	_, eps := simClient(t, http.NotFoundHandler())
	client, _ := simClient(t, http.HandlerFunc(func(w http.ResponseWriter, rq *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch rq.URL.Query().Get("currency") {
		case "BTC":
			fmt.Fprint(w, listing("BTC", btc))
		case "ETH":
			fmt.Fprint(w, listing("ETH", eth))
		default:
			http.Error(w, "currency?", http.StatusBadRequest)
		}
	}))
	live := memsink.New("live")
	dir := t.TempDir()
	cfg := pipeline.Config{
		Client: client, Store: storage.NewLocal(dir), Sinks: []sinks.Sink{live}, Endpoints: eps, Source: "sim",
		Params: map[string]url.Values{"instruments": {"currency": {"BTC,ETH"}}},
		Now:    func() time.Time { return memT0 }, Ledger: true,
	}
	r, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sum := r.Run(context.Background())
	if !sum.OK {
		t.Fatalf("run: %s", sum.Error)
	}
	ep := sum.Endpoints[0]
	if ep.Requests != 2 || ep.Rows != 2*n-1 || ep.Rejects != 1 || ep.Duplicates != 1 {
		t.Errorf("endpoint: %d requests, %d rows, %d rejects, %d duplicates; want 2, %d, 1, 1", ep.Requests, ep.Rows, ep.Rejects, ep.Duplicates, 2*n-1)
	}
	if got := live.Rows(schema.Instruments.Name); got != 2*n-1 {
		t.Errorf("sink holds %d rows, want %d (one per instrument_name)", got, 2*n-1)
	}
	if reasons := rowsOf(live, schema.Rejects); len(reasons) != 1 || !strings.Contains(reasons[0], "duplicate key within snapshot") {
		t.Errorf("rejects: %q", reasons)
	}
	again := memsink.New("replay")
	cfg.Sinks, cfg.Ledger = []sinks.Sink{again}, false
	rr, err := pipeline.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := rr.Replay(context.Background(), pipeline.ReplayOptions{})
	if err != nil || !res.OK() {
		t.Fatalf("replay: %+v %v", res, err)
	}
	if got := again.Rows(schema.Instruments.Name); got != 2*n-1 || res.Rejects != 1 {
		t.Errorf("replay: %d rows, %d rejects; want %d, 1", got, res.Rejects, 2*n-1)
	}
}
