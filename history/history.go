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
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	ch "github.com/ClickHouse/clickhouse-go/v2"
	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/memory"
	"github.com/apache/arrow/go/v17/parquet/file"
	"github.com/apache/arrow/go/v17/parquet/pqarrow"

	"github.com/optlake/optlake/schema"
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

var pointColumns = []string{"snapshot_time", "source", "index_price", "is_active", "deployed", "maker_commission", "taker_commission", "tick_size", "strike", "expiration_time"}

var eventColumns = []string{"snapshot_time", "previous_snapshot_time", "source", "event", "field", "old_value", "new_value", "initial"}

// FromParquet reads the timeline from a data directory. It scans the
// instruments and instrument_events files, reading only the columns it
// shows.
func FromParquet(ctx context.Context, dataDir, name string) (*Timeline, error) {
	tl := &Timeline{Instrument: name}
	err := scan(ctx, filepath.Join(dataDir, schema.Instruments.Name), pointColumns, name, func(c cols, i int) {
		tl.Points = append(tl.Points, Point{
			Time: c.time("snapshot_time", i), Source: c.str("source", i), IndexPrice: c.f64("index_price", i),
			IsActive: c.boolean("is_active", i), Deployed: c.boolean("deployed", i),
			MakerCommission: c.f64("maker_commission", i), TakerCommission: c.f64("taker_commission", i),
			TickSize: c.f64("tick_size", i), Strike: c.f64("strike", i), Expiration: c.timePtr("expiration_time", i),
		})
	})
	if err != nil {
		return nil, err
	}
	err = scan(ctx, filepath.Join(dataDir, schema.InstrumentEvents.Name), eventColumns, name, func(c cols, i int) {
		tl.Events = append(tl.Events, Event{
			Time: c.time("snapshot_time", i), PreviousTime: c.timePtr("previous_snapshot_time", i), Source: c.str("source", i),
			Event: c.str("event", i), Field: c.str("field", i), Old: c.strPtr("old_value", i), New: c.strPtr("new_value", i),
			Initial: c.boolean("initial", i) != nil && *c.boolean("initial", i),
		})
	})
	if err != nil {
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

func (c cols) str(n string, i int) string {
	if p := c.strPtr(n, i); p != nil {
		return *p
	}
	return ""
}

func (c cols) strPtr(n string, i int) *string {
	a, ok := c[n].(*array.String)
	if !ok || a.IsNull(i) {
		return nil
	}
	v := strings.Clone(a.Value(i))
	return &v
}

func (c cols) f64(n string, i int) *float64 {
	a, ok := c[n].(*array.Float64)
	if !ok || a.IsNull(i) {
		return nil
	}
	v := a.Value(i)
	return &v
}

func (c cols) boolean(n string, i int) *bool {
	a, ok := c[n].(*array.Boolean)
	if !ok || a.IsNull(i) {
		return nil
	}
	v := a.Value(i)
	return &v
}

func (c cols) timePtr(n string, i int) *time.Time {
	a, ok := c[n].(*array.Timestamp)
	if !ok || a.IsNull(i) {
		return nil
	}
	t := time.UnixMilli(int64(a.Value(i))).UTC()
	return &t
}

func (c cols) time(n string, i int) time.Time {
	if t := c.timePtr(n, i); t != nil {
		return *t
	}
	return time.Time{}
}

// scan reads every Parquet file of a table folder and calls row for each
// row whose instrument_name is name.
func scan(ctx context.Context, dir string, want []string, name string, row func(cols, int)) error {
	paths, err := filepath.Glob(filepath.Join(dir, "date=*", "*.parquet"))
	if err != nil {
		return err
	}
	sort.Strings(paths)
	for _, p := range paths {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := scanFile(ctx, p, append([]string{"instrument_name"}, want...), name, row); err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
	}
	return nil
}

func scanFile(ctx context.Context, path string, want []string, name string, row func(cols, int)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 65536}, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	sc, err := fr.Schema()
	if err != nil {
		return err
	}
	var idx []int
	for _, n := range want {
		if i := sc.FieldIndices(n); len(i) > 0 {
			idx = append(idx, i[0])
		}
	}
	rr, err := fr.GetRecordReader(ctx, idx, nil)
	if err != nil {
		return err
	}
	defer rr.Release()
	for rr.Next() {
		rec := rr.Record()
		c := cols{}
		for i, f := range rec.Schema().Fields() {
			c[f.Name] = rec.Column(i)
		}
		names, ok := c["instrument_name"].(*array.String)
		if !ok {
			return errors.New("no instrument_name column")
		}
		for i := 0; i < names.Len(); i++ {
			if names.IsValid(i) && names.Value(i) == name {
				row(c, i)
			}
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// FromClickHouse reads the timeline from ClickHouse (deduplicated).
func FromClickHouse(ctx context.Context, dsn, name string) (*Timeline, error) {
	opt, err := ch.ParseDSN(dsn)
	if err != nil {
		return nil, errors.New("invalid ClickHouse DSN")
	}
	db := opt.Auth.Database
	if db == "" {
		db = "default"
	}
	conn, err := ch.Open(opt)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	v, err := conn.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	instQ, eventsQ := Queries(db, schema.FeaturesFor(int(v.Version.Major), int(v.Version.Minor)))
	tl := &Timeline{Instrument: name}
	rows, err := conn.Query(ctx, instQ, name)
	if err != nil {
		return nil, fmt.Errorf("query instruments: %w", err)
	}
	for rows.Next() {
		var ms int64
		var p Point
		var active, deployed *uint8
		var exp *uint32
		if err := rows.Scan(&ms, &p.Source, &p.IndexPrice, &active, &deployed, &p.MakerCommission, &p.TakerCommission, &p.TickSize, &p.Strike, &exp); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read instruments: %w", err)
		}
		p.Time = time.UnixMilli(ms).UTC()
		p.IsActive, p.Deployed = u8bool(active), u8bool(deployed)
		if exp != nil {
			t := time.Unix(int64(*exp), 0).UTC()
			p.Expiration = &t
		}
		tl.Points = append(tl.Points, p)
	}
	rows.Close()
	rows, err = conn.Query(ctx, eventsQ, name)
	if err != nil {
		return nil, fmt.Errorf("query instrument_events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ts, prev int64
		var noPrev, initial uint8
		var e Event
		if err := rows.Scan(&ts, &prev, &noPrev, &e.Source, &e.Event, &e.Field, &e.Old, &e.New, &initial); err != nil {
			return nil, fmt.Errorf("read instrument_events: %w", err)
		}
		e.Time = time.UnixMilli(ts).UTC()
		if noPrev == 0 {
			t := time.UnixMilli(prev).UTC()
			e.PreviousTime = &t
		}
		e.Initial = initial == 1
		tl.Events = append(tl.Events, e)
	}
	return tl.finish()
}

// Queries are FromClickHouse's two queries (instruments, then
// instrument_events, each with one parameter, the instrument's name) for a
// server with f. Times are read as epoch milliseconds: exact where time
// columns are DateTime64 (20.1+), whole seconds on older servers, whose
// DateTime has no more.
func Queries(db string, f schema.Features) (instruments, events string) {
	ms := func(col string) string {
		if f.DateTime64 {
			return "toUnixTimestamp64Milli(" + col + ")"
		}
		return "toInt64(toUnixTimestamp(" + col + ")) * 1000"
	}
	instruments = fmt.Sprintf(`SELECT %s, source, index_price, toNullable(toUInt8(is_active)), toNullable(toUInt8(deployed)),
		maker_commission, taker_commission, tick_size, strike, toUnixTimestamp(expiration_time)
		FROM %s.instruments FINAL WHERE instrument_name = ? ORDER BY snapshot_time`, ms("snapshot_time"), schema.Quote(db))
	events = fmt.Sprintf(`SELECT %s, %s, isNull(previous_snapshot_time),
		source, event, field, old_value, new_value, toUInt8(initial)
		FROM %s.instrument_events FINAL WHERE instrument_name = ? ORDER BY snapshot_time, event, field`,
		ms("snapshot_time"), ms("assumeNotNull(previous_snapshot_time)"), schema.Quote(db))
	return instruments, events
}

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
	cw.Write([]string{"kind", "snapshot_time", "event", "field", "old_value", "new_value", "index_price", "is_active", "deployed", "maker_commission", "taker_commission", "tick_size", "strike"})
	for _, e := range tl.Events {
		cw.Write([]string{"event", e.Time.Format(time.RFC3339Nano), e.Event, e.Field, fmtS(e.Old), fmtS(e.New), "", "", "", "", "", "", ""})
	}
	for _, p := range tl.Points {
		cw.Write([]string{"snapshot", p.Time.Format(time.RFC3339Nano), "", "", "", "", fmtF(p.IndexPrice), fmtB(p.IsActive), fmtB(p.Deployed),
			fmtF(p.MakerCommission), fmtF(p.TakerCommission), fmtF(p.TickSize), fmtF(p.Strike)})
	}
	cw.Flush()
	return cw.Error()
}
