package venuesim

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestStatusFaults(t *testing.T) {
	tests := []struct {
		name       string
		faults     Faults
		path       string
		want       []int
		retryAfter string
	}{
		{"fail first", Faults{FailFirst: 2}, PathInstruments, []int{503, 503, 200, 200}, ""},
		{"fail first any endpoint", Faults{FailFirst: 1}, PathAccountSummary, []int{503, 200}, ""},
		{"rate limit first", Faults{RateLimitFirst: 2, RetryAfter: 3 * time.Second}, PathInstruments, []int{429, 429, 200}, "3"},
		{"retry-after rounds up, min 1", Faults{RateLimitFirst: 1, RetryAfter: 10 * time.Millisecond}, PathPositions, []int{429, 200}, "1"},
		{"fail then rate limit", Faults{FailFirst: 1, RateLimitFirst: 1, RetryAfter: 2 * time.Second}, PathInstruments, []int{503, 429, 200}, "2"},
		{"error rate 1", Faults{ErrorRate: 1}, PathInstruments, []int{-5, -5, -5, -5, -5, -5}, ""},
		{"rate limit rate 1", Faults{RateLimitRate: 1}, PathAccountBalance, []int{429, 429, 429}, "1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{Seed: 1, Instruments: 50, Faults: tc.faults})
			srv := serve(t, s)
			for i, want := range tc.want {
				resp := get(t, srv.URL+tc.path)
				switch {
				case want == -5:
					if resp.status != 500 && resp.status != 503 {
						t.Fatalf("request %d: status %d, want 5xx", i+1, resp.status)
					}
				case resp.status != want:
					t.Fatalf("request %d: status %d, want %d", i+1, resp.status, want)
				}
				if resp.status != 200 {
					var e struct {
						Error struct {
							Code    int    `json:"code"`
							Message string `json:"message"`
						} `json:"error"`
					}
					if err := json.Unmarshal(resp.body, &e); err != nil || e.Error.Code != resp.status {
						t.Fatalf("error body %s (%v)", resp.body, err)
					}
				}
				if resp.status == 429 && resp.header.Get("Retry-After") != tc.retryAfter {
					t.Fatalf("Retry-After %q, want %q", resp.header.Get("Retry-After"), tc.retryAfter)
				}
			}
			if s.Requests() != len(tc.want) {
				t.Fatalf("Requests() = %d, want %d", s.Requests(), len(tc.want))
			}
		})
	}
}

func TestFaultsDeterministic(t *testing.T) {
	f := Faults{ErrorRate: 0.2, RateLimitRate: 0.2, TruncateRate: 0.1, MalformedRate: 0.1}
	seq := func(seed int64) []decision {
		s := New(Config{Seed: seed, Faults: f})
		out := make([]decision, 200)
		for i := range out {
			out[i] = s.decide(int64(i + 1))
		}
		return out
	}
	a, b, c := seq(1), seq(1), seq(2)
	counts := map[int]int{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("request %d: %v vs %v with the same seed", i+1, a[i], b[i])
		}
		counts[a[i].status]++
	}
	if equal := func() bool {
		for i := range a {
			if a[i] != c[i] {
				return false
			}
		}
		return true
	}(); equal {
		t.Fatal("different seeds gave the same fault sequence")
	}
	if counts[429] < 20 || counts[500]+counts[503] < 20 || counts[0] < 80 {
		t.Fatalf("fault mix %v over 200 requests, want about 40/40/120", counts)
	}
}

func TestTruncation(t *testing.T) {
	tests := []struct {
		name, path string
		gzip       bool
		n          int
	}{
		{"instruments", PathInstruments, false, 3000},
		{"instruments gzip", PathInstruments, true, 3000},
		{"instruments tiny", PathInstruments + "?currency=SOL", false, 3},
		{"account", PathPositions, false, 3000},
		{"account gzip", PathAccountSummary, true, 3000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{Seed: 1, Instruments: tc.n, Faults: Faults{TruncateRate: 1}})
			var hdr []string
			if tc.gzip {
				hdr = []string{"Accept-Encoding", "gzip"}
			}
			resp := get(t, serve(t, s).URL+tc.path, hdr...)
			if resp.status != 200 {
				t.Fatalf("status %d", resp.status)
			}
			if !errors.Is(resp.readErr, io.ErrUnexpectedEOF) {
				t.Fatalf("read error %v, want unexpected EOF (read %d bytes)", resp.readErr, len(resp.body))
			}
			// Also through Go's default transparent decompression.
			r, err := http.Get(serve(t, s).URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.ReadAll(r.Body)
			r.Body.Close()
			if err == nil {
				t.Fatal("default client read a truncated body without error")
			}
		})
	}
}

func TestMalformed(t *testing.T) {
	for _, path := range []string{PathInstruments, PathInstruments + "?kind=future", PathAllAccountBalances,
		PathPositionsWithMints, PathExercisableOptions, PathAccountCollateral, PathPosition + "?instrument_name=BTC-PERPETUAL"} {
		t.Run(path, func(t *testing.T) {
			s := New(Config{Seed: 4, Instruments: 500, Faults: Faults{MalformedRate: 1}})
			srv := serve(t, s)
			for i := 0; i < 6; i++ { // both kinds of breakage
				for _, gz := range []bool{false, true} {
					var hdr []string
					if gz {
						hdr = []string{"Accept-Encoding", "gzip"}
					}
					resp := get(t, srv.URL+path, hdr...)
					if resp.status != 200 || resp.readErr != nil {
						t.Fatalf("status %d, read error %v", resp.status, resp.readErr)
					}
					b := resp.body
					if gz {
						b = gunzip(t, b)
					}
					var v any
					var syn *json.SyntaxError
					if err := json.Unmarshal(b, &v); !errors.As(err, &syn) {
						t.Fatalf("decode error %v, want *json.SyntaxError; body %.300s", err, b)
					}
				}
			}
		})
	}
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("gzip: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gunzip: %v", err)
	}
	return out
}

func TestGzip(t *testing.T) {
	s := New(Config{Seed: 5})
	srv := serve(t, s)
	resp := get(t, srv.URL+PathInstruments, "Accept-Encoding", "gzip, deflate")
	if resp.header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding %q", resp.header.Get("Content-Encoding"))
	}
	if got := gunzip(t, resp.body); !bytes.Equal(got, body(t, s)) {
		t.Fatal("gunzipped body differs from WriteInstruments")
	}
	if len(resp.body)*4 > len(body(t, s)) {
		t.Fatalf("gzip body %d bytes for %d plain", len(resp.body), len(body(t, s)))
	}
	plain := get(t, srv.URL+PathInstruments)
	if plain.header.Get("Content-Encoding") != "" || !bytes.Equal(plain.body, body(t, s)) {
		t.Fatal("plain request not served plain")
	}
	refused := get(t, srv.URL+PathInstruments, "Accept-Encoding", "gzip;q=0")
	if refused.header.Get("Content-Encoding") != "" {
		t.Fatal("gzip;q=0 got gzip")
	}
	acct := get(t, srv.URL+PathAccountSummary, "Accept-Encoding", "gzip")
	if acct.header.Get("Content-Encoding") != "gzip" || !json.Valid(gunzip(t, acct.body)) {
		t.Fatal("account endpoint not gzipped")
	}
}

func TestLatency(t *testing.T) {
	s := New(Config{Seed: 1, Instruments: 10, Faults: Faults{Latency: 80 * time.Millisecond}})
	srv := serve(t, s)
	start := time.Now()
	if resp := get(t, srv.URL+PathInstruments); resp.status != 200 {
		t.Fatalf("status %d", resp.status)
	}
	if d := time.Since(start); d < 80*time.Millisecond {
		t.Fatalf("answered after %v, want >= 80ms", d)
	}
	start = time.Now()
	get(t, srv.URL+PathHealth)
	if d := time.Since(start); d > 70*time.Millisecond {
		t.Fatalf("/healthz delayed %v", d)
	}
}

func TestRoutes(t *testing.T) {
	s := New(Config{Seed: 1, Instruments: 200, Faults: Faults{FailFirst: 1000}})
	srv := serve(t, s)
	health := get(t, srv.URL+PathHealth)
	if health.status != 200 || string(health.body) != "ok" {
		t.Fatalf("/healthz: %d %q", health.status, health.body)
	}
	if s.Requests() != 0 {
		t.Fatalf("/healthz counted: Requests() = %d", s.Requests())
	}

	s = New(Config{Seed: 1, Instruments: 200})
	srv = serve(t, s)
	tests := []struct {
		method, path string
		want         int
	}{
		{"GET", "/v1/public/nope", 404},
		{"GET", "/", 404},
		{"POST", PathInstruments, 405},
		{"DELETE", PathPositions, 405},
		{"GET", PathInstruments + "?currency=DOGE", 400},
		{"GET", PathInstruments + "?kind=spot", 400},
		{"GET", PathPosition, 400},
		{"GET", PathPosition + "?instrument_name=BTC-1JAN20-1-C", 400},
		{"GET", PathAccountBalance + "?currency=XRP", 400},
		{"GET", PathPosition + "?instrument_name=BTC-PERPETUAL", 200},
	}
	for _, tc := range tests {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
		}
		if !json.Valid(b) || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: body %q (%s) not JSON", tc.method, tc.path, b, resp.Header.Get("Content-Type"))
		}
		if tc.want >= 400 && !bytes.Contains(b, []byte(`"error"`)) {
			t.Errorf("%s %s: error body %s", tc.method, tc.path, b)
		}
	}
}

func TestFilters(t *testing.T) {
	s := New(Config{Seed: 2})
	srv := serve(t, s)
	all := s.Instruments()
	tests := []struct {
		query string
		keep  func(Instrument) bool
	}{
		{"?currency=ETH", func(in Instrument) bool { return in.BaseCurrency == "ETH" }},
		{"?currency=sol", func(in Instrument) bool { return in.BaseCurrency == "SOL" }},
		{"?kind=future", func(in Instrument) bool { return in.Kind == "future" }},
		{"?kind=option&currency=BTC", func(in Instrument) bool { return in.Kind == "option" && in.BaseCurrency == "BTC" }},
		{"?currency=any", func(Instrument) bool { return true }},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			var want []string
			for _, in := range all {
				if tc.keep(in) {
					want = append(want, string(in.Raw))
				}
			}
			resp := get(t, srv.URL+PathInstruments+tc.query)
			var got []string
			for _, raw := range flat(listing(t, resp.body)) {
				got = append(got, string(raw))
			}
			if len(got) != len(want) || strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("got %d instruments, want %d", len(got), len(want))
			}
		})
	}
}

func TestRequireHeader(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := New(Config{Seed: 1, Instruments: 100, RequireHeader: "X-Api-Key: s3cr3t-value", Logger: logger})
	srv := serve(t, s)
	tests := []struct {
		path    string
		headers []string
		want    int
	}{
		{PathAccountSummary, nil, 401},
		{PathAccountSummary, []string{"X-Api-Key", "wrong"}, 401},
		{PathAccountSummary, []string{"X-Api-Key", "s3cr3t-value"}, 200},
		{PathPositions, []string{"x-api-key", "s3cr3t-value"}, 200},
		{PathAllAccountBalances, nil, 401},
		{PathInstruments, nil, 200},
	}
	for _, tc := range tests {
		resp := get(t, srv.URL+tc.path, tc.headers...)
		if resp.status != tc.want {
			t.Errorf("%s with %v: %d, want %d", tc.path, tc.headers, resp.status, tc.want)
		}
		if tc.path != PathInstruments && bytes.Contains(resp.body, []byte("s3cr3t")) {
			t.Errorf("body echoes the secret: %s", resp.body)
		}
	}
	if logs.Len() == 0 {
		t.Fatal("no debug logs written")
	}
	if strings.Contains(logs.String(), "s3cr3t") {
		t.Fatalf("logs contain the secret:\n%s", logs.String())
	}

	broken := New(Config{Seed: 1, Instruments: 10, RequireHeader: "no-colon-here"})
	if resp := get(t, serve(t, broken).URL+PathAccountSummary, "no-colon-here", ""); resp.status != 401 {
		t.Fatalf("malformed RequireHeader: %d, want 401", resp.status)
	}
}

func TestAutoTick(t *testing.T) {
	s := New(Config{Seed: 1, Instruments: 100, AutoTick: 20 * time.Millisecond})
	srv := serve(t, s)
	time.Sleep(110 * time.Millisecond)
	get(t, srv.URL+PathInstruments)
	if got := s.Tick(); got < 4 {
		t.Fatalf("Tick() = %d after 110ms at 20ms per tick", got)
	}
}

func TestConcurrentUse(t *testing.T) {
	s := New(Config{Seed: 3, Instruments: 300, Faults: Faults{SchemaDrift: true}})
	srv := serve(t, s)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			paths := []string{PathInstruments, PathPositions, PathAccountSummary, PathPositionsWithMints}
			for j := 0; j < 10; j++ {
				resp, err := http.Get(srv.URL + paths[(i+j)%len(paths)])
				if err != nil {
					t.Error(err)
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || !json.Valid(b) {
					t.Errorf("status %d, err %v", resp.StatusCode, err)
				}
			}
		}(i)
	}
	for i := 0; i < 20; i++ {
		s.Advance(1)
		_ = s.Instruments()
	}
	wg.Wait()
	if s.Requests() != 80 {
		t.Fatalf("Requests() = %d, want 80", s.Requests())
	}
}
