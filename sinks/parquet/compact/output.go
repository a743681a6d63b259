package compact

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	pq "github.com/optlake/optlake/sinks/parquet"
)

// parquetSource is one input Parquet file.
type parquetSource struct {
	st     Target
	p      Partition
	batch  int
	f      File
	in     Input
	r      *file.Reader
	fr     *pqarrow.FileReader
	schema *arrow.Schema
	man    *pq.Manifest // compacted files only
	nrows  int64
}

func openSource(ctx context.Context, st Target, p Partition, f File, mem memory.Allocator, batch int) (*parquetSource, error) {
	in, err := st.Open(ctx, p, f)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", f.Name, err)
	}
	props := parquet.NewReaderProperties(mem)
	props.BufferedStreamEnabled = true // read pages through a small buffer, not whole column chunks
	props.BufferSize = 256 << 10
	r, err := file.NewParquetReader(in, file.WithReadProps(props))
	if err != nil {
		in.Close()
		return nil, fmt.Errorf("read %s: %w", f.Name, err)
	}
	fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{BatchSize: int64(batch), Parallel: false}, mem)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("read %s: %w", f.Name, err)
	}
	sc, err := fr.Schema()
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("read %s: schema: %w", f.Name, err)
	}
	s := &parquetSource{st: st, p: p, batch: batch, f: f, in: in, r: r, fr: fr, schema: sc, nrows: r.NumRows()}
	if pq.IsCompacted(f.Name) && !f.Parked {
		if s.man, err = pq.ManifestOf(r); err != nil {
			r.Close()
			return nil, fmt.Errorf("read %s: %w", f.Name, err)
		}
	}
	return s, nil
}

func (s *parquetSource) rows() int64 { return s.nrows }

// close closes the file; again is a no-op.
func (s *parquetSource) close() error {
	if s.r == nil {
		return nil
	}
	err := s.r.Close()
	s.r, s.fr, s.in = nil, nil, nil // the footer is large: let it go
	return err
}

// batches calls fn with each batch of the file, conformed to u.
func (s *parquetSource) batches(ctx context.Context, mem memory.Allocator, u *arrow.Schema, fn func(arrow.Record) error) error {
	if s.r == nil { // closed after its schema was read: open again
		again, err := openSource(ctx, s.st, s.p, s.f, mem, s.batch)
		if err != nil {
			return err
		}
		s.r, s.fr, s.in = again.r, again.fr, again.in
	}
	rr, err := s.fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return fmt.Errorf("read %s: %w", s.f.Name, err)
	}
	defer rr.Release()
	for rr.Next() {
		rec := conform(mem, u, rr.Record())
		err := fn(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	if err := rr.Err(); err != nil && err != io.EOF {
		return fmt.Errorf("read %s: %w", s.f.Name, err)
	}
	return nil
}

// sourceCursor reads a sorted (compacted) file as a merge input, leaving
// out the rows of the dropped snapshot groups (replaced by newer files).
type sourceCursor struct {
	s    *parquetSource
	rr   pqarrow.RecordReader
	mem  memory.Allocator
	u    *arrow.Schema
	key  []string
	drop groupSet
	cur  arrow.Record
	kept int64
}

func newSourceCursor(ctx context.Context, s *parquetSource, mem memory.Allocator, u *arrow.Schema, key []string, drop groupSet) (*sourceCursor, error) {
	rr, err := s.fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.f.Name, err)
	}
	return &sourceCursor{s: s, rr: rr, mem: mem, u: u, key: key, drop: drop}, nil
}

func (c *sourceCursor) next() (arrow.Record, error) {
	if c.cur != nil {
		c.cur.Release()
		c.cur = nil
	}
	for c.rr.Next() {
		rec := conform(c.mem, c.u, c.rr.Record())
		if len(c.drop) > 0 {
			filtered, err := c.filter(rec)
			rec.Release()
			if err != nil {
				return nil, err
			}
			rec = filtered
		}
		if rec.NumRows() == 0 {
			rec.Release()
			continue
		}
		c.cur = rec
		c.kept += rec.NumRows()
		return rec, nil
	}
	if err := c.rr.Err(); err != nil && err != io.EOF {
		return nil, fmt.Errorf("read %s: %w", c.s.f.Name, err)
	}
	return nil, nil
}

// filter returns rec without the rows of dropped groups.
func (c *sourceCursor) filter(rec arrow.Record) (arrow.Record, error) {
	kv, err := newKeyView(rec, c.key)
	if err != nil {
		return nil, err
	}
	rb, err := newRowBuilder(c.mem, c.u)
	if err != nil {
		return nil, err
	}
	defer rb.release()
	for i := range int(rec.NumRows()) {
		if _, gone := c.drop[kv.group(i)]; !gone {
			rb.add(rec, i)
		}
	}
	out := rb.flush()
	if out == nil {
		out = rb.b.NewRecord() // empty
	}
	return out, nil
}

func (c *sourceCursor) close() error {
	if c.cur != nil {
		c.cur.Release()
	}
	c.rr.Release()
	return c.s.close()
}

// output writes the merged rows into the staged partition: files of at
// most ~MaxFileBytes, row groups of RowGroupRows, zstd, encodings chosen
// per column on the first rows (chooseEncodings) or given (fixed). A flat
// schema's columns are encoded at once (pq.ColumnWriter).
type output struct {
	opt      *Options
	mem      memory.Allocator
	u        *arrow.Schema
	st       Staged
	manifest pq.Manifest
	fixed    []parquet.WriterProperty // the encodings, when not chosen by trials
	encs     []parquet.WriterProperty

	sample     []arrow.Record
	sampleRows int

	w     io.WriteCloser
	cw    *pq.CountingWriter
	fw    fileWriter
	parts int
	rows  int64 // in the current file
	total int64
	bytes int64
	chose map[string]string // column path -> encoding chosen
}

// fileWriter writes one output file: *pqarrow.FileWriter or
// *pq.ColumnWriter.
type fileWriter interface {
	WriteBuffered(arrow.Record) error
	AppendKeyValueMetadata(key, value string) error
	Close() error
}

// useFixed takes the given encodings, if any, before the first rows.
func (o *output) useFixed() {
	if o.encs == nil && o.fixed != nil {
		o.encs, o.chose = o.fixed, encodingNames(o.u, o.props(o.fixed...))
	}
}

// parallel reports an output whose files are written by pq.ColumnWriter.
func (o *output) parallel() bool { return pq.ColumnWorkers(o.u) > 0 }

// write takes a batch of merged rows (and releases it).
func (o *output) write(rec arrow.Record) error {
	o.useFixed()
	if o.encs == nil {
		o.sample = append(o.sample, rec)
		o.sampleRows += int(rec.NumRows())
		if o.sampleRows < o.opt.SampleRows {
			return nil
		}
		return o.flushSample()
	}
	defer rec.Release()
	return o.put(rec)
}

func (o *output) flushSample() error {
	encs, chose, err := chooseEncodings(o.u, o.sample, o.opt)
	if err != nil {
		return err
	}
	o.encs, o.chose = encs, chose
	sample := o.sample
	o.sample = nil
	defer func() {
		for _, r := range sample {
			r.Release()
		}
	}()
	for _, r := range sample {
		if err := o.put(r); err != nil {
			return err
		}
	}
	return nil
}

func (o *output) props(extra ...parquet.WriterProperty) *parquet.WriterProperties {
	return parquet.NewWriterProperties(append(baseProps(o.opt, o.mem), extra...)...)
}

func baseProps(opt *Options, mem memory.Allocator) []parquet.WriterProperty {
	return []parquet.WriterProperty{
		parquet.WithAllocator(mem),
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithCompressionLevel(opt.CompressionLevel),
		parquet.WithStats(true),
		parquet.WithMaxRowGroupLength(int64(opt.RowGroupRows)),
		parquet.WithDataPageSize(opt.PageBytes),
		parquet.WithCreatedBy("optlake compact"),
	}
}

func (o *output) put(rec arrow.Record) error {
	if err := o.open(); err != nil {
		return err
	}
	if err := pq.Guard(o.cw, func() error { return o.fw.WriteBuffered(rec) }); err != nil {
		return fmt.Errorf("write %s: %w", pq.CompactedName(o.manifest.ID, o.parts), err)
	}
	return o.wrote(rec.NumRows())
}

// open creates the next file when none is open.
func (o *output) open() error {
	if o.fw != nil {
		return nil
	}
	w, err := o.st.Create(pq.CompactedName(o.manifest.ID, o.parts))
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	o.w, o.cw = w, &pq.CountingWriter{W: w}
	err = pq.Guard(o.cw, func() (err error) {
		props := o.props(o.encs...)
		if o.parallel() {
			o.fw, err = pq.NewColumnWriter(o.u, o.cw, props, pq.ColumnWorkers(o.u))
		} else {
			o.fw, err = pqarrow.NewFileWriter(o.u, o.cw, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(o.mem)))
		}
		return err
	})
	if err != nil {
		w.Close()
		o.fw, o.w, o.cw = nil, nil, nil
		return fmt.Errorf("create %s: %w", pq.CompactedName(o.manifest.ID, o.parts), err)
	}
	o.rows = 0
	return nil
}

// wrote counts n rows written and closes the file past MaxFileBytes.
func (o *output) wrote(n int64) error {
	o.rows += n
	o.total += n
	if o.cw.N >= o.opt.MaxFileBytes {
		return o.closeFile()
	}
	return nil
}

func (o *output) closeFile() error {
	if o.fw == nil {
		return nil
	}
	m := o.manifest
	m.Part = o.parts
	m.Rows = o.rows
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := o.fw.AppendKeyValueMetadata(pq.ManifestKey, string(b)); err != nil {
		return err
	}
	err = pq.Guard(o.cw, o.fw.Close)
	if cerr := o.w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("close %s: %w", pq.CompactedName(o.manifest.ID, o.parts), pq.DiskFull(err))
	}
	o.bytes += o.cw.N
	o.parts++
	o.fw, o.w, o.cw = nil, nil, nil
	return nil
}

// finish writes what is buffered and closes the last file. A day without
// rows still gets one (empty) file: it records the snapshots it replaced.
func (o *output) finish() error {
	o.useFixed()
	if o.encs == nil {
		if err := o.flushSample(); err != nil {
			return err
		}
	}
	if o.fw == nil && o.parts == 0 {
		rb, err := newRowBuilder(o.mem, o.u)
		if err != nil {
			return err
		}
		empty := rb.b.NewRecord()
		rb.release()
		err = o.put(empty)
		empty.Release()
		if err != nil {
			return err
		}
	}
	return o.closeFile()
}

func (o *output) abort() {
	for _, r := range o.sample {
		r.Release()
	}
	o.sample = nil
	if o.fw != nil {
		pq.Guard(o.cw, o.fw.Close)
		o.w.Close()
	}
}

// encodingNames names each column's encoding under props.
func encodingNames(u *arrow.Schema, props *parquet.WriterProperties) map[string]string {
	out := map[string]string{}
	for _, f := range u.Fields() {
		switch {
		case props.DictionaryEnabledFor(f.Name):
			out[f.Name] = "dictionary"
		case props.EncodingFor(f.Name) == parquet.Encodings.DeltaByteArray, props.EncodingFor(f.Name) == parquet.Encodings.DeltaBinaryPacked:
			out[f.Name] = "delta"
		case props.EncodingFor(f.Name) == parquet.Encodings.DeltaLengthByteArray:
			out[f.Name] = "delta_length"
		default:
			out[f.Name] = "plain"
		}
	}
	return out
}

// pipe hands batches of merged rows to fn on a goroutine of its own, in
// order, one waiting at most: the merge finds and gathers the next
// batch's rows while the output encodes the last. fn owns each batch it
// gets.
type pipe struct {
	ch     chan arrow.Record
	done   chan struct{}
	err    error       // fn's first error (written before failed is set)
	failed atomic.Bool // fn has failed: later batches are dropped
}

func startPipe(fn func(arrow.Record) error) *pipe {
	p := &pipe{ch: make(chan arrow.Record, 1), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for b := range p.ch {
			if p.failed.Load() {
				b.Release()
				continue
			}
			// A panic here would end the process: Guard makes it an error.
			if err := pq.Guard(nil, func() error { return fn(b) }); err != nil {
				p.err = err
				p.failed.Store(true)
			}
		}
	}()
	return p
}

// send hands b over (the pipe owns it); fn's error once it has failed.
func (p *pipe) send(b arrow.Record) error {
	if p.failed.Load() {
		b.Release()
		return p.err
	}
	p.ch <- b
	return nil
}

// close waits for the batches sent and returns fn's error.
func (p *pipe) close() error {
	close(p.ch)
	<-p.done
	return p.err
}

// Encodings tried for each column on a sample of the day's rows; the
// smallest column chunk (after zstd) wins. Dictionary pages pay off on low
// cardinality (currencies, kinds, a day's repeated names), delta encodings
// on sorted or slowly changing numbers and on sorted names sharing
// prefixes, plain elsewhere.
var trials = []struct {
	name string
	enc  func(path string, pt parquet.Type, required bool) []parquet.WriterProperty
}{
	{"plain", func(path string, pt parquet.Type, required bool) []parquet.WriterProperty {
		return []parquet.WriterProperty{parquet.WithDictionaryFor(path, false), parquet.WithEncodingFor(path, parquet.Encodings.Plain)}
	}},
	{"dictionary", func(path string, pt parquet.Type, required bool) []parquet.WriterProperty {
		if pt == parquet.Types.Boolean {
			return nil
		}
		return []parquet.WriterProperty{parquet.WithDictionaryFor(path, true)}
	}},
	{"delta", func(path string, pt parquet.Type, required bool) []parquet.WriterProperty {
		if !required {
			return nil // arrow-go v17's delta decoders fail on columns with nulls (DecodeSpaced)
		}
		switch pt {
		case parquet.Types.Int64, parquet.Types.Int32:
			return []parquet.WriterProperty{parquet.WithDictionaryFor(path, false), parquet.WithEncodingFor(path, parquet.Encodings.DeltaBinaryPacked)}
		case parquet.Types.ByteArray:
			return []parquet.WriterProperty{parquet.WithDictionaryFor(path, false), parquet.WithEncodingFor(path, parquet.Encodings.DeltaByteArray)}
		}
		return nil
	}},
	{"delta_length", func(path string, pt parquet.Type, required bool) []parquet.WriterProperty {
		if required && pt == parquet.Types.ByteArray {
			return []parquet.WriterProperty{parquet.WithDictionaryFor(path, false), parquet.WithEncodingFor(path, parquet.Encodings.DeltaLengthByteArray)}
		}
		return nil
	}},
}

// chooseEncodings writes the sample's columns, one column at a time (the
// memory of one column), once per trial into memory and keeps, for each
// leaf column, the trial whose column chunk is the smallest.
func chooseEncodings(u *arrow.Schema, sample []arrow.Record, opt *Options) ([]parquet.WriterProperty, map[string]string, error) {
	out := []parquet.WriterProperty{parquet.WithDictionaryDefault(false)}
	names := map[string]string{}
	for j, f := range u.Fields() {
		sc := arrow.NewSchema([]arrow.Field{f}, nil)
		recs := make([]arrow.Record, len(sample))
		for k, r := range sample {
			recs[k] = array.NewRecord(sc, []arrow.Array{r.Column(j)}, r.NumRows())
		}
		props, chosen, err := chooseColumn(sc, recs, opt)
		for _, r := range recs {
			r.Release()
		}
		if err != nil {
			return nil, nil, fmt.Errorf("column %s: %w", f.Name, err)
		}
		out = append(out, props...)
		for k, v := range chosen {
			names[k] = v
		}
	}
	return out, names, nil
}

type leaf struct {
	path     string
	pt       parquet.Type
	required bool
}

// chooseColumn runs the trials on the records of one column: the
// cheapest wins (bytes stored plus decompressed bytes / DecodeWeight).
func chooseColumn(sc *arrow.Schema, recs []arrow.Record, opt *Options) ([]parquet.WriterProperty, map[string]string, error) {
	mem := memory.DefaultAllocator
	var leaves []leaf
	best := map[string]int64{}
	chosen := map[string]int{}
	var buf bytes.Buffer
	for ti, tr := range trials {
		var props []parquet.WriterProperty
		for _, l := range leaves {
			props = append(props, tr.enc(l.path, l.pt, l.required)...)
		}
		if ti > 0 && len(props) == 0 {
			continue
		}
		buf.Reset()
		all := append(baseProps(opt, mem), parquet.WithDictionaryDefault(false))
		fw, err := pqarrow.NewFileWriter(sc, &buf, parquet.NewWriterProperties(append(all, props...)...), pqarrow.NewArrowWriterProperties())
		if err != nil {
			return nil, nil, fmt.Errorf("encoding trial %s: %w", tr.name, err)
		}
		for _, r := range recs {
			if err := fw.WriteBuffered(r); err != nil {
				return nil, nil, fmt.Errorf("encoding trial %s: %w", tr.name, err)
			}
		}
		if err := fw.Close(); err != nil {
			return nil, nil, fmt.Errorf("encoding trial %s: %w", tr.name, err)
		}
		r, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
		if err != nil {
			return nil, nil, fmt.Errorf("encoding trial %s: %w", tr.name, err)
		}
		md := r.MetaData()
		if ti == 0 {
			for i := range md.Schema.NumColumns() {
				c := md.Schema.Column(i)
				leaves = append(leaves, leaf{c.Path(), c.PhysicalType(), c.MaxDefinitionLevel() == 0})
			}
		}
		sizes := map[string]int64{}
		for g := range r.NumRowGroups() {
			rg := md.RowGroup(g)
			for i := range rg.NumColumns() {
				cc, err := rg.ColumnChunk(i)
				if err != nil {
					r.Close()
					return nil, nil, err
				}
				// The cost of a column chunk: its bytes, plus the work of
				// reading it, which grows with its decompressed pages
				// (zstd output the reader then decodes value by value).
				sizes[md.Schema.Column(i).Path()] += cc.TotalCompressedSize() + cc.TotalUncompressedSize()/opt.DecodeWeight
			}
		}
		r.Close()
		for _, l := range leaves {
			if ti > 0 && len(tr.enc(l.path, l.pt, l.required)) == 0 {
				continue
			}
			if b, ok := best[l.path]; !ok || sizes[l.path] < b {
				best[l.path], chosen[l.path] = sizes[l.path], ti
			}
		}
	}
	var out []parquet.WriterProperty
	names := map[string]string{}
	for _, l := range leaves {
		out = append(out, trials[chosen[l.path]].enc(l.path, l.pt, l.required)...)
		names[l.path] = trials[chosen[l.path]].name
	}
	return out, names, nil
}
