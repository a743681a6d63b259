package pqpage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

var magic = []byte("PAR1")

// ColumnOptions are the Options of the chunks of a file of schema sc
// (Parquet) whose columns hold arrays of arrow's field types, written with
// props; ok is false when a column is not one a Chunk writes as arrow-go
// would (not flat, another type, a dictionary of other values than
// strings or with arrow-go's first-page cost check, an encoding other than
// PLAIN or strings' DELTA_BYTE_ARRAY) or the file is not one File writes
// (encrypted, with page indexes or bloom filters, data pages V2).
func ColumnOptions(sc *schema.Schema, fields []arrow.Field, props *parquet.WriterProperties) (opts []Options, ok bool) {
	if sc.NumColumns() != len(fields) || props.FileEncryptionProperties() != nil || props.DataPageVersion() != parquet.DataPageV1 {
		return nil, false
	}
	opts = make([]Options, len(fields))
	for i, f := range fields {
		col := sc.Column(i)
		path := col.Path()
		if !Supported(f.Type) || col.MaxRepetitionLevel() != 0 || col.MaxDefinitionLevel() > 1 ||
			props.PageIndexEnabledFor(path) || props.BloomFilterEnabledFor(path) {
			return nil, false
		}
		enc := props.EncodingFor(path)
		dict := props.DictionaryEnabledFor(path)
		delta := enc == parquet.Encodings.DeltaByteArray && !dict
		switch {
		case dict && (f.Type.ID() != arrow.STRING || enc != parquet.Encodings.Plain || props.DictionaryCostFallbackEnabledFor(path)):
			return nil, false
		case enc != parquet.Encodings.Plain && !(delta && f.Type.ID() == arrow.STRING):
			return nil, false
		}
		opts[i] = Options{
			Type:         f.Type,
			Optional:     col.MaxDefinitionLevel() == 1,
			Delta:        delta,
			Stats:        props.StatisticsEnabledFor(path),
			Signed:       col.SortOrder() == schema.SortSIGNED,
			Codec:        props.CompressionFor(path),
			Level:        props.CompressionLevelFor(path),
			PageSize:     props.DataPageSize(),
			MaxStatsSize: props.MaxStatsSizeFor(path),
			BatchRows:    int(min(props.WriteBatchSize(), math.MaxInt32)),
		}
		if dict {
			opts[i].Dict, opts[i].DictPageSize = true, props.DictionaryPageSizeLimit()
			opts[i].IndexEncoding, opts[i].DictEncoding = props.DictionaryIndexEncoding(), props.DictionaryPageEncoding()
		}
	}
	return opts, true
}

// File writes a Parquet file whose column chunks are Chunks: the magic,
// each row group's chunks in column order, then the footer, built by
// arrow-go's metadata builders as its file writer builds it.
type File struct {
	w      io.Writer
	pos    int64
	meta   *metadata.FileMetaDataBuilder
	ncols  int
	rgs    int16
	err    error // the first failure: every later write and Close return it
	closed bool
}

// NewFile starts a file of schema sc on w (writing the magic).
func NewFile(w io.Writer, sc *schema.Schema, props *parquet.WriterProperties) (*File, error) {
	f := &File{w: w, meta: metadata.NewFileMetadataBuilder(sc, props, metadata.NewKeyValueMetadata()), ncols: sc.NumColumns()}
	if err := f.write(magic); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *File) write(b []byte) error {
	if f.err != nil {
		return f.err
	}
	n, err := f.w.Write(b)
	f.pos += int64(n)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		f.err = fmt.Errorf("parquet: write: %w", err)
	}
	return f.err
}

// WriteRowGroup writes a row group of rows rows whose columns are chunks
// (each Finished). Every chunk is checked before anything is written: a
// failure leaves no part of the row group in the file or the footer, and
// fails the File (every later write and Close return the error), as a
// failed write does.
func (f *File) WriteRowGroup(rows int64, chunks []*Chunk) error {
	if f.err != nil {
		return f.err
	}
	if f.closed {
		return f.fail(errors.New("parquet: row group after Close"))
	}
	if len(chunks) != f.ncols {
		return f.fail(fmt.Errorf("parquet: %d column chunks for %d columns", len(chunks), f.ncols))
	}
	metas := make([]Meta, len(chunks))
	for i, c := range chunks {
		m := c.Meta()
		if m.Values != rows || c.rows != 0 {
			return f.fail(fmt.Errorf("parquet: column %d: %d values (%d not finished) in a row group of %d rows", i, m.Values, c.rows, rows))
		}
		if (c.dictOn || c.keepDict) && len(c.dictPage) == 0 { // its pages of indices without their dictionary
			return f.fail(fmt.Errorf("parquet: column %d: not finished (no dictionary page)", i))
		}
		metas[i] = m
	}
	rg := f.meta.AppendRowGroup()
	rg.SetNumRows(int(rows))
	start := f.pos
	for i, c := range chunks {
		m := metas[i]
		cc := rg.NextColumnChunk()
		if m.Stats != nil && rows > 0 {
			cc.SetStats(*m.Stats)
		}
		info := metadata.ChunkMetaInfo{NumValues: m.Values, IndexPageOffset: -1, DataPageOffset: f.pos + m.DictPage,
			CompressedSize: m.CompressedSize, UncompressedSize: m.UncompressedSize}
		encStats := metadata.EncodingStats{DataEncodingStats: map[parquet.Encoding]int32{}}
		if m.IndexPages > 0 {
			encStats.DataEncodingStats[m.IndexEncoding] = m.IndexPages
		}
		if plain := m.Pages - m.IndexPages; plain > 0 || m.Pages == 0 {
			encStats.DataEncodingStats[m.Encoding] = plain
		}
		hasDict := m.DictPage > 0
		if hasDict {
			info.DictPageOffset = f.pos
			encStats.DictEncodingStats = map[parquet.Encoding]int32{m.DictEncoding: 1}
		}
		// the encodings listed as arrow-go lists them: after a fallback
		// PLAIN once more (even when no value came after it)
		if err := cc.Finish(info, hasDict, m.Fallback, encStats); err != nil {
			return f.fail(fmt.Errorf("parquet: column %d: %w", i, err))
		}
		if err := f.write(c.DictPage()); err != nil {
			return err
		}
		if err := f.write(c.Bytes()); err != nil {
			return err
		}
	}
	if err := rg.Finish(f.pos-start, f.rgs); err != nil {
		return f.fail(fmt.Errorf("parquet: row group %d: %w", f.rgs, err))
	}
	f.rgs++
	return nil
}

// Fail fails the File with err (unless it failed already): every later
// write returns the first error, and Close closes w without a footer. For
// a writer whose row group could not be completed.
func (f *File) Fail(err error) { f.fail(err) }

func (f *File) fail(err error) error {
	if f.err == nil {
		f.err = err
	}
	return f.err
}

// AppendKeyValueMetadata adds a key-value pair to the footer.
func (f *File) AppendKeyValueMetadata(key, value string) error {
	return f.meta.AppendKeyValueMetadata(key, value)
}

// Close writes the footer and closes w if it is an io.Closer (as arrow-go's
// file writer does); a failed File closes w without a footer. Like
// arrow-go's, a second Close does nothing and returns the first one's
// error (nil after a good one).
func (f *File) Close() error {
	if f.closed {
		return f.err
	}
	f.closed = true
	err := f.footer()
	if c, ok := f.w.(io.Closer); ok {
		if cerr := c.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("parquet: close: %w", cerr)
		}
	}
	if err != nil {
		f.err = err // what a second Close returns
	}
	return err
}

func (f *File) footer() error {
	if f.err != nil {
		return f.err
	}
	fm, err := f.meta.Finish()
	if err != nil {
		return fmt.Errorf("parquet: footer: %w", err)
	}
	cw := &countWriter{w: f}
	if _, err := fm.WriteTo(cw, nil); err != nil {
		return fmt.Errorf("parquet: footer: %w", err)
	}
	if f.err != nil {
		return f.err
	}
	return f.write(append(binary.LittleEndian.AppendUint32(nil, uint32(cw.n)), magic...))
}

// countWriter counts the footer's bytes on their way to the file.
type countWriter struct {
	w *File
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	if err := c.w.write(b); err != nil {
		return 0, err
	}
	c.n += int64(len(b))
	return len(b), nil
}
