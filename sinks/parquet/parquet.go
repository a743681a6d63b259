// Package parquet is the Parquet lake sink: one hive-partitioned folder per
// table, one zstd-compressed file per table and snapshot, streamed into the
// data directory's store (package storage: a hidden temporary file fsynced
// and renamed, or a multipart upload completed at commit) so readers never
// see a partial file.
package parquet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/optlake/optlake/lake/layout"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/storage"
)

// Options configure the sink.
type Options struct {
	Store            storage.Store // the data directory (a bucket prefix or a folder); required
	CompressionLevel int           // zstd level; 0 = 1 (see levelOr)
	RowGroupRows     int64         // most rows of a row group; 0 = the package's RowGroupRows (262,144)
	Logger           *slog.Logger
	// Iceberg writes the files of an Iceberg lake's tables: statistics on
	// every column, the schema's Unfiltered ones too, since the table's
	// manifests copy them as the bounds every engine prunes by (a hive
	// lake's files leave them out, see writerOptions); timestamps in
	// microseconds, Iceberg's unit (Micros; a hive lake's are
	// milliseconds).
	Iceberg bool
	// Park, when set, is asked where each file goes (the lake's table
	// format sets it: its compaction parks a snapshot a compacted day
	// holds already); nil writes every file in its place.
	Park Placer
}

// A Placer says where the sink writes the table file rel (Path, slashed):
// "" for its place in the lake, or the name of the file it is parked as
// instead (the writer's Committed.Parked is set then).
type Placer func(ctx context.Context, rel string) (parked string, err error)

// Sink writes Parquet files into the data directory's store.
type Sink struct {
	opt Options
	st  storage.Store
	log *slog.Logger
}

var _ sinks.Sink = (*Sink)(nil)

// New returns a Parquet sink writing into opt.Store (a local folder is
// created if missing).
func New(opt Options) (*Sink, error) {
	st := opt.Store
	if st == nil {
		return nil, errors.New("parquet sink: no data directory")
	}
	if dir := storage.LocalDir(st); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("parquet sink: %w", err)
		}
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sink{opt: opt, st: st, log: log.With("sink", "parquet")}
	return s, nil
}

// Name implements sinks.Sink.
func (s *Sink) Name() string { return "parquet" }

// CommitsAtomically reports that a Writer's Commit makes the table's rows
// visible all at once (one file renamed into place) and Abort leaves
// nothing (sinks.Atomic): the pipeline need not stage rows for it.
func (s *Sink) CommitsAtomically() bool { return true }

// Close implements sinks.Sink.
func (s *Sink) Close(context.Context) error { return nil }

// Path returns the file that holds table t's rows of snap, relative to the
// data directory: <table>/date=YYYY-MM-DD/<snapshot>-<run_id>.parquet, with
// the endpoint appended for tables shared by endpoints (rejects, runs are
// per run). The name is a pure function of the snapshot, so a replay
// replaces the file instead of adding a second one.
func Path(t *schema.Table, snap sinks.Snapshot) string {
	ts := snap.Time.UTC()
	name := ts.Format(storage.TimeLayout) + "-" + storage.SafeNameDots(snap.RunID)
	if t == schema.Rejects {
		name += "-" + storage.SafeNameDots(snap.Endpoint)
	}
	if snap.Part != "" {
		name += "-" + storage.SafeNameDots(snap.Part)
	}
	return filepath.FromSlash(layout.Day(storage.SafeNameDots(t.Name), ts.Format(time.DateOnly)) + "/" + name + ".parquet")
}

// where names an object of the store for summaries: its path in a local
// folder, its URL-like name on a bucket (never a credential).
func (s *Sink) where(name string) string {
	if dir := storage.LocalDir(s.st); dir != "" {
		return filepath.Join(dir, filepath.FromSlash(name))
	}
	return s.st.String() + "/" + name
}

// Open implements sinks.Sink. The file streams into the store as rows
// arrive; ctx bounds the upload.
func (s *Sink) Open(ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
	return s.OpenVersion(ctx, t, snap, "")
}

// OpenVersion implements sinks.Versioned: Open writing the snapshot's file under
// VersionedName(Path(t, snap), version) instead of its own name (version
// "": Open): an Iceberg lake never rewrites a file its tables may
// reference, so a snapshot loaded again gets a file of its own. A file
// Options.Park parks goes there, as with Open.
func (s *Sink) OpenVersion(ctx context.Context, t *schema.Table, snap sinks.Snapshot, version string) (sinks.Writer, error) {
	rel := filepath.ToSlash(Path(t, snap))
	name := rel
	if version != "" {
		name = VersionedName(rel, version)
	}
	parked := false
	if s.opt.Park != nil {
		park, err := s.opt.Park(ctx, rel)
		if err != nil {
			return nil, fmt.Errorf("parquet: %s: %w", rel, err)
		}
		if park != "" {
			name, parked = park, true
		}
	}
	sw, err := s.st.Create(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("parquet: %w", err)
	}
	f := &CountingWriter{W: sw}
	props := parquet.NewWriterProperties(writerOptions(t, levelOr(s.opt.CompressionLevel), cmp.Or(s.opt.RowGroupRows, RowGroupRows), s.opt.Iceberg)...)
	var fw recordWriter
	var us *arrow.Schema // the file's schema when it differs from the records' (Micros)
	err = Guard(f, func() (err error) {
		sc := t.ArrowSchema()
		if s.opt.Iceberg {
			if m := Micros(sc); m != sc {
				sc, us = m, m
			}
		}
		if workers := ColumnWorkers(sc); workers > 0 {
			fw, err = NewColumnWriter(sc, f, props, workers)
		} else {
			fw, err = pqarrow.NewFileWriter(sc, f, props, pqarrow.NewArrowWriterProperties())
		}
		return err
	})
	if err != nil {
		sw.Abort()
		return nil, fmt.Errorf("parquet: create %s: %w", rel, err)
	}
	return &writer{s: s, t: t, sw: sw, f: f, fw: fw, name: name, rel: rel, parked: parked, start: time.Now(), micros: us}, nil
}

// writerOptions are the Parquet writer properties for table t: zstd at
// level, row groups of at most rowGroupRows rows (RowGroupRows), pages of
// PageBytes, statistics (but on the schema's Unfiltered columns: on the 1M
// listing the instruments file took ~0.2 of its ~1.2 CPU-s less without
// them, docs/PERFORMANCE.md, issue 33; compaction and replay keep every
// column's), Encodings (plain encoding for most columns, dictionary pages
// for the strings of few values, Dictionary, and DELTA_BYTE_ARRAY for the
// columns whose values share prefixes, schema.Column.SharedPrefix).
//
// Chosen by measurement (docs/PERFORMANCE.md, a 3,000-instrument snapshot):
// no dictionary pages for numbers — arrow-go v17's dictionary encoder
// boxes every value in an interface (one allocation per value), 1.0–2.0
// CPU-s per million rows, while zstd on plain pages finds the repeated
// values anyway (on a 3,000-row snapshot a dictionary strike saves 0.8 KB
// at level 1 and costs 0.2 KB at level 3); dictionary pages for the
// Dictionary strings, which package pqpage encodes (issue 33: a replay's
// day files 473,864 → 366,705 bytes for instruments and 109,783 → 95,097
// for instrument_events, its pages ~0.07 CPU-s cheaper: an index per value
// instead of copying the string and zstd finding it again); delta
// encoding of names and ids 6.4 + 4.6 KB → 2.5 + 3.5 KB; delta encoding of
// the timestamps, and of every string column, larger than plain.
//
// With allStats (an Iceberg lake's files) the Unfiltered columns keep
// theirs too.
func writerOptions(t *schema.Table, level int, rowGroupRows int64, allStats bool) []parquet.WriterProperty {
	opts := append([]parquet.WriterProperty{
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithCompressionLevel(level),
		parquet.WithStats(true),
		parquet.WithCreatedBy("optlake"),
		parquet.WithMaxRowGroupLength(rowGroupRows),
		parquet.WithDataPageSize(PageBytes),
	}, Encodings(t)...)
	for _, c := range t.Columns {
		if c.Unfiltered && !allStats {
			opts = append(opts, parquet.WithStatsFor(c.Name, false))
		}
	}
	return opts
}

// RowGroupRows is the most rows of a row group of a per-snapshot file: a
// file's records (schema.DefaultBatchRows each) are gathered into row
// groups of 8 of them (Write: the writer's WriteBuffered). Each row group
// starts a new column writer per column, with fresh page, encoder and
// compression buffers (allocated and cleared again: memclr and arrow's
// memset took 0.38 of the sink's 1.9 CPU-s in a 1M listing's run at one
// record a row group), and the narrow columns' pages were short (a 32Ki-row float
// column is one 256 KiB page): fewer, larger row groups cost less and
// compress better (the 1M listing's two files 8.15 MB at level 1 against
// 8.63 MB). A 3,000-row snapshot is one row group either way. Measured on
// the 1M listing (instruments and its first instrument_events,
// docs/PERFORMANCE.md, issue 33).
const RowGroupRows = 8 * schema.DefaultBatchRows

// PageBytes is the data page size of a per-snapshot file. A row group
// under way holds about three pages of buffers per column (the encoder's,
// the uncompressed page, the compressed one); at arrow-go's 1 MiB and
// RowGroupRows that is ~95 MB for the 32 instruments columns, which near
// the run's 160 MiB heap limit makes the GC run much more often (replay's
// day files took 512 KiB for the same reason: compact.Options.PageBytes).
const PageBytes = 512 << 10

// Encodings are the column encodings of table t's files: dictionary pages
// for the string columns of few distinct values (Dictionary),
// DELTA_BYTE_ARRAY for the columns whose values share prefixes, plain for
// the others (see writerOptions). A replayed day's file takes them too
// (compact.DaySink): fixed by the schema, not tried per day.
func Encodings(t *schema.Table) []parquet.WriterProperty {
	opts := []parquet.WriterProperty{parquet.WithDictionaryDefault(false)}
	for _, c := range t.Columns {
		switch {
		case c.Type != schema.String || c.List:
		case Dictionary(c):
			opts = append(opts, parquet.WithDictionaryFor(c.Name, true))
		case c.SharedPrefix:
			opts = append(opts, parquet.WithEncodingFor(c.Name, parquet.Encodings.DeltaByteArray))
		}
	}
	return opts
}

// DayEncodings are the column encodings of a day's file sorted by key
// (a replayed day, compact.DaySink): Encodings, but for the instruments
// table dictionary pages for the key's string columns. A sorted day
// repeats each instrument's name over its 288 snapshots, so its indices
// are a few hundred runs a row group, and a reader finds an instrument's
// rows without rebuilding a name a row (history: with DELTA_BYTE_ARRAY
// names, a third of a year's CPU). A replayed day's instruments file
// 346,058 → 349,276 bytes; its instrument_events file (a few rows a
// name) would grow 76,834 → 82,949, so it keeps DELTA_BYTE_ARRAY.
func DayEncodings(t *schema.Table, key []string) []parquet.WriterProperty {
	opts := Encodings(t)
	if t.Name != schema.Instruments.Name {
		return opts
	}
	for _, c := range t.Columns {
		if c.Type == schema.String && !c.List && !Dictionary(c) && slices.Contains(key, c.Name) {
			opts = append(opts, parquet.WithEncodingFor(c.Name, parquet.Encodings.Plain), parquet.WithDictionaryFor(c.Name, true))
		}
	}
	return opts
}

// Dictionary reports whether string column c's pages are dictionary
// pages (package pqpage's: an index per value, a lookup only when the
// value differs from the one before): the schema's LowCardinality
// columns, and run_id and index_price_raw, one value per snapshot (per
// currency): PLAIN, their repeated strings were copied into every page and
// found again by zstd. In a replayed day (sorted by instrument, so these
// two change every row) run_id took 100,396 bytes PLAIN against 25,818
// with a dictionary, index_price_raw 24,723 against 22,285.
func Dictionary(c schema.Column) bool {
	switch c.Name {
	case "run_id", "index_price_raw":
		return true
	}
	return c.LowCardinality
}

// levelOr is the zstd level of a per-snapshot file's pages: l, or 1
// (klauspost's SpeedFastest) when l is 0. These files are transient in a
// compacted lake — compaction rewrites each day at level 9, a replay
// writes its days at level 3 — so the level is chosen for the run's CPU.
// On the 1M listing (issue 33, docs/PERFORMANCE.md): the sink's CPU in 7
// alternating runs' profiles 1.37–1.67 (median 1.52) CPU-s at level 1
// against 1.34–1.93 (1.70) at level 3; the pages alone (340 MB) 0.24–0.31
// against 0.30–0.41 CPU-s; the two files 8.15 against 7.84 MB (8.29 MB
// before the row groups of RowGroupRows, at level 3). A 3,000-row
// snapshot's instruments file is 36.5 against 34.0 KB (+7%).
func levelOr(l int) int {
	if l == 0 {
		return 1
	}
	return l
}

type writer struct {
	s      *Sink
	t      *schema.Table
	sw     storage.Writer
	f      *CountingWriter
	fw     recordWriter
	name   string // in the store (rel, or parked)
	rel    string
	parked bool // name is where Options.Park put it
	rows   int64
	done   bool
	start  time.Time
	// micros is the file's schema when its timestamps are in
	// microseconds (Options.Iceberg): each record is converted (ToMicros).
	micros *arrow.Schema
}

func (w *writer) Write(_ context.Context, rec arrow.Record) error {
	if w.done {
		return errors.New("parquet: write after commit or abort")
	}
	if w.micros != nil {
		rec = ToMicros(memory.DefaultAllocator, w.micros, rec)
		defer rec.Release()
	}
	if err := Guard(w.f, func() error { return w.fw.WriteBuffered(rec) }); err != nil {
		return fmt.Errorf("parquet: write %s: %w", w.rel, err)
	}
	w.rows += rec.NumRows()
	return nil
}

// Commit finishes the file and makes it visible whole in the store
// (replacing the same snapshot's earlier file): locally fsynced, renamed
// into place and the folder fsynced; on a bucket the upload completed.
func (w *writer) Commit(context.Context) (sinks.Committed, error) {
	if w.done {
		return sinks.Committed{}, errors.New("parquet: commit after commit or abort")
	}
	w.done = true
	if err := Guard(w.f, w.fw.Close); err != nil { // the footer
		w.sw.Abort()
		return sinks.Committed{}, fmt.Errorf("parquet: commit %s: %w", w.rel, err)
	}
	if err := w.sw.Commit(); err != nil {
		return sinks.Committed{}, fmt.Errorf("parquet: commit %s: %w", w.rel, DiskFull(err))
	}
	w.s.log.Debug("parquet file written", "file", w.rel, "rows", w.rows, "bytes", w.f.N, "took", time.Since(w.start))
	return sinks.Committed{Rows: w.rows, Bytes: w.f.N, Where: w.s.where(w.name), Parked: w.parked}, nil
}

func (w *writer) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	Guard(w.f, w.fw.Close)
	if err := w.sw.Abort(); err != nil {
		return fmt.Errorf("parquet: abort %s: %w", w.rel, err)
	}
	return nil
}
