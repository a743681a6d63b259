package compact

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
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

// idxSchema has dictionary columns: few values with nulls (lc), one value
// per record (run, as run_id), many long ones (hc: its day dictionary
// past the limit), and a number.
var idxSchema = arrow.NewSchema([]arrow.Field{
	{Name: "lc", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "run", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "hc", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

// idxRecord is record k of n rows of idxSchema.
func idxRecord(r *rand.Rand, k, n int) arrow.Record {
	b := array.NewRecordBuilder(memory.DefaultAllocator, idxSchema)
	defer b.Release()
	lc := []string{"option", "future", "", "BTC", "ETH", "\xff"}
	run := fmt.Sprintf("run-%03d", k)
	for range n {
		if r.IntN(7) == 0 {
			b.Field(0).AppendNull()
		} else {
			b.Field(0).(*array.StringBuilder).Append(lc[r.IntN(len(lc))])
		}
		b.Field(1).(*array.StringBuilder).Append(run)
		b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("%s-%04d", strings.Repeat("h", 30), r.IntN(600)))
		b.Field(3).(*array.Int64Builder).Append(r.Int64N(100))
	}
	return b.NewRecord()
}

// idxOpts are the page options of idxSchema's columns: lc, run and hc
// with dictionaries (their pages dictPage bytes at most), x without;
// pages of 1 KiB, statistics, Snappy.
func idxOpts(t *testing.T, dictPage int64) []pqpage.Options {
	t.Helper()
	props := parquet.NewWriterProperties(parquet.WithDictionaryDefault(false), parquet.WithDictionaryFor("lc", true),
		parquet.WithDictionaryFor("run", true), parquet.WithDictionaryFor("hc", true), parquet.WithDictionaryPageSizeLimit(dictPage),
		parquet.WithDataPageSize(1<<10), parquet.WithStats(true), parquet.WithCompression(compress.Codecs.Snappy))
	_, opts, ok, err := pq.PageColumns(idxSchema, props)
	if err != nil || !ok {
		t.Fatalf("pqpage columns: %v %v", ok, err)
	}
	return opts
}

// idxDay is the direct writer's day of units' rows in the order of refs
// (row groups of 400 rows, batches of 150), its columns built
// (byValue: every dictionary column from its gathered strings).
func idxDay(t *testing.T, units []directUnit, refs []rowRef, opts []pqpage.Options, byValue bool, pool *arrowpool.Pool) *directDay {
	t.Helper()
	groups := directGroups(len(refs), 150, 400)
	for g := range groups {
		for _, p := range groups[g].parts {
			groups[g].perms = append(groups[g].perms, unitOrder(refs[p[0]:p[1]], len(units)))
		}
	}
	dd := &directDay{units: units, refs: refs, groups: groups, opts: opts, byValue: byValue, indexed: make([]bool, idxSchema.NumFields())}
	dd.chunks = make([][]*pqpage.Chunk, len(groups))
	for g := range groups {
		dd.chunks[g] = make([]*pqpage.Chunk, idxSchema.NumFields())
	}
	j := &partitionJob{u: idxSchema, pool: pool}
	readers := &unitReaders{pool: pool, m: map[*packFile]*packReader{}}
	for i := range idxSchema.NumFields() {
		if err := j.directColumn(context.Background(), dd, i, readers); err != nil {
			t.Fatal(err)
		}
	}
	return dd
}

// sameIdxChunks fails t unless every chunk of got has want's pages and
// metadata.
func sameIdxChunks(t *testing.T, got, want *directDay) {
	t.Helper()
	for g := range got.chunks {
		for i, c := range got.chunks[g] {
			w := want.chunks[g][i]
			if !bytes.Equal(c.DictPage(), w.DictPage()) || !bytes.Equal(c.Bytes(), w.Bytes()) {
				t.Fatalf("row group %d, column %s: %d+%d bytes, the strings' %d+%d differ", g, idxSchema.Field(i).Name, len(c.DictPage()), len(c.Bytes()), len(w.DictPage()), len(w.Bytes()))
			}
			if m, wm := c.Meta(), w.Meta(); !reflect.DeepEqual(m, wm) {
				t.Fatalf("row group %d, column %s: meta\n got %+v\nwant %+v", g, idxSchema.Field(i).Name, m, wm)
			}
		}
	}
}

// The direct writer's dictionary columns built from the day's ids
// (directDictColumn) are the chunks built from their gathered strings:
// row groups of many batches cut at their bounds, nulls, a value per
// record; a column whose day dictionary reaches the dictionary limit is
// gathered as strings (and its chunks fall back to PLAIN).
func TestDirectDictColumnIsTheStrings(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 1))
	var units []directUnit
	var refs []rowRef
	for k := range 14 {
		rec := idxRecord(r, k, 40+r.IntN(200))
		defer rec.Release()
		units = append(units, directUnit{rec: rec, rows: int(rec.NumRows())})
		for i := range int(rec.NumRows()) {
			refs = append(refs, rowRef{int32(k), int32(i)})
		}
	}
	r.Shuffle(len(refs), func(a, b int) { refs[a], refs[b] = refs[b], refs[a] })
	opts := idxOpts(t, 8<<10)
	pool := arrowpool.New(1 << 20)
	want, got := idxDay(t, units, refs, opts, true, pool), idxDay(t, units, refs, opts, false, pool)
	if len(got.groups) < 5 {
		t.Fatalf("%d row groups: the case does not exercise many", len(got.groups))
	}
	if wantIdx := []bool{true, true, false, false}; !reflect.DeepEqual(got.indexed, wantIdx) {
		t.Fatalf("columns built from ids %v, want %v", got.indexed, wantIdx)
	}
	sameIdxChunks(t, got, want)
	fellBack := false
	for g := range got.chunks {
		fellBack = fellBack || got.chunks[g][2].Meta().Encoding == parquet.Encodings.Plain
	}
	if !fellBack {
		t.Fatal("no chunk of hc fell back: the case does not pass the limit")
	}
}
