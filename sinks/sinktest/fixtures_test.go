package sinktest_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/optlake/optlake/pipeline/transform"
	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks/sinktest"
	"github.com/optlake/optlake/venuesim"
)

var update = flag.Bool("update", false, "rewrite the fixtures from the simulator and package transform")

// decode is what the fixtures hold: the simulator's listing at tick through
// the instrument decoder (only this test depends on transform and venuesim).
func decode(t *testing.T, tick int) (map[*schema.Table][]arrow.Record, int64) {
	t.Helper()
	sim := venuesim.New(venuesim.Config{Seed: 18, Instruments: 600,
		Faults: venuesim.Faults{IndexPriceVariants: true, WrongTypes: true, ExtraFields: true}})
	sim.Advance(tick)
	var body bytes.Buffer
	if err := sim.WriteInstruments(&body); err != nil {
		t.Fatal(err)
	}
	n := int64(body.Len())
	snap := sinktest.SnapshotOf(tick)
	dec := transform.NewInstrumentDecoder(transform.Options{BatchRows: 1 << 20})
	defer dec.Release()
	out := map[*schema.Table][]arrow.Record{}
	if _, err := dec.Decode(context.Background(), &body, snap, func(tb *schema.Table, rec arrow.Record) error {
		rec.Retain()
		out[tb] = append(out[tb], rec)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out, n
}

func write(t *testing.T, name string, sc *arrow.Schema, recs []arrow.Record) {
	t.Helper()
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(sc), ipc.WithAllocator(memory.DefaultAllocator), ipc.WithZstd())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		r = array.NewRecord(sc, r.Columns(), r.NumRows())
		err = w.Write(r)
		r.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The fixtures are what the simulator and the decoder produce now (run
// with -update to rewrite them after a change to either).
func TestFixturesAreTransformOutput(t *testing.T) {
	for tick := 0; tick < sinktest.FixtureTicks; tick++ {
		recs, body := decode(t, tick)
		if *update {
			for _, tb := range []*schema.Table{schema.Instruments, schema.Rejects} {
				sc := tb.ArrowSchema()
				if tb == schema.Instruments {
					md := arrow.NewMetadata([]string{sinktest.BodyBytesKey}, []string{strconv.FormatInt(body, 10)})
					sc = arrow.NewSchema(sc.Fields(), &md)
				}
				write(t, sinktest.FixtureName(tick, tb), sc, recs[tb])
			}
			continue // the new files are embedded by the next build: run again to check them
		}
		d := sinktest.Snapshot(t, tick, 128)
		for _, tb := range []*schema.Table{schema.Instruments, schema.Rejects} {
			got, want := sinktest.Rows(tb, sinktest.Exact, d.Records(tb)...), sinktest.Rows(tb, sinktest.Exact, recs[tb]...)
			if len(want) == 0 || !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("tick %d %s: the fixture has %d rows, the decoder %d (or they differ): run go test -run TestFixturesAreTransformOutput -update ./sinks/sinktest", tick, tb.Name, len(got), len(want))
			}
			for _, r := range d.Records(tb) {
				if r.NumRows() > 128 {
					t.Errorf("tick %d %s: a batch of %d rows", tick, tb.Name, r.NumRows())
				}
			}
		}
		if got := sinktest.Rows(schema.Runs, sinktest.Exact, d.Runs...)[0][7]; got != strconv.FormatInt(body, 10) {
			t.Errorf("tick %d: runs body bytes %s, want %d", tick, got, body)
		}
		d.Release()
		for _, l := range recs {
			for _, r := range l {
				r.Release()
			}
		}
	}
}
