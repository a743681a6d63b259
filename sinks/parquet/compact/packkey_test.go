package compact

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/internal/arrowpool"
)

// packRecords packs recs (schema u, key) as one run of dict's ids into a
// fresh pack file and returns the group (released by the test's end).
func packRecords(t *testing.T, u *arrow.Schema, key []string, d *keyDict, recs []arrow.Record) (*packedGroup, *packReader) {
	t.Helper()
	pool := arrowpool.New(1 << 20)
	so := &sorter{mem: memory.DefaultAllocator, pool: pool, u: u, key: key, budget: 1 << 30, dict: d}
	for _, rec := range recs {
		if err := so.add(rec); err != nil {
			t.Fatal(err)
		}
	}
	m, _ := so.sorted()
	if m.ids == nil {
		t.Fatal("a run without ids")
	}
	pf, err := newPackFile(pool, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pf.remove)
	g, err := packGroup(context.Background(), pf, u, key, d.cols, []*memRun{m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.release)
	return g, newPackReader(pf, pool)
}

// The dictionary's columns of a packed record are not packed (no bytes):
// a record read back (unpack) has them from its rows' ids, nulls, empty
// values and prefixes of values included; read as a packed column they
// are an error.
func TestPackedKeyColumnsReadFromIDs(t *testing.T) {
	r := rand.New(rand.NewPCG(93, 2))
	recs := dictRecords(r, 300, 70, 0)
	for _, rec := range recs {
		defer rec.Release()
	}
	d := newKeyDict(dictSchema, dictKey)
	g, rd := packRecords(t, dictSchema, dictKey, d, recs)
	pr := g.runs[0]
	for k, prec := range pr.recs {
		for j, name := range []string{"source", "name"} {
			pc := prec.cols[dictSchema.FieldIndices(name)[0]]
			if pc.key != j+1 || pc.n != 0 || pc.size == 0 {
				t.Fatalf("record %d: key column %s packed as %+v", k, name, pc)
			}
			if _, err := rd.column(arrow.BinaryTypes.String, pc, prec.rows); err == nil {
				t.Fatalf("key column %s read as a packed column", name)
			}
		}
		got, err := rd.record(dictSchema, prec, pr.ids[k], d)
		if err != nil {
			t.Fatal(err)
		}
		if !array.RecordEqual(got, recs[k]) {
			t.Fatalf("record %d read back:\n%v\nwant\n%v", k, got, recs[k])
		}
		got.Release()
	}
}

// A column whose ids (localDict) or S2 did not pay in a record is packed
// without them in the group's next retryAfter records, then tried again;
// a column that compresses is compressed in every record. Every record
// reads back as it was.
func TestPackSkipsWhatDoesNotPay(t *testing.T) {
	u := arrow.NewSchema([]arrow.Field{
		{Name: "source", Type: arrow.BinaryTypes.String},
		{Name: "snapshot_time", Type: arrow.PrimitiveTypes.Int64},
		{Name: "half", Type: arrow.PrimitiveTypes.Int64}, // random low bytes: S2 saves less than half
		{Name: "same", Type: arrow.PrimitiveTypes.Int64}, // one value
		{Name: "kind", Type: arrow.BinaryTypes.String},   // distinct values in the first record, then two
	}, nil)
	key := []string{"source", "snapshot_time"}
	r := rand.New(rand.NewPCG(93, 3))
	const rows = 512
	var recs []arrow.Record
	for k := range retryAfter + 3 {
		b := array.NewRecordBuilder(memory.DefaultAllocator, u)
		for i := range rows {
			b.Field(0).(*array.StringBuilder).Append("deribit")
			b.Field(1).(*array.Int64Builder).Append(int64(k))
			b.Field(2).(*array.Int64Builder).Append(int64(r.Uint32() & 0xffffff))
			b.Field(3).(*array.Int64Builder).Append(7)
			if k == 0 {
				b.Field(4).(*array.StringBuilder).Append(fmt.Sprint("kind-", i))
			} else {
				b.Field(4).(*array.StringBuilder).Append([]string{"call", "put"}[i%2])
			}
		}
		recs = append(recs, b.NewRecord())
		b.Release()
	}
	for _, rec := range recs {
		defer rec.Release()
	}
	d := newKeyDict(u, key)
	g, rd := packRecords(t, u, key, d, recs)
	pr := g.runs[0]
	for k, prec := range pr.recs {
		retried := k == 0 || k == retryAfter+1
		if half := prec.cols[2]; (half.n < rows*8) != retried {
			t.Errorf("record %d: column half packed in %d bytes (%d raw): compressed %v, want %v", k, half.n, rows*8, half.n < rows*8, retried)
		}
		if same := prec.cols[3]; same.n > rows {
			t.Errorf("record %d: column same packed in %d bytes: not compressed", k, same.n)
		}
		if kind := prec.cols[4]; kind.dict != (k == retryAfter+1 || k == retryAfter+2) {
			t.Errorf("record %d: column kind packed as ids %v", k, kind.dict)
		}
		got, err := rd.record(u, prec, pr.ids[k], d)
		if err != nil {
			t.Fatal(err)
		}
		if !array.RecordEqual(got, recs[k]) {
			t.Fatalf("record %d read back differs", k)
		}
		got.Release()
	}
}
