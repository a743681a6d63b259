package compact

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	pq "github.com/optlake/optlake/sinks/parquet"
)

// groupRows is a view of rows of snapshot, run and endpoint values (""
// for a run: null), sliced from off; every column present.
func groupRows(t *testing.T, snaps []int64, runs, eps []string, off int) (*keyView, func()) {
	t.Helper()
	u := arrow.NewSchema([]arrow.Field{
		{Name: "snapshot_time", Type: &arrow.TimestampType{Unit: arrow.Millisecond}, Nullable: true},
		{Name: "run_id", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "endpoint", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, u)
	defer b.Release()
	for i := range snaps {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(snaps[i]))
		if runs[i] == "" {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(runs[i])
		}
		b.Field(2).(*array.StringBuilder).Append(eps[i])
	}
	rec := b.NewRecord()
	sl := rec.NewSlice(int64(off), rec.NumRows())
	rec.Release()
	kv, err := newKeyView(sl, []string{"snapshot_time"})
	if err != nil {
		t.Fatal(err)
	}
	return &kv, sl.Release
}

// collect finds the groups of a batch of one group (compared a column at
// a time: oneGroup) as it finds them row by row: a value that differs in
// any row and any column, values of the same length, empty values,
// nulls, sliced records.
func TestCollectOneGroup(t *testing.T) {
	rep := func(v string, n int) []string { return slices.Repeat([]string{v}, n) }
	snaps := func(n int) []int64 { return slices.Repeat([]int64{5}, n) }
	cases := []struct {
		name  string
		snaps []int64
		runs  []string
		eps   []string
		off   int
		one   bool
	}{
		{"one group", snaps(6), rep("run-a", 6), rep("instruments", 6), 0, true},
		{"sliced", []int64{1, 5, 5, 5}, []string{"x", "run-a", "run-a", "run-a"}, []string{"other", "ep", "ep", "ep"}, 1, true},
		{"a snapshot differs last", []int64{5, 5, 5, 6}, rep("r", 4), rep("e", 4), 0, false},
		{"a run of the same length differs", snaps(5), []string{"run-a", "run-a", "run-b", "run-a", "run-a"}, rep("e", 5), 0, false},
		{"runs shifted by their length", snaps(3), []string{"ab", "ab", "abab"}, rep("e", 3), 0, false},
		{"empty endpoints", snaps(4), rep("r", 4), rep("", 4), 0, true},
		{"runs all null", snaps(4), rep("", 4), rep("e", 4), 0, true},
		{"a run null", snaps(4), []string{"r", "", "r", "r"}, rep("e", 4), 0, false},
		{"an endpoint differs first", snaps(4), rep("r", 4), []string{"f", "e", "e", "e"}, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kv, release := groupRows(t, c.snaps, c.runs, c.eps, c.off)
			defer release()
			n := len(c.snaps) - c.off
			if got := kv.oneGroup(n); got != c.one {
				t.Fatalf("oneGroup %v, want %v", got, c.one)
			}
			var want []pq.Group
			for i := range n {
				if g := kv.group(i); !slices.Contains(want, g) {
					want = append(want, g)
				}
			}
			var mf pq.ManifestFile
			groupSet{}.collect(kv, n, &mf)
			if !slices.Equal(mf.Groups, want) {
				t.Fatalf("groups %v, want %v", mf.Groups, want)
			}
		})
	}
}

// sortKeys sorts (rank, position) keys as slices.Sort does, by counting
// few ranks or comparing many.
func TestSortKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(93, 4))
	for _, c := range []struct{ n, ranks int }{{0, 5}, {1, 1}, {3000, 8500}, {500, 20}, {100, 5000}} {
		keys := make([]uint64, c.n)
		for i := range keys {
			keys[i] = uint64(r.IntN(c.ranks))<<32 | uint64(i)
		}
		want := slices.Clone(keys)
		slices.Sort(want)
		if got := sortKeys(keys, c.ranks); !slices.Equal(got, want) {
			t.Fatalf("%d keys of %d ranks: not sorted", c.n, c.ranks)
		}
	}
}
