package sinktest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// Capability names one of the optional capabilities of package sinks.
type Capability string

// The optional capabilities of package sinks.
const (
	Atomic    Capability = "Atomic"
	DaySink   Capability = "DaySink"
	Versioned Capability = "Versioned"
)

// Capabilities are every optional capability of package sinks: Capable
// has them all, and Forwarding checks each.
var Capabilities = []Capability{Atomic, DaySink, Versioned}

// Capable is a sink with every optional capability, whose writers count
// rows and keep nothing; it counts the calls each capability gets.
type Capable struct {
	c *capCounts
}

type capCounts struct {
	mu    sync.Mutex
	calls map[Capability]int
}

// NewCapable returns a Capable with no calls counted.
func NewCapable() *Capable {
	return &Capable{c: &capCounts{calls: map[Capability]int{}}}
}

var (
	_ sinks.Atomic    = (*Capable)(nil)
	_ sinks.DaySink   = (*Capable)(nil)
	_ sinks.Versioned = (*Capable)(nil)
)

func (s *Capable) count(c Capability) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.calls[c]++
}

// Calls is how many calls capability c got.
func (s *Capable) Calls(c Capability) int {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.c.calls[c]
}

// Name implements sinks.Sink.
func (s *Capable) Name() string { return "capable" }

// Close implements sinks.Sink.
func (s *Capable) Close(context.Context) error { return nil }

// Open implements sinks.Sink.
func (s *Capable) Open(context.Context, *schema.Table, sinks.Snapshot) (sinks.Writer, error) {
	return &countWriter{}, nil
}

// CommitsAtomically implements sinks.Atomic.
func (s *Capable) CommitsAtomically() bool { s.count(Atomic); return true }

// HoldsDays implements sinks.DaySink.
func (s *Capable) HoldsDays() bool { return true }

// FlushDay implements sinks.DaySink.
func (s *Capable) FlushDay(context.Context, string) error { s.count(DaySink); return nil }

// OpenVersion implements sinks.Versioned.
func (s *Capable) OpenVersion(ctx context.Context, t *schema.Table, snap sinks.Snapshot, _ string) (sinks.Writer, error) {
	s.count(Versioned)
	return s.Open(ctx, t, snap)
}

type countWriter struct {
	rows int64
	done bool
}

func (w *countWriter) Write(_ context.Context, rec arrow.Record) error {
	if w.done {
		return errors.New("capable: write after commit")
	}
	w.rows += rec.NumRows()
	return nil
}

func (w *countWriter) Commit(context.Context) (sinks.Committed, error) {
	if w.done {
		return sinks.Committed{}, errors.New("capable: second commit")
	}
	w.done = true
	return sinks.Committed{Rows: w.rows, Where: "capable"}, nil
}

func (w *countWriter) Abort() error { w.done = true; return nil }

// bare is a sink with no optional capability: a Capable's Sink methods.
type bare struct{ s *Capable }

func (b bare) Name() string                    { return b.s.Name() }
func (b bare) Close(ctx context.Context) error { return b.s.Close(ctx) }
func (b bare) Open(ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
	return b.s.Open(ctx, t, snap)
}

// Forwarding checks that wrap, which wraps a sink in another (a wrapper),
// forwards every optional capability of the sink it wraps: around a
// Capable, each capability is visible on the wrapper (asked as package
// sinks asks) and its call reaches the Capable; around a sink with none,
// the wrapper claims none. declined names the capabilities the wrapper
// does not forward, each with the reason; they are not checked.
func Forwarding(t *testing.T, wrap func(t testing.TB, inner sinks.Sink) sinks.Sink, declined map[Capability]string) {
	t.Helper()
	for _, c := range Capabilities {
		t.Run(string(c), func(t *testing.T) {
			if why, ok := declined[c]; ok {
				t.Skipf("not forwarded: %s", why)
			}
			probe := NewCapable()
			claimed, reached := has(t, wrap(t, probe), c, probe)
			if !claimed {
				t.Errorf("the wrapper hides %s of the sink it wraps", c)
			} else if !reached {
				t.Errorf("the wrapper's %s does not reach the sink it wraps", c)
			}
			none := NewCapable()
			if claimed, _ := has(t, wrap(t, bare{none}), c, none); claimed {
				t.Errorf("the wrapper of a sink without %s claims it", c)
			}
		})
	}
}

// has asks w for capability c as package sinks does, and reports whether
// w has it and whether using it reached probe.
func has(t *testing.T, w sinks.Sink, c Capability, probe *Capable) (claimed, reached bool) {
	t.Helper()
	ctx := context.Background()
	snap := SnapshotOf(0)
	switch c {
	case Atomic:
		claimed = sinks.CommitsAtomically(w)
		reached = probe.Calls(Atomic) > 0
	case DaySink:
		_, claimed = sinks.HoldsDays(w)
		if err := sinks.FlushDay(ctx, w, snap.Time.Format(time.DateOnly)); err != nil {
			t.Fatalf("FlushDay: %v", err)
		}
		reached = probe.Calls(DaySink) > 0
	case Versioned:
		claimed = loads(t, func() (sinks.Writer, error) {
			return sinks.OpenVersion(ctx, w, schema.Runs, snap, "v1")
		})
		reached = probe.Calls(Versioned) > 0
	default:
		t.Fatalf("no check of capability %s", c)
	}
	return claimed, reached
}

// loads opens a writer with open and commits a runs record through it;
// false when open says errors.ErrUnsupported.
func loads(t *testing.T, open func() (sinks.Writer, error)) bool {
	t.Helper()
	ctx := context.Background()
	w, err := open()
	if errors.Is(err, errors.ErrUnsupported) {
		return false
	}
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	d := Snapshot(t, 0, 128)
	defer d.Release()
	if err := w.Write(ctx, d.Runs[0]); err != nil {
		t.Fatalf("write: %v", err)
	}
	if _, err := w.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	return true
}
