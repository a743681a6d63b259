package history

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// readTyped (arrow-go's typed column readers, no Arrow arrays) gives each
// row what pqarrow's record reader gives (readRows), through every method
// of row, for every range of rows: doubles, booleans, ms and µs
// timestamps, plain integers, strings and binary, with nulls, on pages of
// a few rows and of many, PLAIN and with dictionaries, ranges at a row
// group's start, across pages and at its end. A column of another type
// says errNotTyped.
func TestReadTypedReadsWhatPqarrowReads(t *testing.T) {
	ctx := context.Background()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "ms", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "us", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: false},
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
	}, nil)
	const rows = 3000
	rnd := rand.New(rand.NewPCG(1, 2))
	bld := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer bld.Release()
	null := func() bool { return rnd.IntN(7) == 0 }
	for k := range rows {
		fb := bld.Field(0).(*array.Float64Builder)
		if null() {
			fb.AppendNull()
		} else {
			fb.Append(float64(k/50) + 0.25)
		}
		if bb := bld.Field(1).(*array.BooleanBuilder); null() {
			bb.AppendNull()
		} else {
			bb.Append(k%3 == 0)
		}
		if tb := bld.Field(2).(*array.TimestampBuilder); null() {
			tb.AppendNull()
		} else {
			tb.Append(arrow.Timestamp(32503680000000 + int64(k)*300000)) // year 3000 and on
		}
		bld.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(1_790_000_000_000_000 + int64(k)))
		if ib := bld.Field(4).(*array.Int64Builder); null() {
			ib.AppendNull()
		} else {
			ib.Append(int64(k))
		}
		if sb := bld.Field(5).(*array.StringBuilder); null() {
			sb.AppendNull()
		} else {
			sb.Append(fmt.Sprintf("BTC-%d", k/70))
		}
		if bb := bld.Field(6).(*array.BinaryBuilder); null() {
			bb.AppendNull()
		} else {
			bb.Append([]byte{byte(k)})
		}
	}
	rec := bld.NewRecord()
	defer rec.Release()
	for _, c := range []struct {
		name  string
		props []parquet.WriterProperty
	}{
		{"plain, small pages", []parquet.WriterProperty{parquet.WithDictionaryDefault(false), parquet.WithDataPageSize(300)}},
		{"plain, one page", []parquet.WriterProperty{parquet.WithDictionaryDefault(false)}},
		{"dictionary, small pages", []parquet.WriterProperty{parquet.WithDictionaryDefault(true), parquet.WithDataPageSize(200)}},
		{"dictionary V2", []parquet.WriterProperty{parquet.WithDictionaryDefault(true), parquet.WithDataPageVersion(parquet.DataPageV2)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pf := writeRecord(t, rec, append([]parquet.WriterProperty{parquet.WithMaxRowGroupLength(1200), parquet.WithBatchSize(100)}, c.props...))
			fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator)
			if err != nil {
				t.Fatal(err)
			}
			idx := []int{0, 1, 2, 3, 4, 5, 6}
			names := []string{"f", "b", "ms", "us", "i", "s", "bin"}
			for g := range pf.NumRowGroups() {
				n := pf.RowGroup(g).NumRows()
				for _, r := range [][2]int64{{0, 1}, {0, n}, {17, 389}, {n - 5, n}, {n / 2, n/2 + 1}, {299, min(901, n)}} {
					m := matches{lo: r[0], hi: r[1], all: true}
					var got, want []string
					var rd Reads
					if err := readTyped(pf.RowGroup(g), idx, m, func(x typedRow) { got = append(got, show(x, names)) }, &rd); err != nil {
						t.Fatalf("row group %d, rows %v: %v", g, r, err)
					}
					if err := readRows(ctx, fr, g, idx, m, func(c cols, i int) { want = append(want, show(parquetRow{c, i}, names)) }, &rd); err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) {
						for i := range min(len(got), len(want)) {
							if got[i] != want[i] {
								t.Fatalf("row group %d, rows %v: row %d\n got %s\nwant %s", g, r, i, got[i], want[i])
							}
						}
						t.Fatalf("row group %d, rows %v: %d rows, pqarrow %d", g, r, len(got), len(want))
					}
				}
			}
		})
	}
	// A column of another type (float32): nothing read, errNotTyped.
	f32 := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Float32}}, nil)
	b := array.NewFloat32Builder(memory.DefaultAllocator)
	b.AppendValues([]float32{1, 2}, nil)
	a := b.NewArray()
	r32 := array.NewRecord(f32, []arrow.Array{a}, 2)
	pf := writeRecord(t, r32, nil)
	if err := readTyped(pf.RowGroup(0), []int{0}, matches{lo: 0, hi: 2, all: true}, func(typedRow) {}, &Reads{}); !errors.Is(err, errNotTyped) {
		t.Fatalf("a float32 column: %v, want errNotTyped", err)
	}
}

// show renders every method of r on every column.
func show(r row, names []string) string {
	var out string
	for _, n := range names {
		out += fmt.Sprintf("%s:", n)
		if v := r.str(n); v != nil {
			out += fmt.Sprintf(" s=%q", *v)
		}
		if v := r.f64(n); v != nil {
			out += fmt.Sprintf(" f=%v", *v)
		}
		if v := r.boolean(n); v != nil {
			out += fmt.Sprintf(" b=%v", *v)
		}
		if v := r.time(n); v != nil {
			out += " t=" + v.Format(time.RFC3339Nano) + v.Location().String()
		}
		out += "; "
	}
	return out
}
