package events

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/klauspost/compress/zstd"

	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/venuesim"
)

// BenchmarkReplayChain is the events' share of a replay of the simulator's
// realistic listing: consecutive snapshots compared one after the other,
// each against the state the one before left, with a Reuse shared by the
// chain (as a replay does), with and without the memos. One op is one
// snapshot.
func BenchmarkReplayChain(b *testing.B) {
	const snaps = 24
	sim := venuesim.New(venuesim.Config{Seed: 1})
	times := make([]time.Time, snaps)
	recs := make([][]arrow.Record, snaps)
	for i := range snaps {
		var err error
		if times[i], recs[i], err = decodeSim(sim); err != nil {
			b.Fatal(err)
		}
		sim.Advance(1)
	}
	for _, memo := range []bool{true, false} {
		b.Run(map[bool]string{true: "memo", false: "nomemo"}[memo], func(b *testing.B) {
			opt := Options{TempDir: b.TempDir(), Background: true, Reuse: NewReuse(), noMemo: !memo}
			prev := NewState("venue-sim")
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i%snaps == 0 {
					prev.Close()
					prev = NewState("venue-sim")
				}
				k := i % snaps
				i++
				prev = chainStep(b, prev, times[k], recs[k], opt)
			}
			prev.Close()
		})
	}
}

// chainStep compares one snapshot with prev (closed after) and returns
// the next state.
func chainStep(b *testing.B, prev *State, snap time.Time, recs []arrow.Record, opt Options) *State {
	d := NewDifferFor(sinks.Snapshot{Time: snap, RunID: "bench", Source: "venue-sim"}, opt)
	for _, r := range recs {
		if err := d.Observe(r); err != nil {
			b.Fatal(err)
		}
	}
	if err := d.Against(prev); err != nil {
		b.Fatal(err)
	}
	_, next, err := d.Finish(func(*schema.Table, arrow.Record) error { return nil })
	if err != nil {
		b.Fatal(err)
	}
	prev.Close()
	return next
}

// BenchmarkReplayArchive replays the events of the archived instruments
// bodies (*.json.zst, in name order) in OPTLAKE_BENCH_RAW (e.g. the bench
// archive's raw/instruments/date=…): each snapshot is decoded just before
// it is compared (so its rows are in the cache, as in a replay), and
// only the comparison is timed; cpu-ms/op is the process CPU of the
// comparisons of the whole chain (one op).
func BenchmarkReplayArchive(b *testing.B) {
	dir := os.Getenv("OPTLAKE_BENCH_RAW")
	if dir == "" {
		b.Skip("OPTLAKE_BENCH_RAW is not set")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json.zst"))
	if err != nil || len(files) == 0 {
		b.Fatalf("no bodies in %s (%v)", dir, err)
	}
	slices.Sort(files)
	zd, err := zstd.NewReader(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer zd.Close()
	bodies := make([][]byte, len(files))
	times := make([]time.Time, len(files))
	for i, f := range files {
		z, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		if bodies[i], err = zd.DecodeAll(z, nil); err != nil {
			b.Fatal(err)
		}
		ts, _, _ := strings.Cut(filepath.Base(f), "-")
		if times[i], err = time.Parse("20060102T150405.000Z", ts); err != nil {
			b.Fatal(err)
		}
	}
	dec := transform.NewInstrumentDecoder(transform.Options{})
	defer dec.Release()
	for _, memo := range []bool{true, false} {
		b.Run(map[bool]string{true: "memo", false: "nomemo"}[memo], func(b *testing.B) {
			opt := Options{TempDir: b.TempDir(), Background: true, Reuse: NewReuse(), noMemo: !memo}
			var cpu time.Duration
			for b.Loop() {
				prev := NewState("venue-sim")
				for i := range bodies {
					b.StopTimer()
					var recs []arrow.Record
					_, err := dec.Decode(context.Background(), bytes.NewReader(bodies[i]), sinks.Snapshot{Time: times[i], RunID: "bench", Source: "venue-sim", Endpoint: "instruments"},
						func(tb *schema.Table, rec arrow.Record) error {
							if tb == schema.Instruments {
								rec.Retain()
								recs = append(recs, rec)
							}
							return nil
						})
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					c0 := processCPU()
					prev = chainStep(b, prev, times[i], recs, opt)
					cpu += processCPU() - c0
					for _, r := range recs {
						r.Release()
					}
				}
				prev.Close()
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(opt.Reuse.copied.Load())/float64(b.N), "copied/op")
			b.ReportMetric(float64(opt.Reuse.passed.Load())/float64(b.N), "passed/op")
		})
	}
}
