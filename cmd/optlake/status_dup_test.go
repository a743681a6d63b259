package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/venuesim"
)

// `status` counts the duplicate keys the runs found (rows whose
// instrument_name came earlier in their snapshot, rejected): per source
// and endpoint, the rows, the snapshots that had any and the last one, in
// text and JSON, after the runs are gone.
func TestStatusCountsDuplicates(t *testing.T) {
	t.Parallel()
	sim := venuesim.New(venuesim.Config{Seed: 6, Instruments: 50})
	var body bytes.Buffer
	if err := sim.WriteInstruments(&body); err != nil {
		t.Fatal(err)
	}
	listing := bytes.TrimSpace(body.Bytes())
	var groups []struct {
		Instruments []json.RawMessage `json:"instruments"`
	}
	if err := json.Unmarshal(listing, &groups); err != nil {
		t.Fatal(err)
	}
	first := groups[0].Instruments[0]
	dup := append(listing[:len(listing)-1:len(listing)-1], []byte(`,{"instruments":[`+string(first)+`]}]`)...)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(dup)
	}))
	t.Cleanup(srv.Close)
	clk := pinClock(time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC))
	dir := t.TempDir()
	for i := range 2 {
		if res := clk.optlake(t, "run", "--api-url", srv.URL, "--data-dir", dir, "--endpoints", "instruments", "--source", "dupvenue"); res.code != 0 {
			t.Fatalf("run %d: exit %d %s", i, res.code, res.stderr)
		}
		clk.next()
	}
	res := optlake(t, "status", "--data-dir", dir, "--format", "json")
	var doc struct{ Duplicates []pipeline.DuplicateCount }
	if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil || res.code != 0 {
		t.Fatalf("status json: exit %d %v\n%s", res.code, err, res.stdout)
	}
	last := time.Date(2026, 11, 27, 8, 1, 0, 0, time.UTC)
	if d := doc.Duplicates; len(d) != 1 || d[0].Source != "dupvenue" || d[0].Endpoint != "instruments" || d[0].Rows != 2 || d[0].Snapshots != 2 || !d[0].Last.Equal(last) || d[0].LastRows != 1 {
		t.Errorf("status duplicates: %+v, want dupvenue instruments: 2 rows in 2 snapshots, the last at %s with 1", d, last)
	}
	text := optlake(t, "status", "--data-dir", dir).stdout
	if !strings.Contains(text, "duplicate keys: dupvenue instruments: 2 row(s) rejected as duplicates in 2 snapshot(s), the last 2026-11-27T08:01:00Z (1)") {
		t.Errorf("status text:\n%s", text)
	}
}
