package ledger

import (
	"testing"
	"time"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/storage"
)

// The ledger lives in a bucket prefix as in a local folder: beside other
// objects, read back by a fresh reader.
func TestOnBucket(t *testing.T) {
	g := testenv.StartVersityGW(t, "lake")
	g.SetCredentials(t)
	st, err := storage.Open(ctx, g.URL("lake", "hist"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Put(ctx, "hist/x", []byte("not the ledger's")); err != nil {
		t.Fatal(err)
	}
	l := New(st, nil)
	snap := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	if err := l.Begin(ctx, snap, "run-1", "venue", []string{"instruments"}, []string{"parquet", "clickhouse"}); err != nil {
		t.Fatal(err)
	}
	k := Key{Time: snap, RunID: "run-1"}
	if err := l.Settle(ctx, k, "instruments", map[string]Outcome{"parquet": {State: Committed}, "clickhouse": {State: Pending, Error: "down"}}); err != nil {
		t.Fatal(err)
	}
	recs, err := New(st, nil).Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize(recs)
	if len(recs) != 1 || len(s) != 2 || s[0].Sink != "clickhouse" || s[0].Pending != 1 || s[0].LastError != "down" || s[1].Pending != 0 {
		t.Fatalf("ledger read back: %d records, status %+v", len(recs), s)
	}
}
