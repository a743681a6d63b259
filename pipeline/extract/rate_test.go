package extract

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

func TestParseRate(t *testing.T) {
	cases := []struct {
		in   string
		want rate.Limit
		err  bool
	}{
		{in: "", want: 0},
		{in: "0", want: 0},
		{in: "1/s", want: 1},
		{in: "5", want: 5},
		{in: "0.5/s", want: 0.5},
		{in: "30/m", want: 0.5},
		{in: "30/min", want: 0.5},
		{in: "3600/h", want: 1},
		{in: "1/d", err: true},
		{in: "-1/s", err: true},
		{in: "x/s", err: true},
		{in: "NaN/s", err: true},
	}
	for _, c := range cases {
		got, err := ParseRate(c.in)
		if (err != nil) != c.err || (!c.err && got != c.want) {
			t.Errorf("ParseRate(%q) = %v, %v; want %v (error %v)", c.in, got, err, c.want, c.err)
		}
	}
}

// TestRateLimitAtServer checks the limit where it matters, at the venue:
// requests from several goroutines (endpoints, accounts, fanned-out
// parameters share one client), retries included, never arrive faster than
// the limit allows. The bound is measured from a time taken before the
// client existed, so a slow machine only makes arrivals later (never a
// failure); an arrival earlier than the bound is a real failure.
func TestRateLimitAtServer(t *testing.T) {
	const (
		perSec  = 40
		burst   = 2
		callers = 4
		each    = 3
	)
	var mu sync.Mutex
	var arrivals []time.Time
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		first := !seen[r.URL.RawQuery]
		seen[r.URL.RawQuery] = true
		mu.Unlock()
		if first {
			// Every request fails once: its retry must wait for the limit too.
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, `{}`)
	}))
	defer srv.Close()

	start := time.Now()
	c := newClient(t, srv.URL, nil, func(o *Options) {
		o.RateLimit, o.RateBurst = perSec, burst
		o.BackoffBase, o.BackoffMax = time.Millisecond, time.Millisecond
	})
	var wg sync.WaitGroup
	errs := make(chan error, callers*each)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var body []byte
				r := Request{Endpoint: "e", Path: "/x", Params: map[string][]string{"q": {fmt.Sprint(g, "-", i)}}}
				errs <- c.Do(context.Background(), r, Hooks{}, readAll(&body))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := 2 * callers * each; len(arrivals) != want {
		t.Fatalf("server saw %d requests, want %d (each fails once, then succeeds)", len(arrivals), want)
	}
	sort.Slice(arrivals, func(i, j int) bool { return arrivals[i].Before(arrivals[j]) })
	interval := time.Second / perSec
	for k, at := range arrivals {
		// The k-th request (0-based) needs k+1 tokens: burst at start, then
		// one per interval.
		earliest := start
		if k >= burst {
			earliest = start.Add(time.Duration(k-burst+1) * interval)
		}
		// 2 ms of slack for the limiter's own rounding; a request that
		// beats the limit by a whole interval is far beyond it.
		if at.Before(earliest.Add(-2 * time.Millisecond)) {
			t.Errorf("request %d arrived %s after start, before the limit allows (%s)", k+1, at.Sub(start), earliest.Sub(start))
		}
	}
}

func TestRateLimitUnlimitedAndInvalid(t *testing.T) {
	if _, err := New(Options{BaseURL: "http://x", RateLimit: -1}); err == nil {
		t.Error("a negative rate limit was accepted")
	}
	c, err := New(Options{BaseURL: "http://x"})
	if err != nil {
		t.Fatal(err)
	}
	if c.lim != nil {
		t.Error("no rate limit configured, but the client has a limiter")
	}
}
