package iceberg

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	icego "github.com/optlake/optlake/third_party/iceberg-go"
	icetable "github.com/optlake/optlake/third_party/iceberg-go/table"
)

// CheckFiles checks every data file the current snapshot of table name
// references against the file itself, read row by row (not its footer's
// statistics): the record count and size, each top-level column's value
// and null counts and bounds (timestamps in microseconds; a string's
// bounds may be truncated as Iceberg's default metrics do, the lower one
// to a prefix of the smallest value, the upper one to a value above the
// largest), and the day partition of every row. A column whose footer has
// statistics and that has a value must have bounds (else no engine could
// prune on it; but the lower bound "" of a string column, which iceberg-go
// leaves out); a column whose footer has none (a hive lake's file that
// convert registered) must have neither bounds nor a null count. A file
// that names a sort order has its rows in it. It returns how
// many files it checked; ok is false when the table does not exist.
//
// Readers that prune (ClickHouse, pyiceberg, Trino, DuckDB) trust exactly
// these numbers: a wrong bound or partition silently drops rows.
func (l *Warehouse) CheckFiles(ctx context.Context, name string) (n int, ok bool, err error) {
	tbl, ok, err := l.Table(ctx, name)
	if err != nil || !ok || tbl.CurrentSnapshot() == nil {
		return 0, ok, err
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return 0, true, fmt.Errorf("iceberg table %s: plan files: %w", name, err)
	}
	io := l.cat.io(ctx)
	var errs []error
	for _, task := range tasks {
		rel, err := io.name(task.File.FilePath())
		if err != nil {
			return n, true, err
		}
		if err := l.checkFile(ctx, rel, task.File, tbl.Schema(), tbl.Spec(), tbl.Metadata().SortOrders()); err != nil {
			errs = append(errs, fmt.Errorf("iceberg table %s: %s: %w", name, rel, err))
		}
		n++
	}
	return n, true, errors.Join(errs...)
}

func (l *Warehouse) checkFile(ctx context.Context, rel string, df icego.DataFile, sc *icego.Schema, spec icego.PartitionSpec, orders []icetable.SortOrder) error {
	r, err := l.cat.st.Open(ctx, rel)
	if err != nil {
		return err
	}
	defer r.Close()
	var errs []error
	if df.FileSizeBytes() != r.Size() {
		errs = append(errs, fmt.Errorf("size %d in the manifest, %d in the store", df.FileSizeBytes(), r.Size()))
	}
	pf, err := file.NewParquetReader(io.NewSectionReader(r, 0, r.Size()))
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	at, err := fr.ReadTable(ctx)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	defer at.Release()
	if df.Count() != at.NumRows() {
		errs = append(errs, fmt.Errorf("%d records in the manifest, %d in the file", df.Count(), at.NumRows()))
	}
	days := map[string]int32{} // column -> the day of its values (µs since the epoch / day)
	for i, f := range at.Schema().Fields() {
		field, ok := sc.FindFieldByName(f.Name)
		if !ok {
			errs = append(errs, fmt.Errorf("column %s is not in the table's schema", f.Name))
			continue
		}
		if _, prim := field.Type.(icego.PrimitiveType); !prim {
			continue // a list: Iceberg bounds its elements, not checked here
		}
		st, err := columnStats(at.Column(i).Data().Chunks())
		if err != nil {
			errs = append(errs, fmt.Errorf("column %s: %w", f.Name, err))
			continue
		}
		st.footer = footerStats(pf, f.Name)
		if err := st.check(field.ID, df); err != nil {
			errs = append(errs, fmt.Errorf("column %s: %w", f.Name, err))
		}
		if st.ts && st.values > st.nulls {
			lo, hi := dayOf(st.lo), dayOf(st.hi)
			if lo == hi {
				days[f.Name] = lo
			} else {
				days[f.Name] = math.MinInt32 // rows of more than one day
			}
		}
	}
	for _, pf := range spec.Fields() {
		if _, isDay := pf.Transform.(icego.DayTransform); !isDay {
			continue
		}
		src, ok := sc.FindFieldByID(pf.SourceID())
		if !ok {
			continue
		}
		want, ok := days[src.Name]
		got, has := df.Partition()[pf.FieldID]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("partition %s: the file has no %s values", pf.Name, src.Name))
		case want == math.MinInt32:
			errs = append(errs, fmt.Errorf("partition %s: the file's rows span more than one day", pf.Name))
		case !has || fmt.Sprint(got) != fmt.Sprint(want):
			errs = append(errs, fmt.Errorf("partition %s = %v in the manifest, the file's rows are of day %d", pf.Name, got, want))
		}
	}
	if id := df.SortOrderID(); id != nil && *id != 0 {
		if err := checkSorted(at, sc, orders, *id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkSorted checks that the rows of at are in the table's sort order id
// (identity fields of string, int64 or timestamp columns, ascending or
// descending, nulls first or last), as the manifest claims.
func checkSorted(at arrow.Table, sc *icego.Schema, orders []icetable.SortOrder, id int) error {
	var order *icetable.SortOrder
	for i := range orders {
		if orders[i].OrderID() == id {
			order = &orders[i]
		}
	}
	if order == nil {
		return fmt.Errorf("sort order %d is not the table's", id)
	}
	type key struct {
		col       []arrow.Array
		desc, nlo bool // descending; nulls before values
	}
	var keys []key
	for _, f := range order.Fields() {
		src, ok := sc.FindFieldByID(f.SourceIDs[0])
		if _, identity := f.Transform.(icego.IdentityTransform); !ok || !identity {
			return fmt.Errorf("sort order %d: field %v not checked", id, f)
		}
		idx := at.Schema().FieldIndices(src.Name)
		if len(idx) == 0 {
			return fmt.Errorf("sort order %d: the file has no column %s", id, src.Name)
		}
		keys = append(keys, key{col: at.Column(idx[0]).Data().Chunks(), desc: f.Direction == icetable.SortDESC, nlo: f.NullOrder == icetable.NullsFirst})
	}
	// value i of a chunked column
	at1 := func(chunks []arrow.Array, i int) (arrow.Array, int) {
		for _, c := range chunks {
			if i < c.Len() {
				return c, i
			}
			i -= c.Len()
		}
		return nil, 0
	}
	cmpAt := func(k key, i, j int) int {
		a, ai := at1(k.col, i)
		b, bi := at1(k.col, j)
		an, bn := a.IsNull(ai), b.IsNull(bi)
		switch {
		case an && bn:
			return 0
		case an != bn:
			if an == k.nlo {
				return -1
			}
			return 1
		}
		var c int
		switch x := a.(type) {
		case *array.String:
			c = strings.Compare(x.Value(ai), b.(*array.String).Value(bi))
		case *array.Int64:
			c = cmp.Compare(x.Value(ai), b.(*array.Int64).Value(bi))
		case *array.Timestamp:
			c = cmp.Compare(x.Value(ai), b.(*array.Timestamp).Value(bi))
		}
		if k.desc {
			c = -c
		}
		return c
	}
	for i := 1; i < int(at.NumRows()); i++ {
		for _, k := range keys {
			if c := cmpAt(k, i-1, i); c < 0 {
				break
			} else if c > 0 {
				return fmt.Errorf("rows %d and %d are out of the sort order %d the manifest names", i-1, i, id)
			}
		}
	}
	return nil
}

func dayOf(us []byte) int32 {
	v := int64(binary.LittleEndian.Uint64(us))
	d := v / (86400 * 1e6)
	if v < 0 && v%(86400*1e6) != 0 {
		d--
	}
	return int32(d)
}

// colStats is what a column's values are, in Iceberg's single-value
// serialization (lo, hi: nil when every value is null).
type colStats struct {
	values, nulls int64
	lo, hi        []byte
	str, ts, flt  bool
	footer        bool // the file's footer has the column's statistics
}

// footerStats reports whether every row group of pf has statistics of the
// top-level column name.
func footerStats(pf *file.Reader, name string) bool {
	col := pf.MetaData().Schema.ColumnIndexByName(name)
	if col < 0 {
		return false
	}
	for rg := range pf.NumRowGroups() {
		cc, err := pf.MetaData().RowGroup(rg).ColumnChunk(col)
		if err != nil {
			return false
		}
		if ok, err := cc.StatsSet(); err != nil || !ok {
			return false
		}
	}
	return true
}

func columnStats(chunks []arrow.Array) (colStats, error) {
	var s colStats
	for _, c := range chunks {
		s.values += int64(c.Len())
		s.nulls += int64(c.NullN())
		for i := range c.Len() {
			if c.IsNull(i) {
				continue
			}
			var v []byte
			var less func(a, b []byte) bool
			switch a := c.(type) {
			case *array.String:
				s.str = true
				v, less = []byte(a.Value(i)), func(a, b []byte) bool { return bytes.Compare(a, b) < 0 }
			case *array.Int64:
				v, less = le64(uint64(a.Value(i))), lessInt
			case *array.Timestamp:
				s.ts = true
				us, err := micros(a.Value(i), a.DataType().(*arrow.TimestampType).Unit)
				if err != nil {
					return s, err
				}
				v, less = le64(uint64(us)), lessInt
			case *array.Float64:
				f := a.Value(i)
				if math.IsNaN(f) {
					continue
				}
				s.flt = true
				v = le64(math.Float64bits(f))
				less = func(a, b []byte) bool {
					return math.Float64frombits(binary.LittleEndian.Uint64(a)) < math.Float64frombits(binary.LittleEndian.Uint64(b))
				}
			case *array.Boolean:
				v = []byte{0}
				if a.Value(i) {
					v[0] = 1
				}
				less = func(a, b []byte) bool { return a[0] < b[0] }
			default:
				return s, fmt.Errorf("type %s not checked", c.DataType())
			}
			if s.lo == nil || less(v, s.lo) {
				s.lo = v
			}
			if s.hi == nil || less(s.hi, v) {
				s.hi = v
			}
		}
	}
	return s, nil
}

func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func lessInt(a, b []byte) bool {
	return int64(binary.LittleEndian.Uint64(a)) < int64(binary.LittleEndian.Uint64(b))
}

func micros(v arrow.Timestamp, u arrow.TimeUnit) (int64, error) {
	switch u {
	case arrow.Second:
		return int64(v) * 1e6, nil
	case arrow.Millisecond:
		return int64(v) * 1e3, nil
	case arrow.Microsecond:
		return int64(v), nil
	}
	return 0, fmt.Errorf("timestamps in %s", u)
}

// check compares s with the data file's metrics of field id.
func (s colStats) check(id int, df icego.DataFile) error {
	var errs []error
	if got, ok := df.ValueCounts()[id]; !ok || got != s.values {
		errs = append(errs, fmt.Errorf("%d values in the manifest (present %v), %d in the file", got, ok, s.values))
	}
	nulls, hasNulls := df.NullValueCounts()[id]
	lo, hasLo := df.LowerBoundValues()[id]
	hi, hasHi := df.UpperBoundValues()[id]
	if !s.footer {
		// Nothing to copy (a hive lake's file registered by convert):
		// the manifest must not claim anything either.
		if hasNulls || hasLo || hasHi {
			errs = append(errs, errors.New("null count or bounds in the manifest, no statistics in the file"))
		}
		return errors.Join(errs...)
	}
	if !hasNulls || nulls != s.nulls {
		errs = append(errs, fmt.Errorf("%d nulls in the manifest (present %v), %d in the file", nulls, hasNulls, s.nulls))
	}
	switch {
	case s.lo == nil:
		if hasLo || hasHi {
			errs = append(errs, errors.New("bounds in the manifest, no value in the file"))
		}
	case s.str && len(s.lo) == 0 && !hasLo && hasHi:
		// iceberg-go leaves out the lower bound "" (it prunes nothing).
		if bytes.Compare(hi, s.hi) < 0 || utf8.RuneCount(s.hi) <= 16 && !bytes.Equal(hi, s.hi) {
			errs = append(errs, fmt.Errorf("upper bound %q, largest value %q", hi, s.hi))
		}
	case !hasLo || !hasHi:
		errs = append(errs, fmt.Errorf("no bounds in the manifest (values %q..%q): no reader can prune on it", s.lo, s.hi))
	case s.str:
		// Iceberg's default metrics truncate strings to 16 characters: the
		// lower bound is a prefix of the smallest value, the upper bound
		// is above the largest.
		if !bytes.HasPrefix(s.lo, lo) || utf8.RuneCount(lo) < min(16, utf8.RuneCount(s.lo)) {
			errs = append(errs, fmt.Errorf("lower bound %q, smallest value %q", lo, s.lo))
		}
		if bytes.Compare(hi, s.hi) < 0 || utf8.RuneCount(s.hi) <= 16 && !bytes.Equal(hi, s.hi) {
			errs = append(errs, fmt.Errorf("upper bound %q, largest value %q", hi, s.hi))
		}
	case s.flt:
		// -0 and +0 are equal values (Parquet writes -0 for a minimum 0).
		f := func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) }
		if len(lo) != 8 || len(hi) != 8 || f(lo) != f(s.lo) || f(hi) != f(s.hi) {
			errs = append(errs, fmt.Errorf("bounds %x..%x in the manifest, values %x..%x in the file", lo, hi, s.lo, s.hi))
		}
	default:
		if !bytes.Equal(lo, s.lo) || !bytes.Equal(hi, s.hi) {
			errs = append(errs, fmt.Errorf("bounds %x..%x in the manifest, values %x..%x in the file", lo, hi, s.lo, s.hi))
		}
	}
	return errors.Join(errs...)
}
