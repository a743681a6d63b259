// Package bench holds the measurements of optlake's benchmark harness
// (bench/cmd/optlake-bench, `make bench`): generating listings with the
// simulator, and the optlake stages measured one per process so that the
// parent can read each one's peak RSS.
//
// Every measurement streams the listing from a file written beforehand
// (warm in the page cache), exactly as the runner streams a response body.
package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/pipeline"
	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/sinks/clickhouse"
	"github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// Result is one measurement. Seconds covers the work only (not process
// start-up); PeakRSS is filled in by the parent from the child's rusage.
type Result struct {
	Rows     int64   `json:"rows"`
	Rejects  int64   `json:"rejects,omitempty"`
	InBytes  int64   `json:"in_bytes"`            // JSON bytes read
	OutBytes int64   `json:"out_bytes,omitempty"` // Parquet file size, when there is one
	Seconds  float64 `json:"seconds"`
	PeakRSS  int64   `json:"peak_rss,omitempty"` // bytes (ru_maxrss of the measuring process)
	// CPUSeconds is the measuring process's user+sys CPU time, start-up
	// included (filled in by the parent from rusage).
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	// WorkCPUSeconds is the CPU of the timed work alone, when the
	// measurement holds untimed preparation (Events: the decode before).
	WorkCPUSeconds float64 `json:"work_cpu_seconds,omitempty"`
}

// RowsPerSec is the throughput in rows.
func (r Result) RowsPerSec() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Rows) / r.Seconds
}

// MBPerSec is the throughput in JSON megabytes (10^6 bytes) per second.
func (r Result) MBPerSec() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.InBytes) / 1e6 / r.Seconds
}

// Seed is the simulator seed of every generated listing.
const Seed = 1

// GenerateListing writes the simulator's get_instruments body for n
// instruments in outer groups of group to path and returns its size.
func GenerateListing(path string, n, group int) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = venuesim.New(venuesim.Config{Seed: Seed, Instruments: n, GroupSize: group}).WriteInstruments(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return 0, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// snapshot is the snapshot every measured row belongs to.
func snapshot() sinks.Snapshot {
	return sinks.Snapshot{
		Time:     time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC),
		RunID:    "01936f0e-7c00-7000-8000-0000000000a1",
		Source:   "bench",
		Endpoint: "instruments",
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Decode measures decode+flatten into Arrow record batches of the listing at
// path; the records are discarded as they are emitted.
func Decode(ctx context.Context, path string, batchRows int) (Result, error) {
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		return Result{}, err
	}
	defer f.Close()
	cr := &countingReader{r: f}
	dec := transform.NewInstrumentDecoder(transform.Options{BatchRows: batchRows})
	defer dec.Release()
	st, err := dec.Decode(ctx, cr, snapshot(), func(*schema.Table, arrow.Record) error { return nil })
	if err != nil {
		return Result{}, fmt.Errorf("decode %s: %w", path, err)
	}
	return Result{Rows: st.Rows, Rejects: st.Rejects, InBytes: cr.n, Seconds: time.Since(start).Seconds()}, nil
}

// JSONToParquet measures the runner's instrument path into the Parquet sink:
// the decoder in this goroutine, the sink's writers in another, record
// batches handed over pipeline's fan-out (a channel of two per sink),
// committed (fsynced and renamed) at the end. Files go under dir.
func JSONToParquet(ctx context.Context, path, dir string, batchRows int) (Result, error) {
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		return Result{}, err
	}
	defer f.Close()
	res, err := toParquet(ctx, f, dir, snapshot(), batchRows)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", path, err)
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// toParquet decodes the listing r into snap's instruments file under dir,
// as the runner does (see JSONToParquet). Seconds is left to the caller.
func toParquet(ctx context.Context, r io.Reader, dir string, snap sinks.Snapshot, batchRows int) (Result, error) {
	cr := &countingReader{r: r}
	sink, err := parquet.New(parquet.Options{Store: storage.NewLocal(dir)})
	if err != nil {
		return Result{}, err
	}
	fan := pipeline.NewFanout(ctx, []sinks.Sink{sink}, snap, schema.Instruments)
	dec := transform.NewInstrumentDecoder(transform.Options{BatchRows: batchRows})
	defer dec.Release()
	st, err := dec.Decode(ctx, cr, snap, fan.Emit)
	if err != nil {
		fan.Abort()
		return Result{}, fmt.Errorf("decode: %w", err)
	}
	out := fan.Commit(ctx)[sink.Name()]
	if out.Error != "" {
		return Result{}, errors.New(out.Error)
	}
	res := Result{Rows: st.Rows, Rejects: st.Rejects, InBytes: cr.n}
	for _, p := range out.Files {
		if filepath.Base(filepath.Dir(filepath.Dir(p))) == schema.Instruments.Name {
			if fi, err := os.Stat(p); err == nil {
				res.OutBytes += fi.Size()
			}
		}
	}
	return res, nil
}

// DecodeRecords decodes the listing at path into instrument record batches
// kept in memory (retained: release them when done). Rejects are dropped.
func DecodeRecords(ctx context.Context, path string, batchRows int) ([]arrow.Record, Result, error) {
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		return nil, Result{}, err
	}
	defer f.Close()
	cr := &countingReader{r: f}
	dec := transform.NewInstrumentDecoder(transform.Options{BatchRows: batchRows})
	defer dec.Release()
	var recs []arrow.Record
	st, err := dec.Decode(ctx, cr, snapshot(), func(t *schema.Table, rec arrow.Record) error {
		if t == schema.Instruments {
			rec.Retain()
			recs = append(recs, rec)
		}
		return nil
	})
	if err != nil {
		for _, r := range recs {
			r.Release()
		}
		return nil, Result{}, fmt.Errorf("decode %s: %w", path, err)
	}
	return recs, Result{Rows: st.Rows, Rejects: st.Rejects, InBytes: cr.n, Seconds: time.Since(start).Seconds()}, nil
}

// ClickHouseLoad measures inserting recs into table t through the ClickHouse
// sink (dsn's database, already migrated): connect, one Write per record
// batch as the runner's lane does, Commit. The sink is closed afterwards.
func ClickHouseLoad(ctx context.Context, dsn string, t *schema.Table, recs []arrow.Record) (Result, error) {
	sink, err := clickhouse.New(clickhouse.Options{DSN: dsn})
	if err != nil {
		return Result{}, err
	}
	defer sink.Close(ctx)
	start := time.Now()
	w, err := sink.Open(ctx, t, snapshot())
	if err != nil {
		return Result{}, err
	}
	for _, rec := range recs {
		if err := w.Write(ctx, rec); err != nil {
			w.Abort()
			return Result{}, err
		}
	}
	c, err := w.Commit(ctx)
	if err != nil {
		return Result{}, err
	}
	return Result{Rows: c.Rows, Seconds: time.Since(start).Seconds()}, nil
}

// Migrate brings dsn's database to the latest optlake schema with the
// ClickHouse sink's own migrations.
func Migrate(ctx context.Context, dsn string) error {
	sink, err := clickhouse.New(clickhouse.Options{DSN: dsn})
	if err != nil {
		return err
	}
	defer sink.Close(ctx)
	_, _, err = sink.Migrate(ctx)
	return err
}

// DuckDBColumns is the explicit STRUCT type of one instrument for DuckDB's
// read_json (columns={instruments: DuckDBColumns()}): the 25 venue fields
// with the JSON types the venue sends (index_price is a string), taken from
// schema.Instruments.
func DuckDBColumns() string {
	t := schema.Instruments
	first, last := t.MustIndex("base_currency"), t.MustIndex("tick_size")
	var parts []string
	for _, c := range t.Columns[first : last+1] {
		typ := "VARCHAR"
		switch {
		case c.Name == "index_price":
		case c.Type == schema.Float64:
			typ = "DOUBLE"
		case c.Type == schema.Int64:
			typ = "BIGINT"
		case c.Type == schema.Bool:
			typ = "BOOLEAN"
		}
		parts = append(parts, c.Name+" "+typ)
	}
	return "STRUCT(" + strings.Join(parts, ", ") + ")[]"
}
