package parquet

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// recordWriter writes records to one Parquet file; Close writes the footer
// and closes the file. *pqarrow.FileWriter is one.
type recordWriter interface {
	Write(arrow.Record) error
	Close() error
}

// columnWriter writes each record as one row group whose columns are
// encoded and compressed by several goroutines at once: the columns of a
// buffered row group are independent until the row group is closed, which
// writes them to the file in order. pqarrow.FileWriter encodes them one
// after the other, which leaves the second core idle while the decoder
// waits for the sink. Only for tables of flat columns (no lists): each
// column is one leaf whose definition level is its validity.
//
// The file is the same as pqarrow.FileWriter's (schema, one row group per
// record). Neither stores the ARROW:schema metadata: the Parquet logical
// types give every reader the same Arrow types (timestamps in UTC, strings),
// and the serialized schema was 4.9 KB of a 3,000-row snapshot's 47 KB.
type columnWriter struct {
	pw      *file.Writer
	sc      *arrow.Schema
	props   pqarrow.ArrowWriterProperties
	workers int
	levels  [][]int16 // per worker: definition levels of one column
}

func newColumnWriter(sc *arrow.Schema, w io.Writer, props *parquet.WriterProperties, workers int) (*columnWriter, error) {
	aprops := pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(props.Allocator()))
	pqschema, err := pqarrow.ToParquet(sc, props, aprops)
	if err != nil {
		return nil, err
	}
	for i, f := range sc.Fields() {
		if !isFlat(f.Type) {
			return nil, fmt.Errorf("column %s is not a flat column", sc.Field(i).Name)
		}
	}
	pw := file.NewParquetWriter(w, pqschema.Root(), file.WithWriterProps(props))
	return &columnWriter{pw: pw, sc: sc, props: aprops, workers: workers, levels: make([][]int16, workers)}, nil
}

// isFlat reports types written as a single leaf column.
func isFlat(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.LIST, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST, arrow.STRUCT, arrow.MAP, arrow.DICTIONARY, arrow.EXTENSION, arrow.SPARSE_UNION, arrow.DENSE_UNION:
		return false
	}
	return true
}

// Write writes rec as one row group.
func (w *columnWriter) Write(rec arrow.Record) error {
	if !rec.Schema().Equal(w.sc) {
		return fmt.Errorf("record schema %s differs from the file's", rec.Schema())
	}
	n := int(rec.NumRows())
	if n == 0 {
		return nil
	}
	rgw := w.pw.AppendBufferedRowGroup()
	ncols := int(rec.NumCols())
	errs := make([]error, ncols)
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for k := range min(w.workers, ncols) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := pqarrow.NewArrowWriteContext(context.Background(), &w.props)
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
				errs[i] = Guard(nil, func() error { return w.column(ctx, rgw, rec, i, k) })
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("column %s: %w", w.sc.Field(i).Name, err)
		}
	}
	return rgw.Close()
}

// column encodes column i of rec into the row group (worker k's buffers).
func (w *columnWriter) column(ctx context.Context, rgw file.BufferedRowGroupWriter, rec arrow.Record, i, k int) error {
	cw, err := rgw.Column(i)
	if err != nil {
		return err
	}
	arr := rec.Column(i)
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
	if err := pqarrow.WriteArrowToColumn(ctx, cw, arr, def, nil, w.sc.Field(i).Nullable); err != nil {
		return err
	}
	// Build and compress the column's last page here, in the worker: the
	// row group's Close, which would otherwise do it for every column on
	// one goroutine, is then left with the statistics and copying each
	// column's pages into the file in order. (A buffered row group's
	// column writes its pages to a buffer of its own, so columns may flush
	// at once.)
	if f, ok := cw.(pageFlusher); ok {
		return f.FlushBufferedDataPages()
	}
	return nil
}

// pageFlusher is what column uses to compress a column's pages in its
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

// Close writes the footer and closes the file.
func (w *columnWriter) Close() error { return w.pw.Close() }
