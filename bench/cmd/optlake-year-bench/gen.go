package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/lake"
	"github.com/optlake/optlake/pipeline/archive"
	"github.com/optlake/optlake/pipeline/events"
	"github.com/optlake/optlake/pipeline/ledger"
	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	pq "github.com/optlake/optlake/sinks/parquet"
	"github.com/optlake/optlake/sinks/parquet/compact"
	"github.com/optlake/optlake/storage"
	"github.com/optlake/optlake/venuesim"
)

// source is the lake's venue name, the one `run` against the bench's
// simulator records (its URL's host is replaced by --source).
const source = "venue.sim"

// genStats is what the generator wrote.
type genStats struct {
	Days      int     `json:"days"`
	Snapshots int     `json:"snapshots"`
	Rows      int64   `json:"instrument_rows"`
	Events    int64   `json:"event_rows"`
	Seconds   float64 `json:"seconds"`
}

// generate writes the lake a year of `optlake run --compact` every cfg.every
// would leave in dir, for cfg.days closed days ending yesterday (UTC):
//
//   - instruments and instrument_events: each closed day's one sorted
//     compacted file per table, written by optlake's own decoder (the
//     simulator's listing as a run receives it, the venue's daily, weekly,
//     monthly and quarterly expiries listed and expiring, index prices
//     moving), events differ and compaction writer (compact.DaySink, the
//     writer of a replayed day, with compaction's options), not by running
//     the job once per snapshot;
//   - the ledger's done record of every snapshot (the instruments endpoint
//     committed to parquet), written as the ledger writes them, then
//     folded into one object a day as each day's first run folds them;
//   - the events state after the last snapshot (the next run diffs
//     against it);
//   - the raw archive of the last cfg.rawDays days only (the listing's
//     bodies, zstd, with their meta.json).
//
// Not synthesised: account endpoints, the runs and rejects tables, and
// the per-snapshot files of today (a run of today writes them).
func generate(ctx context.Context, dir string, cfg config) (genStats, error) {
	start := time.Now()
	st := storage.NewLocal(dir)
	if _, err := lake.Resolve(ctx, st, lake.Parquet); err != nil {
		return genStats{}, err
	}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	first := today.AddDate(0, 0, -cfg.days)
	perDay := int(24 * time.Hour / cfg.every)
	sim := venuesim.New(venuesim.Config{Seed: 1, Instruments: cfg.instruments, Start: first, TickEvery: cfg.every})
	fallback, err := pq.New(pq.Options{Store: st})
	if err != nil {
		return genStats{}, err
	}
	ds, err := compact.NewDaySink(compact.DayOptions{Fallback: fallback, Compact: compact.Options{Target: compact.For(st, nil, time.Now), RowGroupRows: cfg.rowGroupRows}})
	if err != nil {
		return genStats{}, err
	}
	defer ds.Close(ctx)
	arch := archive.OnStore(st)
	dec := transform.NewInstrumentDecoder(transform.Options{})
	defer dec.Release()
	state := events.NewState(source)
	var gs genStats
	var body bytes.Buffer
	for d := range cfg.days {
		date := first.AddDate(0, 0, d)
		raw := d >= cfg.days-cfg.rawDays
		for k := range perDay {
			if d > 0 || k > 0 {
				sim.Advance(1)
			}
			ts := date.Add(time.Duration(k) * cfg.every)
			snap := sinks.Snapshot{Time: ts, RunID: runID(ts), Source: source, Endpoint: "instruments"}
			body.Reset()
			if err := sim.WriteInstruments(&body); err != nil {
				return gs, err
			}
			if raw {
				if err := archiveBody(ctx, arch, snap, body.Bytes()); err != nil {
					return gs, err
				}
			}
			next, n, ev, err := snapshot(ctx, ds, dec, state, snap, &body)
			if err != nil {
				return gs, fmt.Errorf("snapshot %s: %w", ts.Format(time.RFC3339), err)
			}
			state.Close()
			state = next
			gs.Rows += n
			gs.Events += ev
			gs.Snapshots++
			if err := writeDone(dir, snap); err != nil {
				return gs, err
			}
		}
		if err := ds.FlushDay(ctx, date.Format(time.DateOnly)); err != nil {
			return gs, fmt.Errorf("flush %s: %w", date.Format(time.DateOnly), err)
		}
		gs.Days++
		progress("day %d/%d (%s): %d instrument rows, %d events so far, %.0f s", d+1, cfg.days, date.Format(time.DateOnly), gs.Rows, gs.Events, time.Since(start).Seconds())
	}
	if err := state.Save(dir); err != nil {
		return gs, err
	}
	// The done records folded a day at a time, as each day's first run
	// leaves them (ledger.Fold).
	if _, err := ledger.New(st, nil).Fold(ctx, today.Format(time.DateOnly), 0); err != nil {
		return gs, err
	}
	state.Close()
	if err := emptyTrash(dir); err != nil {
		return gs, err
	}
	gs.Seconds = time.Since(start).Seconds()
	b, _ := json.MarshalIndent(gs, "", "  ")
	return gs, os.WriteFile(filepath.Join(dir, genMarker), append(b, '\n'), 0o644)
}

// genMarker records a finished generation in the lake (reused by -keep).
const genMarker = ".year-bench.json"

// snapshot loads one listing body: its instruments rows and its events
// into the day sink, and returns the events state after it.
func snapshot(ctx context.Context, ds *compact.DaySink, dec *transform.InstrumentDecoder, prev *events.State, snap sinks.Snapshot, body *bytes.Buffer) (*events.State, int64, int64, error) {
	w, err := ds.Open(ctx, schema.Instruments, snap)
	if err != nil {
		return nil, 0, 0, err
	}
	diff, err := events.NewDiffer(prev, snap, events.Options{})
	if err != nil {
		w.Abort()
		return nil, 0, 0, err
	}
	var rows int64
	_, err = dec.Decode(ctx, body, snap, func(t *schema.Table, rec arrow.Record) error {
		if t != schema.Instruments {
			return nil // rejects: none from a clean listing
		}
		rows += rec.NumRows()
		if err := diff.Observe(rec); err != nil {
			return err
		}
		return w.Write(ctx, rec)
	})
	if err != nil {
		diff.Close()
		w.Abort()
		return nil, 0, 0, err
	}
	if _, err := w.Commit(ctx); err != nil {
		diff.Close()
		return nil, 0, 0, err
	}
	esnap := snap
	esnap.Endpoint = "instrument_events"
	ew, err := ds.Open(ctx, schema.InstrumentEvents, esnap)
	if err != nil {
		diff.Close()
		return nil, 0, 0, err
	}
	var evs int64
	_, next, err := diff.Finish(func(t *schema.Table, rec arrow.Record) error {
		evs += rec.NumRows()
		return ew.Write(ctx, rec)
	})
	if err != nil {
		ew.Abort()
		return nil, 0, 0, err
	}
	if _, err := ew.Commit(ctx); err != nil {
		return nil, 0, 0, err
	}
	return next, rows, evs, nil
}

// runID is a UUIDv7-shaped run id of the snapshot time (time-sortable).
func runID(ts time.Time) string {
	ms := uint64(ts.UnixMilli())
	return fmt.Sprintf("%08x-%04x-7000-8000-000000000000", ms>>16, ms&0xffff)
}

// writeDone writes the snapshot's ledger record in done/ as the ledger
// writes it (not through the Store: the generator does not need each of
// 105,120 records fsynced).
func writeDone(dir string, snap sinks.Snapshot) error {
	rec := ledger.Record{SnapshotTime: snap.Time, RunID: snap.RunID, Source: snap.Source,
		Loads: []ledger.Load{{Endpoint: "instruments", Sink: "parquet", State: ledger.Committed, Attempts: 1, Updated: snap.Time.Add(2 * time.Second)}}}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(dir, ledger.Dir, "done", "date="+snap.Time.Format(time.DateOnly), snap.Time.Format(storage.TimeLayout)+"-"+storage.SafeName(snap.RunID)+".json")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, append(b, '\n'), 0o644)
}

// archiveBody stores a listing body in the raw archive as a run does.
func archiveBody(ctx context.Context, a *archive.Archive, snap sinks.Snapshot, body []byte) error {
	e, err := a.Create(ctx, archive.Meta{Endpoint: "instruments", Request: 0, Requests: 1, Attempt: 1, URL: "http://venue.sim/v1/public/get_instruments",
		SnapshotTime: snap.Time, RunID: snap.RunID, Source: snap.Source, FetchTime: snap.Time})
	if err != nil {
		return err
	}
	if _, err := e.Write(body); err != nil {
		e.Abort()
		return err
	}
	_, err = e.Finish(200, "application/json", true, "")
	return err
}

// writeOpenDay writes the per-snapshot instruments files a day of runs
// leaves before compaction (cfg.every apart) for the UTC day of today, in
// dir, through optlake's decoder and Parquet sink as `optlake run` writes
// them: the input of the `compact` of one day.
func writeOpenDay(ctx context.Context, dir string, cfg config) error {
	today := time.Now().UTC().Truncate(24 * time.Hour)
	sim := venuesim.New(venuesim.Config{Seed: 1, Instruments: cfg.instruments, Start: today, TickEvery: cfg.every})
	sink, err := pq.New(pq.Options{Store: storage.NewLocal(dir)})
	if err != nil {
		return err
	}
	dec := transform.NewInstrumentDecoder(transform.Options{})
	defer dec.Release()
	var body bytes.Buffer
	for k := range int(24 * time.Hour / cfg.every) {
		if k > 0 {
			sim.Advance(1)
		}
		body.Reset()
		if err := sim.WriteInstruments(&body); err != nil {
			return err
		}
		ts := today.Add(time.Duration(k) * cfg.every)
		snap := sinks.Snapshot{Time: ts, RunID: runID(ts), Source: source, Endpoint: "instruments"}
		w, err := sink.Open(ctx, schema.Instruments, snap)
		if err != nil {
			return err
		}
		if _, err := dec.Decode(ctx, &body, snap, func(t *schema.Table, rec arrow.Record) error {
			if t != schema.Instruments {
				return nil
			}
			return w.Write(ctx, rec)
		}); err != nil {
			w.Abort()
			return err
		}
		if _, err := w.Commit(ctx); err != nil {
			return err
		}
	}
	return nil
}
