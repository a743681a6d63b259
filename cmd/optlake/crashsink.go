package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/optlake/optlake/schema"
	"github.com/optlake/optlake/sinks"
)

// loadCrashEnv names the test-only crash hook of a load: the process kills
// itself (SIGKILL, as kill -9) at the named step of the first instruments
// or account table file it loads (loadSteps) — in a run with pending
// loads, the catch-up's oldest snapshot. Not documented for users.
const loadCrashEnv = "OPTLAKE_TEST_LOAD_CRASH_AT"

// loadSteps are the steps of a snapshot's commit into a sink, in order:
// the file opened, rows written, about to commit, committed (before the
// ledger records it).
var loadSteps = []string{"opened", "written", "commit", "committed"}

// killAtEnv names the test-only kill of the soak: "STEP:N" kills the
// process (SIGKILL) the Nth time it reaches STEP, a step of a snapshot's
// load (pipeline.Step*, or a sink's loadSteps of an instruments or account
// table file), live or caught up: a moment a seed reproduces, unlike a
// timer. Not documented for users.
const killAtEnv = "OPTLAKE_TEST_KILL_AT"

// killer kills the process at its step's Nth time (nil: never).
type killer struct {
	step string
	n    int
	mu   sync.Mutex
	seen int
}

// killerFromEnv is the killer killAtEnv asks for (nil: none).
func killerFromEnv() *killer {
	step, n, ok := strings.Cut(os.Getenv(killAtEnv), ":")
	k := &killer{step: step, n: 1}
	if ok {
		k.n, _ = strconv.Atoi(n)
	}
	if step == "" || k.n < 1 {
		return nil
	}
	return k
}

// at counts a step reached and kills the process at the chosen one.
func (k *killer) at(step string) {
	if k == nil || step != k.step {
		return
	}
	k.mu.Lock()
	k.seen++
	now := k.seen == k.n
	k.mu.Unlock()
	if now {
		killSelf()
		select {} // the signal is on its way
	}
}

// stepHook is the pipeline's step hook (pipeline.Config.Step) killAtEnv
// asks for (nil: none).
func stepHook() func(string) {
	if k := killerFromEnv(); k != nil {
		return k.at
	}
	return nil
}

// crashSinks wraps ss with the load crash hook when loadCrashEnv (or
// killAtEnv) is set.
func crashSinks(ss []sinks.Sink) []sinks.Sink {
	at, k := os.Getenv(loadCrashEnv), killerFromEnv()
	if at == "" && k == nil {
		return ss
	}
	out := make([]sinks.Sink, len(ss))
	for i, s := range ss {
		out[i] = crashSink{Sink: s, at: at, k: k}
	}
	return out
}

type crashSink struct {
	sinks.Sink
	at string
	k  *killer // killAtEnv's
}

func (s crashSink) crash(step string) {
	s.k.at(step)
	if step == s.at {
		killSelf()
	}
}

func (s crashSink) Open(ctx context.Context, t *schema.Table, snap sinks.Snapshot) (sinks.Writer, error) {
	w, err := s.Sink.Open(ctx, t, snap)
	if err != nil || !crashTable(t) {
		return w, err
	}
	s.crash("opened")
	return crashWriter{Writer: w, s: s}, nil
}

// OpenVersion implements sinks.Versioned: the wrapped sink's OpenVersion
// (parquet.Sink's, which the Iceberg sink writes a snapshot loaded again
// with) with the hook.
func (s crashSink) OpenVersion(ctx context.Context, t *schema.Table, snap sinks.Snapshot, version string) (sinks.Writer, error) {
	w, err := sinks.OpenVersion(ctx, s.Sink, t, snap, version)
	if err != nil || t != schema.Instruments {
		return w, err
	}
	s.crash("opened")
	return crashWriter{Writer: w, s: s}, nil
}

// CommitsAtomically implements sinks.Atomic: the wrapped sink's answer.
func (s crashSink) CommitsAtomically() bool { return sinks.CommitsAtomically(s.Sink) }

// HoldsDays implements sinks.DaySink: the wrapped sink's answer.
func (s crashSink) HoldsDays() bool {
	_, ok := sinks.HoldsDays(s.Sink)
	return ok
}

// FlushDay implements sinks.DaySink: the wrapped sink's FlushDay.
func (s crashSink) FlushDay(ctx context.Context, date string) error {
	return sinks.FlushDay(ctx, s.Sink, date)
}

type crashWriter struct {
	sinks.Writer
	s crashSink
}

func (w crashWriter) Write(ctx context.Context, rec arrow.Record) error {
	err := w.Writer.Write(ctx, rec)
	w.s.crash("written")
	return err
}

func (w crashWriter) Commit(ctx context.Context) (sinks.Committed, error) {
	w.s.crash("commit")
	c, err := w.Writer.Commit(ctx)
	w.s.crash("committed")
	return c, err
}

// crashTable reports whether the load crash hook stops at t's steps: the
// instruments table and the tables inferred from account endpoints (not
// rejects, events, runs or the inferred schema's history).
func crashTable(t *schema.Table) bool {
	if t == schema.Instruments {
		return true
	}
	for _, fixed := range schema.Tables() {
		if t.Name == fixed.Name {
			return false
		}
	}
	return true
}
