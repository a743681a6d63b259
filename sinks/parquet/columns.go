package parquet

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/optlake/optlake/sinks/parquet/pqpage"
)

// recordWriter writes records to one Parquet file: Write as a row group
// of their own, WriteBuffered into the row group under way (closed at the
// properties' MaxRowGroupLength rows); Close writes the footer and closes
// the file. *pqarrow.FileWriter and *ColumnWriter are ones.
type recordWriter interface {
	Write(arrow.Record) error
	WriteBuffered(arrow.Record) error
	Close() error
}

var (
	_ recordWriter = (*pqarrow.FileWriter)(nil)
	_ recordWriter = (*ColumnWriter)(nil)
)

// ColumnWriter writes record batches into row groups whose columns are
// encoded and compressed by several goroutines at once: the columns of a
// buffered row group are independent until the row group is closed, which
// writes them to the file in order. pqarrow.FileWriter encodes them one
// after the other, which leaves the second core idle while the decoder
// waits for the sink. Only for tables of flat columns (ColumnWorkers): each
// column is one leaf whose definition level is its validity.
//
// Write makes each record one row group (the run sink's files);
// WriteBuffered adds a record to the row group under way and EndRowGroup
// closes it (compaction's row groups of many merged batches). The file is
// the same as pqarrow.FileWriter's (schema, row groups). Neither stores the
// ARROW:schema metadata: the Parquet logical types give every reader the
// same Arrow types (timestamps in UTC, strings), and the serialized schema
// was 4.9 KB of a 3,000-row snapshot's 47 KB.
//
// When every column is one package pqpage encodes (int64, float64, bool,
// timestamp[ms] and string columns, PLAIN or DELTA_BYTE_ARRAY, strings
// also with a dictionary: the lake's tables), the columns are encoded by pqpage's
// Chunks and the file laid out by its File: arrow-go's column writers
// took 1.45 of the 1M listing's 5.4 CPU-s, most of it in its generic
// byte-array path (statistics, buffer growth, levels as int16s) — issue
// 33. Otherwise (another type, or any column for which compaction's
// encoding trials chose a dictionary of numbers, DELTA_BINARY_PACKED
// integers or DELTA_LENGTH_BYTE_ARRAY strings) the whole file is written
// through arrow-go's file.Writer. So pqpage writes the per-snapshot files
// and the replayed days; a compacted file only when every column's chosen
// encoding is PLAIN, DELTA_BYTE_ARRAY or a dictionary of strings.
//
// After an error the file is failed: Close closes it without a footer
// (pqpage) and returns the error; a second Close does nothing (as
// arrow-go's).
type ColumnWriter struct {
	nf       *pqpage.File    // the file when pqpage writes every column; nil: pw
	chunks   []*pqpage.Chunk // per column, with nf
	pw       *file.Writer
	sc       *arrow.Schema
	props    pqarrow.ArrowWriterProperties
	workers  int
	levels   [][]int16                   // per worker: definition levels of one column
	inWorker []bool                      // per column: its last page built in the workers (flushPages)
	rgw      file.BufferedRowGroupWriter // the row group under way; nil between row groups
	rgRows   int64                       // rows in rgw
	maxRows  int64                       // WriteBuffered's row group size (the properties' MaxRowGroupLength)
}

// NewColumnWriter writes a Parquet file of schema sc to w, encoding on up
// to workers goroutines at once.
func NewColumnWriter(sc *arrow.Schema, w io.Writer, props *parquet.WriterProperties, workers int) (*ColumnWriter, error) {
	aprops := pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(props.Allocator()))
	pqschema, opts, ok, err := PageColumns(sc, props)
	if err != nil {
		return nil, err
	}
	workers = max(workers, 1)
	if ok {
		chunks := make([]*pqpage.Chunk, len(opts))
		for i, o := range opts {
			if chunks[i], err = pqpage.New(o); err != nil {
				return nil, fmt.Errorf("column %s: %w", sc.Field(i).Name, err)
			}
		}
		nf, err := pqpage.NewFile(w, pqschema, props)
		if err != nil {
			return nil, err
		}
		return &ColumnWriter{nf: nf, chunks: chunks, sc: sc, workers: workers, maxRows: max(props.MaxRowGroupLength(), 1)}, nil
	}
	inWorker := make([]bool, pqschema.NumColumns())
	for i := range inWorker {
		inWorker[i] = !props.DictionaryEnabledFor(pqschema.Column(i).Path())
	}
	pw := file.NewParquetWriter(w, pqschema.Root(), file.WithWriterProps(props))
	return &ColumnWriter{pw: pw, sc: sc, props: aprops, workers: workers, levels: make([][]int16, workers),
		inWorker: inWorker, maxRows: max(props.MaxRowGroupLength(), 1)}, nil
}

// PageColumns returns the Parquet schema of a file of flat columns sc
// written with props (as NewColumnWriter writes it) and its columns'
// pqpage options; ok is false when pqpage does not write every column
// (NewColumnWriter then writes through arrow-go).
func PageColumns(sc *arrow.Schema, props *parquet.WriterProperties) (*schema.Schema, []pqpage.Options, bool, error) {
	aprops := pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(props.Allocator()))
	pqschema, err := pqarrow.ToParquet(sc, props, aprops)
	if err != nil {
		return nil, nil, false, err
	}
	for i, f := range sc.Fields() {
		if !isFlat(f.Type) {
			return nil, nil, false, fmt.Errorf("column %s is not a flat column", sc.Field(i).Name)
		}
	}
	opts, ok := pqpage.ColumnOptions(pqschema, sc.Fields(), props)
	return pqschema, opts, ok, nil
}

// ColumnWorkers is how many goroutines encode the columns of a file of
// schema sc at once (NewColumnWriter): GOMAXPROCS, at most 4. It is 0
// when ColumnWriter cannot write sc (a list, struct or other nested
// column): write with pqarrow's writer. On one core it is 1: ColumnWriter
// on one goroutine, whose pqpage encoder is cheaper than pqarrow's column
// writers, and whose dictionary pages (pq.Encodings) are pqpage's, not
// arrow-go's dictionary encoder's. With GOMAXPROCS=1 (issue 33, 4 and 3
// pairs against main before the dictionaries, which wrote through pqarrow
// on one core): the 1M listing's run 2.9–3.9 CPU-s against 3.8–4.1; a
// replay, whose day files compaction writes through ColumnWriter too,
// 1.40–1.62 against 1.67–2.26 (a 2-core machine shared with other work).
func ColumnWorkers(sc *arrow.Schema) int {
	for _, f := range sc.Fields() {
		if !isFlat(f.Type) {
			return 0
		}
	}
	return min(runtime.GOMAXPROCS(0), 4)
}

// isFlat reports types written as a single leaf column.
func isFlat(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.LIST, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST, arrow.STRUCT, arrow.MAP, arrow.DICTIONARY, arrow.EXTENSION, arrow.SPARSE_UNION, arrow.DENSE_UNION:
		return false
	}
	return true
}

// Write writes rec as one row group (after the row group under way, if
// any, is closed).
func (w *ColumnWriter) Write(rec arrow.Record) error {
	if rec.NumRows() == 0 {
		return nil
	}
	if err := w.EndRowGroup(); err != nil {
		return err
	}
	return w.put(rec, true)
}

// WriteBuffered adds rec's rows to the row group under way (starting one
// when none is), closing it at the properties' MaxRowGroupLength rows, as
// pqarrow.FileWriter's WriteBuffered does.
func (w *ColumnWriter) WriteBuffered(rec arrow.Record) error {
	n := rec.NumRows()
	for off := int64(0); off < n; {
		k := min(n-off, w.maxRows-w.rgRows)
		part := rec
		if k < n {
			part = rec.NewSlice(off, off+k)
		}
		err := w.put(part, w.rgRows+k >= w.maxRows)
		if k < n {
			part.Release()
		}
		if err != nil {
			return err
		}
		off += k
	}
	return nil
}

// put encodes rec's columns into the row group under way; end closes it.
func (w *ColumnWriter) put(rec arrow.Record, end bool) error {
	if !rec.Schema().Equal(w.sc) {
		return fmt.Errorf("record schema %s differs from the file's", rec.Schema())
	}
	return w.write(rec.NumRows(), func(i int) arrow.Array {
		c := rec.Column(i)
		c.Retain()
		return c
	}, end)
}

// Room is the rows the row group under way takes before WriteColumns
// closes it.
func (w *ColumnWriter) Room() int64 { return w.maxRows - w.rgRows }

// WriteColumns adds n rows (at most Room) to the row group under way,
// closing it when full: column i is column(i), called on a worker once
// (so the caller may build a batch's columns at once too) and released
// after.
func (w *ColumnWriter) WriteColumns(n int64, column func(i int) arrow.Array) error {
	if n > w.Room() {
		return fmt.Errorf("%d rows for a row group with room for %d", n, w.Room())
	}
	if n <= 0 {
		return nil
	}
	return w.write(n, column, n == w.Room())
}

// write encodes n rows, column i being column(i), into the row group under
// way; end closes it after, its columns' last pages built in the same pass
// (see EndRowGroup).
func (w *ColumnWriter) write(n int64, column func(i int) arrow.Array, end bool) error {
	if w.nf != nil {
		return w.writeChunks(n, column, end)
	}
	if w.rgw == nil {
		w.rgw, w.rgRows = w.pw.AppendBufferedRowGroup(), 0
	}
	rgw := w.rgw
	w.rgRows += n
	err := w.columns(func(ctx context.Context, i, k int) error {
		arr := column(i)
		defer arr.Release()
		if int64(arr.Len()) != n {
			return fmt.Errorf("%d values for %d rows", arr.Len(), n)
		}
		if err := w.column(ctx, rgw, arr, i, k); err != nil {
			return err
		}
		if end {
			return w.flushPages(rgw, i)
		}
		return nil
	})
	if err != nil || !end {
		return err
	}
	w.rgw, w.rgRows = nil, 0
	return rgw.Close()
}

// EndRowGroup closes the row group under way (none: nothing to do). Each
// column's last page is built and compressed in the workers first: the row
// group's Close, which would otherwise do it for every column on one
// goroutine, is then left with the statistics and copying each column's
// pages into the file in order.
func (w *ColumnWriter) EndRowGroup() error {
	if w.nf != nil {
		if w.rgRows == 0 {
			return nil
		}
		if err := w.columns(func(_ context.Context, i, _ int) error { return w.chunks[i].Finish() }); err != nil {
			w.nf.Fail(err)
			return err
		}
		return w.writeRowGroup()
	}
	rgw := w.rgw
	if rgw == nil {
		return nil
	}
	w.rgw, w.rgRows = nil, 0
	if err := w.columns(func(_ context.Context, i, _ int) error { return w.flushPages(rgw, i) }); err != nil {
		return err
	}
	return rgw.Close()
}

// flushPages builds and compresses column i's last page (a buffered row
// group's column writes its pages to a buffer of its own, so columns may
// flush at once); not for a dictionary column, whose data pages must
// follow the dictionary page that the row group's Close writes.
func (w *ColumnWriter) flushPages(rgw file.BufferedRowGroupWriter, i int) error {
	if !w.inWorker[i] {
		return nil
	}
	cw, err := rgw.Column(i)
	if err != nil {
		return err
	}
	if f, ok := cw.(pageFlusher); ok {
		return f.FlushBufferedDataPages()
	}
	return nil
}

// columns runs fn for every column on the workers (fn gets the column and
// the worker's number); the first error, naming its column, is returned.
func (w *ColumnWriter) columns(fn func(ctx context.Context, i, k int) error) error {
	ncols := w.sc.NumFields()
	errs := make([]error, ncols)
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for k := range min(w.workers, ncols) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			if w.pw != nil {
				ctx = pqarrow.NewArrowWriteContext(ctx, &w.props)
			}
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= ncols {
					return
				}
				// A panic here would end the process: Guard makes it
				// this column's error.
				errs[i] = Guard(nil, func() error { return fn(ctx, i, k) })
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("column %s: %w", w.sc.Field(i).Name, err)
		}
	}
	return nil
}

// writeChunks is write with pqpage's chunks: each worker appends its
// columns' arrays (compressing the pages they fill); end closes the
// row group, the last pages closed in the same pass.
func (w *ColumnWriter) writeChunks(n int64, column func(i int) arrow.Array, end bool) error {
	w.rgRows += n
	err := w.columns(func(_ context.Context, i, _ int) error {
		arr := column(i)
		defer arr.Release()
		if int64(arr.Len()) != n {
			return fmt.Errorf("%d values for %d rows", arr.Len(), n)
		}
		if err := w.chunks[i].Append(arr); err != nil {
			return err
		}
		if end {
			return w.chunks[i].Finish()
		}
		return nil
	})
	if err != nil {
		// some columns hold the rows, others not: the row group cannot be
		// completed, and the file gets no footer (Close returns err)
		w.nf.Fail(err)
		return err
	}
	if !end {
		return nil
	}
	return w.writeRowGroup()
}

// writeRowGroup writes the finished chunks as the next row group and
// empties them (after a failure too, which fails the file: nothing of the
// row group is in it).
func (w *ColumnWriter) writeRowGroup() error {
	err := w.nf.WriteRowGroup(w.rgRows, w.chunks)
	w.rgRows = 0
	for _, c := range w.chunks {
		c.Reset()
	}
	return err
}

// column encodes arr, column i, into the row group (worker k's buffers);
// the pages it fills are compressed here, in the worker.
func (w *ColumnWriter) column(ctx context.Context, rgw file.BufferedRowGroupWriter, arr arrow.Array, i, k int) error {
	cw, err := rgw.Column(i)
	if err != nil {
		return err
	}
	var def []int16
	if cw.LevelInfo().DefLevel > 0 {
		n := arr.Len()
		if cap(w.levels[k]) < n {
			w.levels[k] = make([]int16, n)
		}
		def = w.levels[k][:n]
		for j := range def {
			def[j] = 1
		}
		if arr.NullN() > 0 {
			for j := range def {
				if arr.IsNull(j) {
					def[j] = 0
				}
			}
		}
	}
	return pqarrow.WriteArrowToColumn(ctx, cw, arr, def, nil, w.sc.Field(i).Nullable)
}

// pageFlusher is what EndRowGroup uses to compress a column's pages in its
// worker; every column writer of the flat types has it (checked here, so
// an arrow-go upgrade that drops it fails to build instead of quietly
// compressing on one goroutine again).
type pageFlusher interface{ FlushBufferedDataPages() error }

var (
	_ pageFlusher = (*file.BooleanColumnChunkWriter)(nil)
	_ pageFlusher = (*file.Int32ColumnChunkWriter)(nil)
	_ pageFlusher = (*file.Int64ColumnChunkWriter)(nil)
	_ pageFlusher = (*file.Float32ColumnChunkWriter)(nil)
	_ pageFlusher = (*file.Float64ColumnChunkWriter)(nil)
	_ pageFlusher = (*file.ByteArrayColumnChunkWriter)(nil)
	_ pageFlusher = (*file.FixedLenByteArrayColumnChunkWriter)(nil)
)

// AppendKeyValueMetadata adds a key-value pair to the file's footer.
func (w *ColumnWriter) AppendKeyValueMetadata(key, value string) error {
	if w.nf != nil {
		return w.nf.AppendKeyValueMetadata(key, value)
	}
	return w.pw.AppendKeyValueMetadata(key, value)
}

// Close closes the row group under way, writes the footer and closes the
// file.
func (w *ColumnWriter) Close() error {
	if w.nf != nil {
		err := w.EndRowGroup()
		if cerr := w.nf.Close(); err == nil {
			err = cerr
		}
		return err
	}
	if err := w.EndRowGroup(); err != nil {
		w.pw.Close()
		return err
	}
	return w.pw.Close()
}
