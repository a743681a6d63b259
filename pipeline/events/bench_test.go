package events

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
	"github.com/optlake/optlake/venuesim"
)

const benchN = 1_000_000

// benchFixture holds two consecutive 1,000,000-instrument simulator
// snapshots decoded to Arrow records (decoding takes several seconds, so it
// is shared by the benchmarks).
var benchFixture = sync.OnceValues(func() (*fixture, error) {
	sim := venuesim.New(venuesim.Config{Seed: 1, Instruments: benchN})
	f := &fixture{}
	var err error
	if f.snap0, f.recs0, err = decodeSim(sim); err != nil {
		return nil, err
	}
	sim.Advance(1)
	if f.snap1, f.recs1, err = decodeSim(sim); err != nil {
		return nil, err
	}
	return f, nil
})

type fixture struct {
	snap0, snap1 time.Time
	recs0, recs1 []arrow.Record
}

func decodeSim(sim *venuesim.Sim) (time.Time, []arrow.Record, error) {
	var body bytes.Buffer
	if err := sim.WriteInstruments(&body); err != nil {
		return time.Time{}, nil, err
	}
	snap := sim.Now()
	dec := transform.NewInstrumentDecoder(transform.Options{})
	defer dec.Release()
	var recs []arrow.Record
	_, err := dec.Decode(context.Background(), &body, sinks.Snapshot{Time: snap, RunID: "bench", Source: "venue-sim", Endpoint: "instruments"},
		func(tb *schema.Table, rec arrow.Record) error {
			if tb == schema.Instruments {
				rec.Retain()
				recs = append(recs, rec)
			}
			return nil
		})
	return snap, recs, err
}

// processCPU returns the CPU time (user + system) the process has used:
// on a shared machine it moves less with the load than wall time does.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// savedBenchState returns the fixture and a data directory holding the
// saved state of its first snapshot.
func savedBenchState(b *testing.B) (*fixture, string) {
	f, err := benchFixture()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	st, err := Rebuild("venue-sim", f.snap0, f.recs0)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Save(dir); err != nil {
		b.Fatal(err)
	}
	st.Close()
	return f, dir
}

// BenchmarkDiff1M compares a 1,000,000-instrument snapshot with the state of
// the previous tick, loaded from its file as a live run does: rows/s is the
// throughput of Observe + Finish (emitting the events into a counter,
// writing the next state). It also reports the size of the state file and
// the live heap of a comparison after Observe (bounded by Options.MemBytes,
// whatever the listing size).
func BenchmarkDiff1M(b *testing.B) {
	f, dir := savedBenchState(b)
	prev, err := Load(dir, "venue-sim")
	if err != nil {
		b.Fatal(err)
	}
	defer prev.Close()
	fi, err := os.Stat(StatePath(dir, "venue-sim"))
	if err != nil {
		b.Fatal(err)
	}
	meta := sinks.Snapshot{Time: f.snap1, RunID: "bench-1", Source: "venue-sim"}
	var stats Stats
	var heap uint64
	var observe, finish, finishCPU time.Duration
	h0 := heapInUse()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		d, err := NewDiffer(prev, meta, Options{TempDir: StateDir(dir)})
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		for _, r := range f.recs1 {
			if err := d.Observe(r); err != nil {
				b.Fatal(err)
			}
		}
		observe += time.Since(t0)
		if heap == 0 {
			b.StopTimer()
			heap = heapInUse() - h0
			b.StartTimer()
		}
		var next *State
		t1, c1 := time.Now(), processCPU()
		if stats, next, err = d.Finish(func(*schema.Table, arrow.Record) error { return nil }); err != nil {
			b.Fatal(err)
		}
		finish += time.Since(t1)
		finishCPU += processCPU() - c1
		next.Close()
	}
	b.StopTimer()
	b.ReportMetric(float64(stats.Rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(stats.Events), "events")
	b.ReportMetric(float64(fi.Size()), "state-file-B")
	b.ReportMetric(float64(heap)/(1<<20), "heap-after-observe-MiB")
	b.ReportMetric(observe.Seconds()/float64(b.N), "observe-s/op")
	b.ReportMetric(finish.Seconds()/float64(b.N), "finish-s/op")
	b.ReportMetric(finishCPU.Seconds()/float64(b.N), "finish-cpu-s/op")
}

// BenchmarkInitial1M is the first snapshot of a source: 1,000,000 listed
// events, sorted (spilled and merged) and emitted.
func BenchmarkInitial1M(b *testing.B) {
	f, err := benchFixture()
	if err != nil {
		b.Fatal(err)
	}
	meta := sinks.Snapshot{Time: f.snap0, RunID: "bench-0", Source: "venue-sim"}
	var finish, finishCPU time.Duration
	b.ReportAllocs()
	for b.Loop() {
		d, err := NewDiffer(NewState("venue-sim"), meta, Options{TempDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range f.recs0 {
			if err := d.Observe(r); err != nil {
				b.Fatal(err)
			}
		}
		t0, c0 := time.Now(), processCPU()
		_, next, err := d.Finish(func(*schema.Table, arrow.Record) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		finish += time.Since(t0)
		finishCPU += processCPU() - c0
		next.Close()
	}
	b.ReportMetric(float64(benchN)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(finish.Seconds()/float64(b.N), "finish-s/op")
	b.ReportMetric(finishCPU.Seconds()/float64(b.N), "finish-cpu-s/op")
}

// BenchmarkState1M saves (copies, here: a rebuilt state is a temporary file
// elsewhere) and loads (checks) the state of 1,000,000 instruments.
func BenchmarkState1M(b *testing.B) {
	f, err := benchFixture()
	if err != nil {
		b.Fatal(err)
	}
	st, err := Rebuild("venue-sim", f.snap0, f.recs0)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	dir := b.TempDir()
	b.Run("save", func(b *testing.B) {
		for b.Loop() {
			if err := st.Save(dir); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("load", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			st, err := Load(dir, "venue-sim")
			if err != nil {
				b.Fatal(err)
			}
			st.Close()
		}
	})
}

// BenchmarkSmallSnapshot is the events' share of the every-5-minutes run
// on the simulator's realistic listing (3,000 instruments): load the state
// from its file, compare the next snapshot, save the next state — what a
// live run does per snapshot.
func BenchmarkSmallSnapshot(b *testing.B) {
	sim := venuesim.New(venuesim.Config{Seed: 1})
	snap0, recs0, err := decodeSim(sim)
	if err != nil {
		b.Fatal(err)
	}
	sim.Advance(1)
	snap1, recs1, err := decodeSim(sim)
	if err != nil {
		b.Fatal(err)
	}
	st, err := Rebuild("venue-sim", snap0, recs0)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if err := st.Save(dir); err != nil {
		b.Fatal(err)
	}
	st.Close()
	opt := Options{TempDir: StateDir(dir)}
	out := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		prev, err := Load(dir, "venue-sim")
		if err != nil {
			b.Fatal(err)
		}
		d, err := NewDiffer(prev, sinks.Snapshot{Time: snap1, RunID: "bench", Source: "venue-sim"}, opt)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs1 {
			if err := d.Observe(r); err != nil {
				b.Fatal(err)
			}
		}
		_, next, err := d.Finish(func(*schema.Table, arrow.Record) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		prev.Close()
		if err := next.Save(out); err != nil { // elsewhere: the next loop starts from the same state
			b.Fatal(err)
		}
		next.Close()
	}
}
