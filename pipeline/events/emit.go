package events

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/schema"
)

// emitter renders events as records of schema.InstrumentEvents.
//
// It gathers a record's events column by column (names, kinds, fields,
// rendered values) in scratch slices reused from one record to the next,
// and builds each column's Arrow buffers at once when the record is full.
// The columns that are the same on every row of a snapshot (snapshot_time,
// run_id, source, previous_snapshot_time) are built once per record length
// and shared by the records of that length: a first snapshot of 1,000,000
// instruments emits as many events, 31 full records of the same length.
type emitter struct {
	d     *Differ
	emit  func(*schema.Table, arrow.Record) error
	stats *Stats
	sc    *arrow.Schema
	cols  [10]int // column indexes: see the col* constants
	mem   memory.Allocator

	// The pending record.
	n          int
	kinds      []Kind
	initial    []bool
	name       strCol
	field      strCol
	old, new   strCol
	hasInitial bool // some pending row has initial = true
	// listed counts the pending rows, from the first, that are listed
	// events whose other columns were not gathered (see add): a record of
	// listed events only (a first snapshot's) is their names and the
	// constant columns of listedCols.
	listed int

	// consts holds the constant columns of records of constN rows.
	constN int
	consts [4]arrow.Array
	// listedCols holds the columns event, field, old_value, new_value and
	// initial of a record of listedN listed events.
	listedN    int
	listedCols [5]arrow.Array
	err        error
}

// The columns of schema.InstrumentEvents the emitter fills, in emitter.cols.
const (
	ecSnapshot = iota
	ecRun
	ecSource
	ecPrev
	ecName
	ecEvent
	ecField
	ecOld
	ecNew
	ecInitial
)

var emitterColumns = [10]string{"snapshot_time", "run_id", "source", "previous_snapshot_time",
	"instrument_name", "event", "field", "old_value", "new_value", "initial"}

// strCol gathers the values of a string column: data, the end offset of
// each value, and which values are null.
type strCol struct {
	data  []byte
	ends  []int32
	null  []bool
	nulls int
}

// addStr adds a value (a string or its bytes) to c.
func addStr[S string | []byte](c *strCol, s S) {
	c.data = append(c.data, s...)
	c.ends = append(c.ends, int32(len(c.data)))
	c.null = append(c.null, false)
}

func (c *strCol) addNull() {
	c.ends = append(c.ends, int32(len(c.data)))
	c.null = append(c.null, true)
	c.nulls++
}

// addValue renders a payload item of type t (appendRender), null for a
// null item.
func (c *strCol) addValue(it []byte, t schema.Type) {
	var null bool
	if c.data, null = appendRender(c.data, it, t); null {
		c.addNull()
		return
	}
	c.ends = append(c.ends, int32(len(c.data)))
	c.null = append(c.null, false)
}

func (c *strCol) reset() {
	c.data, c.ends, c.null, c.nulls = c.data[:0], c.ends[:0], c.null[:0], 0
}

func newBuffer(mem memory.Allocator, n int) *memory.Buffer {
	b := memory.NewResizableBuffer(mem)
	b.Resize(n)
	return b
}

// validity returns the validity bitmap of null (nil when nothing is null).
func validity(mem memory.Allocator, null []bool, nulls int) *memory.Buffer {
	if nulls == 0 {
		return nil
	}
	b := newBuffer(mem, int(bitutil.BytesForBits(int64(len(null)))))
	bm := b.Bytes()
	clear(bm)
	for i, isNull := range null {
		if !isNull {
			bitutil.SetBit(bm, i)
		}
	}
	return b
}

// array builds the column's string array.
func (c *strCol) array(mem memory.Allocator) arrow.Array {
	n := len(c.ends)
	offs := newBuffer(mem, (n+1)*4)
	ob := offs.Bytes()
	binary.LittleEndian.PutUint32(ob, 0)
	for i, e := range c.ends {
		binary.LittleEndian.PutUint32(ob[4*(i+1):], uint32(e))
	}
	data := newBuffer(mem, len(c.data))
	copy(data.Bytes(), c.data)
	valid := validity(mem, c.null, c.nulls)
	d := array.NewData(arrow.BinaryTypes.String, n, []*memory.Buffer{valid, offs, data}, nil, c.nulls, 0)
	release(valid, offs, data)
	defer d.Release()
	return array.MakeFromData(d)
}

func release(bs ...*memory.Buffer) {
	for _, b := range bs {
		if b != nil {
			b.Release()
		}
	}
}

// constString returns an array of n times s.
func constString(mem memory.Allocator, s string, n int) arrow.Array {
	offs := newBuffer(mem, (n+1)*4)
	ob := offs.Bytes()
	for i := range n + 1 {
		binary.LittleEndian.PutUint32(ob[4*i:], uint32(i*len(s)))
	}
	data := newBuffer(mem, n*len(s))
	if db := data.Bytes(); len(db) > 0 {
		copy(db, s)
		for k := len(s); k < len(db); k *= 2 {
			copy(db[k:], db[:k])
		}
	}
	d := array.NewData(arrow.BinaryTypes.String, n, []*memory.Buffer{nil, offs, data}, nil, 0, 0)
	release(offs, data)
	defer d.Release()
	return array.MakeFromData(d)
}

// constTimestamp returns an array of n times v (all null when null).
func constTimestamp(mem memory.Allocator, typ arrow.DataType, v int64, null bool, n int) arrow.Array {
	vals := newBuffer(mem, 8*n)
	vb := vals.Bytes()
	var valid *memory.Buffer
	nulls := 0
	if null {
		clear(vb)
		valid = newBuffer(mem, int(bitutil.BytesForBits(int64(n))))
		clear(valid.Bytes())
		nulls = n
	} else {
		for i := range n {
			binary.LittleEndian.PutUint64(vb[8*i:], uint64(v))
		}
	}
	d := array.NewData(typ, n, []*memory.Buffer{valid, vals}, nil, nulls, 0)
	release(valid, vals)
	defer d.Release()
	return array.MakeFromData(d)
}

// eventsSchema is schema.InstrumentEvents' Arrow schema, built once.
var eventsSchema = sync.OnceValue(schema.InstrumentEvents.ArrowSchema)

func (d *Differ) newEmitter(emit func(*schema.Table, arrow.Record) error, stats *Stats) (*emitter, error) {
	t := schema.InstrumentEvents
	sc := eventsSchema()
	if sc.NumFields() != len(emitterColumns) {
		return nil, fmt.Errorf("instrument events: schema.InstrumentEvents has %d columns, this package fills %d", sc.NumFields(), len(emitterColumns))
	}
	e := d.opt.Reuse.emitter()
	e.d, e.emit, e.stats, e.sc, e.mem = d, emit, stats, sc, d.opt.Mem
	for i, name := range emitterColumns {
		e.cols[i] = t.MustIndex(name)
	}
	return e, nil
}

// release drops the shared constant columns and gives the emitter's
// scratch slices back to the Differ's Reuse (if any).
func (e *emitter) release() {
	releaseAll(e.consts[:])
	releaseAll(e.listedCols[:])
	e.d.opt.Reuse.putEmitter(e)
}

func releaseAll(as []arrow.Array) {
	for i, a := range as {
		if a != nil {
			a.Release()
			as[i] = nil
		}
	}
}

// listedColumns returns the columns event, field, old_value, new_value
// and initial of a record of n listed events.
func (e *emitter) listedColumns(n int) [5]arrow.Array {
	if e.listedN != n || e.listedCols[0] == nil {
		releaseAll(e.listedCols[:])
		mem := e.mem
		nulls := strCol{ends: make([]int32, n), null: make([]bool, n), nulls: n}
		for i := range nulls.null {
			nulls.null[i] = true
		}
		bits := newBuffer(mem, int(bitutil.BytesForBits(int64(n))))
		bm := bits.Bytes()
		clear(bm)
		if !e.d.prev.hasSnap {
			bitutil.SetBitsTo(bm, 0, int64(n), true)
		}
		bd := array.NewData(arrow.FixedWidthTypes.Boolean, n, []*memory.Buffer{nil, bits}, nil, 0, 0)
		bits.Release()
		e.listedCols = [5]arrow.Array{
			constString(mem, kindNames[Listed], n),
			constString(mem, "", n),
			nulls.array(mem),
			nulls.array(mem),
			array.MakeFromData(bd),
		}
		bd.Release()
		e.listedN = n
	}
	return e.listedCols
}

// unlist gathers the columns of the pending listed events that add left
// out, before an event of another kind joins them.
func (e *emitter) unlist() {
	n := e.listed
	e.listed = 0
	initial := !e.d.prev.hasSnap
	for range n {
		e.kinds = append(e.kinds, Listed)
		addStr(&e.field, "")
		e.old.addNull()
		e.new.addNull()
		e.initial = append(e.initial, initial)
	}
	e.hasInitial = e.hasInitial || initial && n > 0
}

// constants returns the constant columns of a record of n rows.
func (e *emitter) constants(n int) [4]arrow.Array {
	if e.constN != n || e.consts[0] == nil {
		releaseAll(e.consts[:]) // the listed columns stay: their length is checked apart
		d, ts := e.d, e.sc.Field(e.cols[ecSnapshot]).Type
		e.consts = [4]arrow.Array{
			ecSnapshot: constTimestamp(e.mem, ts, d.b.snapMs, false, n),
			ecRun:      constString(e.mem, d.meta.RunID, n),
			ecSource:   constString(e.mem, d.meta.Source, n),
			ecPrev:     constTimestamp(e.mem, e.sc.Field(e.cols[ecPrev]).Type, d.prev.snapMs, !d.prev.hasSnap, n),
		}
		e.constN = n
	}
	return e.consts
}

// flush emits the pending events as one record.
func (e *emitter) flush() error {
	if e.err != nil || e.n == 0 {
		return e.err
	}
	n, mem := e.n, e.mem
	var cols [10]arrow.Array
	consts := e.constants(n)
	for i, a := range consts {
		a.Retain()
		cols[i] = a
	}
	cols[ecName] = e.name.array(mem)
	if e.listed == n {
		lc := e.listedColumns(n)
		for i, a := range lc {
			a.Retain()
			cols[ecEvent+i] = a
		}
		e.listed = 0
		e.name.reset()
		return e.emitRecord(cols, n)
	}
	var ev strCol
	ev.data = make([]byte, 0, n*len("deactivated"))
	for _, k := range e.kinds {
		addStr(&ev, kindNames[k])
	}
	cols[ecEvent] = ev.array(mem)
	cols[ecField] = e.field.array(mem)
	cols[ecOld] = e.old.array(mem)
	cols[ecNew] = e.new.array(mem)
	bits := newBuffer(mem, int(bitutil.BytesForBits(int64(n))))
	bm := bits.Bytes()
	clear(bm)
	if e.hasInitial {
		for i, v := range e.initial {
			if v {
				bitutil.SetBit(bm, i)
			}
		}
	}
	bd := array.NewData(arrow.FixedWidthTypes.Boolean, n, []*memory.Buffer{nil, bits}, nil, 0, 0)
	bits.Release()
	cols[ecInitial] = array.MakeFromData(bd)
	bd.Release()
	e.n, e.hasInitial = 0, false
	e.kinds, e.initial = e.kinds[:0], e.initial[:0]
	e.name.reset()
	e.field.reset()
	e.old.reset()
	e.new.reset()
	return e.emitRecord(cols, n)
}

// emitRecord emits the columns (the emitter's column order) as a record of
// n rows, releasing them.
func (e *emitter) emitRecord(cols [10]arrow.Array, n int) error {
	e.n = 0
	ordered := make([]arrow.Array, len(cols))
	for i, a := range cols {
		ordered[e.cols[i]] = a
	}
	rec := array.NewRecord(e.sc, ordered, int64(n))
	for _, a := range cols {
		a.Release()
	}
	err := e.emit(schema.InstrumentEvents, rec)
	rec.Release()
	if err != nil {
		e.err = fmt.Errorf("instrument events: %s: emit: %w", e.d.meta.Source, err)
	}
	return e.err
}

// add appends one event; old and new are the field's items for flips and
// changes. A full batch is emitted; an emit error is kept in e.err.
//
// A listed event that only listed events precede in the pending record
// adds its name alone (e.listed): the rest of its row is the same for
// all, and a record of listed events only takes the shared columns of
// listedColumns.
func (e *emitter) add(kind Kind, name []byte, field int, old, new []byte) {
	if kind == Listed && e.listed == e.n {
		e.n++
		e.listed++
		addStr(&e.name, name)
		e.count(kind)
		return
	}
	if e.listed > 0 {
		e.unlist()
	}
	e.n++
	e.kinds = append(e.kinds, kind)
	addStr(&e.name, name)
	switch kind {
	case Listed, Delisted, Expired:
		addStr(&e.field, "")
		e.old.addNull()
		e.new.addNull()
		initial := kind == Listed && !e.d.prev.hasSnap
		e.initial = append(e.initial, initial)
		e.hasInitial = e.hasInitial || initial
	default:
		f := fields[field]
		addStr(&e.field, f.name)
		e.old.addValue(old, f.typ)
		e.new.addValue(new, f.typ)
		e.initial = append(e.initial, false)
	}
	e.count(kind)
}

// count counts an added event and emits a full record.
func (e *emitter) count(kind Kind) {
	e.stats.Events++
	e.stats.ByKind[kind]++
	if e.n >= e.d.opt.BatchRows {
		e.flush()
	}
}
