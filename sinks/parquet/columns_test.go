package parquet

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/storage"
)

// The parallel column writer writes the same file as pqarrow's FileWriter:
// same schema, row groups, encodings, values and statistics; read back, its
// Arrow schema is the table's (no ARROW:schema metadata needed). The
// table's own properties (dictionaries of strings among them) take package
// pqpage's encoder; a dictionary of floats (which pqpage does not write)
// takes arrow-go's column writers for the whole file.
func TestColumnWriterMatchesPqarrow(t *testing.T) {
	recs := []arrow.Record{record(t, 100), record(t, 50), record(t, 1)}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	sc := schema.Instruments.ArrowSchema()
	for _, tc := range []struct {
		name  string
		extra []parquet.WriterProperty
		ours  bool // pqpage encodes the columns
	}{
		{"table's properties", nil, true},
		{"float dictionary", []parquet.WriterProperty{parquet.WithDictionaryFor("strike", true)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			props := func() *parquet.WriterProperties {
				return parquet.NewWriterProperties(append(writerOptions(schema.Instruments, 1, RowGroupRows, false), tc.extra...)...)
			}
			writeWith := func(name string, open func(f *os.File) (recordWriter, error)) string {
				path := filepath.Join(dir, name)
				f, err := os.Create(path)
				if err != nil {
					t.Fatal(err)
				}
				w, err := open(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range recs {
					if err := w.Write(r); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				return path
			}
			ref := writeWith("pqarrow.parquet", func(f *os.File) (recordWriter, error) {
				return pqarrow.NewFileWriter(sc, f, props(), pqarrow.NewArrowWriterProperties())
			})
			for _, workers := range []int{2, 3, 40} {
				got := writeWith(fmt.Sprintf("columns-%d.parquet", workers), func(f *os.File) (recordWriter, error) {
					w, err := NewColumnWriter(sc, f, props(), workers)
					if err == nil && (w.nf != nil) != tc.ours {
						t.Errorf("pqpage encodes the columns: %v, want %v", w.nf != nil, tc.ours)
					}
					return w, err
				})
				compareParquet(t, ref, got)
			}
		})
	}
}

// Every fixed table of flat columns is encoded by package pqpage with the
// properties of its files (the run sink's writerOptions).
func TestColumnWriterEncodesTablesWithPqpage(t *testing.T) {
	checked := 0
	for _, tb := range schema.Tables() {
		sc := tb.ArrowSchema()
		flat := true
		for _, f := range sc.Fields() {
			flat = flat && isFlat(f.Type)
		}
		if !flat {
			continue
		}
		props := parquet.NewWriterProperties(writerOptions(tb, 1, RowGroupRows, false)...)
		w, err := NewColumnWriter(sc, io.Discard, props, 2)
		if err != nil {
			t.Fatalf("%s: %v", tb.Name, err)
		}
		if w.nf == nil {
			t.Errorf("%s: written with arrow-go's column writers, want pqpage's", tb.Name)
		}
		checked++
	}
	if checked < 3 {
		t.Errorf("%d tables of flat columns, want instruments, runs, rejects at least", checked)
	}
}

// On one core too the sink (and compaction, ColumnWorkers) writes a table
// of flat columns with ColumnWriter (pqpage's encoder, one goroutine), not
// with pqarrow's column writers and their dictionary encoder.
func TestSinkOnOneCoreEncodesWithPqpage(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s, err := New(Options{Store: storage.NewLocal(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Open(context.Background(), schema.Instruments, snap)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if cw, ok := w.(*writer).fw.(*ColumnWriter); !ok || cw.nf == nil || cw.workers != 1 {
		t.Errorf("one core: writer %T, want a ColumnWriter of pqpage's chunks on one goroutine", w.(*writer).fw)
	}
}

// WriteBuffered fills row groups of the properties' MaxRowGroupLength rows
// across records, as pqarrow's WriteBuffered does: the same row groups
// (none empty), values and statistics, here with a key-value pair in the
// footer too.
func TestColumnWriterBufferedMatchesPqarrow(t *testing.T) {
	dir := t.TempDir()
	recs := []arrow.Record{record(t, 100), record(t, 50), record(t, 1), record(t, 64), record(t, 20)}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	sc := schema.Instruments.ArrowSchema()
	props := func() *parquet.WriterProperties {
		return parquet.NewWriterProperties(writerOptions(schema.Instruments, 1, 64, false)...)
	}
	type bufferedWriter interface {
		WriteBuffered(arrow.Record) error
		AppendKeyValueMetadata(key, value string) error
		Close() error
	}
	writeWith := func(name string, open func(f *os.File) (bufferedWriter, error)) string {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w, err := open(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := w.WriteBuffered(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.AppendKeyValueMetadata("k", "v"); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ref := writeWith("pqarrow.parquet", func(f *os.File) (bufferedWriter, error) {
		return pqarrow.NewFileWriter(sc, f, props(), pqarrow.NewArrowWriterProperties())
	})
	got := writeWith("columns.parquet", func(f *os.File) (bufferedWriter, error) {
		return NewColumnWriter(sc, f, props(), 3)
	})
	compareParquet(t, ref, got)
	r, err := file.OpenParquetFile(got, false)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n := r.NumRowGroups(); n != 4 { // 235 rows, 64 a row group
		t.Errorf("%d row groups, want 4", n)
	}
	if v := r.MetaData().KeyValueMetadata().FindValue("k"); v == nil || *v != "v" {
		t.Errorf("key-value metadata k = %v, want v", v)
	}
}

func compareParquet(t *testing.T, want, got string) {
	t.Helper()
	open := func(path string) (*file.Reader, arrow.Table) {
		r, err := file.OpenParquetFile(path, false)
		if err != nil {
			t.Fatal(err)
		}
		fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return r, tbl
	}
	wr, wt := open(want)
	gr, gt := open(got)
	defer wr.Close()
	defer gr.Close()
	defer wt.Release()
	defer gt.Release()
	if want := schema.Instruments.ArrowSchema(); gt.Schema().NumFields() != want.NumFields() {
		t.Fatalf("%d columns read back, want %d", gt.Schema().NumFields(), want.NumFields())
	} else {
		for i, f := range want.Fields() {
			if g := gt.Schema().Field(i); g.Name != f.Name || !arrow.TypeEqual(g.Type, f.Type) || g.Nullable != f.Nullable {
				t.Errorf("column %d read back as %s, want %s", i, g, f)
			}
		}
	}
	if !wt.Schema().Equal(gt.Schema()) {
		t.Fatalf("schema:\n%s\nwant\n%s", gt.Schema(), wt.Schema())
	}
	if !array.TableEqual(wt, gt) {
		t.Fatal("values differ")
	}
	wm, gm := wr.MetaData(), gr.MetaData()
	if len(wm.RowGroups) != len(gm.RowGroups) || wm.NumRows != gm.NumRows {
		t.Fatalf("%d row groups, %d rows; want %d, %d", len(gm.RowGroups), gm.NumRows, len(wm.RowGroups), wm.NumRows)
	}
	for rg := 0; rg < len(wm.RowGroups); rg++ {
		for c := 0; c < wm.Schema.NumColumns(); c++ {
			wc, _ := wm.RowGroup(rg).ColumnChunk(c)
			gc, _ := gm.RowGroup(rg).ColumnChunk(c)
			ws, _ := wc.Statistics()
			gs, _ := gc.Statistics()
			if (ws == nil) != (gs == nil) {
				t.Fatalf("row group %d column %d: statistics present %v, want %v", rg, c, gs != nil, ws != nil)
			}
			if ws != nil && (!bytes.Equal(ws.EncodeMin(), gs.EncodeMin()) || !bytes.Equal(ws.EncodeMax(), gs.EncodeMax()) || ws.NullCount() != gs.NullCount()) {
				t.Errorf("row group %d column %s: statistics differ", rg, wm.Schema.Column(c).Name())
			}
			if fmt.Sprint(wc.Encodings()) != fmt.Sprint(gc.Encodings()) {
				t.Errorf("row group %d column %s: encodings %v, want %v", rg, wm.Schema.Column(c).Name(), gc.Encodings(), wc.Encodings())
			}
			if wc.NumValues() != gc.NumValues() || wc.Compression() != gc.Compression() {
				t.Errorf("row group %d column %s: %d values %v, want %d %v", rg, wm.Schema.Column(c).Name(), gc.NumValues(), gc.Compression(), wc.NumValues(), wc.Compression())
			}
		}
	}
}

// closeCountingBuffer is a file that counts its Close calls.
type closeCountingBuffer struct {
	bytes.Buffer
	closes int
}

func (c *closeCountingBuffer) Close() error { c.closes++; return nil }

// A row group that fails midway (here one column of the wrong length,
// the others encoded) fails the file: no part of it is written, Close
// returns the error and writes no footer, and a second Close (compaction's
// abort after a failed close) returns the same error without writing or
// closing again.
func TestColumnWriterFailedRowGroupLeavesNoFooter(t *testing.T) {
	rec := record(t, 20)
	defer rec.Release()
	sc := schema.Instruments.ArrowSchema()
	out := &closeCountingBuffer{}
	w, err := NewColumnWriter(sc, out, parquet.NewWriterProperties(writerOptions(schema.Instruments, 1, RowGroupRows, false)...), 2)
	if err != nil {
		t.Fatal(err)
	}
	if w.nf == nil {
		t.Fatal("not written by pqpage")
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	err = w.WriteColumns(10, func(i int) arrow.Array {
		if i == 1 {
			return array.NewSlice(rec.Column(i), 0, 9)
		}
		return array.NewSlice(rec.Column(i), 0, 10)
	})
	if err == nil {
		t.Fatal("WriteColumns: no error")
	}
	size := out.Len()
	cerr := w.Close()
	if cerr == nil {
		t.Fatal("Close: no error")
	}
	if out.Len() != size || bytes.HasSuffix(out.Bytes(), []byte("PAR1")) || out.closes != 1 {
		t.Errorf("Close wrote %d bytes (footer magic %v), %d closes; want none, 1 close", out.Len()-size, bytes.HasSuffix(out.Bytes(), []byte("PAR1")), out.closes)
	}
	if again := w.Close(); again != cerr || out.Len() != size || out.closes != 1 {
		t.Errorf("second Close: %v, %d bytes, %d closes; want %v, none, 1", again, out.Len()-size, out.closes, cerr)
	}
}
