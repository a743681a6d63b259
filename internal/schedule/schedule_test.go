package schedule

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// fakeClock stands still; each After is handed to the test, which fires it.
type fakeClock struct {
	now   time.Time
	waits chan wait
}

type wait struct {
	d    time.Duration
	fire chan time.Time
}

func newFakeClock(now time.Time) *fakeClock {
	return &fakeClock{now: now, waits: make(chan wait, 1)}
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.waits <- wait{d, ch}
	return ch
}

// tick lets the scheduler's pending wait (of want) elapse.
func (c *fakeClock) tick(t *testing.T, want time.Duration) {
	t.Helper()
	w := <-c.waits
	if w.d != want {
		t.Errorf("waits %s, want %s", w.d, want)
	}
	c.now = c.now.Add(w.d)
	w.fire <- c.now
}

func TestNext(t *testing.T) {
	base := time.Date(2026, 11, 24, 12, 1, 30, 0, time.UTC)
	for _, tc := range []struct {
		now        time.Time
		every, jit time.Duration
		want       time.Time
	}{
		{base, 5 * time.Minute, 0, time.Date(2026, 11, 24, 12, 5, 0, 0, time.UTC)},
		{base.Add(3*time.Minute + 30*time.Second), 5 * time.Minute, 0, time.Date(2026, 11, 24, 12, 10, 0, 0, time.UTC)}, // on a tick: the next one
		{base, time.Hour, 0, time.Date(2026, 11, 24, 13, 0, 0, 0, time.UTC)},
		{base, 5 * time.Minute, 7 * time.Second, time.Date(2026, 11, 24, 12, 5, 7, 0, time.UTC)},
	} {
		if got := Next(tc.now, tc.every, tc.jit); !got.Equal(tc.want) {
			t.Errorf("Next(%s, %s, %s) = %s, want %s", tc.now, tc.every, tc.jit, got, tc.want)
		}
	}
}

// Runs at once, then at each clock-aligned tick plus the jitter; an error
// of a run does not stop the schedule; cancelling ctx between runs stops it.
func TestRunTicksWithJitter(t *testing.T) {
	clock := newFakeClock(time.Date(2026, 11, 24, 12, 1, 30, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	runs := make(chan time.Time, 10)
	var jitterBounds []int64
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Every: 5 * time.Minute, Jitter: 10 * time.Second, Clock: clock, Signals: make(chan os.Signal),
			Rand: func(n int64) int64 { jitterBounds = append(jitterBounds, n); return int64(4 * time.Second) }},
			func(context.Context) error {
				runs <- clock.Now()
				if len(runs) == 2 {
					return errors.New("venue down")
				}
				return nil
			})
	}()
	clock.tick(t, 3*time.Minute+34*time.Second) // 12:01:30 -> 12:05:04
	clock.tick(t, 5*time.Minute)                // 12:05:04 -> 12:10:04 (the failed run did not stop it)
	<-clock.waits                               // waiting for 12:15:04
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	close(runs)
	var got []string
	for r := range runs {
		got = append(got, r.Format("15:04:05"))
	}
	if want := []string{"12:01:30", "12:05:04", "12:10:04"}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("runs at %v, want %v", got, want)
	}
	for _, n := range jitterBounds {
		if n != int64(10*time.Second) {
			t.Errorf("jitter drawn below %d, want below %d", n, int64(10*time.Second))
		}
	}
}

// The first signal (ctx cancelled) lets the run in flight finish with its
// context intact, and Run returns nil without waiting for the next tick.
func TestRunFirstSignalFinishesTheRun(t *testing.T) {
	clock := newFakeClock(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 4)
	started, release := make(chan struct{}), make(chan struct{})
	runErr := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Every: time.Minute, Clock: clock, Signals: sigs}, func(rctx context.Context) error {
			close(started)
			<-release
			runErr <- rctx.Err()
			return nil
		})
	}()
	<-started
	sigs <- syscall.SIGTERM
	cancel()
	close(release)
	if err := <-runErr; err != nil {
		t.Errorf("the run in flight saw %v after the first signal, want its context intact", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
	select {
	case w := <-clock.waits:
		t.Errorf("Run waited %s for another tick after the signal", w.d)
	default:
	}
}

// A second signal cancels the run in flight and Run returns ErrAborted.
func TestRunSecondSignalAborts(t *testing.T) {
	clock := newFakeClock(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 4)
	started := make(chan struct{})
	n := 0
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Every: time.Minute, Clock: clock, Signals: sigs}, func(rctx context.Context) error {
			n++
			close(started)
			<-rctx.Done() // only the abort ends this run
			return rctx.Err()
		})
	}()
	<-started
	sigs <- syscall.SIGTERM
	cancel()
	sigs <- syscall.SIGINT
	if err := <-done; !errors.Is(err, ErrAborted) {
		t.Errorf("Run = %v, want ErrAborted", err)
	}
	if n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}

func TestRunRejectsNoInterval(t *testing.T) {
	if err := Run(context.Background(), Options{}, func(context.Context) error { return nil }); err == nil {
		t.Error("Run with no interval: no error")
	}
}
