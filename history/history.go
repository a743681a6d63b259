// Package history reads the timeline of one instrument back from the lake
// (Parquet) or from ClickHouse: its lifecycle events in order, and its index
// price and parameters over time.
package history

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"golang.org/x/sync/errgroup"

	"github.com/optlake/optlake/internal/arrowpool"
	"github.com/optlake/optlake/lake/layout"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks/clickhouse"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/storage"
)

// Event is one lifecycle event.
type Event struct {
	Time         time.Time  `json:"snapshot_time"`
	PreviousTime *time.Time `json:"previous_snapshot_time,omitempty"`
	Source       string     `json:"source"`
	Event        string     `json:"event"`
	Field        string     `json:"field,omitempty"`
	Old          *string    `json:"old_value,omitempty"`
	New          *string    `json:"new_value,omitempty"`
	Initial      bool       `json:"initial,omitempty"`
}

// Point is the instrument in one snapshot.
type Point struct {
	Time            time.Time  `json:"snapshot_time"`
	Source          string     `json:"source"`
	IndexPrice      *float64   `json:"index_price"`
	IsActive        *bool      `json:"is_active"`
	Deployed        *bool      `json:"deployed"`
	MakerCommission *float64   `json:"maker_commission"`
	TakerCommission *float64   `json:"taker_commission"`
	TickSize        *float64   `json:"tick_size"`
	Strike          *float64   `json:"strike"`
	Expiration      *time.Time `json:"expiration_time"`
}

// Timeline is everything known about one instrument.
type Timeline struct {
	Instrument string  `json:"instrument_name"`
	Events     []Event `json:"events"`
	Points     []Point `json:"snapshots"`
}

// ErrNotFound is returned when no snapshot mentions the instrument.
var ErrNotFound = errors.New("instrument not found")

// FromParquet reads the timeline from a data directory. It reads only the
// columns it shows, of the row groups whose instrument_name statistics
// may hold the instrument (see scanFile).
func FromParquet(ctx context.Context, dataDir, name string) (*Timeline, error) {
	return FromLake(ctx, storage.NewLocal(dataDir), name)
}

// FromLake is FromParquet on a data directory's store (a local folder or a
// bucket prefix).
func FromLake(ctx context.Context, st storage.Store, name string) (*Timeline, error) {
	return fromLake(ctx, st, name, &Reads{})
}

// Reads counts what a read of the lake decoded: the files it opened, the
// row groups it read and the rows it decoded of them (each column's).
type Reads struct {
	Files, RowGroups, SkippedRowGroups int
	Rows                               int64
}

func fromLake(ctx context.Context, st storage.Store, name string, n *Reads) (*Timeline, error) {
	tl := &Timeline{Instrument: name}
	if err := scan(ctx, st, points, name, &tl.Points, n); err != nil {
		return nil, err
	}
	if err := scan(ctx, st, events, name, &tl.Events, n); err != nil {
		return nil, err
	}
	return tl.finish()
}

func (tl *Timeline) finish() (*Timeline, error) {
	if len(tl.Points) == 0 && len(tl.Events) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, tl.Instrument)
	}
	sort.SliceStable(tl.Points, func(i, j int) bool { return tl.Points[i].Time.Before(tl.Points[j].Time) })
	sort.SliceStable(tl.Events, func(i, j int) bool { return tl.Events[i].Time.Before(tl.Events[j].Time) })
	return tl, nil
}

// cols gives typed access to the columns of one record by name.
type cols map[string]arrow.Array

// parquetRow is row i of a record.
type parquetRow struct {
	c cols
	i int
}

func (r parquetRow) str(n string) *string {
	a, ok := r.c[n].(*array.String)
	if !ok || a.IsNull(r.i) {
		return nil
	}
	v := strings.Clone(a.Value(r.i))
	return &v
}

func (r parquetRow) f64(n string) *float64 {
	a, ok := r.c[n].(*array.Float64)
	if !ok || a.IsNull(r.i) {
		return nil
	}
	v := a.Value(r.i)
	return &v
}

func (r parquetRow) boolean(n string) *bool {
	a, ok := r.c[n].(*array.Boolean)
	if !ok || a.IsNull(r.i) {
		return nil
	}
	v := a.Value(r.i)
	return &v
}

func (r parquetRow) time(n string) *time.Time {
	a, ok := r.c[n].(*array.Timestamp)
	if !ok || a.IsNull(r.i) {
		return nil
	}
	t := a.Value(r.i).ToTime(a.DataType().(*arrow.TimestampType).Unit).UTC() // ms, or µs in an Iceberg lake's files
	return &t
}

// remoteFiles is how many files of a bucket scan reads at once: each
// file is three requests or so (ranges), whose latency, not the cores,
// bounds a year's 730 files.
const remoteFiles = 16

// scan reads every Parquet file of p's table (TABLE/date=*/*.parquet) in
// the store and appends the rows whose instrument_name is name to out, in
// the files' order. The files are read by GOMAXPROCS goroutines (a year is
// 365 files a table, each read independently), remoteFiles in a bucket.
func scan[T any](ctx context.Context, st storage.Store, proj projection[T], name string, out *[]T, n *Reads) error {
	prefix := layout.Days(proj.table.Name)
	want := proj.names()
	listed, err := st.List(ctx, prefix)
	if err != nil {
		return err
	}
	var files []storage.Info
	for _, f := range listed { // sorted by name
		if rest := strings.TrimPrefix(f.Name, proj.table.Name+"/"); strings.Count(rest, "/") != 1 || !strings.HasSuffix(rest, ".parquet") {
			continue // not TABLE/date=.../NAME.parquet
		}
		files = append(files, f)
	}
	sortedKey := slices.Equal(schema.SortKey(proj.table.Name)[:2], []string{"source", "instrument_name"})
	// The page readers' buffers (a decompressed page each, up to 1 MiB
	// a column a day) are recycled from file to file: allocated afresh
	// they were a fifth of a year's history's CPU, most of it the GC's.
	pool := arrowpool.New(64 << 20)
	found := make([][]T, len(files))
	reads := make([]Reads, len(files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	if remote(st) {
		g.SetLimit(max(runtime.GOMAXPROCS(0), remoteFiles)) // waiting on requests, not on the cores
	}
	for i, f := range files {
		g.Go(func() error {
			if err := gctx.Err(); err != nil {
				return err
			}
			row := func(r row) { found[i] = append(found[i], proj.build(r)) }
			if err := scanFile(gctx, st, f, sortedKey && pq.IsCompacted(path.Base(f.Name)), want, name, row, pool, &reads[i]); err != nil {
				return fmt.Errorf("read %s/%s: %w", st, f.Name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for i := range files {
		*out = append(*out, found[i]...)
		n.add(reads[i])
	}
	return nil
}

func (n *Reads) add(o Reads) {
	n.Files += o.Files
	n.RowGroups += o.RowGroups
	n.SkippedRowGroups += o.SkippedRowGroups
	n.Rows += o.Rows
}

// scanFile reads the rows of one file whose instrument_name is name. A
// year of compacted history is one file per day and table, each sorted by
// (source, instrument_name, …) (schema.SortKey): of each day's row groups
// it reads only those whose instrument_name statistics (min, max) may hold
// name; of each of those, first the instrument_name column alone, up to
// the instrument's last row when the file is sorted (a row group of one
// source), to find the rows [lo, hi) that hold name (fastRows); then the
// other columns of just those rows (readTyped). A per-snapshot file
// (unsorted, one row per instrument) is read the same way, its names
// whole. In a bucket, each row group's column chunks and the footer are
// a ranged GET each (ranges), and the file's size is the listing's (no
// HEAD).
func scanFile(ctx context.Context, st storage.Store, o storage.Info, sorted bool, want []string, name string, emit func(row), mem memory.Allocator, n *Reads) error {
	f, err := storage.OpenListed(ctx, st, o)
	if err != nil {
		return err
	}
	defer f.Close()
	var src io.ReaderAt = f
	var ra *ranges
	if remote(st) {
		ra = &ranges{r: f, size: f.Size()}
		src = ra
	}
	pf, err := file.NewParquetReader(io.NewSectionReader(src, 0, f.Size()), file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		return err
	}
	defer pf.Close()
	n.Files++
	md := pf.MetaData()
	nameCol := md.Schema.ColumnIndexByName("instrument_name")
	if nameCol < 0 {
		return errors.New("no instrument_name column")
	}
	sourceCol := md.Schema.ColumnIndexByName("source")
	var groups []int
	for g := range md.NumRowGroups() {
		if lo, hi, ok := minMax(md.RowGroup(g), nameCol); !ok || name >= lo && name <= hi {
			groups = append(groups, g)
		} else {
			n.SkippedRowGroups++
		}
	}
	if len(groups) == 0 {
		return nil
	}
	var fr *pqarrow.FileReader
	var idx []int
	for _, c := range want {
		if i := md.Schema.ColumnIndexByName(c); i >= 0 && i != nameCol {
			idx = append(idx, i)
		}
	}
	for _, g := range groups {
		n.RowGroups++
		if ra != nil {
			if err := ra.rowGroup(md.RowGroup(g), append([]int{nameCol}, idx...)); err != nil {
				return err
			}
		}
		// Sorted by name within the row group: one source in it.
		lo, hi, ok := minMax(md.RowGroup(g), sourceCol)
		m, err := rowsOf(pf.RowGroup(g), nameCol, name, sorted && ok && lo == hi, n)
		if errors.Is(err, errNotDelta) {
			m, err = rowsDecoded(pf.RowGroup(g), nameCol, name, sorted && ok && lo == hi, n)
		}
		if err != nil || m.lo == m.hi {
			if err != nil {
				return err
			}
			continue
		}
		err = readTyped(pf.RowGroup(g), idx, m, func(r typedRow) { emit(r) }, n)
		if errors.Is(err, errNotTyped) {
			if fr == nil {
				if fr, err = pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, memory.DefaultAllocator); err != nil {
					return err
				}
			}
			err = readRows(ctx, fr, g, idx, m, func(c cols, i int) { emit(parquetRow{c, i}) }, n)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// minMax returns the string statistics of column col of the row group
// (ok false without them).
func minMax(rg *metadata.RowGroupMetaData, col int) (lo, hi string, ok bool) {
	if col < 0 {
		return "", "", false
	}
	cc, err := rg.ColumnChunk(col)
	if err != nil {
		return "", "", false
	}
	if set, err := cc.StatsSet(); err != nil || !set {
		return "", "", false
	}
	stats, err := cc.Statistics()
	if err != nil || stats == nil || !stats.HasMinMax() {
		return "", "", false
	}
	s, isBytes := stats.(*metadata.ByteArrayStatistics)
	if !isBytes {
		return "", "", false
	}
	return string(s.Min()), string(s.Max()), true
}

// matches are the rows of a row group whose instrument_name is the one
// read: [lo, hi), every one of them (all) or those listed in at.
type matches struct {
	lo, hi int64
	all    bool
	at     map[int64]bool
}

func (m matches) has(i int64) bool { return m.all || m.at[i] }

// rowsOf finds the rows of row group rg whose instrument_name is name,
// reading that column alone; sorted: the column is in order, so the read
// stops past name's rows. The lake's names (DELTA_BYTE_ARRAY or a
// dictionary) are read without a value per row (fastRows); errNotDelta for
// another chunk, which rowsDecoded reads.
func rowsOf(rg *file.RowGroupReader, nameCol int, name string, sorted bool, n *Reads) (matches, error) {
	cc, err := rg.MetaData().ColumnChunk(nameCol)
	if err != nil {
		return matches{}, err
	}
	return fastRows(rg, cc, nameCol, name, sorted, n)
}

// rowsDecoded is rowsOf through arrow-go's decoder (as Parquet byte
// arrays, not an Arrow array), for a chunk of any encoding.
func rowsDecoded(rg *file.RowGroupReader, nameCol int, name string, sorted bool, n *Reads) (matches, error) {
	cr, err := rg.Column(nameCol)
	if err != nil {
		return matches{}, err
	}
	br, ok := cr.(*file.ByteArrayColumnChunkReader)
	if !ok {
		return matches{}, errors.New("instrument_name is not a string column")
	}
	const batch = 4096
	vals := make([]parquet.ByteArray, batch)
	defs := make([]int16, batch)
	optional := cr.Descriptor().MaxDefinitionLevel() > 0
	m := matches{lo: -1, hi: -1, all: sorted, at: map[int64]bool{}}
	var at int64
	for br.HasNext() {
		levels, nv, err := br.ReadBatch(batch, vals, defs, nil)
		if err != nil {
			return matches{}, err
		}
		n.Rows += levels
		v := 0
		for i := range int(levels) {
			if optional && defs[i] == 0 {
				continue // null
			}
			x := string(vals[v]) // no allocation: compared only
			v++
			switch {
			case x == name:
				if m.lo < 0 {
					m.lo = at + int64(i)
				}
				m.hi = at + int64(i) + 1
				if !sorted {
					m.at[at+int64(i)] = true
				}
			case sorted && x > name:
				return m.found(), nil
			}
		}
		_ = nv
		at += levels
	}
	return m.found(), nil
}

func (m matches) found() matches {
	if m.lo < 0 {
		m.lo, m.hi = 0, 0
	}
	return m
}

// readRows reads the columns idx of m's rows of row group g and hands
// those that hold the instrument to row.
func readRows(ctx context.Context, fr *pqarrow.FileReader, g int, idx []int, m matches, row func(cols, int), n *Reads) error {
	fr.Props.BatchSize = m.hi - m.lo
	rr, err := fr.GetRecordReader(ctx, idx, []int{g})
	if err != nil {
		return err
	}
	defer rr.Release()
	if m.lo > 0 {
		if err := rr.SeekToRow(m.lo); err != nil {
			return err
		}
	}
	at := m.lo
	for at < m.hi && rr.Next() {
		rec := rr.Record()
		n.Rows += rec.NumRows()
		c := cols{}
		for i, f := range rec.Schema().Fields() {
			c[f.Name] = rec.Column(i)
		}
		for i := 0; i < int(rec.NumRows()) && at < m.hi; i, at = i+1, at+1 {
			if m.has(at) {
				row(c, i)
			}
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// FromClickHouse reads the timeline from ClickHouse (deduplicated), through
// the ClickHouse sink's connection (its version features and redaction:
// the DSN's password never appears in an error).
func FromClickHouse(ctx context.Context, dsn, name string) (*Timeline, error) {
	s, err := clickhouse.New(clickhouse.Options{DSN: dsn})
	if err != nil {
		return nil, err
	}
	defer s.Close(ctx)
	tl := &Timeline{Instrument: name}
	if err := query(ctx, s, points, name, &tl.Points, pointsOrder...); err != nil {
		return nil, err
	}
	if err := query(ctx, s, events, name, &tl.Events, eventsOrder...); err != nil {
		return nil, err
	}
	return tl.finish()
}

// query reads p's rows of the instrument name, in order, and appends them
// to out.
func query[T any](ctx context.Context, s *clickhouse.Sink, p projection[T], name string, out *[]T, order ...string) error {
	rows, err := s.Query(ctx, func(db string, f schema.Features) string { return p.query(db, f, order...) }, name)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		dst, r := p.scanTargets()
		if err := rows.Scan(dst...); err != nil {
			return fmt.Errorf("read %s: %w", p.table.Name, err)
		}
		*out = append(*out, p.build(r))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s: %w", p.table.Name, err)
	}
	return nil
}

// Queries are FromClickHouse's two queries (instruments, then
// instrument_events, each with one parameter, the instrument's name) for a
// server with f.
func Queries(db string, f schema.Features) (instrumentsSQL, eventsSQL string) {
	return points.query(db, f, pointsOrder...), events.query(db, f, eventsOrder...)
}

// The order FromClickHouse reads rows in.
var (
	pointsOrder = []string{"snapshot_time"}
	eventsOrder = []string{"snapshot_time", "event", "field"}
)

func u8bool(v *uint8) *bool {
	if v == nil {
		return nil
	}
	b := *v != 0
	return &b
}

// Write renders the timeline as "table" (for a terminal), "json" or "csv".
func (tl *Timeline) Write(w io.Writer, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(tl)
	case "csv":
		return tl.writeCSV(w)
	case "", "table":
		return tl.writeTable(w)
	}
	return fmt.Errorf("unknown format %q (want table, json or csv)", format)
}

func fmtF(p *float64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}

func fmtB(p *bool) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatBool(*p)
}

func fmtS(p *string) string {
	if p == nil {
		return "∅"
	}
	return *p
}

const ts = "2006-01-02 15:04:05.000"

func (tl *Timeline) writeTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s — %d events, %d snapshots\n\n", tl.Instrument, len(tl.Events), len(tl.Points))
	fmt.Fprintln(tw, "EVENT TIME\tEVENT\tDETAIL\tSINCE")
	for _, e := range tl.Events {
		detail := ""
		switch {
		case e.Event == "changed" || e.Field != "":
			detail = fmt.Sprintf("%s %s → %s", e.Field, fmtS(e.Old), fmtS(e.New))
		case e.Initial:
			detail = "(first snapshot of the history)"
		}
		since := "-"
		if e.PreviousTime != nil {
			since = e.PreviousTime.Format(ts)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Time.Format(ts), e.Event, detail, since)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SNAPSHOT TIME\tINDEX PRICE\tACTIVE\tDEPLOYED\tMAKER\tTAKER\tTICK SIZE\tSTRIKE")
	for _, p := range tl.Points {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Time.Format(ts), fmtF(p.IndexPrice), fmtB(p.IsActive), fmtB(p.Deployed),
			fmtF(p.MakerCommission), fmtF(p.TakerCommission), fmtF(p.TickSize), fmtF(p.Strike))
	}
	return tw.Flush()
}

func (tl *Timeline) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	// kind, snapshot_time, then the columns each projection shows.
	cw.Write(slices.Concat([]string{"kind", "snapshot_time"}, events.csvNames(), points.csvNames()))
	for _, e := range tl.Events {
		cw.Write(slices.Concat([]string{"event", e.Time.Format(time.RFC3339Nano)}, events.csvValues(&e), points.csvValues(nil)))
	}
	for _, p := range tl.Points {
		cw.Write(slices.Concat([]string{"snapshot", p.Time.Format(time.RFC3339Nano)}, events.csvValues(nil), points.csvValues(&p)))
	}
	cw.Flush()
	return cw.Error()
}
