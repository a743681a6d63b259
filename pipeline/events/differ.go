package events

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"time"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/optlake/optlake/schema"
)

// Builder accumulates the instruments rows of one snapshot of one source
// into a State. Use it (or Rebuild) to recreate a lost state file from the
// instruments table of the last snapshot; a Differ uses one internally. A
// Builder is not safe for concurrent use.
type Builder struct {
	st     *State
	snapMs int64
	prev   *State  // when diffing: the state compared against
	prevOf []int32 // per entry of st: its entry in prev, or -1
	guess  int     // the prev entry the next row probably matches
	cols   []column
	buf    []byte
	stats  Stats
	err    error // the first Observe error: the rows seen are incomplete
	done   bool
}

// NewBuilder returns a Builder for the snapshot of source taken at
// snapshotTime. sizeHint (may be 0) is the expected number of instruments.
func NewBuilder(source string, snapshotTime time.Time, sizeHint int) *Builder {
	return newBuilder(source, snapshotTime.UnixMilli(), sizeHint)
}

func newBuilder(source string, snapMs int64, hint int) *Builder {
	st := &State{source: source, ents: make([]entry, 0, hint)}
	st.idx.seed = maphash.MakeSeed() // the index is built by State
	return &Builder{st: st, snapMs: snapMs}
}

// column is one input column of the record being observed.
type column struct {
	arr   arrow.Array
	nulls bool
	str   *array.String
	f64   []float64
	i64   []int64
	ts    []arrow.Timestamp
	bln   *array.Boolean
}

func (c *column) set(a arrow.Array) {
	*c = column{arr: a, nulls: a.NullN() > 0}
	switch a := a.(type) {
	case *array.String:
		c.str = a
	case *array.Float64:
		c.f64 = a.Float64Values()
	case *array.Int64:
		c.i64 = a.Int64Values()
	case *array.Timestamp:
		c.ts = a.TimestampValues()
	case *array.Boolean:
		c.bln = a
	}
}

// Extra input columns, after the compared fields.
const (
	colName = iota
	colExpiration
	colSource
	colSnapshot
	numExtra
)

// bind resolves the columns of rec by name and checks their types.
func (b *Builder) bind(rec arrow.Record) error {
	sc := rec.Schema()
	if b.cols == nil {
		b.cols = make([]column, len(fields)+numExtra)
	}
	find := func(name string, want arrow.DataType, required bool) (arrow.Array, error) {
		idx := sc.FieldIndices(name)
		if len(idx) == 0 {
			if required {
				return nil, fmt.Errorf("record lacks column %s", name)
			}
			return nil, nil
		}
		a := rec.Column(idx[0])
		got := a.DataType()
		ok := arrow.TypeEqual(got, want)
		if ts, isTS := got.(*arrow.TimestampType); isTS {
			wt, _ := want.(*arrow.TimestampType)
			ok = wt != nil && ts.Unit == wt.Unit // any time zone: the values are instants
		}
		if !ok {
			return nil, fmt.Errorf("column %s is %s, want %s", name, got, want)
		}
		return a, nil
	}
	for k, f := range fields {
		a, err := find(f.name, schema.ArrowType(f.typ), true)
		if err != nil {
			return err
		}
		b.cols[k].set(a)
	}
	ts := schema.ArrowType(schema.TimestampMs)
	for i, c := range []struct {
		name     string
		typ      arrow.DataType
		required bool
	}{
		colName:       {"instrument_name", arrow.BinaryTypes.String, true},
		colExpiration: {"expiration_time", ts, true},
		colSource:     {"source", arrow.BinaryTypes.String, false},
		colSnapshot:   {"snapshot_time", ts, false},
	} {
		a, err := find(c.name, c.typ, c.required)
		if err != nil {
			return err
		}
		if a == nil {
			b.cols[len(fields)+i] = column{}
		} else {
			b.cols[len(fields)+i].set(a)
		}
	}
	return nil
}

// Observe adds the rows of one schema.Instruments record (columns are found
// by name; extra columns are ignored). Rows must belong to the builder's
// source and snapshot: when the record has source / snapshot_time columns,
// a row with another value is an error. instrument_name must not be null. A
// row whose instrument_name was already observed replaces the earlier row
// (last one wins). rec is not retained. After an error the rows are
// incomplete: later calls (and State, Finish) return the same error.
func (b *Builder) Observe(rec arrow.Record) error {
	if b.done {
		return errors.New("instrument events: Observe after the state was built")
	}
	if b.err != nil {
		return b.err
	}
	if err := b.observe(rec); err != nil {
		b.err = err
		return err
	}
	return nil
}

func (b *Builder) observe(rec arrow.Record) error {
	if err := b.bind(rec); err != nil {
		return fmt.Errorf("instrument events: %s: %w", b.st.source, err)
	}
	cols := b.cols
	name := &cols[len(fields)+colName]
	src := &cols[len(fields)+colSource]
	snap := &cols[len(fields)+colSnapshot]
	exp := &cols[len(fields)+colExpiration]
	n := int(rec.NumRows())
	for i := 0; i < n; i++ {
		if name.nulls && name.arr.IsNull(i) {
			return fmt.Errorf("instrument events: %s: row %d: instrument_name is null", b.st.source, b.stats.Rows)
		}
		nm := name.str.Value(i)
		if src.arr != nil && (src.nulls && src.arr.IsNull(i) || src.str.Value(i) != b.st.source) {
			return fmt.Errorf("instrument events: %s: row %d (%q) belongs to source %q", b.st.source, b.stats.Rows, nm, src.arr.ValueStr(i))
		}
		if snap.arr != nil && (snap.nulls && snap.arr.IsNull(i) || int64(snap.ts[i]) != b.snapMs) {
			return fmt.Errorf("instrument events: %s: row %d (%q) has snapshot_time %s, expected %s",
				b.st.source, b.stats.Rows, nm, snap.arr.ValueStr(i), time.UnixMilli(b.snapMs).UTC().Format(time.RFC3339Nano))
		}
		p := b.buf[:0]
		for k := range fields {
			c := &cols[k]
			if c.nulls && c.arr.IsNull(i) {
				p = appendNull(p)
				continue
			}
			switch fields[k].typ {
			case schema.String:
				p = appendString(p, c.str.Value(i))
			case schema.Float64:
				p = appendFloat(p, c.f64[i])
			case schema.Int64:
				p = appendInt(p, c.i64[i])
			case schema.Bool:
				p = appendBool(p, c.bln.Value(i))
			}
		}
		if exp.nulls && exp.arr.IsNull(i) {
			p = appendNull(p)
		} else {
			p = appendInt(p, int64(exp.ts[i]))
		}
		b.buf = p
		if err := b.add(nm, p); err != nil {
			return fmt.Errorf("instrument events: %s: row %d (%.64q): %w", b.st.source, b.stats.Rows, nm, err)
		}
		b.stats.Rows++
	}
	return nil
}

func (b *Builder) add(name string, p []byte) error {
	if err := b.st.append(name, p); err != nil {
		return err
	}
	if b.prev != nil {
		// Venues list instruments in a stable order: try the entry after
		// the last match before hashing.
		pi := -1
		if g := b.guess; g < b.prev.Len() && string(b.prev.name(g)) == name {
			pi = g
		} else {
			pi = b.prev.find(b.prev.idx.hash(name), name)
		}
		if pi >= 0 {
			b.guess = pi + 1
		}
		b.prevOf = append(b.prevOf, int32(pi))
	}
	return nil
}

// deadEntry marks an entry superseded by a later row of the same instrument.
const deadEntry = math.MaxUint32

// index builds the state's index. A later row of an instrument already
// indexed replaces the earlier row's values (keeping its position) and is
// dropped, with prevOf kept in step.
func (b *Builder) index() {
	st := b.st
	st.idx.init(st.idx.seed, len(st.ents))
	dups := 0
	for j := range st.ents {
		name := st.name(j)
		h := st.idx.hashBytes(name)
		if e := st.idx.findBytes(st, h, name); e >= 0 {
			st.ents[e] = st.ents[j]
			st.ents[j].plen = deadEntry
			dups++
			continue
		}
		st.idx.insert(h, j)
	}
	if dups == 0 {
		return
	}
	b.stats.Duplicates += int64(dups)
	live := 0
	for j, en := range st.ents {
		if en.plen == deadEntry {
			continue
		}
		st.ents[live] = en
		if b.prevOf != nil {
			b.prevOf[live] = b.prevOf[j]
		}
		live++
	}
	st.ents = st.ents[:live]
	if b.prevOf != nil {
		b.prevOf = b.prevOf[:live]
	}
	st.idx.init(st.idx.seed, live)
	for j := range st.ents {
		st.idx.insert(st.idx.hashBytes(st.name(j)), j)
	}
}

// State returns the state built from the rows observed, or the error of a
// failed Observe; the Builder cannot be used afterwards.
func (b *Builder) State() (*State, error) {
	if b.done {
		return nil, errors.New("instrument events: the state was already built")
	}
	b.done = true
	b.cols, b.buf = nil, nil
	if b.err != nil {
		return nil, b.err
	}
	b.index()
	b.st.hasSnap, b.st.snapMs = true, b.snapMs
	return b.st, nil
}

// Rebuild builds the state of source from the instruments rows of one
// snapshot (e.g. the last snapshot's rows read back from ClickHouse or
// Parquet), as if that snapshot had just been compared.
func Rebuild(source string, snapshotTime time.Time, recs []arrow.Record) (*State, error) {
	n := 0
	for _, r := range recs {
		n += int(r.NumRows())
	}
	b := NewBuilder(source, snapshotTime, n)
	for _, r := range recs {
		if err := b.Observe(r); err != nil {
			return nil, err
		}
	}
	return b.State()
}

// Differ compares one snapshot of one source with the previous state. Feed
// it every instruments record of the snapshot with Observe, then call Finish
// once. A Differ is not safe for concurrent use; prev is only read.
type Differ struct {
	b    *Builder
	prev *State
	meta Meta
	opt  Options
}

// NewDiffer returns a Differ comparing the snapshot described by meta with
// prev, the state of the same source. It fails with ErrOutOfOrder when prev
// already reflects a snapshot at or after meta.SnapshotTime (compared at
// millisecond precision), and when prev belongs to another source.
func NewDiffer(prev *State, meta Meta, opt Options) (*Differ, error) {
	opt.defaults()
	if prev == nil {
		prev = NewState(meta.Source)
	}
	if prev.source != meta.Source {
		return nil, fmt.Errorf("instrument events: state of source %q used for source %q", prev.source, meta.Source)
	}
	ms := meta.SnapshotTime.UnixMilli()
	if prev.hasSnap && ms <= prev.snapMs {
		last := time.UnixMilli(prev.snapMs).UTC().Format(time.RFC3339Nano)
		this := time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
		if ms == prev.snapMs {
			return nil, fmt.Errorf("%w: source %q: snapshot %s was already compared (its events exist); to recompute, replay from the first snapshot with an empty state", ErrOutOfOrder, meta.Source, this)
		}
		return nil, fmt.Errorf("%w: source %q: snapshot %s is older than the state's last snapshot %s; replay older snapshots from the first one with an empty state", ErrOutOfOrder, meta.Source, this, last)
	}
	b := newBuilder(meta.Source, ms, prev.Len()+prev.Len()/32)
	b.prev = prev
	b.prevOf = make([]int32, 0, cap(b.st.ents))
	return &Differ{b: b, prev: prev, meta: meta, opt: opt}, nil
}

// Observe adds the rows of one schema.Instruments record of the snapshot
// (see Builder.Observe for the rules). rec is not retained. After an error
// the Differ is unusable (Finish returns the error); prev is intact.
func (d *Differ) Observe(rec arrow.Record) error { return d.b.Observe(rec) }

// event is one event before rendering. Listed, flips and changes refer to
// entry idx of the new state (and pidx of prev); delisted and expired to
// entry pidx of prev.
type event struct {
	idx, pidx uint32
	kind      Kind
	field     uint8
}

// Finish compares the observed snapshot with the previous state, emits the
// events as schema.InstrumentEvents records of at most Options.BatchRows
// rows in the documented order, and returns the counts and the new state.
// Emit follows the transform.Emit contract: the record is released after it
// returns, a consumer that keeps it must Retain it. On an emit error Finish
// returns it (wrapped) and no state; prev is never modified. The new state
// is not saved: call Save once the events are safely stored.
func (d *Differ) Finish(emit func(t *schema.Table, rec arrow.Record) error) (Stats, *State, error) {
	if d.b.done {
		return Stats{}, nil, errors.New("instrument events: Finish called twice")
	}
	st, err := d.b.State()
	if err != nil {
		return Stats{}, nil, err
	}
	prevOf := d.b.prevOf
	stats := d.b.stats
	d.b.prevOf = nil
	prev := d.prev
	stats.Instruments = st.Len()

	var evs []event
	seen := make([]uint64, (prev.Len()+63)/64)
	for j := range st.ents {
		pi := prevOf[j]
		if pi < 0 {
			evs = append(evs, event{idx: uint32(j), kind: Listed})
			continue
		}
		seen[pi/64] |= 1 << (pi % 64)
		pp, np := prev.payload(int(pi)), st.payload(j)
		if bytes.Equal(pp, np) {
			continue
		}
		diffPayloads(pp, np, func(k int, a, b []byte) {
			kind := Changed
			if k == isActiveField || k == deployedField {
				_, an := boolOf(a)
				bv, bn := boolOf(b)
				if !an && !bn {
					switch {
					case k == isActiveField && bv:
						kind = Activated
					case k == isActiveField:
						kind = Deactivated
					case bv:
						kind = Deployed
					default:
						kind = Undeployed
					}
				}
			}
			evs = append(evs, event{idx: uint32(j), pidx: uint32(pi), kind: kind, field: uint8(k)})
		})
	}
	for i := range prev.ents {
		if seen[i/64]&(1<<(i%64)) != 0 {
			continue
		}
		kind := Delisted
		if exp, ok := expirationMs(prev.payload(i)); ok && exp <= st.snapMs {
			kind = Expired
		}
		evs = append(evs, event{pidx: uint32(i), kind: kind})
	}

	nameOf := func(e *event) []byte {
		if e.kind == Delisted || e.kind == Expired {
			return prev.name(int(e.pidx))
		}
		return st.name(int(e.idx))
	}
	slices.SortFunc(evs, func(a, b event) int {
		if c := bytes.Compare(nameOf(&a), nameOf(&b)); c != 0 {
			return c
		}
		if a.kind != b.kind {
			return cmp.Compare(a.kind, b.kind)
		}
		return cmp.Compare(fields[a.field].name, fields[b.field].name)
	})

	if err := d.emit(evs, prev, st, nameOf, emit, &stats); err != nil {
		return stats, nil, err
	}
	return stats, st, nil
}

// emit renders evs as records of schema.InstrumentEvents.
func (d *Differ) emit(evs []event, prev, st *State, nameOf func(*event) []byte, emit func(*schema.Table, arrow.Record) error, stats *Stats) error {
	t := schema.InstrumentEvents
	rb := array.NewRecordBuilder(d.opt.Mem, t.ArrowSchema())
	defer rb.Release()
	var (
		snapB    = rb.Field(t.MustIndex("snapshot_time")).(*array.TimestampBuilder)
		runB     = rb.Field(t.MustIndex("run_id")).(*array.StringBuilder)
		srcB     = rb.Field(t.MustIndex("source")).(*array.StringBuilder)
		nameB    = rb.Field(t.MustIndex("instrument_name")).(*array.StringBuilder)
		eventB   = rb.Field(t.MustIndex("event")).(*array.StringBuilder)
		fieldB   = rb.Field(t.MustIndex("field")).(*array.StringBuilder)
		oldB     = rb.Field(t.MustIndex("old_value")).(*array.StringBuilder)
		newB     = rb.Field(t.MustIndex("new_value")).(*array.StringBuilder)
		prevB    = rb.Field(t.MustIndex("previous_snapshot_time")).(*array.TimestampBuilder)
		initialB = rb.Field(t.MustIndex("initial")).(*array.BooleanBuilder)
	)
	if len(rb.Fields()) != 10 {
		return fmt.Errorf("instrument events: schema.InstrumentEvents has %d columns, this package fills 10", len(rb.Fields()))
	}
	initial := !prev.hasSnap
	flush := func() error {
		if nameB.Len() == 0 {
			return nil
		}
		rec := rb.NewRecord()
		err := emit(t, rec)
		rec.Release()
		if err != nil {
			return fmt.Errorf("instrument events: %s: emit: %w", d.meta.Source, err)
		}
		return nil
	}
	value := func(b *array.StringBuilder, it []byte, typ schema.Type) {
		if s, null := render(it, typ); null {
			b.AppendNull()
		} else {
			b.Append(s)
		}
	}
	rb.Reserve(min(len(evs), d.opt.BatchRows))
	for i := range evs {
		e := &evs[i]
		snapB.Append(arrow.Timestamp(st.snapMs))
		runB.Append(d.meta.RunID)
		srcB.Append(d.meta.Source)
		nameB.BinaryBuilder.Append(nameOf(e))
		eventB.Append(e.kind.String())
		if prev.hasSnap {
			prevB.Append(arrow.Timestamp(prev.snapMs))
		} else {
			prevB.AppendNull()
		}
		switch e.kind {
		case Listed, Delisted, Expired:
			fieldB.Append("")
			oldB.AppendNull()
			newB.AppendNull()
			initialB.Append(e.kind == Listed && initial)
		default:
			f := fields[e.field]
			fieldB.Append(f.name)
			value(oldB, itemAt(prev.payload(int(e.pidx)), int(e.field)), f.typ)
			value(newB, itemAt(st.payload(int(e.idx)), int(e.field)), f.typ)
			initialB.Append(false)
		}
		stats.Events++
		stats.ByKind[e.kind]++
		if nameB.Len() >= d.opt.BatchRows {
			if err := flush(); err != nil {
				return err
			}
			rb.Reserve(min(len(evs)-i-1, d.opt.BatchRows))
		}
	}
	return flush()
}
