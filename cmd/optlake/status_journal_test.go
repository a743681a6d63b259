package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/events"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// statusDoc is `status --format json` whole.
type statusDoc struct {
	Compactions []compactionStatus `json:"compactions"`
	Lease       *leaseStatus       `json:"lease"`
}

func statusDocOf(t *testing.T, dir string) (statusDoc, string) {
	t.Helper()
	res := optlake(t, "status", "--data-dir", dir, "--format", "json")
	var doc statusDoc
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &doc) != nil {
		t.Fatalf("status json: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	return doc, optlake(t, "status", "--data-dir", dir).stdout
}

// A compaction killed after its journal was written: `status` names the
// day and table of the unfinished compaction (it said "nothing pending"),
// in text and JSON, until the next compact recovers it.
func TestStatusShowsUnfinishedCompaction(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	_, clk := buildLake(t, dir, 3)
	to := compactDay.AddDate(0, 0, 1).Format(time.DateOnly)
	cmd := exec.Command(os.Args[0], "compact", "--data-dir", dir, "--to", to, "--tables", "instruments")
	cmd.Env = append(os.Environ(), "OPTLAKE_TEST_AS_CLI=1", crashEnv+"=swap")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("compact was not killed: %s", out)
	}
	doc, text := statusDocOf(t, dir)
	day := compactDay.Format(time.DateOnly)
	if len(doc.Compactions) != 1 || doc.Compactions[0].Table != "instruments" || doc.Compactions[0].Date != day || doc.Compactions[0].Duplicates {
		t.Fatalf("status json: %+v", doc)
	}
	if !strings.Contains(text, "unfinished compaction: instruments "+day) {
		t.Fatalf("status text:\n%s", text)
	}
	if res := clk.optlake(t, "compact", "--data-dir", dir, "--to", to, "--tables", "instruments"); res.code != 0 {
		t.Fatalf("compact: %s", res.stderr)
	}
	if doc, text := statusDocOf(t, dir); len(doc.Compactions) != 0 || strings.Contains(text, "unfinished") {
		t.Fatalf("status after the recovery: %+v\n%s", doc, text)
	}
}

// On a bucket: a journal left by a crash is shown with the warning that
// readers may see rows twice, and the lease says until when it keeps the
// next command out (then that it has expired).
func TestStatusOnBucketShowsJournalAndLease(t *testing.T) {
	t.Parallel()
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	ctx := context.Background()
	url := g.URL("lake", "hist")
	st, err := storage.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Put(ctx, ".compact/journal/instruments@2026-11-20.json", []byte(`{"id":"c1"}`)); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	lease := func(exp time.Time) {
		b, _ := json.Marshal(map[string]any{"holder": "pid 7 on host", "token": "x", "expires": exp})
		if err := st.Put(ctx, storage.LeaseName, b); err != nil {
			t.Fatal(err)
		}
	}
	lease(until)
	doc, text := statusDocOf(t, url)
	if len(doc.Compactions) != 1 || !doc.Compactions[0].Duplicates || doc.Lease == nil || !doc.Lease.Expires.Equal(until) || doc.Lease.Expired {
		t.Fatalf("status json: %+v %+v", doc, doc.Lease)
	}
	if !strings.Contains(text, "unfinished compaction: instruments 2026-11-20") || !strings.Contains(text, "rows of that day twice") ||
		!strings.Contains(text, "pid 7 on host until "+until.Format(time.RFC3339)) {
		t.Fatalf("status text:\n%s", text)
	}
	lease(time.Now().Add(-time.Minute))
	if doc, text := statusDocOf(t, url); !doc.Lease.Expired || !strings.Contains(text, "the next command takes it over") {
		t.Fatalf("expired lease: %+v\n%s", doc.Lease, text)
	}
}

// A snapshot whose instrument events were not written (its time is before
// the events state: a clock gone backwards) exits 3, and `status` keeps
// saying so, in text and JSON, until a later snapshot writes its events.
func TestStatusShowsEventsNotWritten(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	clk := pinClock(base)
	sim, url := startSim(t, venuesim.Config{Seed: 4, Instruments: 60})
	dir := t.TempDir()
	args := []string{"run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments"}
	if res := clk.optlake(t, args...); res.code != 0 {
		t.Fatalf("first run: exit %d %s", res.code, res.stderr)
	}
	clk.set(base.Add(-time.Hour))
	sim.Advance(1)
	res := clk.optlake(t, args...)
	if res.code != 3 || !strings.Contains(res.stderr, "instrument events not written") {
		t.Fatalf("run before the events state: exit %d\n%s", res.code, res.stderr)
	}
	var doc struct {
		Events []pipeline.EventsNote `json:"events_not_written"`
	}
	js := optlake(t, "status", "--data-dir", dir, "--format", "json")
	if err := json.Unmarshal([]byte(js.stdout), &doc); err != nil || len(doc.Events) != 1 ||
		!doc.Events[0].SnapshotTime.Equal(base.Add(-time.Hour)) || !strings.Contains(doc.Events[0].Reason, "older than the state") {
		t.Fatalf("status json: %v %+v\n%s", err, doc, js.stdout)
	}
	if text := optlake(t, "status", "--data-dir", dir).stdout; !strings.Contains(text, "instrument events not written: ") {
		t.Fatalf("status text:\n%s", text)
	}
	clk.set(base.Add(time.Minute))
	sim.Advance(1)
	if res := clk.optlake(t, args...); res.code != 0 {
		t.Fatalf("run after: exit %d %s", res.code, res.stderr)
	}
	if text := optlake(t, "status", "--data-dir", dir).stdout; strings.Contains(text, "instrument events not written") {
		t.Fatalf("status after a snapshot with its events:\n%s", text)
	}
}

// The events state's folder is what cannot be used (a file in its way):
// the run exits 3 naming the events, and `status` says so although the
// note cannot be written beside the state; once the folder is back, the
// next snapshot writes its events and clears the note.
func TestStatusShowsEventsStateUnwritable(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 23, 13, 0, 0, 0, time.UTC)
	clk := pinClock(base)
	sim, url := startSim(t, venuesim.Config{Seed: 5, Instruments: 60})
	dir := t.TempDir()
	args := []string{"run", "--api-url", url, "--data-dir", dir, "--endpoints", "instruments"}
	if res := clk.optlake(t, args...); res.code != 0 {
		t.Fatalf("first run: exit %d %s", res.code, res.stderr)
	}
	unblock := testenv.BlockFolder(t, events.StateDir(dir))
	clk.next()
	sim.Advance(1)
	res := clk.optlake(t, args...)
	if res.code != exitPartial || !strings.Contains(res.stderr, "instrument events not written") {
		t.Fatalf("run with the state folder blocked: exit %d\n%s", res.code, res.stderr)
	}
	var doc struct {
		Events []pipeline.EventsNote `json:"events_not_written"`
	}
	js := optlake(t, "status", "--data-dir", dir, "--format", "json")
	if err := json.Unmarshal([]byte(js.stdout), &doc); err != nil || len(doc.Events) != 1 ||
		!doc.Events[0].SnapshotTime.Equal(base.Add(time.Minute)) || !strings.Contains(doc.Events[0].Reason, "state") {
		t.Fatalf("status json: %v %+v\n%s", err, doc, js.stdout)
	}
	unblock()
	clk.next()
	sim.Advance(1)
	if res := clk.optlake(t, args...); res.code != 0 {
		t.Fatalf("run after the repair: exit %d %s", res.code, res.stderr)
	}
	if text := optlake(t, "status", "--data-dir", dir).stdout; strings.Contains(text, "instrument events not written") {
		t.Fatalf("status after a snapshot with its events:\n%s", text)
	}
}
