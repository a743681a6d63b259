package lake_test

import (
	"context"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/optlake/optlake/lake"
	"github.com/optlake/optlake/lake/tableformat"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/storage"
)

// countingStore counts the opens of the format's record.
type countingStore struct {
	storage.Store
	reads int
}

func (s *countingStore) Open(ctx context.Context, name string) (storage.Reader, error) {
	if name == lake.FormatName {
		s.reads++
	}
	return s.Store.Open(ctx, name)
}

// Every registered format opens from its record, and a command asks the
// Format for every part it uses without reading the record again: the
// record is read once per command (twice at a lake's first run: read,
// recorded, read back in case another process recorded first). Its status
// section is the format's.
func TestOpenGivesEveryPartFromOneRead(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		kind lake.Kind
		keys []string // status's JSON keys
	}{
		{lake.Parquet, []string{"table_format"}},
		{lake.Iceberg, []string{"iceberg_tables", "table_format"}},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			st := &countingStore{Store: storage.NewLocal(t.TempDir())}
			if _, err := lake.Open(ctx, st, tc.kind, lake.Options{}); err != nil || st.reads != 2 {
				t.Fatalf("first run: %d reads (%v), want 2", st.reads, err)
			}
			st.reads = 0
			f, err := lake.Open(ctx, st, "", lake.Options{})
			if err != nil || f.Kind != tc.kind || !f.Recorded || f.Name() != string(tc.kind) {
				t.Fatalf("open: %+v %v", f, err)
			}
			files := f.Files(parquet.Options{Store: st})
			if files.Park == nil {
				t.Error("the format's files park nothing: a compacted day's snapshot loaded again would show twice")
			}
			if files.Iceberg != (tc.kind == lake.Iceberg) {
				t.Errorf("the files' Iceberg option is %v", files.Iceberg)
			}
			fs, err := parquet.New(files)
			if err != nil {
				t.Fatal(err)
			}
			live := f.Sink(fs)
			if _, err := f.ReplaySink(fs, live); err != nil {
				t.Fatal(err)
			}
			c := f.Compaction()
			if _, err := c.Partitions(ctx); err != nil {
				t.Fatal(err)
			}
			c.ClosedFrom(ctx)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := f.View().List(ctx, "instruments/date="); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Upkeep(ctx, tableformat.Upkeep{Keep: time.Hour, Grace: time.Hour}); err != nil {
				t.Fatal(err)
			}
			s, err := f.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for k := range s.JSON {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if !slices.Equal(keys, tc.keys) || s.JSON["table_format"] != tc.kind || s.Lines[0] != "table format: "+string(tc.kind) {
				t.Errorf("status: %v %q", s.JSON, s.Lines)
			}
			if st.reads != 1 {
				t.Errorf("the format's record was read %d times, want 1", st.reads)
			}
		})
	}
}

// A reading command on a lake no run wrote yet sees a Parquet lake and
// records nothing; status shows no format.
func TestReadRecordsNothing(t *testing.T) {
	ctx := context.Background()
	st := storage.NewLocal(t.TempDir())
	f, err := lake.Read(ctx, st, lake.Options{})
	if err != nil || f.Kind != lake.Parquet || f.Recorded {
		t.Fatalf("read: %+v %v", f, err)
	}
	if k, err := lake.Recorded(ctx, st); err != nil || k != "" {
		t.Fatalf("recorded %q (%v) by a reader", k, err)
	}
	s, err := f.Status(ctx)
	if err != nil || len(s.Lines) != 0 || s.JSON["table_format"] != "" || len(s.JSON) != 1 {
		t.Fatalf("status of an unwritten lake: %v %q %v", s.JSON, s.Lines, err)
	}
}
