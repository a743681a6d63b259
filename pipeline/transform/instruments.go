// Package transform turns venue responses into Arrow record batches whose
// schemas come from package schema. Decoding streams: a body is never held
// whole in memory.
package transform

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/internal/jsontok"
	"github.com/optlake/optlake/pipeline/values"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// Options tune a decode.
type Options struct {
	// BatchRows bounds the rows of one emitted record (default schema.DefaultBatchRows).
	BatchRows int
	// TimestampUnit of creation_timestamp/expiration_timestamp (default auto).
	TimestampUnit TimeUnit
	// Mem allocates Arrow buffers (default Go allocator).
	Mem memory.Allocator
	// ReadBuffer is the scanner's initial buffer size (default 256 KiB).
	ReadBuffer int
	// UniqueNames rejects a row whose instrument_name came earlier in the
	// same Decode, with ReasonDuplicate (the first row of a name loads).
	// The pipeline sets it: a listing's sinks then hold the same rows.
	UniqueNames bool
}

func (o *Options) defaults() {
	if o.BatchRows <= 0 {
		o.BatchRows = schema.DefaultBatchRows
	}
	if o.Mem == nil {
		o.Mem = memory.DefaultAllocator
	}
	if o.ReadBuffer <= 0 {
		o.ReadBuffer = 256 << 10
	}
}

// Emit receives each finished record batch with the table it belongs to
// (schema.Instruments or schema.Rejects). The record is released after Emit
// returns: a consumer that keeps it must Retain it.
type Emit func(t *schema.Table, rec arrow.Record) error

// Stats counts what a decode produced.
type Stats struct {
	Rows    int64 // rows emitted to the instruments table
	Rejects int64 // rows emitted to rejects
	// Duplicates are the rejects whose instrument_name came earlier in the
	// listing (ReasonDuplicate); Repeated of them came in an earlier request
	// of the endpoint (UseNames), the rest in this Decode.
	Duplicates, Repeated int64
	// TopReason is the reason most rejects gave (TopRejects of them).
	TopReason  string
	TopRejects int64
}

func shapeError(format string, args ...any) error {
	return &values.ShapeError{Msg: fmt.Sprintf(format, args...)}
}

type fieldKind uint8

const (
	kString fieldKind = iota
	kFloat
	kInt
	kBool
	kIndexPrice
)

// venueField is one of the 25 fields of an instrument.
type venueField struct {
	name string
	kind fieldKind
	col  int // column in schema.Instruments
}

// venueFields are schema.Instruments' venue fields, in schema order; their
// kinds come from the columns' JSON kinds.
var venueFields = func() []venueField {
	kinds := map[schema.JSONKind]fieldKind{
		schema.JSONString: kString, schema.JSONNumber: kFloat, schema.JSONInteger: kInt,
		schema.JSONBool: kBool, schema.JSONDecimalText: kIndexPrice,
	}
	var out []venueField
	for _, c := range schema.Instruments.Fields() {
		k, ok := kinds[c.JSON]
		if !ok {
			panic("transform: no decoder for the JSON kind of " + c.Name)
		}
		out = append(out, venueField{name: c.Name, kind: k, col: schema.Instruments.MustIndex(c.Name)})
	}
	if len(out) != 25 || len(out) > 32 { // the venue sends 25; row.set and row.null are bit sets
		panic(fmt.Sprintf("transform: schema.Instruments has %d venue fields, the listing 25", len(out)))
	}
	return out
}()

// fieldIndex maps a key to its position in venueFields, or -1. The map lookup
// with string(key) does not allocate.
var fieldIndex = func() func([]byte) int {
	m := make(map[string]int, len(venueFields))
	for i, f := range venueFields {
		m[f.name] = i
	}
	return func(k []byte) int {
		if i, ok := m[string(k)]; ok {
			return i
		}
		return -1
	}
}()

// value is one parsed field of the row being decoded. Which fields are set
// or null is kept in row.set/row.null, so starting a row clears two words.
type value struct {
	b    bool
	fok  bool // index_price parsed
	i    int64
	f    float64
	soff int // string bytes in row.src
	slen int
}

type row struct {
	set, null uint32 // bit fi: venue field fi was present / was null
	vals      [32]value
	src       []byte // holds the string values: arena or the scanner's window
	arena     []byte
	extra     []int  // [begin, end) offsets of unknown members in the row's capture
	reason    string // first reason to reject, "" when none
}

func (r *row) reset() {
	r.set, r.null = 0, 0
	r.arena = r.arena[:0]
	r.extra = r.extra[:0]
	r.reason = ""
}

func (r *row) reject(format string, args ...any) {
	if r.reason == "" {
		r.reason = fmt.Sprintf(format, args...)
	}
}

// InstrumentDecoder decodes get_instruments bodies. It is not safe for
// concurrent use; reuse one per goroutine to keep its buffers.
type InstrumentDecoder struct {
	opt  Options
	meta sinks.Snapshot
	emit Emit

	b       *batch               // instruments rows
	fcols   [32]*batchCol        // b's column of each venue field, by field index
	rjb     *array.RecordBuilder // rejects
	colRaw  int
	colCTim int
	colETim int
	colExt  int
	noFast  bool // tests: decode every instrument with the general path

	fastRows int64 // rows the fast path decoded (tests)

	extraBuf []byte
	snapMs   arrow.Timestamp  // meta.Time
	sc       *jsontok.Scanner // kept for the next Decode

	r     row
	key   []byte        // an unknown member's key while its value is skipped
	texts [32]textCache // the fast path's last value texts, by field
	stats Stats
	index int64 // position of the next instrument in the listing

	keys    *keySet          // the listing's instrument names
	own     *keySet          // the decoder's own (keys unless UseNames)
	reasons map[string]int64 // rejects by reason

	// With UniqueNames, the names of the fast path's rows are checked a
	// few hundred at a time (checkNames): pend are the last rows of the
	// batch, not checked yet, from the listing's instrument pendIdx on.
	// They are checked before the batch is emitted, before a row of the
	// general path, and before the scanner moves its buffer's bytes
	// (jsontok.Scanner.OnRefill: their bytes are still in its window).
	// They are fewer than pendMax: each may be a duplicate, and a
	// duplicate that fills the rejects batch ends the batch of rows at once
	// (as the general path's does), so the window never holds it with rows
	// after it.
	pend      []pendRow
	redo      []pendRow
	pendIdx   int64
	pendMax   int // maxPending, or fewer: the rows the rejects batch still takes
	inline    int // rows still checked one at a time, after a duplicate
	checkHook func()
}

// pendRow is a row of the fast path whose name is not checked yet: the
// scanner's window from the instrument's first byte, and its length.
type pendRow struct {
	w []byte
	n int
}

const (
	// maxPending bounds the rows whose names are checked together.
	maxPending = 256
	// inlineRows are the rows checked one at a time after a duplicate:
	// each duplicate among pending rows decodes the rows after it again,
	// so a listing with many keeps to the cost of one check per row.
	inlineRows = 4 * maxPending
)

// NewInstrumentDecoder returns a decoder that emits record batches of
// schema.Instruments and schema.Rejects. The instruments records are built
// in Go memory unless UseColumns says otherwise (Options.Mem allocates the
// rejects).
func NewInstrumentDecoder(opt Options) *InstrumentDecoder {
	opt.defaults()
	t := schema.Instruments
	own := newKeySet()
	d := &InstrumentDecoder{opt: opt, b: newBatch(t, opt.BatchRows), keys: own, own: own, reasons: map[string]int64{}}
	d.checkHook = d.checkNames
	d.rjb = array.NewRecordBuilder(opt.Mem, schema.Rejects.ArrowSchema())
	if t.Columns[0].Name != "snapshot_time" || t.Columns[0].Type != schema.TimestampMs ||
		t.Columns[1].Name != "run_id" || t.Columns[2].Name != "source" {
		panic("transform: schema.Instruments must start with snapshot_time, run_id, source")
	}
	d.colRaw = t.MustIndex("index_price_raw")
	d.colCTim = t.MustIndex("creation_time")
	d.colETim = t.MustIndex("expiration_time")
	d.colExt = t.MustIndex("extra")
	for fi, f := range venueFields {
		d.fcols[fi] = &d.b.cols[f.col]
	}
	return d
}

// Release frees the builders.
func (d *InstrumentDecoder) Release() {
	d.rjb.Release()
	d.b.free()
}

// UseColumns makes mem (nil: Go memory, which the GC frees) allocate the
// column buffers of the instruments records from the next Decode on. Each
// record's buffers are freed to mem when its last holder releases it, so
// mem may recycle them (a replay's arrowpool.Pool): every consumer that
// keeps a record, or a view of its buffers, past Emit must Retain it. The
// decoder holds no column memory between Decodes.
func (d *InstrumentDecoder) UseColumns(mem memory.Allocator) {
	d.b.useMem(mem)
}

// UseNames makes the names of n (nil: the decoder's own set, emptied by
// every Decode) the names that came before, from the next Decode on: with
// UniqueNames, a row whose name is in n (kept from an earlier request of
// the endpoint, NameSet.Keep) or came earlier in the Decode is a
// duplicate.
func (d *InstrumentDecoder) UseNames(n *NameSet) {
	if n == nil {
		d.keys = d.own
		return
	}
	d.keys = n.k
}

// Decode reads one get_instruments body and emits its rows. The body is a
// JSON array whose elements are {"instruments": [...]} groups (an object
// with an "instruments" key, wherever the key is; its other members are
// ignored) or bare instruments (an object without one), mixed freely; {} is
// an empty group. Rows that break the value rules go to rejects with a
// reason and the rest loads. A body that is malformed, not an array, or has
// an element that is not an object fails with an error that is
// values.ErrBadInput; rows of earlier batches may have been emitted already,
// and the caller decides what to do with them.
// meta identifies the snapshot every row belongs to (its Part is not used).
func (d *InstrumentDecoder) Decode(ctx context.Context, r io.Reader, meta sinks.Snapshot, emit Emit) (Stats, error) {
	d.meta, d.emit = meta, emit
	d.snapMs = arrow.Timestamp(meta.Time.UnixMilli())
	d.stats, d.index = Stats{}, 0
	d.keys.reset()
	d.pend, d.inline = d.pend[:0], 0
	d.setPendMax()
	clear(d.reasons)
	if d.sc == nil {
		d.sc = jsontok.New(r, d.opt.ReadBuffer)
	} else {
		d.sc.Reset(r)
	}
	sc := d.sc
	if d.opt.UniqueNames {
		sc.OnRefill(d.checkHook)
	}
	defer sc.Reset(nil)
	err := d.decode(ctx, sc)
	d.checkNames() // a failed decode counts the duplicates before it too
	if err == nil {
		err = d.flush(true)
	}
	// The rows checked last hold the input's bytes: not past the Decode.
	clear(d.pend[:cap(d.pend)])
	clear(d.redo[:cap(d.redo)])
	if err != nil {
		// A failed decode or a failed emit of the last batches: nothing
		// built for this listing may reach the next one (the decoder is
		// pooled and reused).
		d.discard()
	}
	for reason, n := range d.reasons {
		if n > d.stats.TopRejects || n == d.stats.TopRejects && reason < d.stats.TopReason {
			d.stats.TopReason, d.stats.TopRejects = reason, n
		}
	}
	return d.stats, values.BadInput(err)
}

const elementShape = `an instrument or an {"instruments": [...]} group`

// groupStart is how a listing element that is a group starts, written
// compactly.
var groupStart = []byte(`{"instruments":`)

func (d *InstrumentDecoder) decode(ctx context.Context, sc *jsontok.Scanner) error {
	k, err := sc.PeekKind()
	if err != nil {
		return err
	}
	if k != jsontok.Array {
		return shapeError("listing is a JSON %s, expected an array of %ss", k, elementShape)
	}
	if err := sc.Expect('['); err != nil {
		return err
	}
	for elem, first := 0, true; ; elem, first = elem+1, false {
		more, err := sc.More(']', first)
		if err != nil {
			return err
		}
		if !more {
			break
		}
		if k, err := sc.PeekKind(); err != nil {
			return err
		} else if k != jsontok.Object {
			return shapeError("listing element %d is a JSON %s, expected %s", elem, k, elementShape)
		}
		if err := d.element(ctx, sc, elem); err != nil {
			return err
		}
	}
	if eof, err := sc.AtEOF(); err != nil {
		return err
	} else if !eof {
		return &jsontok.SyntaxError{Offset: sc.Offset(), Msg: "unexpected data after the listing"}
	}
	return nil
}

// objectKind is what the members of a listing element made of it.
type objectKind uint8

const (
	objInstrument objectKind = iota // the object ended without an "instruments" key
	objGroup                        // stopped just after `"instruments":`
	objEmpty                        // {}: an empty group
)

// element decodes one object of the listing. Whether it is a group is known
// only when its "instruments" key comes, which need not be first: its
// members are decoded as an instrument until then, and that row is dropped
// when the key comes. So the group's members before "instruments" are held
// in memory (a bare instrument is anyway); its instruments stream.
func (d *InstrumentDecoder) element(ctx context.Context, sc *jsontok.Scanner, elem int) error {
	// A group (most often written so) is not tried as an instrument: the
	// fast path would give it up at its first key.
	if !bytes.HasPrefix(sc.Window(), groupStart) && d.fastElement(sc) {
		return d.rowDone(ctx)
	}
	d.checkNames() // before d.r is written
	r := &d.r
	r.reset()
	if err := sc.StartCapture(); err != nil {
		return err
	}
	if err := sc.Expect('{'); err != nil {
		return err
	}
	kind, err := d.members(sc, true)
	if err != nil {
		return err
	}
	raw := sc.EndCapture()
	switch kind {
	case objEmpty:
		return nil
	case objInstrument:
		idx := d.index
		d.index++
		d.finish(idx, raw)
		return d.rowDone(ctx)
	}
	r.reset() // the members before "instruments" were the group's
	if err := d.list(ctx, sc, elem); err != nil {
		return err
	}
	// The rest of the group: other members are ignored (they are in the
	// raw archive); another "instruments" key is read as well.
	for {
		more, err := sc.More('}', false)
		if err != nil || !more {
			return err
		}
		key, err := sc.String()
		if err != nil {
			return err
		}
		isList := string(key) == "instruments"
		if err := sc.Expect(':'); err != nil {
			return err
		}
		if !isList {
			// Ignored at any depth.
			if _, err := sc.SkipDeep(); err != nil {
				return err
			}
			continue
		}
		if err := d.list(ctx, sc, elem); err != nil {
			return err
		}
	}
}

// list decodes the value of a group's "instruments" member (the scanner is
// just after its ':'): null or an array of instruments.
func (d *InstrumentDecoder) list(ctx context.Context, sc *jsontok.Scanner, elem int) error {
	k, err := sc.PeekKind()
	if err != nil {
		return err
	}
	switch k {
	case jsontok.Null:
		_, err := sc.Literal()
		return err
	case jsontok.Array:
	default:
		return shapeError("listing element %d: \"instruments\" is a JSON %s, expected an array", elem, k)
	}
	if err := sc.Expect('['); err != nil {
		return err
	}
	for first := true; ; first = false {
		more, err := sc.More(']', first)
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
		if !d.fastElement(sc) {
			d.checkNames() // before d.r is written
			if err := d.instrument(sc); err != nil {
				return err
			}
		}
		if err := d.rowDone(ctx); err != nil {
			return err
		}
	}
}

// fastElement decodes the instrument at the scanner with the fast path when
// it can: a well-formed instrument that is whole in the scanner's buffer and
// loads without a reject. Otherwise it consumes nothing and returns false,
// and the general path decodes the value from its first byte.
func (d *InstrumentDecoder) fastElement(sc *jsontok.Scanner) bool {
	w := sc.Window()
	if len(w) < fastWindow {
		w = sc.Fill(fastWindow)
	}
	n := d.fastInstrument(w)
	if n == 0 {
		return false
	}
	if d.opt.UniqueNames {
		if len(d.pend) == 0 {
			d.pendIdx = d.index
		}
		d.pend = append(d.pend, pendRow{w, n})
	}
	sc.Advance(n)
	d.index++
	d.fastRows++
	if d.inline > 0 || len(d.pend) >= d.pendMax {
		d.inline = max(d.inline-1, 0)
		d.checkNames()
	}
	return true
}

// checkNames checks the names of the pending rows of the fast path in
// order, as finish does a row's, and leaves none pending: a name that came
// earlier takes its row out of the batch and into rejects
// (ReasonDuplicate; exactly as the general path would reject it); the rows
// after it are decoded again from their bytes, their names checked one by
// one.
func (d *InstrumentDecoder) checkNames() {
	if len(d.pend) == 0 {
		return
	}
	b := d.b
	p0 := b.rows - len(d.pend)
	nc := &b.cols[fieldCols[nameField]]
	j := d.keys.addAll(nc.data, nc.offs[p0:b.rows+1])
	if j < 0 {
		d.pend = d.pend[:0]
		return
	}
	d.redo = append(d.redo[:0], d.pend[j+1:]...)
	idx := d.pendIdx + int64(j)
	d.duplicate(p0+j, idx, d.pend[j])
	d.pend = d.pend[:0]
	d.inline = inlineRows
	for _, p := range d.redo {
		idx++
		if d.fastInstrument(p.w) != p.n {
			panic("transform: an instrument decoded again is not the same")
		}
		if row := b.rows - 1; !d.keys.add(nc.data[nc.offs[row]:nc.offs[row+1]]) {
			d.duplicate(row, idx, p)
		}
	}
}

// duplicate moves row (the batch's rows from it on) to rejects: its name
// came earlier in the listing. p holds its bytes, idx its position.
func (d *InstrumentDecoder) duplicate(row int, idx int64, p pendRow) {
	nc := &d.b.cols[fieldCols[nameField]]
	d.stats.Duplicates++
	if d.keys.kept > 0 && d.keys.earlier(nc.data[nc.offs[row]:nc.offs[row+1]]) {
		d.stats.Repeated++
	}
	d.b.truncate(row)
	d.fastRows--
	d.addReject(idx, ReasonDuplicate, p.w[:p.n]) // full again if the rejects fill a batch
}

// setPendMax bounds the pending rows by the rejects the rejects batch
// still takes: the last of pendMax pending rows is checked as soon as it
// is read, as the general path checks each row, so that when it is a
// duplicate that fills the rejects batch, no row after it is in the batch
// of rows (rowDone emits both at once).
func (d *InstrumentDecoder) setPendMax() {
	d.pendMax = min(maxPending, d.opt.BatchRows-d.rjb.Field(0).Len())
}

// rowDone emits the batch when it is full.
func (d *InstrumentDecoder) rowDone(ctx context.Context) error {
	if !d.b.full {
		return nil
	}
	if d.checkNames(); !d.b.full {
		return nil // a duplicate was taken out
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return d.flush(false)
}

// instrument decodes one element of an instruments array into the row
// builders, or into rejects.
func (d *InstrumentDecoder) instrument(sc *jsontok.Scanner) error {
	d.r.reset()
	idx := d.index
	d.index++
	if err := sc.StartCapture(); err != nil {
		return err
	}
	k, err := sc.PeekKind()
	if err != nil {
		return err
	}
	if k != jsontok.Object {
		if _, err := sc.SkipDeep(); err != nil {
			return err
		}
		d.addReject(idx, fmt.Sprintf("instrument is a JSON %s, expected an object", k), sc.EndCapture())
		return nil
	}
	if err := sc.Expect('{'); err != nil {
		return err
	}
	if _, err := d.members(sc, false); err != nil {
		return err
	}
	d.finish(idx, sc.EndCapture())
	return nil
}

// members decodes the members of an instrument object (the scanner is just
// after its '{', capturing) into d.r. For a listing element (top), an
// "instruments" key stops it just after the key's ':' (objGroup), and {} is
// objEmpty.
func (d *InstrumentDecoder) members(sc *jsontok.Scanner, top bool) (objectKind, error) {
	r := &d.r
	next := 0
	for first := true; ; first = false {
		more, err := sc.More('}', first)
		if err != nil {
			return 0, err
		}
		if !more {
			if top && first {
				return objEmpty, nil
			}
			return objInstrument, nil
		}
		memberStart := sc.CaptureLen()
		key, err := sc.String()
		if err != nil {
			return 0, err
		}
		// Venues send fields in a fixed order: try the field after the
		// previous one before the map.
		fi := -1
		if next < len(venueFields) && string(key) == venueFields[next].name {
			fi = next
		} else {
			fi = fieldIndex(key)
		}
		if fi >= 0 {
			next = fi + 1
		}
		group := fi < 0 && top && string(key) == "instruments"
		if err := sc.Expect(':'); err != nil {
			return 0, err
		}
		if group {
			return objGroup, nil
		}
		if fi < 0 {
			// key aliases the scanner's buffer, which the skip may refill.
			d.key = append(d.key[:0], key...)
			if deep, err := sc.SkipDeep(); err != nil {
				return 0, err
			} else if deep {
				r.reject("%s: JSON nested deeper than %d levels", d.key, jsontok.MaxDepth)
			}
			// Keep the member as received; the capture holds it.
			r.extra = append(r.extra, memberStart, sc.CaptureLen())
			continue
		}
		if err := d.field(sc, fi); err != nil {
			return 0, err
		}
	}
}

// finish appends the instrument decoded into d.r (raw as received) as a
// row, or as a reject with its first reason.
func (d *InstrumentDecoder) finish(idx int64, raw []byte) {
	r := &d.r
	r.src = r.arena
	name := &r.vals[nameField]
	switch {
	case r.reason != "":
	case r.set&(1<<nameField) == 0:
		r.reject("instrument_name is missing")
	case r.null&(1<<nameField) != 0:
		r.reject("instrument_name is null")
	case name.slen == 0:
		r.reject("instrument_name is empty")
	case d.opt.UniqueNames && !d.keys.add(r.src[name.soff:name.soff+name.slen]):
		r.reason = ReasonDuplicate
		d.stats.Duplicates++
		if d.keys.kept > 0 && d.keys.earlier(r.src[name.soff:name.soff+name.slen]) {
			d.stats.Repeated++
		}
	}
	if r.reason != "" {
		d.addReject(idx, r.reason, raw)
		return
	}
	d.appendRow(raw)
}

// fastWindow is the input kept in the scanner's buffer for the fast path:
// an instrument larger than that (or straddling the end of the input read
// so far) takes the general path.
const fastWindow = 2048

var (
	nameField       = fieldIndex([]byte("instrument_name"))
	creationField   = fieldIndex([]byte("creation_timestamp"))
	expirationField = fieldIndex([]byte("expiration_timestamp"))
)

// field parses the value of venue field fi (a later duplicate key wins).
func (d *InstrumentDecoder) field(sc *jsontok.Scanner, fi int) error {
	r := &d.r
	f := &venueFields[fi]
	v := &r.vals[fi]
	*v = value{}
	bit := uint32(1) << fi
	r.set |= bit
	r.null &^= bit
	k, err := sc.PeekKind()
	if err != nil {
		return err
	}
	if k == jsontok.Null {
		_, err := sc.Literal()
		r.null |= bit
		return err
	}
	wrong := func() error {
		r.reject("%s: expected %s, got %s", f.name, kindName(f.kind), k)
		r.null |= bit
		_, err := sc.SkipDeep()
		return err
	}
	switch f.kind {
	case kString:
		var s []byte
		switch k {
		case jsontok.StringKind:
			s, err = sc.String()
		case jsontok.Number:
			// A number where the table wants text (an integer id) is
			// kept as its exact text, never rejected.
			s, err = sc.Number()
		default:
			return wrong()
		}
		if err != nil {
			return err
		}
		if !utf8.Valid(s) {
			r.reject("%s: invalid UTF-8", f.name)
		}
		v.soff, v.slen = len(r.arena), len(s)
		r.arena = append(r.arena, s...)
	case kFloat:
		if k != jsontok.Number {
			return wrong()
		}
		n, err := sc.Number()
		if err != nil {
			return err
		}
		if v.f, err = values.ParseJSONFloat(n); err != nil {
			r.reject("%s: %v", f.name, err)
		}
	case kInt:
		if k != jsontok.Number {
			return wrong()
		}
		n, err := sc.Number()
		if err != nil {
			return err
		}
		if v.i, err = values.ParseJSONInt(n); err != nil {
			r.reject("%s: %v", f.name, err)
		}
	case kBool:
		if k != jsontok.True && k != jsontok.False {
			return wrong()
		}
		_, err := sc.Literal()
		v.b = k == jsontok.True
		return err
	case kIndexPrice:
		// The venue sends a string holding a number; a bare JSON number is
		// the same value and is accepted with its text kept as raw.
		var s []byte
		switch k {
		case jsontok.StringKind:
			s, err = sc.String()
			if err == nil && !utf8.Valid(s) {
				r.reject("%s: invalid UTF-8", f.name)
			}
		case jsontok.Number:
			s, err = sc.Number()
		default:
			r.reject("%s: expected string, got %s", f.name, k)
			r.null |= bit
			_, err := sc.SkipDeep()
			return err
		}
		if err != nil {
			return err
		}
		v.f, v.fok = values.ParseDecimal(s)
		v.soff, v.slen = len(r.arena), len(s)
		r.arena = append(r.arena, s...)
	}
	return nil
}

func kindName(k fieldKind) string {
	switch k {
	case kString, kIndexPrice:
		return "string"
	case kFloat:
		return "number"
	case kInt:
		return "integer"
	case kBool:
		return "bool"
	}
	return "?"
}

// appendRow appends the decoded row (d.r, strings in d.r.src) to the batch.
// raw is the instrument as received, needed only when it has unknown
// members (d.r.extra).
func (d *InstrumentDecoder) appendRow(raw []byte) {
	r := &d.r
	b := d.b
	b.begin()
	present := r.set &^ r.null
	for fi := range venueFields {
		f := &venueFields[fi]
		c := f.col
		if present&(1<<fi) == 0 {
			b.null(c)
			if f.kind == kIndexPrice {
				b.null(d.colRaw)
			}
			continue
		}
		v := &r.vals[fi]
		switch f.kind {
		case kString:
			b.str(c, r.src[v.soff:v.soff+v.slen])
		case kFloat:
			b.f64(c, v.f)
		case kInt:
			b.i64(c, v.i)
		case kBool:
			b.bool(c, v.b)
		case kIndexPrice:
			if v.fok {
				b.f64(c, v.f)
			} else {
				b.null(c)
			}
			b.str(d.colRaw, r.src[v.soff:v.soff+v.slen])
		}
	}
	d.appendTimes(present, r.vals[creationField].i, r.vals[expirationField].i)
	d.appendExtra(raw)
	b.commit()
}

// appendExtra appends the extra column: the unknown members of the row
// (d.r.extra, spans of raw), or null.
func (d *InstrumentDecoder) appendExtra(raw []byte) {
	if len(d.r.extra) == 0 {
		d.b.null(d.colExt)
		return
	}
	d.extraBuf = extraJSON(d.extraBuf, raw, d.r.extra)
	d.b.str(d.colExt, d.extraBuf)
}

// extraJSON builds {"k":v,...} in buf from the member spans ([begin, end)
// pairs of offsets into raw).
func extraJSON(buf, raw []byte, spans []int) []byte {
	out := append(buf[:0], '{')
	for i := 0; i+1 < len(spans); i += 2 {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, raw[spans[i]:spans[i+1]]...)
	}
	return append(out, '}')
}

// appendTimes appends creation_time and expiration_time, the UTC times of
// the raw epoch fields (present: the bit set of the row's present fields).
func (d *InstrumentDecoder) appendTimes(present uint32, creation, expiration int64) {
	// Both present as epoch milliseconds, detected so (what the venue
	// sends): values.EpochToMillis returns them unchanged.
	if d.opt.TimestampUnit == UnitAuto && present&timeFields == timeFields && autoMillis(creation) && autoMillis(expiration) {
		d.b.i64(d.colCTim, creation)
		d.b.i64(d.colETim, expiration)
		return
	}
	d.appendTime(d.colCTim, present&(1<<creationField) != 0, creation)
	d.appendTime(d.colETim, present&(1<<expirationField) != 0, expiration)
}

// timeFields are the two epoch fields, as a bit set by field index.
var timeFields = uint32(1)<<creationField | 1<<expirationField

// autoMillis reports an epoch value that values.DetectUnit takes for
// milliseconds: [1e11, 1e14), all within the years EpochToMillis keeps.
func autoMillis(v int64) bool { return uint64(v-1e11) < 1e14-1e11 }

func (d *InstrumentDecoder) appendTime(col int, present bool, epoch int64) {
	if present {
		if ms, ok := values.EpochToMillis(epoch, d.opt.TimestampUnit); ok {
			d.b.i64(col, ms)
			return
		}
	}
	d.b.null(col)
}

// appendMeta appends snapshot_time, run_id and source (the first three
// columns of every table).
func (d *InstrumentDecoder) appendMeta(b *array.RecordBuilder) {
	b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(d.meta.Time.UnixMilli()))
	b.Field(1).(*array.StringBuilder).Append(d.meta.RunID)
	b.Field(2).(*array.StringBuilder).Append(d.meta.Source)
}

func (d *InstrumentDecoder) addReject(idx int64, reason string, raw []byte) {
	d.reasons[reason]++
	b := d.rjb
	d.appendMeta(b)
	t := schema.Rejects
	b.Field(t.MustIndex("endpoint")).(*array.StringBuilder).Append(d.meta.Endpoint)
	b.Field(t.MustIndex("row_index")).(*array.Int64Builder).Append(idx)
	b.Field(t.MustIndex("reason")).(*array.StringBuilder).Append(reason)
	b.Field(t.MustIndex("raw")).(*array.StringBuilder).Append(strings.ToValidUTF8(string(raw), "\uFFFD"))
	if b.Field(0).Len() >= d.opt.BatchRows {
		d.b.full = true // emit them with the next flush
	}
	d.setPendMax()
}

// flush emits the rows built so far; rejects are emitted at the end only
// (they are few) unless they reach a batch.
func (d *InstrumentDecoder) flush(final bool) error {
	d.checkNames()
	if rec := d.b.record(d.snapMs, d.meta.RunID, d.meta.Source); rec != nil {
		d.stats.Rows += rec.NumRows()
		err := d.emit(schema.Instruments, rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	if n := d.rjb.Field(0).Len(); n > 0 && (final || n >= d.opt.BatchRows) {
		rec := d.rjb.NewRecord()
		d.setPendMax()
		d.stats.Rejects += int64(n)
		err := d.emit(schema.Rejects, rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// discard drops rows built but not emitted (after a failed decode).
func (d *InstrumentDecoder) discard() {
	d.pend, d.inline = d.pend[:0], 0
	d.b.discard()
	d.rjb.NewRecord().Release()
	d.setPendMax()
}
