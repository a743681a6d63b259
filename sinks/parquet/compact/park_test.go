package compact

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/lake/layout"
	"github.com/optlake/optlake/schema"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/sinktest"
	"github.com/optlake/optlake/storage"
)

// listingStore counts the objects its List calls return.
type listingStore struct {
	storage.Store
	listed int
}

func (s *listingStore) List(ctx context.Context, prefix string) ([]storage.Info, error) {
	out, err := s.Store.List(ctx, prefix)
	s.listed += len(out)
	return out, err
}

// Opening a snapshot's file looks for a compacted file in its partition
// (Parking) without listing the partition's other snapshot files: a day of
// runs, or a replay, would otherwise cost a listing of every earlier file
// per file written.
func TestParkingDoesNotListThePartition(t *testing.T) {
	ctx := context.Background()
	st := &listingStore{Store: storage.NewLocal(t.TempDir())}
	s, err := pq.New(pq.Options{Store: st, Park: Parking(st)})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		sn := snapAt(day1, i)
		rec := genRecord(schema.Instruments, sn, 3, 1)
		sinktest.Load(t, s, schema.Instruments, sn, []arrow.Record{rec})
		rec.Release()
	}
	files, err := st.Store.List(ctx, "instruments/")
	if err != nil || len(files) != n {
		t.Fatalf("%d files (%v), want %d", len(files), err, n)
	}
	if st.listed != 0 {
		t.Errorf("opening %d files listed %d objects, want 0 (no compacted file in the partition)", n, st.listed)
	}
}

// A snapshot the compacted day holds, loaded again, is parked and its
// commit says so (Committed.Parked, which a table format reads instead of
// the file's name); a snapshot the day does not hold goes in its place.
// Without a Placer every file goes in its place.
func TestParkedCommitSaysSo(t *testing.T) {
	dir := t.TempDir()
	for k := range 3 {
		writeSnap(t, dir, schema.Instruments, snapAt(day1, k), 50, 1)
	}
	if _, err := Compact(context.Background(), Options{Target: localLake(dir), Now: func() time.Time { return day1.AddDate(0, 0, 1) }}); err != nil {
		t.Fatal(err)
	}
	st := storage.NewLocal(dir)
	load := func(s *pq.Sink, k int) (string, bool) {
		t.Helper()
		sn := snapAt(day1, k)
		rec := genRecord(schema.Instruments, sn, 10, 2)
		defer rec.Release()
		c := sinktest.Load(t, s, schema.Instruments, sn, []arrow.Record{rec})
		return c.Where, c.Parked
	}
	parking, err := pq.New(pq.Options{Store: st, Park: Parking(st)})
	if err != nil {
		t.Fatal(err)
	}
	if where, parked := load(parking, 1); !parked || !strings.Contains(where, layout.ParkedDir) {
		t.Errorf("a compacted snapshot loaded again: parked %v at %s, want parked under %s", parked, where, layout.ParkedDir)
	}
	if where, parked := load(parking, 5); parked || strings.Contains(where, layout.ParkedDir) {
		t.Errorf("a new snapshot of a compacted day: parked %v at %s, want its place", parked, where)
	}
	plain, err := pq.New(pq.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if where, parked := load(plain, 2); parked || strings.Contains(where, layout.ParkedDir) {
		t.Errorf("without a Placer: parked %v at %s, want its place", parked, where)
	}
}
