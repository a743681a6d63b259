package compact

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/optlake/optlake/internal/arrowpool"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/parquet/pqpage"
)

// A key column's cost (directColumns' order) is the Arrow bytes of the
// column keyColumn builds: its values and offsets, nulls none.
func TestDirectKeyColumnCost(t *testing.T) {
	cases := []struct {
		name  string
		vals  []string
		valid []bool
		rows  []int // per rank
	}{
		{"strings", []string{"BTC-27DEC24-100000-C", "ETH-27DEC24-4000-P", "x"}, nil, []int{3, 0, 7}},
		{"nulls", []string{"a", "", "deribit"}, []bool{true, false, true}, []int{2, 5, 1}},
		{"empty", []string{"", ""}, nil, []int{4, 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := []int{0}
			for _, n := range c.rows {
				start = append(start, start[len(start)-1]+n)
			}
			kv := keyValues{vals: c.vals, valid: c.valid}
			n := start[len(start)-1]
			arr, err := keyColumn(arrowpool.New(1<<20), arrow.BinaryTypes.String, start, kv, 0, n)
			if err != nil {
				t.Fatal(err)
			}
			defer arr.Release()
			s := arr.(*array.String)
			want := int64(len(s.ValueBytes()) + 4*(len(s.ValueOffsets())-1))
			if got := kv.bytes(start); got != want {
				t.Fatalf("cost %d, the built column's values and offsets %d", got, want)
			}
		})
	}
}

// groupOrders, the groups shared among workers, sets every part's perm
// as unitOrder does alone.
func TestGroupOrdersParallel(t *testing.T) {
	r := rand.New(rand.NewPCG(84, 1))
	const units = 9
	var refs []rowRef
	for k := range units {
		for i := range 30 + r.IntN(50) {
			refs = append(refs, rowRef{int32(k), int32(i)})
		}
	}
	r.Shuffle(len(refs), func(a, b int) { refs[a], refs[b] = refs[b], refs[a] })
	want := directGroups(len(refs), 37, 100)
	for g := range want {
		for _, p := range want[g].parts {
			want[g].perms = append(want[g].perms, unitOrder(refs[p[0]:p[1]], units))
		}
	}
	for _, workers := range []int{0, 1, 2, 3} {
		got := directGroups(len(refs), 37, 100)
		groupOrders(got, refs, units, workers)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%d workers: the groups' perms differ from unitOrder's", workers)
		}
	}
}

// The direct writer's memory counts the order, each worker's largest
// column and, with a dictionary column, each worker's ids (not the
// workers' idle pools: see directNeed).
func TestDirectNeed(t *testing.T) {
	cases := []struct {
		name    string
		cols    []int64
		rows    int
		workers int
		dict    bool
		want    int64
	}{
		{"one worker", []int64{10, 300, 20}, 10, 1, false, 240 + 300},
		{"two workers, the largest two", []int64{10, 300, 20}, 10, 2, false, 240 + 300 + 20},
		{"more workers than columns", []int64{10, 300}, 10, 4, false, 240 + 310},
		{"dictionary ids per worker, a pool class each", []int64{10, 300, 20}, 10, 2, true, 240 + 320 + 2*64},
		{"ids past a power of two take the next class", []int64{1}, 1<<20 + 1, 1, true, 24<<20 + 24 + 1 + 8<<20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cols := slices.Clone(c.cols)
			if got := directNeed(c.cols, c.rows, c.workers, c.dict); got != c.want {
				t.Fatalf("need %d, want %d", got, c.want)
			}
			if !slices.Equal(c.cols, cols) { // the day's per-column bytes, kept as they are (dayCols)
				t.Fatalf("directNeed reordered its columns: %v, were %v", c.cols, cols)
			}
		})
	}
}

// gatherByUnit of a boolean column (its bits copied record by record) is
// gatherArrays's array: the same values and nulls, also from sliced
// records.
func TestGatherBoolsByUnit(t *testing.T) {
	r := rand.New(rand.NewPCG(93, 1))
	pool := arrowpool.New(1 << 20)
	var arrs []arrow.Array
	var refs []rowRef
	for k := range 7 {
		b := array.NewBooleanBuilder(memory.DefaultAllocator)
		n := 20 + r.IntN(90)
		for range n + 5 {
			if k%3 != 0 && r.IntN(5) == 0 {
				b.AppendNull()
			} else {
				b.Append(r.IntN(2) == 0)
			}
		}
		full := b.NewArray()
		b.Release()
		a := array.NewSlice(full, 3, int64(3+n)) // an offset that is not a byte's
		full.Release()
		defer a.Release()
		arrs = append(arrs, a)
		for i := range n {
			refs = append(refs, rowRef{int32(k), int32(i)})
		}
	}
	r.Shuffle(len(refs), func(a, b int) { refs[a], refs[b] = refs[b], refs[a] })
	want, err := gatherArrays(pool, arrow.FixedWidthTypes.Boolean, arrs, refs)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Release()
	got, err := gatherByUnit(pool, arrow.FixedWidthTypes.Boolean, arrs, refs, unitOrder(refs, len(arrs)))
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if got.NullN() == 0 || !array.Equal(got, want) {
		t.Fatalf("gathered by unit:\n%v\nwant (%d nulls)\n%v", got, want.NullN(), want)
	}
}

// A column worker reads every packed unit's column into buffers of its
// own pool and, its column done, reads the next one's into the same
// buffers: over columns of one size, the workers' pools make a column's
// buffers once per worker, not once per column.
func TestColumnWorkersReuseTheirBuffers(t *testing.T) {
	const cols, recs, rows = 5, 12, 500
	fields := append([]arrow.Field{}, dictSchema.Fields()[:3]...)
	for c := range cols {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("v%d", c), Type: arrow.PrimitiveTypes.Int64})
	}
	u := arrow.NewSchema(fields, nil)
	r := rand.New(rand.NewPCG(103, 1))
	var in []arrow.Record
	for k := range recs {
		b := array.NewRecordBuilder(memory.DefaultAllocator, u)
		for i := range rows {
			b.Field(0).(*array.StringBuilder).Append("s")
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("n%04d", i))
			b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(k))
			for c := range cols {
				b.Field(3 + c).(*array.Int64Builder).Append(r.Int64()) // S2 does not pay: stored raw
			}
		}
		in = append(in, b.NewRecord())
		b.Release()
	}
	defer func() {
		for _, rec := range in {
			rec.Release()
		}
	}()
	d := newKeyDict(u, dictKey)
	g, _ := packRecords(t, u, dictKey, d, in)
	units, refs, start, err := directOrder([]Run{{Schema: u, packed: g, keyed: true}}, d.ranks(), d.cols)
	if err != nil {
		t.Fatal(err)
	}
	props := parquet.NewWriterProperties(parquet.WithDictionaryDefault(false), parquet.WithStats(true), parquet.WithCompression(compress.Codecs.Snappy))
	_, opts, ok, err := pq.PageColumns(u, props)
	if err != nil || !ok {
		t.Fatalf("pqpage columns: %v %v", ok, err)
	}
	groups := directGroups(len(refs), 1000, 2000)
	groupOrders(groups, refs, len(units), 1)
	dd := &directDay{units: units, refs: refs, start: start, groups: groups, opts: opts, keyVals: map[int]keyValues{},
		indexed: make([]bool, u.NumFields()), cost: make([]int64, u.NumFields())}
	for c := range d.cols {
		var kv keyValues
		kv.vals, kv.valid = d.prefixValues(c)
		dd.keyVals[c] = kv
	}
	for i := range dd.cost {
		dd.cost[i] = 8 * recs * rows
	}
	dd.chunks = make([][]*pqpage.Chunk, len(groups))
	for g := range groups {
		dd.chunks[g] = make([]*pqpage.Chunk, u.NumFields())
	}
	j := &partitionJob{u: u, pool: arrowpool.New(0)} // the day's pool keeps nothing: what is reused is the workers' own
	if err := j.directColumns(context.Background(), dd); err != nil {
		t.Fatal(err)
	}
	workers := min(pq.ColumnWorkers(u), u.NumFields())
	if len(dd.readers) != workers {
		t.Fatalf("%d workers' readers, want %d", len(dd.readers), workers)
	}
	var made int64
	for _, rd := range dd.readers {
		made += rd.pool.Made()
	}
	column := int64(recs) * (arrowpool.Size(8*rows) + arrowpool.Size(rows/8+1)) // a column of every unit: its values and validity (the builder's)
	if made < column {
		t.Fatalf("the workers' pools made %d bytes, not even a column's %d: the units' columns were not read into them", made, column)
	}
	if want := int64(min(workers, cols+1)) * column; made > want {
		t.Fatalf("the workers' pools made %d bytes reading %d columns of %d bytes on %d workers, want at most %d", made, cols+1, column, workers, want)
	}
}

// gatherByUnit of int64, float64, timestamp and string columns (copied
// record by record) is gatherArrays's array: the same values and nulls,
// from sliced records, one of them with no row in the batch.
func TestGatherByUnitIsGatherArrays(t *testing.T) {
	types := []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float64,
		&arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, arrow.BinaryTypes.String}
	for _, typ := range types {
		t.Run(typ.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(103, 3))
			pool := arrowpool.New(1 << 20)
			var arrs []arrow.Array
			var refs []rowRef
			for k := range 8 {
				b := array.NewBuilder(memory.DefaultAllocator, typ)
				n := 20 + r.IntN(90)
				for range n + 5 {
					if k%3 != 0 && r.IntN(5) == 0 {
						b.AppendNull()
						continue
					}
					switch b := b.(type) {
					case *array.Int64Builder:
						b.Append(r.Int64())
					case *array.Float64Builder:
						b.Append(r.NormFloat64())
					case *array.TimestampBuilder:
						b.Append(arrow.Timestamp(r.Int64N(1 << 40)))
					case *array.StringBuilder:
						b.Append(fmt.Sprintf("%.*s", r.IntN(12), "BTC-27DEC24-100000-C"))
					}
				}
				full := b.NewArray()
				b.Release()
				a := array.NewSlice(full, 3, int64(3+n))
				full.Release()
				defer a.Release()
				arrs = append(arrs, a)
				if k == 5 {
					continue // no row of this record in the batch
				}
				for i := range n {
					if r.IntN(4) > 0 {
						refs = append(refs, rowRef{int32(k), int32(i)})
					}
				}
			}
			r.Shuffle(len(refs), func(a, b int) { refs[a], refs[b] = refs[b], refs[a] })
			want, err := gatherArrays(pool, typ, arrs, refs)
			if err != nil {
				t.Fatal(err)
			}
			defer want.Release()
			got, err := gatherByUnit(pool, typ, arrs, refs, unitOrder(refs, len(arrs)))
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			if got.NullN() == 0 || !array.Equal(got, want) {
				t.Fatalf("gathered by unit:\n%v\nwant (%d nulls)\n%v", got, want.NullN(), want)
			}
		})
	}
}
