package history

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// A lake of a compacted day (sorted by instrument_name, in many row
// groups) and a day of per-snapshot files: the history of an instrument
// is the one a scan of every row gives, but decodes the instrument_name
// column of only the row groups whose statistics may hold it, and the
// other columns of only its rows. Today's full scan decodes every row of
// every file.
func TestHistoryReadsOnlyTheInstrumentsRows(t *testing.T) {
	ctx := context.Background()
	st, sim, total := testLake(t)
	names := sim.Instruments()
	for _, name := range []string{names[0].InstrumentName, names[len(names)/2].InstrumentName, names[len(names)-1].InstrumentName} {
		var n Reads
		tl, err := fromLake(ctx, st, name, &n)
		if err != nil {
			t.Fatal(err)
		}
		want := fullScan(t, st, name)
		if !reflect.DeepEqual(tl.Points, want) {
			t.Fatalf("%s: %d points, a full scan finds %d", name, len(tl.Points), len(want))
		}
		if len(want) == 0 {
			t.Fatalf("%s: not in the lake", name)
		}
		// Each compacted day: 1,920 rows in ≥ 19 row groups, of which the
		// instrument's ≤ 24 rows touch at most three; each of the 24
		// per-snapshot files of the last day is one row group.
		if n.SkippedRowGroups < 3*16 || n.RowGroups > 3*3+24 {
			t.Errorf("%s: read %d row groups, skipped %d", name, n.RowGroups, n.SkippedRowGroups)
		}
		// Decoded: of each compacted day the names of ≤ 3 row groups of
		// 100 and the instrument's ≤ 24 rows; of each snapshot file its
		// names (unsorted: a quarter of the rows) and its one row.
		if n.Rows > total/4+3*(3*100+24)+24 {
			t.Errorf("%s: decoded %d rows of the instruments table's %d", name, n.Rows, total)
		}
		t.Logf("%s: %+v of %d rows", name, n, total)
	}
}

// testLake is four days of an 80-instrument venue, hourly: three days
// compacted into row groups of 100 rows, the fourth in per-snapshot
// files; total is its instruments rows.
func testLake(t *testing.T) (st storage.Store, sim *venuesim.Sim, total int64) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st = storage.NewLocal(dir)
	sim = venuesim.New(venuesim.Config{Seed: 3, Instruments: 80, TickEvery: time.Hour})
	sink, err := pq.New(pq.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	dec := transform.NewInstrumentDecoder(transform.Options{})
	defer dec.Release()
	day := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	var body bytes.Buffer
	for k := range 96 { // four days, hourly
		if k > 0 {
			sim.Advance(1)
		}
		body.Reset()
		if err := sim.WriteInstruments(&body); err != nil {
			t.Fatal(err)
		}
		snap := sinks.Snapshot{Time: day.Add(time.Duration(k) * time.Hour), RunID: fmt.Sprintf("run-%02d", k), Source: "venue.sim", Endpoint: "instruments"}
		w, err := sink.Open(ctx, schema.Instruments, snap)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dec.Decode(ctx, &body, snap, func(tb *schema.Table, rec arrow.Record) error {
			if tb != schema.Instruments {
				return nil
			}
			total += rec.NumRows()
			return w.Write(ctx, rec)
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Three days compacted into row groups of 100 rows; the fourth stays
	// in per-snapshot files.
	if _, err := compact.Compact(ctx, compact.Options{Target: compact.For(st, nil, time.Now), To: "2026-11-23", RowGroupRows: 100}); err != nil {
		t.Fatal(err)
	}
	return st, sim, total
}

// fullScan is the history's points as a read of every row finds them.
func fullScan(t *testing.T, st storage.Store, name string) []Point {
	t.Helper()
	ctx := context.Background()
	files, err := st.List(ctx, "instruments/date=")
	if err != nil {
		t.Fatal(err)
	}
	var out []Point
	for _, f := range files {
		r, err := st.Open(ctx, f.Name)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := file.NewParquetReader(io.NewSectionReader(r, 0, r.Size()))
		if err != nil {
			t.Fatal(err)
		}
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 16}, memory.DefaultAllocator)
		if err != nil {
			t.Fatal(err)
		}
		rr, err := fr.GetRecordReader(ctx, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for rr.Next() {
			rec := rr.Record()
			c := cols{}
			for i, f := range rec.Schema().Fields() {
				c[f.Name] = rec.Column(i)
			}
			names := c["instrument_name"].(*array.String)
			for i := 0; i < names.Len(); i++ {
				if names.Value(i) == name {
					out = append(out, points.build(parquetRow{c, i}))
				}
			}
		}
		if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		rr.Release()
		pf.Close()
		r.Close()
	}
	tl, err := (&Timeline{Points: out}).finish()
	if err != nil {
		t.Fatal(err)
	}
	return tl.Points
}
