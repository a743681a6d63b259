package compact

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/optlake/optlake/internal/testenv"
	"github.com/optlake/optlake/lake/layout"
	"github.com/optlake/optlake/storage"
)

// listLog records the prefixes a store is listed under.
type listLog struct {
	storage.Store
	lists []string // "List p" or "ListDir p"
}

func (s *listLog) List(ctx context.Context, prefix string) ([]storage.Info, error) {
	s.lists = append(s.lists, "List "+prefix)
	return s.Store.List(ctx, prefix)
}

func (s *listLog) ListDir(ctx context.Context, dir string) ([]storage.Info, error) {
	s.lists = append(s.lists, "ListDir "+dir)
	return s.Store.ListDir(ctx, dir)
}

// Partitions finds every table's days and the parked ones through
// one-level listings of the data directory and of each table: it never
// lists the raw archive (nor the whole directory, which holds it), nor a
// partition's files, on a local folder and on a bucket alike.
func TestPartitionsSkipsRawArchive(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) storage.Store
	}{
		{"local", func(t *testing.T) storage.Store { return storage.NewLocal(t.TempDir()) }},
		{"bucket", func(t *testing.T) storage.Store {
			g := testenv.StartVersityGW(t, "lake")
			g.SetCredentials(t)
			st, err := storage.Open(ctx, g.URL("lake", "hist"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &listLog{Store: tc.open(t)}
			for _, n := range []string{
				"instruments/date=2026-11-24/a.parquet", "instruments/date=2026-11-25/b.parquet",
				"rejects/date=2026-11-24/c.parquet", "rejects/notes.txt",
				layout.ParkedDir + "runs/date=2026-11-23/d.parquet",
				"raw/instruments/date=2026-11-24/e.json.zst", "_tmp/date=2026-11-24/f.parquet",
			} {
				if err := st.Put(ctx, n, []byte("x")); err != nil {
					t.Fatal(err)
				}
			}
			parts, err := (&Folders{St: st}).Partitions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := fmt.Sprint(parts), fmt.Sprint([]Partition{{"instruments", "2026-11-24"}, {"instruments", "2026-11-25"},
				{"rejects", "2026-11-24"}, {"runs", "2026-11-23"}}); got != want {
				t.Fatalf("partitions %s, want %s", got, want)
			}
			for _, l := range st.lists {
				if l == "List " || strings.Contains(l, "raw/") || strings.Contains(l, "_tmp/") {
					t.Fatalf("listed %q (all lists: %q)", l, st.lists)
				}
				// A table's days are its folders: no partition's files are
				// listed (a year is 365 of them a table, at every run).
				if strings.HasPrefix(l, "List ") && !strings.Contains(l, layout.ParkedDir) || strings.Contains(l, "date=") {
					t.Fatalf("listed a table's files: %q (all lists: %q)", l, st.lists)
				}
			}
		})
	}
}
