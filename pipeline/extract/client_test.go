package extract

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/pipeline/extract/auth"
	"github.com/optlake/optlake/pipeline/extract/envelope"
)

const secret = "Bearer sk-live-0123456789"

func newClient(t *testing.T, url string, logs io.Writer, mod func(*Options)) *Client {
	t.Helper()
	red := redact.New("sk-live-0123456789")
	if logs == nil {
		logs = io.Discard
	}
	opt := Options{
		BaseURL: url, Headers: http.Header{"Authorization": {secret}},
		Timeout: 2 * time.Second, MaxAttempts: 4, BackoffBase: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond,
		Redactor: red, Logger: slog.New(red.Handler(slog.NewTextHandler(logs, nil))),
	}
	if mod != nil {
		mod(&opt)
	}
	c, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func readAll(body *[]byte) func(context.Context, *Response) error {
	return func(_ context.Context, r *Response) error {
		b, err := io.ReadAll(r.Body)
		*body = b
		return err
	}
}

func TestStatusRetries(t *testing.T) {
	cases := []struct {
		name     string
		statuses []int // answered in order; then 200
		attempts int   // requests the server sees
		err      string
	}{
		{name: "ok", statuses: nil, attempts: 1},
		{name: "503 then ok", statuses: []int{503}, attempts: 2},
		{name: "500 502 504 then ok", statuses: []int{500, 502, 504}, attempts: 4},
		{name: "429 then ok", statuses: []int{429}, attempts: 2},
		{name: "408 then ok", statuses: []int{408}, attempts: 2},
		{name: "always 503", statuses: []int{503, 503, 503, 503, 503}, attempts: 4, err: "HTTP 503 Service Unavailable after 4 attempts: boom"},
		{name: "404 is final", statuses: []int{404}, attempts: 1, err: "HTTP 404 Not Found: boom"},
		{name: "401 is final", statuses: []int{401}, attempts: 1, err: "HTTP 401 Unauthorized"},
		{name: "501 is final", statuses: []int{501}, attempts: 1, err: "HTTP 501"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				i := int(n.Add(1)) - 1
				if r.Header.Get("Authorization") != secret {
					t.Errorf("header not sent")
				}
				if i < len(tc.statuses) {
					w.WriteHeader(tc.statuses[i])
					io.WriteString(w, "boom\n")
					return
				}
				io.WriteString(w, `[]`)
			}))
			defer srv.Close()
			var failed []Failed
			var body []byte
			err := newClient(t, srv.URL, nil, nil).Do(context.Background(), Request{Endpoint: "instruments", Path: "/v1/public/get_instruments"},
				Hooks{OnFailed: func(f Failed) { failed = append(failed, f) }}, readAll(&body))
			if int(n.Load()) != tc.attempts {
				t.Errorf("server saw %d requests, want %d", n.Load(), tc.attempts)
			}
			if tc.err == "" {
				if err != nil || string(body) != "[]" {
					t.Fatalf("err=%v body=%q", err, body)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
			if want := min(len(tc.statuses), tc.attempts); len(failed) != want {
				t.Errorf("OnFailed called %d times, want %d", len(failed), want)
			}
			for _, f := range failed {
				if string(f.Body) != "boom\n" || !f.Complete || strings.Contains(f.URL, "sk-live") {
					t.Errorf("failed = %+v", f)
				}
			}
		})
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	var n atomic.Int32
	var first time.Time
	var gap time.Duration
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			first = time.Now()
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(429)
			return
		}
		gap = time.Since(first)
		io.WriteString(w, "[]")
	}))
	defer srv.Close()
	var body []byte
	if err := newClient(t, srv.URL, nil, nil).Do(context.Background(), Request{Path: "/x"}, Hooks{}, readAll(&body)); err != nil {
		t.Fatal(err)
	}
	if gap < time.Second {
		t.Errorf("retried after %s, before Retry-After: 1", gap)
	}
}

func TestRetryAfterBeyondLimitFails(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(429)
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, nil, func(o *Options) { o.MaxWait = time.Second })
	start := time.Now()
	err := c.Do(context.Background(), Request{Path: "/x"}, Hooks{}, func(context.Context, *Response) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "retry after 1h0m0s") || time.Since(start) > 5*time.Second {
		t.Fatalf("err = %v after %s", err, time.Since(start))
	}
}

func TestParseRetryAfter(t *testing.T) {
	if d := retryAfter("7"); d != 7*time.Second {
		t.Errorf("7 -> %s", d)
	}
	if d := retryAfter(time.Now().Add(10 * time.Second).UTC().Format(http.TimeFormat)); d < 8*time.Second || d > 10*time.Second {
		t.Errorf("date -> %s", d)
	}
	for _, s := range []string{"", "soon", "-3"} {
		if d := retryAfter(s); d != 0 {
			t.Errorf("%q -> %s", s, d)
		}
	}
}

// A body cut off mid-way is retried, and the handler sees a *BodyError.
func TestTruncatedBodyRetried(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Content-Length", "1000")
			io.WriteString(w, `[{"instruments":[`)
			return // the server closes: unexpected EOF
		}
		io.WriteString(w, `[]`)
	}))
	defer srv.Close()
	var errs []error
	err := newClient(t, srv.URL, nil, nil).Do(context.Background(), Request{Path: "/x"}, Hooks{}, func(_ context.Context, r *Response) error {
		_, err := io.ReadAll(r.Body)
		errs = append(errs, err)
		return err
	})
	var be *BodyError
	if err != nil || len(errs) != 2 || !errors.As(errs[0], &be) || !errors.Is(errs[0], io.ErrUnexpectedEOF) {
		t.Fatalf("err=%v attempts=%v", err, errs)
	}
}

func TestIdleTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `[`)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, nil, func(o *Options) { o.Timeout = 200 * time.Millisecond; o.MaxAttempts = 2 })
	start := time.Now()
	err := c.Do(context.Background(), Request{Path: "/x"}, Hooks{}, func(_ context.Context, r *Response) error {
		_, err := io.ReadAll(r.Body)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "no data for 200ms") || time.Since(start) > 3*time.Second {
		t.Fatalf("err = %v after %s", err, time.Since(start))
	}
}

func TestHeaderTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, nil, func(o *Options) { o.Timeout = 200 * time.Millisecond; o.MaxAttempts = 1 })
	err := c.Do(context.Background(), Request{Path: "/x"}, Hooks{}, func(context.Context, *Response) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "no response within 200ms") {
		t.Fatalf("err = %v", err)
	}
}

func TestBodyLimitAndGzipBomb(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(bytes.Repeat([]byte(" "), 1<<20)) // 1 MiB inflates from ~1 KiB
	zw.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gz" {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(gz.Bytes())
			return
		}
		w.Write(bytes.Repeat([]byte("x"), 200<<10))
	}))
	defer srv.Close()
	for _, path := range []string{"/plain", "/gz"} {
		var calls int
		c := newClient(t, srv.URL, nil, func(o *Options) { o.MaxBodyBytes = 100 << 10 })
		err := c.Do(context.Background(), Request{Path: path}, Hooks{}, func(_ context.Context, r *Response) error {
			calls++
			_, err := io.Copy(io.Discard, r.Body)
			return err
		})
		if !errors.Is(err, ErrBodyTooLarge) || calls != 1 {
			t.Errorf("%s: err=%v calls=%d (too large is not retried)", path, err, calls)
		}
	}
}

func TestGzipDecoded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			io.WriteString(w, "no gzip asked")
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		io.WriteString(zw, `[{"instruments":[]}]`)
		zw.Close()
	}))
	defer srv.Close()
	var body []byte
	if err := newClient(t, srv.URL, nil, nil).Do(context.Background(), Request{Path: "/x"}, Hooks{}, readAll(&body)); err != nil || string(body) != `[{"instruments":[]}]` {
		t.Fatalf("err=%v body=%q", err, body)
	}
}

// A gzip body that cannot be decoded (not gzip, a bad checksum, corrupt
// deflate data) is the venue's bytes, sent the same way again: not retried.
// A gzip stream cut short is a truncated body like any other: retried.
func TestGzipDecodeErrors(t *testing.T) {
	var good bytes.Buffer
	zw := gzip.NewWriter(&good)
	io.WriteString(zw, strings.Repeat(`{"instrument_name":"BTC-1"},`, 200))
	zw.Close()
	gz := good.Bytes()
	badSum := bytes.Clone(gz)
	badSum[len(badSum)-5] ^= 0xff // CRC-32 in the trailer
	corrupt := bytes.Clone(gz[:10])
	corrupt = append(corrupt, 0xff, 0xff, 0xff, 0xff) // a reserved block type
	corrupt = append(corrupt, gz[14:]...)
	cases := []struct {
		name  string
		body  []byte
		calls int
		err   string
	}{
		{"not gzip", []byte(`[{"instrument_name":"BTC-1"}]`), 1, "gzip: invalid header"},
		{"bad checksum", badSum, 1, "gzip: invalid checksum"},
		{"corrupt deflate", corrupt, 1, "flate: corrupt input"},
		{"truncated", gz[:len(gz)/2], 3, "unexpected EOF"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Encoding", "gzip")
				w.Write(tc.body)
			}))
			defer srv.Close()
			calls := 0
			err := newClient(t, srv.URL, nil, func(o *Options) { o.MaxAttempts = 3 }).Do(context.Background(), Request{Path: "/x"}, Hooks{}, func(_ context.Context, r *Response) error {
				calls++
				_, err := io.Copy(io.Discard, r.Body)
				return err
			})
			if err == nil || !strings.Contains(err.Error(), tc.err) || calls != tc.calls {
				t.Errorf("err=%v, %d attempt(s); want %q after %d", err, calls, tc.err, tc.calls)
			}
		})
	}
}

func TestConnectionRefusedRetriedThenFails(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	var logs bytes.Buffer
	err := newClient(t, url, &logs, nil).Do(context.Background(), Request{Path: "/x", Endpoint: "instruments"}, Hooks{}, func(context.Context, *Response) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err = %v", err)
	}
	if got := strings.Count(logs.String(), "retrying"); got != 3 {
		t.Errorf("%d retries logged, want 3:\n%s", got, logs.String())
	}
	if strings.Contains(logs.String()+err.Error(), "sk-live") {
		t.Error("secret leaked")
	}
}

func TestCancelNotRetried(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(503)
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	c := newClient(t, srv.URL, nil, func(o *Options) { o.BackoffBase = time.Second; o.BackoffMax = time.Second })
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	err := c.Do(ctx, Request{Path: "/x"}, Hooks{}, func(context.Context, *Response) error { return nil })
	if !errors.Is(err, context.Canceled) || n.Load() != 1 {
		t.Fatalf("err=%v requests=%d", err, n.Load())
	}
}

func TestURL(t *testing.T) {
	c := newClient(t, "https://api.venue.example/prefix/", nil, nil)
	u := c.URL(Request{Path: "/v1/public/get_instruments", Params: map[string][]string{"currency": {"BTC"}}})
	if u.String() != "https://api.venue.example/prefix/v1/public/get_instruments?currency=BTC" {
		t.Errorf("URL = %s", u)
	}
	for _, bad := range []string{"", "venue", "ftp://x", "http://"} {
		if _, err := New(Options{BaseURL: bad}); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}

// A 4xx venue error (Binance's {"code": -1021, "msg": …}) is retried only
// when its code is one of the retry codes; the error names the venue's code.
func TestVenueErrorIn4xx(t *testing.T) {
	errs := &envelope.Errors{Code: "code", Message: "msg", RetryCodes: []string{"-1021"}}
	for _, tc := range []struct {
		name     string
		body     string
		errs     *envelope.Errors
		attempts int
		err      string
	}{
		{"retry code", `{"code":-1021,"msg":"Timestamp for this request is outside of the recvWindow."}`, errs, 2, ""},
		{"other code is final", `{"code":-2015,"msg":"Invalid API-key, IP, or permissions for action."}`, errs, 1,
			"HTTP 400 Bad Request: venue error -2015: Invalid API-key, IP, or permissions for action."},
		{"no errors configured", `{"code":-1021,"msg":"x"}`, nil, 1, `HTTP 400 Bad Request: {"code":-1021,"msg":"x"}`},
		{"retry code always", `{"code":-1021,"msg":"late"}`, errs, 4, "HTTP 400 Bad Request after 4 attempts: venue error -1021: late"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if i := n.Add(1); i < int32(tc.attempts) || tc.err != "" {
					w.WriteHeader(http.StatusBadRequest)
					io.WriteString(w, tc.body)
					return
				}
				io.WriteString(w, `[]`)
			}))
			defer srv.Close()
			var body []byte
			err := newClient(t, srv.URL, nil, nil).Do(context.Background(), Request{Endpoint: "positions", Path: "/eapi/v1/position", Errors: tc.errs}, Hooks{}, readAll(&body))
			if int(n.Load()) != tc.attempts {
				t.Errorf("server saw %d requests, want %d", n.Load(), tc.attempts)
			}
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || err.Error() != tc.err {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
		})
	}
}

// A redirect to another host gets none of the request's credentials: not
// the client's headers, not the account's, not those an authenticator set
// (a venue's API key or passphrase header, which Go's client forwards to
// any host; it drops only Authorization and Cookie). A redirect on the
// venue's own host keeps them.
func TestRedirectElsewhereDropsCredentials(t *testing.T) {
	var got atomic.Value
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Clone())
		w.Write([]byte(`[]`))
	}))
	defer other.Close()
	var same atomic.Value
	venue := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/x", http.StatusFound)
		case "/here":
			http.Redirect(w, r, "/landed", http.StatusFound)
		default:
			same.Store(r.Header.Clone())
			w.Write([]byte(`[]`))
		}
	}))
	defer venue.Close()
	c := newClient(t, venue.URL, nil, func(o *Options) { o.Headers.Set("X-Static-Key", "static-key-0123") })
	a, err := auth.New(auth.Spec{Type: auth.Templated, Key: "api-key-0123", Passphrase: "passphrase-0123",
		Headers: []auth.KV{{Name: "X-Api-Key", Value: "{{ .Key }}"}, {Name: "X-Passphrase", Value: "{{ .Passphrase }}"}}}, auth.Env{})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/away", "/here"} {
		var body []byte
		r := Request{Endpoint: "e", Path: path, Auth: a, Headers: http.Header{"X-Account-Key": {"account-key-0123"}}}
		if err := c.Do(context.Background(), r, Hooks{}, readAll(&body)); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	h, _ := got.Load().(http.Header)
	for _, name := range []string{"Authorization", "X-Static-Key", "X-Account-Key", "X-Api-Key", "X-Passphrase"} {
		if v := h.Get(name); v != "" {
			t.Errorf("the other host got %s: %s", name, v)
		}
	}
	if h.Get("User-Agent") == "" {
		t.Errorf("the other host got no User-Agent: %v", h)
	}
	s, _ := same.Load().(http.Header)
	for _, name := range []string{"Authorization", "X-Static-Key", "X-Account-Key", "X-Api-Key", "X-Passphrase"} {
		if s.Get(name) == "" {
			t.Errorf("a redirect on the venue's host lost %s", name)
		}
	}
}

// A 307 or 308 redirect sends the body again: to another host the request
// fails at once, naming the redirect, and the body (here a signed one)
// never leaves; on the venue's own host it is followed.
func TestRedirectElsewhereKeepsTheBody(t *testing.T) {
	var gotBody atomic.Value
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotBody.Store(string(b))
		w.Write([]byte(`[]`))
	}))
	defer other.Close()
	var calls, landed atomic.Int32
	venue := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		switch r.URL.Path {
		case "/away307":
			http.Redirect(w, r, other.URL+"/x", http.StatusTemporaryRedirect)
		case "/away308":
			http.Redirect(w, r, other.URL+"/x", http.StatusPermanentRedirect)
		case "/here":
			http.Redirect(w, r, "/landed", http.StatusTemporaryRedirect)
		default:
			if b, _ := io.ReadAll(r.Body); string(b) == `{"nonce":"secret-nonce-0123"}` {
				landed.Add(1)
			}
			w.Write([]byte(`[]`))
		}
	}))
	defer venue.Close()
	c := newClient(t, venue.URL, nil, nil)
	for _, path := range []string{"/away307", "/away308"} {
		calls.Store(0)
		var body []byte
		r := Request{Endpoint: "e", Method: http.MethodPost, Path: path, Body: []byte(`{"nonce":"secret-nonce-0123"}`)}
		err := c.Do(context.Background(), r, Hooks{}, readAll(&body))
		if err == nil || !strings.Contains(err.Error(), "refused to send the request's body to another host") || !strings.Contains(err.Error(), "redirect to http://127.0.0.1") {
			t.Errorf("%s: error %v, want the refused redirect", path, err)
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("%s: the venue was asked %d times, want once (the refusal is not retried)", path, n)
		}
	}
	if b, _ := gotBody.Load().(string); b != "" {
		t.Errorf("the other host got the body %q", b)
	}
	var body []byte
	if err := c.Do(context.Background(), Request{Endpoint: "e", Method: http.MethodPost, Path: "/here", Body: []byte(`{"nonce":"secret-nonce-0123"}`)}, Hooks{}, readAll(&body)); err != nil || landed.Load() != 1 {
		t.Errorf("a 307 on the venue's host: %v, body landed %d times", err, landed.Load())
	}
}
