package infer

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/optlake/optlake/schema"
)

// emitAll builds and emits the records of every table that has rows: the
// endpoint's table first, then child tables in the order first met.
func (d *decoder) emitAll(ctx context.Context, emit Emit) error {
	for _, w := range d.order {
		if w.changed {
			w.tbl = w.st.build()
		} else {
			w.tbl = d.committed[w.st.Name].tbl
		}
	}
	for _, w := range d.order {
		if w.nrows == 0 {
			continue
		}
		if err := d.emitTable(ctx, w, emit); err != nil {
			return err
		}
	}
	return d.emitRejects(emit)
}

// emitRejects emits the rejected records as one record of schema.Rejects.
func (d *decoder) emitRejects(emit Emit) error {
	if len(d.rejects) == 0 {
		return nil
	}
	t := schema.Rejects
	b := array.NewRecordBuilder(d.opt.Mem, t.ArrowSchema())
	defer b.Release()
	for _, rj := range d.rejects {
		b.Field(t.MustIndex("snapshot_time")).(*array.TimestampBuilder).Append(arrow.Timestamp(d.meta.Time.UnixMilli()))
		b.Field(t.MustIndex("run_id")).(*array.StringBuilder).Append(d.meta.RunID)
		b.Field(t.MustIndex("source")).(*array.StringBuilder).Append(d.meta.Source)
		b.Field(t.MustIndex("endpoint")).(*array.StringBuilder).Append(d.meta.Endpoint)
		b.Field(t.MustIndex("row_index")).(*array.Int64Builder).Append(d.meta.RecordOffset + int64(rj.index))
		b.Field(t.MustIndex("reason")).(*array.StringBuilder).Append(rj.reason)
		b.Field(t.MustIndex("raw")).(*array.StringBuilder).Append(rj.raw)
	}
	rec := b.NewRecord()
	defer rec.Release()
	return emit(t, rec)
}

func (d *decoder) emitTable(ctx context.Context, w *work, emit Emit) error {
	b := array.NewRecordBuilder(d.opt.Mem, w.tbl.ArrowSchema())
	defer b.Release()
	nMeta := len(w.tbl.Columns) - len(w.st.Cols)
	snap := arrow.Timestamp(d.meta.Time.UnixMilli())
	for lo := 0; lo < w.nrows; lo += d.opt.BatchRows {
		if err := ctx.Err(); err != nil {
			return err
		}
		hi := min(lo+d.opt.BatchRows, w.nrows)
		n := hi - lo
		b.Reserve(n)
		ts := b.Field(0).(*array.TimestampBuilder)
		run := b.Field(1).(*array.StringBuilder)
		src := b.Field(2).(*array.StringBuilder)
		acc := b.Field(3).(*array.StringBuilder)
		idx := b.Field(4).(*array.Int64Builder)
		for r := lo; r < hi; r++ {
			ts.Append(snap)
			run.Append(d.meta.RunID)
			src.Append(d.meta.Source)
			acc.Append(d.meta.Account)
			idx.Append(w.offset + int64(r))
		}
		if w.st.Parent != "" {
			pb := b.Field(5).(*array.Int64Builder)
			pb.AppendValues(w.parents[lo:hi], nil)
		}
		for c, col := range w.st.Cols {
			fb := b.Field(nMeta + c)
			var vals []value
			if c < len(w.vals) {
				vals = w.vals[c]
			}
			for r := lo; r < hi; r++ {
				var v value
				if r < len(vals) {
					v = vals[r]
				}
				if err := appendCell(fb, col, v); err != nil {
					return fmt.Errorf("infer: table %s column %s row %d: %w", w.st.Name, col.Name, r, err)
				}
			}
		}
		rec := b.NewRecord()
		err := emit(w.tbl, rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

func appendCell(b array.Builder, col *colState, v value) error {
	if !col.List {
		return appendScalar(b, col.Type, v)
	}
	lb, ok := b.(*array.ListBuilder)
	if !ok {
		return fmt.Errorf("builder %T for a list", b)
	}
	lb.Append(true) // never null: a missing list is empty
	vb := lb.ValueBuilder()
	for _, e := range v.list {
		if err := appendScalar(vb, col.Type, e); err != nil {
			return err
		}
	}
	return nil
}

func appendScalar(b array.Builder, typ schema.Type, v value) error {
	if v.k == vNull {
		b.AppendNull()
		return nil
	}
	switch typ {
	case schema.String:
		if sb, ok := b.(*array.StringBuilder); ok && v.k != vBool {
			sb.Append(v.s)
			return nil
		}
	case schema.Int64:
		if ib, ok := b.(*array.Int64Builder); ok && v.k == vInt {
			ib.Append(v.i)
			return nil
		}
	case schema.Float64:
		if fb, ok := b.(*array.Float64Builder); ok {
			switch v.k {
			case vInt:
				fb.Append(float64(v.i))
				return nil
			case vFloat:
				fb.Append(v.f)
				return nil
			}
		}
	case schema.Bool:
		if bb, ok := b.(*array.BooleanBuilder); ok && v.k == vBool {
			bb.Append(v.b)
			return nil
		}
	case schema.TimestampMs:
		if tb, ok := b.(*array.TimestampBuilder); ok && v.k == vInt {
			tb.Append(arrow.Timestamp(v.i))
			return nil
		}
	}
	// The routing rules never store such a value; fail loudly rather than
	// load a wrong one.
	return fmt.Errorf("value of kind %s in a %s column (builder %T)", v.k.kindName(), typ, b)
}
