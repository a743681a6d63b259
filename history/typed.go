package history

import (
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
)

// errNotTyped says a column is of a type readTyped does not read: the file
// is read through pqarrow instead (readRows).
var errNotTyped = errors.New("a column readTyped does not read")

// kind is how readTyped reads a column and which of row's methods gives
// its values (the Arrow type pqarrow would read it as).
type kind int

const (
	kNone  kind = iota // an integer that is no timestamp: no method gives it
	kBytes             // binary, not a string: no method gives it
	kFloat
	kBool
	kTime
	kString
)

// kindOf is the kind of column c, errNotTyped for the others.
func kindOf(c *pqschema.Column) (kind, time.Duration, error) {
	if c.MaxRepetitionLevel() > 0 {
		return 0, 0, errNotTyped
	}
	lt := c.LogicalType()
	switch c.PhysicalType() {
	case parquet.Types.Double:
		return kFloat, 0, nil
	case parquet.Types.Boolean:
		return kBool, 0, nil
	case parquet.Types.Int64:
		switch t := lt.(type) {
		case pqschema.TimestampLogicalType:
			switch t.TimeUnit() {
			case pqschema.TimeUnitMillis:
				return kTime, time.Millisecond, nil
			case pqschema.TimeUnitMicros:
				return kTime, time.Microsecond, nil
			case pqschema.TimeUnitNanos:
				return kTime, time.Nanosecond, nil
			}
		case pqschema.IntLogicalType, pqschema.NoLogicalType, nil:
			return kNone, 0, nil
		}
	case parquet.Types.ByteArray:
		switch lt.(type) {
		case pqschema.StringLogicalType:
			return kString, 0, nil
		case pqschema.NoLogicalType, nil:
			if c.ConvertedType() == pqschema.ConvertedTypes.UTF8 {
				return kString, 0, nil
			}
			return kBytes, 0, nil
		}
	}
	return 0, 0, errNotTyped
}

// typedCol is one column's values of the rows read: valid[i] says row i
// is not null, its value in the slice of the column's kind.
type typedCol struct {
	kind  kind
	unit  time.Duration
	valid []bool
	f     []float64
	b     []bool
	i     []int64
	s     []string
}

// typedRow is row i of the columns read; it gives what parquetRow gives
// for the same columns read by pqarrow (nil for null, or for a column of
// another kind).
type typedRow struct {
	c map[string]*typedCol
	i int
}

func (r typedRow) col(n string, k kind) *typedCol {
	c := r.c[n]
	if c == nil || c.kind != k || !c.valid[r.i] {
		return nil
	}
	return c
}

func (r typedRow) str(n string) *string {
	if c := r.col(n, kString); c != nil {
		return &c.s[r.i]
	}
	return nil
}

func (r typedRow) f64(n string) *float64 {
	if c := r.col(n, kFloat); c != nil {
		v := c.f[r.i]
		return &v
	}
	return nil
}

func (r typedRow) boolean(n string) *bool {
	if c := r.col(n, kBool); c != nil {
		v := c.b[r.i]
		return &v
	}
	return nil
}

func (r typedRow) time(n string) *time.Time {
	if c := r.col(n, kTime); c != nil {
		v := c.i[r.i]
		var t time.Time
		switch c.unit { // as arrow.Timestamp.ToTime
		case time.Millisecond:
			t = time.UnixMilli(v).UTC()
		case time.Microsecond:
			t = time.UnixMicro(v).UTC()
		default:
			t = time.Unix(0, v).UTC()
		}
		return &t
	}
	return nil
}

// skipBatch is how many rows readTyped skips at a time: arrow-go's skip
// takes a buffer of levels as long as the rows skipped at once (SeekToRow
// skips a row group's ~65,000 rows at once, a fresh buffer a column a day).
const skipBatch = 8 << 10

// readTyped reads the columns idx of m's rows of row group rg, through
// arrow-go's column readers (skipping the rows before m.lo a page at a
// time, or by skipBatch in a page), and hands each row that holds the
// instrument to row. errNotTyped, before reading, when a column is of a
// type it does not read.
func readTyped(rg *file.RowGroupReader, idx []int, m matches, row func(typedRow), n *Reads) error {
	sc := rg.MetaData().Schema
	cols := make(map[string]*typedCol, len(idx))
	kinds := make([]kind, len(idx))
	units := make([]time.Duration, len(idx))
	for j, i := range idx {
		k, u, err := kindOf(sc.Column(i))
		if err != nil {
			return err
		}
		kinds[j], units[j] = k, u
	}
	want := m.hi - m.lo
	for j, i := range idx {
		c := &typedCol{kind: kinds[j], unit: units[j]}
		if err := readColumn(rg, i, m.lo, want, c); err != nil {
			return fmt.Errorf("%s: %w", sc.Column(i).Name(), err)
		}
		cols[sc.Column(i).Name()] = c
	}
	n.Rows += want
	for i := range int(want) {
		if m.has(m.lo + int64(i)) {
			row(typedRow{cols, i})
		}
	}
	return nil
}

// readColumn reads rows [lo, lo+want) of column i into c.
func readColumn(rg *file.RowGroupReader, i int, lo, want int64, c *typedCol) error {
	cr, err := rg.Column(i)
	if err != nil {
		return err
	}
	defer cr.Close()
	for left := lo; left > 0; {
		k := min(left, skipBatch)
		var got int64
		switch r := cr.(type) {
		case *file.Float64ColumnChunkReader:
			got, err = r.Skip(k)
		case *file.BooleanColumnChunkReader:
			got, err = r.Skip(k)
		case *file.Int64ColumnChunkReader:
			got, err = r.Skip(k)
		case *file.ByteArrayColumnChunkReader:
			got, err = r.Skip(k)
		default:
			return errNotTyped
		}
		if err != nil {
			return err
		}
		if got <= 0 {
			return fmt.Errorf("row group ends before row %d", lo)
		}
		left -= got
	}
	defs := make([]int16, want)
	maxDef := cr.Descriptor().MaxDefinitionLevel()
	read := func(f func(done int64) (int64, int, error)) (int, error) {
		var done int64
		var vals int
		for done < want {
			levels, nv, err := f(done)
			if err != nil {
				return 0, err
			}
			if levels == 0 {
				return 0, fmt.Errorf("%d rows of %d after row %d", done, want, lo)
			}
			done += levels
			vals += nv
		}
		return vals, nil
	}
	var nv int
	switch r := cr.(type) {
	case *file.Float64ColumnChunkReader:
		c.f = make([]float64, want)
		nv, err = read(func(done int64) (int64, int, error) {
			return r.ReadBatch(want-done, c.f[vals(c.f, done, defs, maxDef):], defs[done:], nil)
		})
	case *file.BooleanColumnChunkReader:
		c.b = make([]bool, want)
		nv, err = read(func(done int64) (int64, int, error) {
			return r.ReadBatch(want-done, c.b[vals(c.b, done, defs, maxDef):], defs[done:], nil)
		})
	case *file.Int64ColumnChunkReader:
		c.i = make([]int64, want)
		nv, err = read(func(done int64) (int64, int, error) {
			return r.ReadBatch(want-done, c.i[vals(c.i, done, defs, maxDef):], defs[done:], nil)
		})
	case *file.ByteArrayColumnChunkReader:
		ba := make([]parquet.ByteArray, want)
		nv, err = read(func(done int64) (int64, int, error) {
			return r.ReadBatch(want-done, ba[vals(ba, done, defs, maxDef):], defs[done:], nil)
		})
		c.s = make([]string, want)
		for j := range ba[:nv] {
			c.s[j] = string(ba[j])
		}
	default:
		return errNotTyped
	}
	if err != nil {
		return err
	}
	// Spread the nv values read densely over the rows: row j holds one
	// when its definition level is the column's maximum.
	c.valid = make([]bool, want)
	v := nv
	for j := want - 1; j >= 0; j-- {
		if maxDef > 0 && defs[j] < maxDef {
			continue
		}
		v--
		if v < 0 {
			return fmt.Errorf("%d values for more rows", nv)
		}
		c.valid[j] = true
		switch c.kind {
		case kFloat:
			c.f[j] = c.f[v]
		case kBool:
			c.b[j] = c.b[v]
		case kTime, kNone:
			c.i[j] = c.i[v]
		case kString, kBytes:
			c.s[j] = c.s[v]
		}
	}
	if v != 0 {
		return fmt.Errorf("%d values for %d rows", nv, nv-v)
	}
	return nil
}

// vals is how many values (not nulls) the first done rows held: where
// the next batch's values go.
func vals[T any](_ []T, done int64, defs []int16, maxDef int16) int64 {
	if maxDef == 0 {
		return done
	}
	var k int64
	for _, d := range defs[:done] {
		if d == maxDef {
			k++
		}
	}
	return k
}
