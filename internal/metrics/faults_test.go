package metrics

import (
	"os"
	"path/filepath"
	"testing"
)

// A run whose instrument events were refused, and compaction journals left
// behind, show in optlake_events_skipped_total and
// optlake_unfinished_compactions.
func TestEventsSkippedAndUnfinishedCompactions(t *testing.T) {
	m := New()
	r := okRun()
	r.Endpoints[0].EventsSkipped = "snapshot is older than the state's last snapshot"
	r.UnfinishedCompactions = 2
	m.Observe(r)
	path := filepath.Join(t.TempDir(), "optlake.prom")
	if err := m.WriteTextfile(path); err != nil {
		t.Fatal(err)
	}
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	f := parse(t, file)
	f.expect(t, 1, Namespace+"_events_skipped_total", "endpoint="+r.Endpoints[0].Endpoint)
	f.expect(t, 2, Namespace+"_unfinished_compactions")
}
