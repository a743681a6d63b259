package events

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// Builder accumulates the instruments rows of one snapshot of one source
// into a State. Use it (or Rebuild) to recreate a lost state file from the
// instruments table of the last snapshot; a Differ uses one internally. Its
// memory is bounded like a Differ's (rows beyond the buffer are spilled to
// temporary files; the State is then a temporary file, see State.Close). A
// Builder is not safe for concurrent use.
type Builder struct {
	source string
	snapMs int64
	srt    *sorter
	cols   []column
	enc    *blockEnc
	re     *Reuse // holds the memos (nil: none)
	recs   int    // the records with rows observed
	noMemo bool   // Options.noMemo
	srcRun []byte // the source repeated (checkRows)
	stats  Stats
	err    error // the first Observe error: the rows seen are incomplete
	done   bool
}

// NewBuilder returns a Builder for the snapshot of source taken at
// snapshotTime, with the default Options (temporary files in os.TempDir()).
// sizeHint (may be 0) is the expected number of instruments.
func NewBuilder(source string, snapshotTime time.Time, sizeHint int) *Builder {
	var opt Options
	opt.defaults()
	b := newBuilder(source, snapshotTime.UnixMilli(), opt)
	b.srt.ents = make([]entry, 0, min(max(sizeHint, 0), opt.MemBytes/256))
	return b
}

func newBuilder(source string, snapMs int64, opt Options) *Builder {
	return &Builder{source: source, snapMs: snapMs, srt: newSorter(source, opt.MemBytes, opt.TempDir, opt.Reuse), re: opt.Reuse, noMemo: opt.noMemo}
}

// column is one input column of the record being observed.
type column struct {
	arr   arrow.Array
	nulls bool
	valid []byte // the validity bitmap, from bit off
	off   int
	offs  []int32 // strings: the value offsets (from offs[0]) into vals
	vals  []byte
	f64   []float64
	i64   []int64
	ts    []arrow.Timestamp
	bln   *array.Boolean
	bits  []byte // booleans: the value bitmap, from bit off
}

func (c *column) set(a arrow.Array) {
	*c = column{arr: a, nulls: a.NullN() > 0, valid: a.NullBitmapBytes(), off: a.Data().Offset()}
	switch a := a.(type) {
	case *array.String:
		c.offs, c.vals = a.ValueOffsets(), a.ValueBytes()
	case *array.Float64:
		c.f64 = a.Float64Values()
	case *array.Int64:
		c.i64 = a.Int64Values()
	case *array.Timestamp:
		c.ts = a.TimestampValues()
	case *array.Boolean:
		c.bln = a
		if b := a.Data().Buffers()[1]; b != nil {
			c.bits = b.Bytes()
		}
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

// bind resolves the columns of rec by name into cols (len(fields)+numExtra
// of them) and checks their types.
func bind(rec arrow.Record, cols []column) error {
	sc := rec.Schema()
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
		cols[k].set(a)
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
			cols[len(fields)+i] = column{}
		} else {
			cols[len(fields)+i].set(a)
		}
	}
	return nil
}

// Observe adds the rows of one schema.Instruments record (columns are found
// by name; extra columns are ignored). Rows must belong to the builder's
// source and snapshot: when the record has source / snapshot_time columns,
// a row with another value is an error. instrument_name must not be null. A
// row whose instrument_name was already observed replaces the earlier row
// (last one wins). rec is not retained, except by Options.Reuse, which
// remembers the record last encoded (Retain) until the next one replaces
// it or until Reuse.Close. After an error the rows are incomplete: later
// calls (and State, Finish) return the same error.
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
	if b.cols == nil {
		b.cols = make([]column, len(fields)+numExtra)
	}
	if err := bind(rec, b.cols); err != nil {
		return fmt.Errorf("instrument events: %s: %w", b.source, err)
	}
	n := int(rec.NumRows())
	if n == 0 {
		return nil
	}
	if err := b.encodeRecord(rec, b.cols, n, b.stats.Rows, b.recs, true); err != nil {
		return err
	}
	b.recs++
	b.stats.Rows += int64(n)
	return nil
}

// State returns the state built from the rows observed, or the error of a
// failed Observe; the Builder cannot be used afterwards.
func (b *Builder) State() (*State, error) {
	if b.done {
		return nil, errors.New("instrument events: the state was already built")
	}
	b.done = true
	b.cols, b.enc = nil, nil
	defer b.srt.close()
	if b.err != nil {
		return nil, b.err
	}
	return b.srt.state(true, b.snapMs)
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
// once (or Close to abandon it). A Differ is not safe for concurrent use;
// prev is only read.
type Differ struct {
	b    *Builder
	prev *State
	meta sinks.Snapshot
	opt  Options
	enc  *encoder // encodes the observed records (nil until the first)
}

// NewDiffer returns a Differ comparing the snapshot described by meta with
// prev, the state of the same source (only meta's Time, RunID and Source
// are used). It fails with ErrOutOfOrder when prev already reflects a
// snapshot at or after meta.Time (compared at millisecond precision), and
// when prev belongs to another source.
func NewDiffer(prev *State, meta sinks.Snapshot, opt Options) (*Differ, error) {
	if prev == nil {
		prev = NewState(meta.Source)
	}
	if err := checkPrev(prev, meta); err != nil {
		return nil, err
	}
	d := NewDifferFor(meta, opt)
	d.prev = prev
	return d, nil
}

// NewDifferFor returns a Differ of the snapshot described by meta whose
// previous state is given later, with Against, before Finish: a pipelined
// replay observes a snapshot's rows while the snapshot before it is still
// being compared.
func NewDifferFor(meta sinks.Snapshot, opt Options) *Differ {
	opt.defaults()
	return &Differ{b: newBuilder(meta.Source, meta.Time.UnixMilli(), opt), meta: meta, opt: opt}
}

// Against sets the previous state of a Differ from NewDifferFor (nil: the
// empty state), with NewDiffer's checks: ErrOutOfOrder when prev already
// reflects a snapshot at or after this one, an error when prev belongs to
// another source. On error the Differ is unchanged.
func (d *Differ) Against(prev *State) error {
	if prev == nil {
		prev = NewState(d.meta.Source)
	}
	if err := checkPrev(prev, d.meta); err != nil {
		return err
	}
	d.prev = prev
	return nil
}

func checkPrev(prev *State, meta sinks.Snapshot) error {
	if prev.source != meta.Source {
		return fmt.Errorf("instrument events: state of source %q used for source %q", prev.source, meta.Source)
	}
	ms := meta.Time.UnixMilli()
	if prev.hasSnap && ms <= prev.snapMs {
		last := time.UnixMilli(prev.snapMs).UTC().Format(time.RFC3339Nano)
		this := time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
		if ms == prev.snapMs {
			return fmt.Errorf("%w: source %q: snapshot %s was already compared (its events exist); to recompute, replay from the first snapshot with an empty state", ErrOutOfOrder, meta.Source, this)
		}
		return fmt.Errorf("%w: source %q: snapshot %s is older than the state's last snapshot %s; replay older snapshots from the first one with an empty state", ErrOutOfOrder, meta.Source, this, last)
	}
	return nil
}

// Observe adds the rows of one schema.Instruments record of the snapshot
// (see Builder.Observe for the rules). The rows are checked at once; with
// Options.Background they are encoded on a goroutine of the Differ's (see
// encoder), which holds rec (Retain) until then, else rec is not retained.
// After an error the Differ is unusable (Finish
// returns the error); prev is intact.
func (d *Differ) Observe(rec arrow.Record) error {
	b := d.b
	if !d.opt.Background {
		return b.Observe(rec)
	}
	if b.done {
		return errors.New("instrument events: Observe after the state was built")
	}
	if b.err == nil {
		b.err = d.enc.failed()
	}
	if b.err != nil {
		return b.err
	}
	cols := make([]column, len(fields)+numExtra)
	if err := bind(rec, cols); err != nil {
		b.err = fmt.Errorf("instrument events: %s: %w", b.source, err)
		return b.err
	}
	n := int(rec.NumRows())
	if err := b.checkRows(cols, n, b.stats.Rows); err != nil {
		b.err = err
		return err
	}
	if n == 0 {
		return nil
	}
	if n < d.opt.backgroundMin && d.enc.idle() {
		if err := b.encodeRecord(rec, cols, n, b.stats.Rows, b.recs, false); err != nil {
			b.err = err
			return err
		}
		b.recs++
		b.stats.Rows += int64(n)
		return nil
	}
	if d.enc == nil {
		d.enc = newEncoder(b, d.opt.encoderGate)
	}
	d.enc.pending.Add(1)
	rec.Retain()
	d.enc.jobs <- encodeJob{rec: rec, cols: cols, n: n, row0: b.stats.Rows, ord: b.recs}
	b.recs++
	b.stats.Rows += int64(n)
	return nil
}

// Close abandons a Differ that will not be finished: it removes its
// temporary files. Finish does so itself; Close after Finish is a no-op.
func (d *Differ) Close() {
	d.enc.stop()
	d.enc = nil
	d.b.done = true
	d.b.cols, d.b.enc = nil, nil
	d.b.srt.close()
}

// change is one flip or change of an instrument present in both states.
type change struct {
	kind     Kind
	field    uint8
	old, new []byte
}

// Finish compares the observed snapshot with the previous state, emits the
// events as schema.InstrumentEvents records of at most Options.BatchRows
// rows in the documented order, and returns the counts and the new state.
// Emit follows the transform.Emit contract: the record is released after it
// returns, a consumer that keeps it must Retain it. On an emit error Finish
// returns it (wrapped) and no state; prev is never modified. The new state
// is not saved: call Save once the events are safely stored, and Close it
// when done (a large one is a temporary file in Options.TempDir until
// saved).
//
// The observed rows and prev are both read in name order and merged, so
// events come out in order without being collected, and the new state is
// written as the merge goes.
func (d *Differ) Finish(emit func(t *schema.Table, rec arrow.Record) error) (Stats, *State, error) {
	b := d.b
	if b.done {
		return Stats{}, nil, errors.New("instrument events: Finish called twice")
	}
	b.done = true
	if err := d.enc.stop(); b.err == nil {
		b.err = err
	}
	d.enc = nil
	b.cols, b.enc = nil, nil
	defer b.srt.close()
	if b.err != nil {
		return Stats{}, nil, b.err
	}
	stats := b.stats
	prev := d.prev
	if prev == nil {
		return stats, nil, errors.New("instrument events: Finish before Against")
	}
	pc, err := prev.cursor()
	if err != nil {
		return stats, nil, d.prevError(err)
	}
	defer pc.close()
	nc, err := b.srt.stream()
	if err != nil {
		return stats, nil, err
	}
	defer nc.close()
	var out *stateWriter
	if b.srt.spilled() {
		if out, err = newStateWriter(d.opt.TempDir, d.meta.Source, true, b.snapMs); err != nil {
			return stats, nil, fmt.Errorf("instrument events: %s: write state: %w", d.meta.Source, err)
		}
	}
	fail := func(err error) (Stats, *State, error) {
		if out != nil {
			out.abort()
		}
		return stats, nil, err
	}

	em, err := d.newEmitter(emit, &stats)
	if err != nil {
		return fail(err)
	}
	defer em.release()
	// The merge (and the next state, written as it goes) runs in its own
	// goroutine and hands the events over in batches; this one renders
	// them and emits: on a first snapshot of 1,000,000 instruments the two
	// halves cost about the same (0.2 CPU-s each), and they no longer add
	// up on one core. A small comparison in memory (a replay's snapshot)
	// merges and emits on this goroutine: starting and waking a second
	// one cost more than what it would take over.
	q := newEventQueue(d.opt.Reuse)
	emitBatch := func(bt *eventBatchBuf) {
		if em.err == nil {
			for i := range bt.evs {
				e := &bt.evs[i]
				em.add(e.kind, bt.bytes(e.name), int(e.field), bt.bytes(e.old), bt.bytes(e.new))
			}
		}
		bt.reset()
	}
	var n int
	var merr error
	if smallMerge(pc, nc, out) {
		q.direct = func(bt *eventBatchBuf) bool {
			emitBatch(bt)
			return em.err == nil
		}
		n, merr = d.merge(pc, nc, out, q)
	} else {
		go func() {
			n, merr = d.merge(pc, nc, out, q)
			close(q.full)
		}()
		for bt := range q.full {
			failed := em.err != nil
			emitBatch(bt)
			if !failed && em.err != nil {
				close(q.stop) // the merge stops at its next batch
			}
			q.free <- bt
		}
	}
	q.release(d.opt.Reuse) // the merge has ended (it closed q.full)
	if em.err != nil {
		return fail(em.err)
	}
	if merr != nil {
		return fail(merr)
	}
	if err := em.flush(); err != nil {
		return fail(err)
	}
	stats.Instruments = n
	stats.Duplicates = stats.Rows - int64(n)
	if out == nil {
		return stats, b.srt.takeState(true, b.snapMs), nil
	}
	if err := out.finish(); err != nil {
		return fail(fmt.Errorf("instrument events: %s: write state: %w", d.meta.Source, err))
	}
	next, err := out.state(d.meta.Source, true, b.snapMs)
	if err != nil {
		return stats, nil, fmt.Errorf("instrument events: %s: write state: %w", d.meta.Source, err)
	}
	return stats, next, nil
}

// merge merges the observed rows (nc) with the previous state (pc), both
// in name order, writes each instrument of the snapshot to out (when it is
// not nil) and queues the events in their documented order. It returns the
// number of instruments of the snapshot.
func (d *Differ) merge(pc, nc cursor, out *stateWriter, q *eventQueue) (int, error) {
	snapMs := d.b.snapMs
	// checkPrev validates a payload of prev before it is decoded: a state
	// file's payloads are checked by Load, not again as they stream by.
	checkPrev := func() error { return nil }
	if fc, ok := pc.(*fileCursor); ok {
		checkPrev = fc.check
	}
	var (
		n, passed int
		changes   []change
	)
	// Both sides in memory with their rows' ids (a replay's comparisons
	// sharing a Reuse): an instrument whose row has the id of the previous
	// state's (the same name and payload, see rowID) has no event, and is
	// passed over without reading its name or payload. Ids are only
	// unique within one Reuse: a previous state built with another one
	// (whose arena is lent by it) is compared by its bytes.
	nm, _ := nc.(*memCursor)
	pm, _ := pc.(*memCursor)
	byID := nm != nil && pm != nil && len(nm.ids) > 0 && len(pm.ids) > 0 && out == nil &&
		nm.ar.re != nil && nm.ar.re == pm.ar.re
	bt := <-q.free
	nok, pok := nc.next(), pc.next()
	for nok || pok {
		if byID && nok && pok {
			i, j := nm.i, pm.i
			for i < len(nm.ids) && j < len(pm.ids) && nm.ids[i] != 0 && nm.ids[i] == pm.ids[j] {
				i++
				j++
			}
			if i > nm.i {
				n += i - nm.i
				passed += i - nm.i
				nm.i, pm.i = i-1, j-1
				if nok, pok = nm.next(), pm.next(); !nok && !pok {
					break
				}
			}
		}
		if len(bt.evs) >= eventBatch {
			var ok bool
			if bt, ok = q.hand(bt); !ok {
				return n, errEmitStopped
			}
		}
		c := 0
		switch {
		case !pok:
			c = -1
		case !nok:
			c = 1
		default:
			c = bytes.Compare(nc.name(), pc.name())
		}
		if c > 0 {
			if err := checkPrev(); err != nil {
				return n, d.prevError(err)
			}
			kind := Delisted
			if exp, ok := expirationMs(pc.payload()); ok && exp <= snapMs {
				kind = Expired
			}
			bt.add(kind, pc.name(), 0, nil, nil)
			pok = pc.next()
			continue
		}
		name, np := nc.name(), nc.payload()
		n++
		if out != nil {
			if err := out.add(name, np); err != nil {
				return n, fmt.Errorf("instrument events: %s: write state: %w", d.meta.Source, err)
			}
		}
		if c < 0 {
			bt.add(Listed, name, 0, nil, nil)
			nok = nc.next()
			continue
		}
		if pp := pc.payload(); !bytes.Equal(pp, np) {
			if err := checkPrev(); err != nil {
				return n, d.prevError(err)
			}
			changes = changes[:0]
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
				changes = append(changes, change{kind: kind, field: uint8(k), old: a, new: b})
			})
			slices.SortFunc(changes, func(a, b change) int {
				if a.kind != b.kind {
					return cmp.Compare(a.kind, b.kind)
				}
				return cmp.Compare(fields[a.field].name, fields[b.field].name)
			})
			for i := range changes {
				bt.add(changes[i].kind, name, int(changes[i].field), changes[i].old, changes[i].new)
			}
		}
		nok, pok = nc.next(), pc.next()
	}
	if passed > 0 {
		d.opt.Reuse.passed.Add(int64(passed))
	}
	if err := nc.error(); err != nil {
		return n, fmt.Errorf("instrument events: %s: %w", d.meta.Source, err)
	}
	if err := pc.error(); err != nil {
		return n, d.prevError(err)
	}
	if !q.send(bt) { // the last batch: no empty one is taken back
		return n, errEmitStopped
	}
	return n, nil
}

// errEmitStopped ends a merge whose events can no longer be emitted (the
// emit error is what Finish returns).
var errEmitStopped = errors.New("instrument events: emit stopped")

// eventBatch is the number of events handed over at once.
const eventBatch = 4096

// eventQueue hands batches of events from the merge to the emitter: full
// carries them in order, free returns them for reuse (two circulate, so
// the merge fills one while the other is emitted), stop tells the merge
// that the emitter has failed. With direct set, the merge runs on the
// emitter's goroutine and hands each batch to direct instead (false: the
// emitter has failed), then goes on with the same batch.
type eventQueue struct {
	full   chan *eventBatchBuf
	free   chan *eventBatchBuf
	stop   chan struct{}
	direct func(*eventBatchBuf) bool
}

// smallMergeRows is the most rows a merge on the emitter's goroutine
// compares (see smallMerge).
const smallMergeRows = 1 << 16

// smallMerge reports whether Finish merges pc and nc on its own goroutine:
// both in memory, together at most smallMergeRows rows (a replay's
// snapshot of a realistic listing), no state file to write.
func smallMerge(pc, nc cursor, out *stateWriter) bool {
	nm, ok := nc.(*memCursor)
	pm, ok2 := pc.(*memCursor)
	return ok && ok2 && out == nil && len(nm.ents)+len(pm.ents) <= smallMergeRows
}

// newEventQueue returns a queue whose batches come from re (nil: new ones).
func newEventQueue(re *Reuse) *eventQueue {
	q := &eventQueue{full: make(chan *eventBatchBuf, 2), free: make(chan *eventBatchBuf, 2), stop: make(chan struct{})}
	q.free <- re.eventBatch()
	q.free <- re.eventBatch()
	return q
}

// release gives the batches left in the queue back to re, once the merge
// and the emitter are done with it.
func (q *eventQueue) release(re *Reuse) {
	for {
		select {
		case bt := <-q.free:
			re.putEventBatch(bt)
		default:
			return
		}
	}
}

// hand queues a batch and returns an empty one; false when the emitter has
// stopped.
func (q *eventQueue) hand(bt *eventBatchBuf) (*eventBatchBuf, bool) {
	if q.direct != nil {
		if !q.direct(bt) {
			q.free <- bt // for release
			return nil, false
		}
		return bt, true
	}
	if !q.send(bt) {
		return nil, false
	}
	select {
	case bt = <-q.free:
		return bt, true
	case <-q.stop:
		return nil, false
	}
}

// send queues a batch; false when the emitter has stopped.
func (q *eventQueue) send(bt *eventBatchBuf) bool {
	if q.direct != nil {
		ok := q.direct(bt)
		q.free <- bt // for release
		return ok
	}
	select {
	case q.full <- bt:
		return true
	case <-q.stop:
		q.free <- bt // for release (two batches circulate: there is room)
		return false
	}
}

// eventBatchBuf holds events whose names and values are copied into buf.
type eventBatchBuf struct {
	buf []byte
	evs []queuedEvent
}

// queuedEvent is one event of a batch; name, old and new are spans of the
// batch's buf.
type queuedEvent struct {
	kind           Kind
	field          uint8
	name, old, new span
}

type span struct{ off, n uint32 }

func (b *eventBatchBuf) span(p []byte) span {
	s := span{uint32(len(b.buf)), uint32(len(p))}
	b.buf = append(b.buf, p...)
	return s
}

func (b *eventBatchBuf) bytes(s span) []byte { return b.buf[s.off : s.off+s.n : s.off+s.n] }

func (b *eventBatchBuf) add(kind Kind, name []byte, field int, old, new []byte) {
	b.evs = append(b.evs, queuedEvent{kind: kind, field: uint8(field), name: b.span(name), old: b.span(old), new: b.span(new)})
}

func (b *eventBatchBuf) reset() {
	b.buf, b.evs = b.buf[:0], b.evs[:0]
}

// prevError wraps a failure to read the previous state.
func (d *Differ) prevError(err error) error {
	p := d.prev
	p.mu.Lock()
	path := p.path
	p.mu.Unlock()
	if path == "" || errors.Is(err, errClosed) {
		return fmt.Errorf("instrument events: %s: previous state: %w", p.source, err)
	}
	return fmt.Errorf("%w %s: %w", ErrCorruptState, path, err)
}
