package compact

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/internal/arrowpool"
	"github.com/optlake/optlake/schema"
)

// dictSchema has a key of two nullable strings (a prefix of values that
// are prefixes of each other, and empty ones) and a timestamp.
var dictSchema = arrow.NewSchema([]arrow.Field{
	{Name: "source", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "snapshot_time", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
}, nil)

var dictKey = []string{"source", "name", "snapshot_time"}

// dictRecords builds n random rows (ids from first) as records of at most
// batch rows: few distinct values, so that keys tie; nulls in every key
// column.
func dictRecords(r *rand.Rand, n, batch int, first int64) []arrow.Record {
	vals := []string{"", "A", "AB", "A\x00", "B", "BTC-1", "BTC-10", "BTC-2", "\xff"}
	var out []arrow.Record
	for start := 0; start < n; start += batch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, dictSchema)
		for i := start; i < min(start+batch, n); i++ {
			for c := range 2 {
				if r.IntN(8) == 0 {
					b.Field(c).AppendNull()
				} else {
					b.Field(c).(*array.StringBuilder).Append(vals[r.IntN(len(vals))])
				}
			}
			if r.IntN(10) == 0 {
				b.Field(2).AppendNull()
			} else {
				b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(r.IntN(3)))
			}
			b.Field(3).(*array.Int64Builder).Append(first + int64(i))
		}
		out = append(out, b.NewRecord())
		b.Release()
	}
	return out
}

// Comparing ranks, then the key's other columns, orders any two rows as
// compareRows does: nulls first, prefixes of values, empty values, ties;
// also when the ranks are worked out a batch of new values at a time.
func TestIntegerKeysOrderAsCompareRows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	recs := dictRecords(r, 400, 64, 0)
	d := newKeyDict(dictSchema, dictKey)
	if d == nil || d.cols != 2 {
		t.Fatalf("dictionary %+v, want one of the 2 string columns", d)
	}
	type row struct {
		kv *keyView
		i  int
		id uint32
	}
	var rows []row
	for _, rec := range recs {
		kv, err := newKeyView(rec, dictKey)
		if err != nil {
			t.Fatal(err)
		}
		ids := d.idsOf(&kv, int(rec.NumRows()))
		if len(ids) != int(rec.NumRows()) {
			t.Fatalf("%d ids for %d rows", len(ids), rec.NumRows())
		}
		for i, id := range ids {
			rows = append(rows, row{&kv, i, id})
		}
		defer rec.Release()
		d.ranks() // put in place a batch at a time, as the day's sorts ask
	}
	rank := d.ranks()
	sign := func(c int) int { return max(-1, min(1, c)) }
	for _, a := range rows {
		for _, b := range rows {
			want := sign(compareRows(a.kv, a.i, b.kv, b.i))
			got := sign(int(rank[a.id]) - int(rank[b.id]))
			if got == 0 {
				if a.id != b.id {
					t.Fatalf("ids %d and %d share a rank", a.id, b.id)
				}
				got = sign(compareRowsFrom(a.kv, a.i, b.kv, b.i, d.cols))
			}
			if got != want {
				t.Fatalf("rows %v and %v: integer keys order %d, compareRows %d", a, b, got, want)
			}
		}
	}
}

// A keyless table (its key starts with an integer) has no dictionary.
func TestKeyDictNeedsALeadingString(t *testing.T) {
	u := arrow.NewSchema([]arrow.Field{{Name: "t", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	if d := newKeyDict(u, []string{"t", "s"}); d != nil {
		t.Fatalf("dictionary of %d columns for a key starting with an integer", d.cols)
	}
}

// mergeToRun merges runs with ids by their integer keys into the same
// rows in the same order (ties in input order) as the generic merge, and
// gives the merged run the ids of its rows; when a run has no ids (the
// dictionary full, or none) it falls back to the generic merge.
func TestKeyedMergeMatchesGeneric(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxKeys int // 0: no dictionary
		keyed   bool
	}{
		{"keyed", maxDictKeys, true},
		{"dictionary full", 5, false},
		{"no dictionary", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d *keyDict
			if tc.maxKeys > 0 {
				d = newKeyDict(dictSchema, dictKey)
				d.maxKeys = tc.maxKeys
			}
			got := mergedIDs(t, d, tc.keyed)
			want := mergedIDs(t, nil, false)
			if !slices.Equal(got, want) {
				t.Fatalf("merged rows %v\nwant %v", got, want)
			}
		})
	}
}

// mergedIDs sorts random runs (some spilled by the sorter, some in
// memory, one empty) with dictionary d, merges them into one spilled run
// and returns its rows' id column; the run is keyed as wanted, and its
// ids are those of its rows.
func mergedIDs(t *testing.T, d *keyDict, keyed bool) []int64 {
	t.Helper()
	r := rand.New(rand.NewPCG(9, 9))
	tmp := t.TempDir()
	var runs []Run
	for k := range 7 {
		so := &sorter{mem: memory.DefaultAllocator, pool: arrowpool.New(1 << 20), u: dictSchema, key: dictKey, tmp: tmp, budget: 1 << 30, runBatch: 13, dict: d}
		if k%2 == 1 {
			so.budget = 2 << 10 // spills
		}
		for _, rec := range dictRecords(r, []int{0, 50, 300}[k%3], 40, int64(k)<<20) {
			if err := so.add(rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
		if len(so.runs) > 0 {
			paths, err := so.finish()
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range paths {
				run := Run{Path: p, Schema: dictSchema}
				if i < len(so.runIDs) {
					run.keyed, run.ids = so.runIDs[i] != nil, so.runIDs[i]
				}
				runs = append(runs, run)
			}
			continue
		}
		if m, _ := so.sorted(); m != nil {
			runs = append(runs, Run{Schema: dictSchema, mem: m, keyed: m.ids != nil})
		}
	}
	if k := keysFor(d, runs, true); (k != nil) != keyed {
		t.Fatalf("keyed merge: %v, want %v", k != nil, keyed)
	}
	out, err := mergeToRun(context.Background(), memory.DefaultAllocator, arrowpool.New(1<<20), dictSchema, dictKey, d, tmp, runs, 16)
	if err != nil {
		t.Fatal(err)
	}
	if out.keyed != keyed {
		t.Fatalf("merged run keyed %v, want %v", out.keyed, keyed)
	}
	c, err := openRun(arrowpool.New(1<<20), dictSchema, out.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	var ids []int64
	for {
		rec, err := c.next()
		if err != nil {
			t.Fatal(err)
		}
		if rec == nil {
			break
		}
		if keyed {
			kv, err := newKeyView(rec, dictKey)
			if err != nil {
				t.Fatal(err)
			}
			again := d.idsOf(&kv, int(rec.NumRows()))
			if want := out.ids[len(ids) : len(ids)+len(again)]; !slices.Equal(again, want) {
				t.Fatalf("merged run's ids %v, its rows' %v", want, again)
			}
		}
		ids = append(ids, rec.Column(3).(*array.Int64).Int64Values()...)
	}
	if keyed && len(out.ids) != len(ids) {
		t.Fatalf("%d ids for %d rows", len(out.ids), len(ids))
	}
	return ids
}

// A replayed day's runs, in memory and merged while loading, carry ids of
// the day's dictionary, so that its merges compare integers.
func TestDaySinkRunsAreKeyed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ds := newMergingDaySink(t, localLake(dir))
	for k := range 12 {
		replaySnap(t, ds, schema.Instruments, snapAt(day1, k), 100+k, uint64(k), true)
	}
	p := Partition{Table: "instruments", Date: day1.Format(time.DateOnly)}
	d := ds.days[p]
	d.mu.Lock()
	d.wait()
	if d.dict == nil || d.dict != ds.dicts[p] {
		t.Fatal("the day has no dictionary, or not its writers'")
	}
	for i, r := range d.runs {
		if !r.keyed {
			t.Fatalf("run %d of %d (spilled %v) has no ids", i, len(d.runs), r.Path != "")
		}
	}
	spilled := slices.ContainsFunc(d.runs, func(r *dayRun) bool { return r.Path != "" })
	d.mu.Unlock()
	if !spilled {
		t.Fatal("no run merged while loading: the test does not exercise them")
	}
	if err := ds.FlushDay(ctx, p.Date); err != nil {
		t.Fatal(err)
	}
	if err := ds.Close(ctx); err != nil {
		t.Fatal(err)
	}
	checkSorted(t, partDir(dir, "instruments", day1), "instruments")
	if _, ok := ds.dicts[p]; ok {
		t.Fatal("the day's dictionary outlives its flush")
	}
}

// A row's id is its prefix's, whichever way idsOf finds it (the row after
// the previous row's last time, the previous row's, the map): records
// that repeat a listing in order, with changes, nulls and values that
// are prefixes of each other.
func TestKeyDictIDsMatchPrefixes(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	d := newKeyDict(dictSchema, dictKey)
	byPrefix := map[string]uint32{}
	base := dictRecords(r, 60, 60, 0)
	recs := slices.Clone(base)
	for range 6 {
		recs = append(recs, base[0]) // the same listing again: guesses hit
	}
	recs = append(recs, dictRecords(r, 300, 50, 100)...)
	defer func() {
		for _, rec := range recs[len(base)+6:] {
			rec.Release()
		}
		for _, rec := range base {
			rec.Release()
		}
	}()
	for k, rec := range recs {
		kv, err := newKeyView(rec, dictKey)
		if err != nil {
			t.Fatal(err)
		}
		ids := d.idsOf(&kv, int(rec.NumRows()))
		if len(ids) != int(rec.NumRows()) {
			t.Fatalf("record %d: %d ids for %d rows", k, len(ids), rec.NumRows())
		}
		for i, id := range ids {
			p := string(appendPrefix(nil, &kv, d.cols, i))
			if want, ok := byPrefix[p]; ok && want != id {
				t.Fatalf("record %d row %d: id %d, its prefix had %d", k, i, id, want)
			}
			if d.keys[id] != p {
				t.Fatalf("record %d row %d: id %d is another prefix's", k, i, id)
			}
			byPrefix[p] = id
		}
	}
}
