// Package schedule runs a job on an interval aligned to the clock (a 5m
// interval fires at :00, :05, ...), with an optional random jitter, and
// stops on signals in two steps: the first SIGINT/SIGTERM lets the run in
// flight finish, the second aborts it.
package schedule

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// ErrAborted is Run's error when a second signal aborted a run.
var ErrAborted = errors.New("aborted by a second signal")

// Clock is the time source of Run; tests pass a fake one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options configure Run.
type Options struct {
	Every  time.Duration // the interval, > 0
	Jitter time.Duration // a random extra delay in [0, Jitter) before each run but the first
	// Clock is the time source (nil: the system clock).
	Clock Clock
	// Rand returns a random number in [0, n) for the jitter (nil:
	// math/rand/v2).
	Rand func(n int64) int64
	// Signals delivers the stop signals, which Run counts: the second
	// aborts the run in flight. nil: Run listens for SIGINT and SIGTERM
	// itself. The first signal must also cancel Run's ctx (as
	// signal.NotifyContext does): that is what stops the loop.
	Signals <-chan os.Signal
	Logger  *slog.Logger // nil: discard
}

// Next is when the run after now starts: the next multiple of every (in
// Unix time) after now, plus jitter.
func Next(now time.Time, every, jitter time.Duration) time.Time {
	return now.Truncate(every).Add(every).Add(jitter)
}

// Run calls run at once and then at every tick, until ctx is cancelled: a
// run in flight then finishes (its context is not cancelled by ctx) and Run
// returns nil. A second signal cancels the run in flight, and Run returns
// ErrAborted. An error of run is logged and the schedule goes on.
func Run(ctx context.Context, o Options, run func(context.Context) error) error {
	if o.Every <= 0 {
		return errors.New("schedule: the interval must be positive")
	}
	clock := o.Clock
	if clock == nil {
		clock = systemClock{}
	}
	rnd := o.Rand
	if rnd == nil {
		rnd = rand.Int64N
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sigs := o.Signals
	if sigs == nil {
		ch := make(chan os.Signal, 4)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(ch)
		sigs = ch
	}

	var mu sync.Mutex
	abort := context.CancelFunc(func() {})
	aborted := false
	isAborted := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return aborted
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		n := 0
		for {
			select {
			case <-done:
				return
			case <-sigs:
				n++
				if n >= 2 {
					mu.Lock()
					aborted = true
					abort()
					mu.Unlock()
					log.Warn("second signal: aborting the snapshot in flight")
				}
			}
		}
	}()
	for {
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		mu.Lock()
		abort = cancel
		stop := aborted
		mu.Unlock()
		if stop {
			cancel()
			return ErrAborted
		}
		err := run(rctx)
		cancel()
		if err != nil {
			log.Error("snapshot failed", "err", err)
		}
		if isAborted() {
			return ErrAborted
		}
		if ctx.Err() != nil {
			log.Info("stopping: signal received, last snapshot finished")
			return nil
		}
		var jitter time.Duration
		if o.Jitter > 0 {
			jitter = time.Duration(rnd(int64(o.Jitter)))
		}
		now := clock.Now()
		select {
		case <-ctx.Done():
			log.Info("stopping: signal received, last snapshot finished")
			return nil
		case <-clock.After(Next(now, o.Every, jitter).Sub(now)):
		}
	}
}
