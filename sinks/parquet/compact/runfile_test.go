package compact

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/internal/arrowpool"
	"github.com/optlake/optlake/schema"
)

// runRefs picks n rows of recs: single rows at random and runs of
// consecutive rows of one record (a merge's output takes both).
func runRefs(r *rand.Rand, recs []arrow.Record, n int) []rowRef {
	var refs []rowRef
	for len(refs) < n {
		k := r.IntN(len(recs))
		rows := int(recs[k].NumRows())
		from := r.IntN(rows)
		for i := from; i < min(rows, from+1+r.IntN(12)) && len(refs) < n; i++ {
			refs = append(refs, rowRef{int32(k), int32(i)})
		}
	}
	return refs
}

// rowsOf builds refs' rows of recs one by one (rowBuilder): the reference
// for gather and the spilled runs.
func rowsOf(t *testing.T, u *arrow.Schema, recs []arrow.Record, refs []rowRef) arrow.Record {
	t.Helper()
	rb, err := newRowBuilder(memory.DefaultAllocator, u)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.release()
	for _, ref := range refs {
		rb.add(recs[ref.rec], int(ref.row))
	}
	return rb.flush()
}

func sameRecord(t *testing.T, what string, got, want arrow.Record) {
	t.Helper()
	if got.NumRows() != want.NumRows() {
		t.Fatalf("%s: %d rows, want %d", what, got.NumRows(), want.NumRows())
	}
	for j := range int(want.NumCols()) {
		if !array.Equal(got.Column(j), want.Column(j)) {
			t.Errorf("%s: column %s differs", what, want.Schema().Field(j).Name)
		}
	}
}

// A spilled run gives back exactly the rows written, for every column
// type of optlake's tables (lists and booleans through the generic array
// path, a sliced record's offsets included), batch after batch with the
// reader's and the writer's buffers reused between them.
func TestRunFileRoundTrip(t *testing.T) {
	var extra []schema.Column
	for _, ty := range []schema.Type{schema.String, schema.Float64, schema.Int64, schema.Bool, schema.TimestampMs} {
		extra = append(extra,
			schema.Column{Name: fmt.Sprintf("c%d", ty), Type: ty, Nullable: true},
			schema.Column{Name: fmt.Sprintf("l%d", ty), Type: ty, Nullable: true, List: true})
	}
	tbl := accountTable(extra...)
	u := tbl.ArrowSchema()
	recs := []arrow.Record{
		genRecord(tbl, snapAt(day1, 0), 300, 1),
		genRecord(tbl, snapAt(day1, 1), 1, 2),
		genRecord(tbl, snapAt(day1, 2), 90, 3),
	}
	recs = append(recs, recs[2].NewSlice(5, 75))
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	pool := arrowpool.New(1 << 20)
	w, err := newRunWriter(pool, u, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	var want []arrow.Record
	defer func() {
		for _, r := range want {
			r.Release()
		}
	}()
	for b := range 12 {
		refs := runRefs(r, recs, 1+r.IntN(400))
		want = append(want, rowsOf(t, u, recs, refs))
		switch b % 3 {
		case 0, 1:
			err = w.writeRows(recs, refs)
		default: // a whole record, all its rows (write)
			want[b].Retain()
			err = w.write(want[b])
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	sliced := recs[3]
	sliced.Retain()
	want = append(want, sliced)
	if err := w.write(sliced); err != nil {
		t.Fatal(err)
	}
	path, err := w.finish()
	if err != nil {
		t.Fatal(err)
	}
	c, err := openRun(pool, u, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	for b := 0; ; b++ {
		got, err := c.next()
		if err != nil {
			t.Fatal(err)
		}
		if got == nil {
			if b != len(want) {
				t.Fatalf("%d batches read, %d written", b, len(want))
			}
			break
		}
		sameRecord(t, fmt.Sprintf("batch %d", b), got, want[b])
	}
}

// The pool's buffers are not zeroed: a batch gathered or read after
// another of the same sizes gets its own values only — its nulls where
// the batch before had values, its short strings where it had long ones
// (array.Equal compares each string's bytes, from its offsets: bytes of
// the earlier strings past the last offset, which nothing reads, are not
// compared).
func TestReusedBuffersLeakNothing(t *testing.T) {
	u := arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "t", Type: arrow.FixedWidthTypes.Timestamp_ms, Nullable: true},
	}, nil)
	build := func(n int, long bool, nullEvery int) arrow.Record {
		b := array.NewRecordBuilder(memory.DefaultAllocator, u)
		defer b.Release()
		for i := range n {
			if i%nullEvery == nullEvery-1 {
				for j := range 3 {
					b.Field(j).AppendNull()
				}
				continue
			}
			s := strings.Repeat("x", i%4)
			if long {
				s = fmt.Sprintf("%040d", i)
			}
			b.Field(0).(*array.StringBuilder).Append(s)
			b.Field(1).(*array.Float64Builder).Append(float64(i) + 0.5)
			b.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(i))
		}
		return b.NewRecord()
	}
	// long strings, few nulls; then short strings, mostly nulls
	first, second := build(2000, true, 50), build(2000, false, 2)
	defer first.Release()
	defer second.Release()
	refs := make([]rowRef, 2000)
	for i := range refs {
		refs[i] = rowRef{0, int32((i * 7) % 2000)} // single rows, no runs
	}
	pool := arrowpool.New(1 << 20)
	w, err := newRunWriter(pool, u, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for k, rec := range []arrow.Record{first, second} {
		recs := []arrow.Record{rec}
		want := rowsOf(t, u, recs, refs)
		defer want.Release()
		got := mustGather(t, pool, u, recs, refs)
		sameRecord(t, fmt.Sprintf("gathered batch %d", k), got, want)
		got.Release() // its buffers go back to the pool for the next batch
		if err := w.writeRows(recs, refs); err != nil {
			t.Fatal(err)
		}
	}
	path, err := w.finish()
	if err != nil {
		t.Fatal(err)
	}
	c, err := openRun(pool, u, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	for k, rec := range []arrow.Record{first, second} {
		got, err := c.next()
		if err != nil || got == nil {
			t.Fatalf("batch %d: %v, %v", k, got, err)
		}
		want := rowsOf(t, u, []arrow.Record{rec}, refs)
		sameRecord(t, fmt.Sprintf("read batch %d", k), got, want)
		want.Release()
	}
	if pool.Held() == 0 {
		t.Fatal("the pool kept no buffer: the test does not exercise reuse")
	}
}

// The strings' bytes are sized by the sources' average length: rows far
// longer than it grow the buffer (the pool's and the writer's scratch),
// keeping the bytes gathered before.
func TestGatherStringsLongerThanTheirSources(t *testing.T) {
	u := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, u)
	var refs []rowRef
	for i := range 2000 {
		s := ""
		if i%100 == 0 {
			s = fmt.Sprintf("%0300d", i)
			refs = append(refs, rowRef{0, int32(i)}, rowRef{0, int32(i + 1)}) // and an empty one after it: a run
		}
		b.Field(0).(*array.StringBuilder).Append(s)
	}
	rec := b.NewRecord()
	b.Release()
	defer rec.Release()
	recs := []arrow.Record{rec}
	want := rowsOf(t, u, recs, refs)
	defer want.Release()
	pool := arrowpool.New(1 << 20)
	got := mustGather(t, pool, u, recs, refs)
	sameRecord(t, "gathered", got, want)
	got.Release()
	w, err := newRunWriter(pool, u, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.writeRows(recs, refs); err != nil {
		t.Fatal(err)
	}
	path, err := w.finish()
	if err != nil {
		t.Fatal(err)
	}
	c, err := openRun(pool, u, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	read, err := c.next()
	if err != nil || read == nil {
		t.Fatalf("%v, %v", read, err)
	}
	sameRecord(t, "spilled", read, want)
}

// write writes rec as a batch of all its rows (the production path,
// writeRows; a sliced record's offsets included) and releases it.
func (w *runWriter) write(rec arrow.Record) error {
	defer rec.Release()
	refs := make([]rowRef, rec.NumRows())
	for i := range refs {
		refs[i] = rowRef{0, int32(i)}
	}
	return w.writeRows([]arrow.Record{rec}, refs)
}

func mustGather(t *testing.T, pool *arrowpool.Pool, u *arrow.Schema, recs []arrow.Record, refs []rowRef) arrow.Record {
	t.Helper()
	rec, err := gather(pool, u, recs, refs)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func mustFlush(t *testing.T, g *gatherer) arrow.Record {
	t.Helper()
	rec, err := g.flush()
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestBuildRecordPanicIsAnError: nodes whose buffers do not fit their type
// (what node's checks are there to catch, e.g. an int64 column of 10 rows
// over 8 bytes of values) make an error, not a panic. (The node arrow-go
// panicked on keeps the reference it took: Go's collector frees it.)
func TestBuildRecordPanicIsAnError(t *testing.T) {
	mem := memory.NewGoAllocator()
	u := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "b", Type: arrow.PrimitiveTypes.Int64}}, nil)
	values := func(n int) *memory.Buffer {
		b := memory.NewResizableBuffer(mem)
		b.Resize(n)
		return b
	}
	good, short := values(80), values(8)
	datas := []arrow.ArrayData{
		array.NewData(arrow.PrimitiveTypes.Int64, 10, []*memory.Buffer{nil, good}, nil, 0, 0),
		array.NewData(arrow.PrimitiveTypes.Int64, 10, []*memory.Buffer{nil, short}, nil, 0, 0),
	}
	good.Release()
	short.Release()
	rec, err := buildRecord(u, datas, 10)
	if err == nil {
		rec.Release()
		t.Fatal("a column of 10 int64s over 8 bytes built a record")
	}
	if !strings.Contains(err.Error(), "do not fit") {
		t.Errorf("error %q", err)
	}
	for _, d := range datas {
		d.Release()
	}
}
