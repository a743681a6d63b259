package compact

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/internal/arrowpool"
	"github.com/optlake/optlake/schema"
)

// mergeSchema has a two-column key (a nullable string and a timestamp)
// and an id naming each row.
var mergeSchema = arrow.NewSchema([]arrow.Field{
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "snapshot_time", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
}, nil)

var mergeKey = []string{"name", "snapshot_time"}

type mergeRow struct {
	name  *string
	ts    int64
	id    int64
	v     float64
	vNull bool
}

func compareMergeRows(a, b mergeRow) int {
	switch {
	case a.name == nil && b.name != nil:
		return -1
	case a.name != nil && b.name == nil:
		return 1
	case a.name != nil && *a.name != *b.name:
		if *a.name < *b.name {
			return -1
		}
		return 1
	}
	return int(a.ts - b.ts)
}

// mergeRecords builds rows as records of at most batch rows.
func mergeRecords(rows []mergeRow, batch int) []arrow.Record {
	var out []arrow.Record
	for start := 0; start < len(rows); start += batch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, mergeSchema)
		for _, r := range rows[start:min(start+batch, len(rows))] {
			if r.name == nil {
				b.Field(0).AppendNull()
			} else {
				b.Field(0).(*array.StringBuilder).Append(*r.name)
			}
			b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(r.ts))
			b.Field(2).(*array.Int64Builder).Append(r.id)
			if r.vNull {
				b.Field(3).AppendNull()
			} else {
				b.Field(3).(*array.Float64Builder).Append(r.v)
			}
		}
		out = append(out, b.NewRecord())
		b.Release()
	}
	return out
}

// The merge yields every input's rows in key order, rows of equal keys in
// input order (and, within an input, in its order), whatever the inputs
// are: runs in memory read through their permutation, spilled runs of
// several batches, runs of other columns conformed, empty runs.
func TestMergeIsStableAcrossRunKinds(t *testing.T) {
	names := []string{"BTC-1", "BTC-10", "BTC-2", "ETH-1"}
	for _, inputs := range []int{0, 1, 2, 3, 5, 17} {
		t.Run(fmt.Sprint(inputs), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(inputs), 7))
			tmp := t.TempDir()
			var all []mergeRow // in input order
			var runs []Run
			id := int64(0)
			for k := range inputs {
				n := r.IntN(40) // some inputs are empty
				rows := make([]mergeRow, n)
				for i := range rows {
					if r.IntN(6) > 0 {
						rows[i].name = &names[r.IntN(len(names))]
					}
					rows[i].ts = int64(r.IntN(3)) // ties across inputs and within one
					rows[i].v, rows[i].vNull = r.Float64(), r.IntN(5) == 0
				}
				slices.SortStableFunc(rows, compareMergeRows)
				for i := range rows {
					rows[i].id = id
					id++
				}
				all = append(all, rows...)
				switch k % 3 {
				case 0: // in memory, its records in another order
					shuffled := slices.Clone(rows)
					r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
					so := &sorter{mem: memory.DefaultAllocator, pool: arrowpool.New(1 << 20), u: mergeSchema, key: mergeKey, budget: 1 << 30}
					for _, rec := range mergeRecords(shuffled, 7) {
						if err := so.add(rec); err != nil {
							t.Fatal(err)
						}
						rec.Release()
					}
					m, _ := so.sorted()
					if m == nil {
						continue
					}
					// The permutation keeps equal keys in the order added:
					// give it the rows' order back for equal keys.
					slices.SortStableFunc(m.order, func(a, b rowRef) int {
						if c := compareRows(&m.views[a.rec], int(a.row), &m.views[b.rec], int(b.row)); c != 0 {
							return c
						}
						ia := m.recs[a.rec].Column(2).(*array.Int64).Value(int(a.row))
						ib := m.recs[b.rec].Column(2).(*array.Int64).Value(int(b.row))
						return int(ia - ib)
					})
					runs = append(runs, Run{Schema: mergeSchema, mem: m})
				case 1: // spilled, in batches of 5
					w, err := newRunWriter(arrowpool.New(1<<20), mergeSchema, tmp)
					if err != nil {
						t.Fatal(err)
					}
					for _, rec := range mergeRecords(rows, 5) {
						if err := w.write(rec); err != nil {
							t.Fatal(err)
						}
					}
					path, err := w.finish()
					if err != nil {
						t.Fatal(err)
					}
					runs = append(runs, Run{Path: path, Schema: mergeSchema})
				case 2: // spilled without the v column: conformed (nulls)
					narrow := arrow.NewSchema(mergeSchema.Fields()[:3], nil)
					w, err := newRunWriter(arrowpool.New(1<<20), narrow, tmp)
					if err != nil {
						t.Fatal(err)
					}
					for _, rec := range mergeRecords(rows, 11) {
						cut := array.NewRecord(narrow, rec.Columns()[:3], rec.NumRows())
						rec.Release()
						if err := w.write(cut); err != nil {
							t.Fatal(err)
						}
					}
					path, err := w.finish()
					if err != nil {
						t.Fatal(err)
					}
					runs = append(runs, Run{Path: path, Schema: narrow})
					for i := len(all) - len(rows); i < len(all); i++ {
						all[i].vNull = true
					}
				}
			}
			want := slices.Clone(all)
			slices.SortStableFunc(want, compareMergeRows)

			cursors, err := openRuns(memory.DefaultAllocator, arrowpool.New(1<<20), mergeSchema, runs)
			if err != nil {
				t.Fatal(err)
			}
			g := newGatherer(arrowpool.New(1<<20), mergeSchema)
			var got []arrow.Record
			err = merge(context.Background(), cursors, mergeKey, func(src int, rec arrow.Record, row int) error {
				g.add(src, rec, row)
				if g.rows() >= 8 {
					got = append(got, mustFlush(t, g))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if rec := mustFlush(t, g); rec != nil {
				got = append(got, rec)
			}
			i := 0
			for _, rec := range got {
				ids := rec.Column(2).(*array.Int64)
				vs := rec.Column(3).(*array.Float64)
				for j := range int(rec.NumRows()) {
					if i >= len(want) {
						t.Fatalf("more rows than the %d in", len(want))
					}
					w := want[i]
					if ids.Value(j) != w.id || vs.IsNull(j) != w.vNull || !w.vNull && vs.Value(j) != w.v {
						t.Fatalf("row %d: id %d (v %v null %v), want id %d (v %v null %v)", i, ids.Value(j), vs.Value(j), vs.IsNull(j), w.id, w.v, w.vNull)
					}
					i++
				}
				rec.Release()
			}
			if i != len(want) {
				t.Fatalf("%d rows out, want %d", i, len(want))
			}
		})
	}
}

// gatherColumn copies values straight into column buffers; it gives the
// same arrays as appending the rows one by one (rowBuilder), nulls
// included, for every column type of optlake's tables.
func TestGatherMatchesRowBuilder(t *testing.T) {
	var extra []schema.Column
	for _, ty := range []schema.Type{schema.String, schema.Float64, schema.Int64, schema.Bool, schema.TimestampMs} {
		extra = append(extra,
			schema.Column{Name: fmt.Sprintf("c%d", ty), Type: ty, Nullable: true},
			schema.Column{Name: fmt.Sprintf("l%d", ty), Type: ty, Nullable: true, List: true})
	}
	tbl := accountTable(extra...)
	recs := []arrow.Record{
		genRecord(tbl, snapAt(day1, 0), 50, 1),
		genRecord(tbl, snapAt(day1, 1), 1, 2),
		genRecord(tbl, snapAt(day1, 2), 30, 3),
	}
	sliced := recs[2].NewSlice(5, 25) // an offset into its buffers
	recs = append(recs, sliced)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	u := tbl.ArrowSchema()
	r := rand.New(rand.NewPCG(3, 4))
	var refs []rowRef
	for range 200 {
		k := r.IntN(len(recs))
		refs = append(refs, rowRef{int32(k), int32(r.IntN(int(recs[k].NumRows())))})
	}
	got := mustGather(t, arrowpool.New(1<<20), u, recs, refs)
	defer got.Release()
	rb, err := newRowBuilder(memory.DefaultAllocator, u)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.release()
	for _, ref := range refs {
		rb.add(recs[ref.rec], int(ref.row))
	}
	want := rb.flush()
	defer want.Release()
	for j := range u.NumFields() {
		if !array.Equal(got.Column(j), want.Column(j)) {
			t.Errorf("column %s: gathered %v, want %v", u.Field(j).Name, got.Column(j), want.Column(j))
		}
	}
}

// A keyed chunk is sorted by its ids' ranks, then the rest of the key:
// the order of a stable sort by compareRows (ties in (record, row)
// order), with nulls in the prefix, names the dictionary saw in an
// earlier chunk and new ones, rows of one name at several times and
// duplicates of the whole key.
func TestSorterRanksOrderAsCompareRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 71))
	for _, c := range []struct{ rows, names, times, batch int }{
		{1, 1, 1, 10}, {300, 40, 1, 64}, {500, 7, 3, 100}, {1000, 900, 2, 333}, {200, 1, 5, 50},
	} {
		dict := newKeyDict(mergeSchema, mergeKey)
		if dict == nil {
			t.Fatal("no dictionary for a string-led key")
		}
		for round := range 3 { // later rounds: mostly names the dictionary has
			rows := make([]mergeRow, c.rows)
			for i := range rows {
				rows[i] = mergeRow{ts: int64(rng.IntN(c.times)), id: int64(i)}
				if n := rng.IntN(c.names + 1); n < c.names {
					s := fmt.Sprintf("n%03d", (n*7+round)%(c.names+round))
					rows[i].name = &s
				}
			}
			recs := mergeRecords(rows, c.batch)
			so := &sorter{mem: memory.DefaultAllocator, key: mergeKey, budget: 1 << 40, dict: dict}
			for _, r := range recs {
				if err := so.add(r); err != nil {
					t.Fatal(err)
				}
				r.Release()
			}
			m, _ := so.sorted()
			if m.ids == nil {
				t.Fatalf("%+v: the chunk has no ids", c)
			}
			want := slices.Clone(rows)
			slices.SortStableFunc(want, compareMergeRows)
			for i, ref := range m.order {
				if got := rows[int(ref.rec)*c.batch+int(ref.row)]; got.id != want[i].id {
					t.Fatalf("%+v round %d: row %d is id %d, want %d", c, round, i, got.id, want[i].id)
				}
			}
			m.release()
		}
	}
}
