// Package sinktest is the conformance suite of the sinks.Sink contract: every
// sink runs Run with a Harness that makes a fresh, empty store and reads its
// committed rows back by the store's own means (DuckDB for Parquet, the
// server with FINAL for ClickHouse), so that the same records in give the
// same rows out whatever the store.
//
// The records are those the venue simulator's listings decode into through
// package transform (instruments and rejects), kept as testdata fixtures,
// and a hand-built runs record, as a run produces them.
package sinktest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// Null is the canonical text of a null value.
const Null = "NULL"

// Row is one row in canonical text, a value per column of the table in
// schema order (see Value).
type Row []string

// Reader reads back what a sink committed.
type Reader interface {
	// Rows returns every row of tb visible to a reader of the store (after
	// the store's read-time deduplication, if any), in any order, each in
	// canonical text. A table the store has never written has no rows.
	Rows(t testing.TB, tb *schema.Table) []Row
	// Time is the value the store keeps for a time written as epoch
	// milliseconds ms (a store may keep seconds); ok false when it keeps
	// null instead (out of its range).
	Time(ms int64) (kept int64, ok bool)
}

// Harness is what a sink's test gives the suite.
type Harness struct {
	// New returns a fresh, empty store's sink and a Reader of it. The test
	// closes the sink.
	New func(t testing.TB) (sinks.Sink, Reader)
	// PartialAbort is set by stores whose Abort cannot take back rows
	// already sent (ClickHouse: each block written is a part). For them the
	// suite checks instead that a load after an Abort converges to the
	// snapshot's rows, once each.
	PartialAbort bool
}

// Value is the canonical text of row i of a (a column of type c): Null,
// strings as they are, integers in decimal, floats in Go's shortest form
// ('g', -1), booleans true/false, times as epoch milliseconds mapped
// through keep.
func Value(c schema.Column, a arrow.Array, i int, keep func(int64) (int64, bool)) string {
	if a.IsNull(i) {
		return Null
	}
	switch x := a.(type) {
	case *array.String:
		return x.Value(i)
	case *array.Int64:
		return strconv.FormatInt(x.Value(i), 10)
	case *array.Float64:
		return Float(x.Value(i))
	case *array.Boolean:
		return strconv.FormatBool(x.Value(i))
	case *array.Timestamp:
		ms, ok := keep(int64(x.Value(i)))
		if !ok {
			return Null
		}
		return strconv.FormatInt(ms, 10)
	}
	panic(fmt.Sprintf("sinktest: column %s: no canonical form for %s", c.Name, a.DataType()))
}

// Float is the canonical text of a float.
func Float(f float64) string {
	if math.IsNaN(f) {
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// Rows renders recs (of table tb) in canonical text.
func Rows(tb *schema.Table, keep func(int64) (int64, bool), recs ...arrow.Record) []Row {
	var out []Row
	for _, rec := range recs {
		for i := 0; i < int(rec.NumRows()); i++ {
			r := make(Row, len(tb.Columns))
			for c, col := range tb.Columns {
				r[c] = Value(col, rec.Column(c), i, keep)
			}
			out = append(out, r)
		}
	}
	return out
}

// Exact keeps every time as written.
func Exact(ms int64) (int64, bool) { return ms, true }

// Data is one snapshot's records, as a run produces them.
type Data struct {
	Snap        sinks.Snapshot
	Instruments []arrow.Record
	Rejects     []arrow.Record
	Runs        []arrow.Record
}

// Release releases the records.
func (d *Data) Release() {
	for _, l := range [][]arrow.Record{d.Instruments, d.Rejects, d.Runs} {
		for _, r := range l {
			r.Release()
		}
	}
}

// Records returns the records of tb.
func (d *Data) Records(tb *schema.Table) []arrow.Record {
	switch tb {
	case schema.Instruments:
		return d.Instruments
	case schema.Rejects:
		return d.Rejects
	case schema.Runs:
		return d.Runs
	}
	return nil
}

// Tables are the tables the suite loads.
var Tables = []*schema.Table{schema.Instruments, schema.Rejects, schema.Runs}

// Snapshot returns the records of the simulator's listing at tick (0 to
// 5), as package transform decodes them, in batches of batch rows. They are
// read from testdata fixtures (see fixtures.go), so the suite depends on
// nothing above the sinks. The simulator sends wrong types and index price
// variants, so there are rejects and null prices.
func Snapshot(t testing.TB, tick int, batch int) *Data {
	t.Helper()
	snap := SnapshotOf(tick)
	d := &Data{Snap: snap}
	var md arrow.Metadata
	var body int64
	var err error
	if d.Instruments, md, err = fixture(tick, schema.Instruments, batch); err == nil {
		d.Rejects, _, err = fixture(tick, schema.Rejects, batch)
	}
	if i := md.FindKey(BodyBytesKey); err == nil && i < 0 {
		err = fmt.Errorf("sinktest: %s: no %s", FixtureName(tick, schema.Instruments), BodyBytesKey)
	} else if err == nil {
		body, err = strconv.ParseInt(md.Values()[i], 10, 64)
	}
	if err != nil {
		d.Release()
		t.Fatal(err)
	}
	d.Runs = []arrow.Record{Build(t, schema.Runs, [][]any{{
		snap.Time, snap.RunID, snap.Source, snap.Endpoint, "ok", int64(590), int64(10), body, int64(1234), nil,
	}})}
	return d
}

// SnapshotOf is the snapshot of the simulator's listing at tick.
func SnapshotOf(tick int) sinks.Snapshot {
	return sinks.Snapshot{
		Time:     time.Date(2026, 11, 22, 9, 30, tick, 250e6, time.UTC),
		RunID:    fmt.Sprintf("01936f0e-7c00-7000-8000-%012d", tick),
		Source:   "sim",
		Endpoint: "instruments",
	}
}

// Build makes a record of tb from rows of Go values in column order: string,
// int64, float64, bool, time.Time, or nil for null.
func Build(t testing.TB, tb *schema.Table, rows [][]any) arrow.Record {
	t.Helper()
	b := array.NewRecordBuilder(memory.DefaultAllocator, tb.ArrowSchema())
	defer b.Release()
	for _, row := range rows {
		if len(row) != len(tb.Columns) {
			t.Fatalf("sinktest: %s row has %d values for %d columns", tb.Name, len(row), len(tb.Columns))
		}
		for c, v := range row {
			switch f := b.Field(c).(type) {
			case *array.StringBuilder:
				appendOrNull(f, v, func(v any) string { return v.(string) })
			case *array.Int64Builder:
				appendOrNull(f, v, func(v any) int64 { return v.(int64) })
			case *array.Float64Builder:
				appendOrNull(f, v, func(v any) float64 { return v.(float64) })
			case *array.BooleanBuilder:
				appendOrNull(f, v, func(v any) bool { return v.(bool) })
			case *array.TimestampBuilder:
				appendOrNull(f, v, func(v any) arrow.Timestamp { return arrow.Timestamp(v.(time.Time).UnixMilli()) })
			default:
				t.Fatalf("sinktest: %s.%s: unsupported builder %T", tb.Name, tb.Columns[c].Name, f)
			}
		}
	}
	return b.NewRecord()
}

// Check is one check of the suite.
type Check struct {
	Name string
	Run  func(t testing.TB, h Harness)
}

// Checks are the suite's checks, in the order Run runs them.
var Checks = []Check{
	{"SameRowsOut", sameRowsOut},
	{"IdempotentReload", idempotentReload},
	{"Abort", abort},
	{"CommitAtomicity", commitAtomicity},
	{"WritersOpenAtOnce", writersAtOnce},
	{"WriterMisuse", misuse},
	{"PoisonedBuffers", poisonedBuffers},
}

func appendOrNull[T any](b interface {
	Append(T)
	AppendNull()
}, v any, conv func(any) T) {
	if v == nil {
		b.AppendNull()
		return
	}
	b.Append(conv(v))
}

// Run runs every check as a subtest of t.
func Run(t *testing.T, h Harness) {
	for _, c := range Checks {
		t.Run(c.Name, func(t *testing.T) { c.Run(t, h) })
	}
}

func open(t testing.TB, h Harness) (sinks.Sink, Reader) {
	t.Helper()
	s, r := h.New(t)
	t.Cleanup(func() { s.Close(context.Background()) })
	if _, ok := sinks.HoldsDays(s); ok {
		r = dayReader{Reader: r, s: s}
	}
	return s, r
}

// dayReader reads a sinks.DaySink's rows once it wrote the suite's day:
// a replay flushes each day once its snapshots are loaded, and only then
// are the rows committed to the day visible.
type dayReader struct {
	Reader
	s sinks.Sink
}

func (r dayReader) Rows(t testing.TB, tb *schema.Table) []Row {
	t.Helper()
	flushDay(t, r.s)
	return r.Reader.Rows(t, tb)
}

// flushDay has s write the suite's day when it is a sinks.DaySink.
func flushDay(t testing.TB, s sinks.Sink) {
	t.Helper()
	if err := sinks.FlushDay(context.Background(), s, SnapshotOf(0).Time.Format(time.DateOnly)); err != nil {
		t.Fatalf("flush day: %v", err)
	}
}

// Load writes recs into tb for snap through one Writer and commits.
func Load(t testing.TB, s sinks.Sink, tb *schema.Table, snap sinks.Snapshot, recs []arrow.Record) sinks.Committed {
	t.Helper()
	ctx := context.Background()
	snap.Endpoint = endpoint(tb, snap)
	w, err := s.Open(ctx, tb, snap)
	if err != nil {
		t.Fatalf("open %s: %v", tb.Name, err)
	}
	for _, r := range recs {
		if err := w.Write(ctx, r); err != nil {
			t.Fatalf("write %s: %v", tb.Name, err)
		}
	}
	c, err := w.Commit(ctx)
	if err != nil {
		t.Fatalf("commit %s: %v", tb.Name, err)
	}
	return c
}

func endpoint(tb *schema.Table, snap sinks.Snapshot) string {
	if snap.Endpoint == "" {
		return tb.Name
	}
	return snap.Endpoint
}

// expect is the rows the store should show for the records of tb.
func expect(r Reader, tb *schema.Table, recs ...arrow.Record) []Row {
	return Rows(tb, r.Time, recs...)
}

// Equal fails t when got and want differ as multisets, naming the first
// rows that differ.
func Equal(t testing.TB, what string, got, want []Row) {
	t.Helper()
	g, w := sorted(got), sorted(want)
	if slices.Equal(g, w) {
		return
	}
	var only []string
	for _, x := range g {
		if _, ok := slices.BinarySearch(w, x); !ok {
			only = append(only, "  store has: "+strings.ReplaceAll(x, "\x1f", " | "))
		}
	}
	for _, x := range w {
		if _, ok := slices.BinarySearch(g, x); !ok {
			only = append(only, "  expected:  "+strings.ReplaceAll(x, "\x1f", " | "))
		}
	}
	if len(only) > 6 {
		only = append(only[:6], fmt.Sprintf("  ... %d more", len(only)-6))
	}
	t.Errorf("%s: store has %d rows, expected %d\n%s", what, len(got), len(want), strings.Join(only, "\n"))
}

func sorted(rows []Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = strings.Join(r, "\x1f")
	}
	slices.Sort(out)
	return out
}

func sameRowsOut(t testing.TB, h Harness) {
	s, r := open(t, h)
	d := Snapshot(t, 0, 128)
	defer d.Release()
	if len(d.Instruments) < 2 || len(d.Rejects) == 0 {
		t.Fatalf("the snapshot has %d instrument records and %d reject records: the checks prove less", len(d.Instruments), len(d.Rejects))
	}
	for _, tb := range Tables {
		c := Load(t, s, tb, d.Snap, d.Records(tb))
		want := expect(r, tb, d.Records(tb)...)
		if c.Rows != int64(len(want)) {
			t.Errorf("%s: Committed.Rows = %d, want %d", tb.Name, c.Rows, len(want))
		}
		if c.Where == "" {
			t.Errorf("%s: Committed.Where is empty", tb.Name)
		}
		Equal(t, tb.Name, r.Rows(t, tb), want)
	}
}

func idempotentReload(t testing.TB, h Harness) {
	s, r := open(t, h)
	d := Snapshot(t, 0, 128)
	defer d.Release()
	d2 := Snapshot(t, 1, 128)
	defer d2.Release()
	for _, tb := range Tables {
		Load(t, s, tb, d.Snap, d.Records(tb))
		Load(t, s, tb, d2.Snap, d2.Records(tb))
		// A sinks.DaySink takes a snapshot once per day it holds: the
		// retry is a later replay's, after the day was written.
		flushDay(t, s)
		// A retry of the first snapshot, in other batches: the same rows.
		Load(t, s, tb, d.Snap, rebatch(t, tb, d.Records(tb)))
		want := append(expect(r, tb, d.Records(tb)...), expect(r, tb, d2.Records(tb)...)...)
		Equal(t, tb.Name+" after loading a snapshot twice", r.Rows(t, tb), want)
	}
}

// rebatch returns recs as one record.
func rebatch(t testing.TB, tb *schema.Table, recs []arrow.Record) []arrow.Record {
	tbl := array.NewTableFromRecords(tb.ArrowSchema(), recs)
	defer tbl.Release()
	tr := array.NewTableReader(tbl, tbl.NumRows()+1)
	defer tr.Release()
	var out []arrow.Record
	for tr.Next() {
		rec := tr.Record()
		rec.Retain()
		out = append(out, rec)
	}
	t.Cleanup(func() {
		for _, r := range out {
			r.Release()
		}
	})
	return out
}

func abort(t testing.TB, h Harness) {
	ctx := context.Background()
	s, r := open(t, h)
	d := Snapshot(t, 0, 128)
	defer d.Release()
	tb := schema.Instruments
	w, err := s.Open(ctx, tb, d.Snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range d.Instruments {
		if err := w.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Abort(); err != nil {
		t.Fatalf("abort: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Fatalf("second abort: %v", err)
	}
	if _, err := w.Commit(ctx); err == nil {
		t.Error("commit after abort succeeded")
	}
	if !h.PartialAbort {
		Equal(t, "after an abort", r.Rows(t, tb), nil)
	}
	// The retry that follows an abort: exactly the snapshot's rows.
	Load(t, s, tb, d.Snap, d.Instruments)
	Equal(t, "abort then load", r.Rows(t, tb), expect(r, tb, d.Instruments...))
}

func commitAtomicity(t testing.TB, h Harness) {
	ctx := context.Background()
	s, r := open(t, h)
	d := Snapshot(t, 0, 128)
	defer d.Release()
	d2 := Snapshot(t, 1, 128)
	defer d2.Release()
	tb := schema.Instruments
	Load(t, s, tb, d.Snap, d.Instruments)
	before := expect(r, tb, d.Instruments...)

	// A second snapshot in flight, and a reload of the first one in
	// flight: readers see the first snapshot's rows, only.
	w2, err := s.Open(ctx, tb, d2.Snap)
	if err != nil {
		t.Fatal(err)
	}
	w1, err := s.Open(ctx, tb, d.Snap)
	if err != nil {
		t.Fatal(err)
	}
	for i := range d2.Instruments {
		if err := w2.Write(ctx, d2.Instruments[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w1.Write(ctx, d.Instruments[0]); err != nil {
		t.Fatal(err)
	}
	if !h.PartialAbort {
		Equal(t, "before commit", r.Rows(t, tb), before)
	}
	if _, err := w2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The reload of the first snapshot has one record of several: aborted,
	// the first snapshot's rows stay whole.
	if err := w1.Abort(); err != nil {
		t.Fatal(err)
	}
	Equal(t, "after commit", r.Rows(t, tb), append(slices.Clone(before), expect(r, tb, d2.Instruments...)...))
}

func writersAtOnce(t testing.TB, h Harness) {
	s, r := open(t, h)
	d := Snapshot(t, 0, 64)
	defer d.Release()
	loadInterleaved(t, s, d, func(w sinks.Writer, rec arrow.Record) error { return w.Write(context.Background(), rec) })
	for _, tb := range Tables {
		Equal(t, tb.Name, r.Rows(t, tb), expect(r, tb, d.Records(tb)...))
	}
}

// loadInterleaved opens a writer for each table of d, hands them d's
// records one per table in turn through write, and commits them, last
// opened first.
func loadInterleaved(t testing.TB, s sinks.Sink, d *Data, write func(sinks.Writer, arrow.Record) error) {
	t.Helper()
	ctx := context.Background()
	ws := make([]sinks.Writer, len(Tables))
	for i, tb := range Tables {
		snap := d.Snap
		snap.Endpoint = endpoint(tb, snap)
		w, err := s.Open(ctx, tb, snap)
		if err != nil {
			t.Fatal(err)
		}
		ws[i] = w
	}
	for k := 0; ; k++ {
		more := false
		for i, tb := range Tables {
			if recs := d.Records(tb); k < len(recs) {
				more = true
				if err := write(ws[i], recs[k]); err != nil {
					t.Fatalf("write %s: %v", tb.Name, err)
				}
			}
		}
		if !more {
			break
		}
	}
	for i := len(ws) - 1; i >= 0; i-- {
		if _, err := ws[i].Commit(ctx); err != nil {
			t.Fatalf("commit %s: %v", Tables[i].Name, err)
		}
	}
}

func misuse(t testing.TB, h Harness) {
	ctx := context.Background()
	s, r := open(t, h)
	d := Snapshot(t, 0, 1024)
	defer d.Release()
	tb := schema.Runs
	w, err := s.Open(ctx, tb, d.Snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, d.Runs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, d.Runs[0]); err == nil {
		t.Error("write after commit succeeded")
	}
	if _, err := w.Commit(ctx); err == nil {
		t.Error("second commit succeeded")
	}
	if err := w.Abort(); err != nil {
		t.Errorf("abort after commit: %v", err)
	}
	Equal(t, "after misuse", r.Rows(t, tb), expect(r, tb, d.Runs...))
}

// poisonedBuffers: the suite hands each record to Write in buffers of an
// allocator that overwrites a buffer once its last holder releases it (a
// replay recycles them so), and releases the record as soon as Write
// returns, as the caller does (Writer.Write's ownership rule). A sink that
// keeps a view of a record without retaining it commits the poison; one
// that retains or copies commits the records' rows.
func poisonedBuffers(t testing.TB, h Harness) {
	s, r := open(t, h)
	d := Snapshot(t, 0, 64)
	defer d.Release()
	mem := &Poison{}
	// Interleaved, so that a table's records are poisoned while the other
	// tables' writers are still open.
	loadInterleaved(t, s, d, func(w sinks.Writer, rec arrow.Record) error {
		cp := mem.Copy(t, rec)
		defer cp.Release()
		return w.Write(context.Background(), cp)
	})
	for _, tb := range Tables {
		Equal(t, tb.Name+" written from buffers recycled after Write", r.Rows(t, tb), expect(r, tb, d.Records(tb)...))
	}
}

// Poison is an Arrow allocator that zeroes each buffer it frees, as a
// recycled buffer is overwritten by its next records.
type Poison struct{ memory.GoAllocator }

// Free implements memory.Allocator: b is zeroed.
func (p *Poison) Free(b []byte) {
	clear(b)
	p.GoAllocator.Free(b)
}

// Copy returns a copy of rec in buffers of p.
func (p *Poison) Copy(t testing.TB, rec arrow.Record) arrow.Record {
	t.Helper()
	cols := make([]arrow.Array, rec.NumCols())
	for i, c := range rec.Columns() {
		a, err := array.Concatenate([]arrow.Array{c}, p)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Release()
		cols[i] = a
	}
	return array.NewRecord(rec.Schema(), cols, rec.NumRows())
}
