// Package extract fetches the venue's HTTP API: one client with per-request
// timeouts, bounded retries with exponential backoff and jitter (honouring
// Retry-After), a maximum body size and transparent gzip. Header values are
// secrets: they never appear in logs or errors.
package extract

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/optlake/optlake/internal/redact"
	"github.com/optlake/optlake/pipeline/extract/auth"
	"github.com/optlake/optlake/pipeline/extract/envelope"
)

// Options configure a Client.
type Options struct {
	BaseURL string      // scheme://host[:port][/prefix]
	Headers http.Header // sent with every request; values are secrets
	// Timeout bounds each attempt's wait for the response headers and every
	// pause between body reads (default 60s).
	Timeout      time.Duration
	MaxAttempts  int           // per request, including the first (default 5)
	BackoffBase  time.Duration // first retry delay before jitter (default 500ms)
	BackoffMax   time.Duration // cap of the exponential delay (default 30s)
	MaxWait      time.Duration // longest Retry-After honoured (default 5m); longer fails
	MaxBodyBytes int64         // largest body accepted, after gzip decoding (default 4 GiB)
	UserAgent    string
	Transport    http.RoundTripper // default: a tuned clone of http.DefaultTransport
	// CAFile adds PEM certificates to the system roots (a venue behind a
	// private CA). InsecureSkipVerify turns TLS verification off: only for
	// tests; it is logged loudly.
	CAFile             string
	InsecureSkipVerify bool
	Redactor           *redact.Redactor
	Logger             *slog.Logger
	// RateLimit caps the requests of the client, every attempt of every
	// request (retries included) counted, shared by all callers: at most
	// RateBurst at once, then one per 1/RateLimit s. 0 means unlimited.
	RateLimit rate.Limit
	RateBurst int // default 1
}

func (o *Options) defaults() {
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = 500 * time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 30 * time.Second
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 5 * time.Minute
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 4 << 30
	}
	if o.UserAgent == "" {
		o.UserAgent = "optlake"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RateBurst <= 0 {
		o.RateBurst = 1
	}
}

// Client fetches endpoints of one venue. It is safe for concurrent use.
type Client struct {
	opt  Options
	base *url.URL
	hc   *http.Client
	log  *slog.Logger
	mu   sync.Mutex
	rng  *rand.Rand
	lim  *rate.Limiter // nil: unlimited
}

// HTTP is the client's HTTP client (for authenticators that log in).
func (c *Client) HTTP() *http.Client { return c.hc }

// Base is the API URL.
func (c *Client) Base() *url.URL { u := *c.base; return &u }

// New returns a Client.
func New(opt Options) (*Client, error) {
	opt.defaults()
	base, err := url.Parse(opt.BaseURL)
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, fmt.Errorf("invalid API URL %q: want scheme://host[:port]", opt.Redactor.String(opt.BaseURL))
	}
	if base.Scheme != "http" && base.Scheme != "https" {
		return nil, fmt.Errorf("invalid API URL: scheme %q is not http or https", base.Scheme)
	}
	tr := opt.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.ResponseHeaderTimeout = opt.Timeout
		t.MaxIdleConnsPerHost = 4
		tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if opt.CAFile != "" {
			pem, err := os.ReadFile(opt.CAFile)
			if err != nil {
				return nil, &CAFileError{Path: opt.CAFile, Err: err}
			}
			pool, err := x509.SystemCertPool()
			if err != nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, &CAFileError{Path: opt.CAFile, Err: errors.New("no PEM certificate in it")}
			}
			tlsCfg.RootCAs = pool
		}
		if opt.InsecureSkipVerify {
			tlsCfg.InsecureSkipVerify = true
			opt.Logger.Warn("TLS certificate verification is OFF (insecure-skip-verify): anyone on the path can read the secrets")
		}
		t.TLSClientConfig = tlsCfg
		tr = t
	}
	if opt.RateLimit < 0 || math.IsNaN(float64(opt.RateLimit)) {
		return nil, fmt.Errorf("invalid rate limit %v: want a positive rate or 0 (unlimited)", float64(opt.RateLimit))
	}
	var lim *rate.Limiter
	if opt.RateLimit > 0 && !math.IsInf(float64(opt.RateLimit), 1) {
		lim = rate.NewLimiter(opt.RateLimit, opt.RateBurst)
	}
	return &Client{
		lim:  lim,
		opt:  opt,
		base: base,
		hc:   &http.Client{Transport: tr, CheckRedirect: keepCredentialsHome},
		log:  opt.Logger.With("component", "extract"),
		rng:  rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x6f70746c616b65)),
	}, nil
}

// Request is one request of an endpoint.
type Request struct {
	Endpoint string     // logical name, for logs and errors
	Method   string     // default GET
	Path     string     // e.g. /v1/public/get_instruments
	Params   url.Values // query parameters
	// URL, when set, is the whole URL (a next page's link); Path and
	// Params are not used.
	URL  *url.URL
	Body []byte // sent as application/json (POST)
	// Auth authenticates the request (nil: none). NoAuth leaves out the
	// client's and the request's headers too (an endpoint with auth: none).
	Auth   auth.Authenticator
	NoAuth bool
	// Index is the request's position in its endpoint's fan-out and Page
	// its page (1-based; 0 when not paginated): how the raw archive finds
	// the body again.
	Index, Page int
	// Headers are added to the client's for this request (an account's
	// credentials); their values are secrets too.
	Headers http.Header
	// Account labels the request (logs, archive); not sent.
	Account string
	// Errors reads the code of a 4xx answer's body: retried only when it
	// is one of the retry codes.
	Errors *envelope.Errors
}

// URL returns the request's URL.
func (c *Client) URL(r Request) *url.URL {
	if r.URL != nil {
		u := *r.URL
		return &u
	}
	u := *c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + strings.TrimPrefix(r.Path, "/")
	if len(r.Params) > 0 {
		u.RawQuery = r.Params.Encode()
	}
	return &u
}

// Response is one attempt's answer.
type Response struct {
	Attempt     int
	Status      int
	ContentType string
	URL         string      // redacted
	Header      http.Header // the answer's headers (Link)
	Body        io.Reader   // bounded by MaxBodyBytes and the idle timeout
}

// Failed describes an attempt that got a non-2xx answer, for archiving.
type Failed struct {
	Attempt     int
	Status      int
	ContentType string
	URL         string // redacted
	Body        []byte // the start of the body (at most 64 KiB)
	Complete    bool   // Body is the whole body
}

// Hooks receive what a request sees, for the raw archive.
type Hooks struct {
	// OnFailed is called for every non-2xx answer before it is retried or
	// returned as an error.
	OnFailed func(Failed)
}

// BodyError is a failure to read a response body (connection reset,
// truncated body, idle timeout). Handlers wrap it into their errors so Do can
// retry the attempt.
type BodyError struct{ Err error }

func (e *BodyError) Error() string { return "read body: " + e.Err.Error() }
func (e *BodyError) Unwrap() error { return e.Err }

// EncodingError is a body whose Content-Encoding cannot be decoded: not
// gzip at all, a gzip checksum that does not match, corrupt deflate data.
// The venue sends the same bytes again, so it is not retried (a stream cut
// short is a *BodyError, retried).
type EncodingError struct{ Err error }

func (e *EncodingError) Error() string { return "read body: " + e.Err.Error() }
func (e *EncodingError) Unwrap() error { return e.Err }

// ErrBodyTooLarge is returned when a body exceeds MaxBodyBytes.
var ErrBodyTooLarge = errors.New("response body exceeds the size limit")

// StatusError is a final non-2xx answer.
type StatusError struct {
	Status   int
	Attempts int
	Excerpt  string // start of the body, one line, redacted
	// Venue is the venue's error in the body, read by Request.Errors.
	Venue *envelope.VenueError
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
	if e.Attempts > 1 {
		msg += fmt.Sprintf(" after %d attempts", e.Attempts)
	}
	switch {
	case e.Venue != nil:
		msg += ": " + e.Venue.Error()
	case e.Excerpt != "":
		msg += ": " + e.Excerpt
	}
	return msg
}

// Unwrap is the venue's error, when the body names one.
func (e *StatusError) Unwrap() error {
	if e.Venue == nil {
		return nil
	}
	return e.Venue
}

// retryable reports whether the answer may be retried: a transient status,
// or a 4xx whose venue code is one of the retry codes.
func (e *StatusError) retryable() bool {
	if retryableStatus(e.Status) {
		return true
	}
	return e.Venue != nil && e.Venue.Retry && e.Status >= 400 && e.Status < 500
}

var errIdle = errors.New("timed out waiting for the venue")

// Do performs r, retrying transient failures: network errors, 408, 425,
// 429 and 5xx answers (waiting for Retry-After when given), and handler
// errors that wrap a *BodyError. handle is called with the body of each 2xx
// answer; when it is retried, everything it did for the failed attempt must
// be undone by handle itself. Context cancellation is never retried.
func (c *Client) Do(ctx context.Context, r Request, hooks Hooks, handle func(context.Context, *Response) error) error {
	u := c.URL(r)
	shown := c.opt.Redactor.URL(u) // before auth adds its query entries
	var last error
	refreshed := false
	for attempt := 1; attempt <= c.opt.MaxAttempts; attempt++ {
		retryAfter, err := c.attempt(ctx, r, u, shown, attempt, hooks, handle)
		if err == nil {
			return nil
		}
		last = err
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var se *StatusError
		if rf, ok := r.Auth.(auth.Refresher); ok && !refreshed && attempt < c.opt.MaxAttempts && errors.As(err, &se) && se.Status == http.StatusUnauthorized {
			// A session that expired early: log in again, once.
			refreshed = true
			rf.Refresh()
			c.log.Info("logging in again after a 401", "endpoint", r.Endpoint, "attempt", attempt)
			continue
		}
		if !retryable(err) || attempt == c.opt.MaxAttempts {
			break
		}
		wait := c.backoff(attempt)
		if retryAfter > wait {
			wait = retryAfter
		}
		if retryAfter > c.opt.MaxWait {
			return fmt.Errorf("venue asks to retry after %s, more than the %s allowed: %w", retryAfter, c.opt.MaxWait, err)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return fmt.Errorf("no time left to retry before the deadline: %w", err)
		}
		c.log.Info("retrying", "endpoint", r.Endpoint, "attempt", attempt, "of", c.opt.MaxAttempts, "wait", wait.Round(time.Millisecond), "err", c.opt.Redactor.String(err.Error()))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	var se *StatusError
	if errors.As(last, &se) {
		se.Attempts = c.opt.MaxAttempts
		if !se.retryable() {
			se.Attempts = 1
		}
	}
	return last
}

func (c *Client) backoff(attempt int) time.Duration {
	d := c.opt.BackoffBase << (attempt - 1)
	if d > c.opt.BackoffMax || d <= 0 {
		d = c.opt.BackoffMax
	}
	c.mu.Lock()
	j := c.rng.Float64()
	c.mu.Unlock()
	return d/2 + time.Duration(j*float64(d/2))
}

// attempt does one request. It returns the Retry-After the venue asked for.
func (c *Client) attempt(ctx context.Context, r Request, u *url.URL, shown string, attempt int, hooks Hooks, handle func(context.Context, *Response) error) (time.Duration, error) {
	if c.lim != nil {
		// Before the attempt's timer starts: waiting for our own rate limit
		// is not the venue being slow.
		if err := c.lim.Wait(ctx); err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, fmt.Errorf("rate limit %s: no time left before the deadline: %w", FormatRate(c.opt.RateLimit), err)
		}
	}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(c.opt.Timeout, func() { cancel(errIdle) })
	defer timer.Stop()

	method := r.Method
	if method == "" {
		method = http.MethodGet
	}
	var reqBody io.Reader
	if r.Body != nil {
		reqBody = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(actx, method, u.String(), reqBody)
	if err != nil {
		return 0, fmt.Errorf("build request: %w", err)
	}
	if !r.NoAuth {
		for k, vs := range c.opt.Headers {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		for k, vs := range r.Headers {
			req.Header.Del(k)
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
	}
	req.Header.Set("User-Agent", c.opt.UserAgent)
	req.Header.Set("Accept", "application/json")
	if r.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.Auth != nil && !r.NoAuth {
		if err := r.Auth.Apply(actx, req, r.Body); err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, &AuthError{Err: err}
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var te interface{ Timeout() bool }
		if cause := context.Cause(actx); errors.Is(cause, errIdle) || (errors.As(err, &te) && te.Timeout() && ctx.Err() == nil) {
			return 0, &netError{fmt.Errorf("no response within %s", c.opt.Timeout)}
		}
		// *url.Error repeats the URL; keep only the cause, redacted.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, errBodyElsewhere) {
			return 0, err // the venue's answer, the same next time
		}
		return 0, &netError{err}
	}
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	body := &guardedBody{r: resp.Body, timer: timer, timeout: c.opt.Timeout, max: c.opt.MaxBodyBytes, ctx: actx}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		excerpt, rerr := io.ReadAll(io.LimitReader(body, 64<<10))
		complete := rerr == nil && len(excerpt) < 64<<10
		if hooks.OnFailed != nil {
			hooks.OnFailed(Failed{Attempt: attempt, Status: resp.StatusCode, ContentType: ct, URL: shown, Body: excerpt, Complete: complete})
		}
		se := &StatusError{
			Status: resp.StatusCode, Attempts: attempt,
			Excerpt: c.opt.Redactor.String(oneLine(excerpt, 200)),
		}
		if ve := envelope.Classify(excerpt, r.Errors); ve != nil {
			ve.Code, ve.Message = c.opt.Redactor.String(ve.Code), c.opt.Redactor.String(ve.Message)
			se.Venue = ve
		}
		return retryAfter(resp.Header.Get("Retry-After")), se
	}
	return 0, handle(actx, &Response{Attempt: attempt, Status: resp.StatusCode, ContentType: ct, URL: shown, Header: resp.Header, Body: body})
}

// keepCredentialsHome follows a redirect (at most 10, as Go's client
// does), but one that leaves the venue's scheme and host (its port
// included) carries no header but User-Agent and Accept: Go's client
// forwards every other header to any host but Authorization and Cookie,
// and to a host of the same name on another port even those, so an API
// key or a passphrase an authenticator or an account set would reach it.
//
// A 307 or 308 redirect keeps the method and sends the body again: to
// another host that is refused (errBodyElsewhere), since a venue's body can
// carry what signs it (a nonce, a wallet's signature, a passphrase).
func keepCredentialsHome(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	first := via[0].URL
	if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		if req.GetBody != nil && req.ContentLength != 0 {
			status := 0
			if req.Response != nil {
				status = req.Response.StatusCode
			}
			return fmt.Errorf("%w: a %d redirect to %s://%s", errBodyElsewhere, status, req.URL.Scheme, req.URL.Host)
		}
		keep := http.Header{}
		for _, k := range []string{"User-Agent", "Accept"} {
			if v := req.Header.Get(k); v != "" {
				keep.Set(k, v)
			}
		}
		req.Header = keep
	}
	return nil
}

// errBodyElsewhere refuses a redirect that would send the request's body
// to another host.
var errBodyElsewhere = errors.New("refused to send the request's body to another host")

// netError marks a transport failure before any body was read.
type netError struct{ err error }

func (e *netError) Error() string { return e.err.Error() }
func (e *netError) Unwrap() error { return e.err }

func retryable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, ErrBodyTooLarge) {
		return false
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.retryable()
	}
	var ve *envelope.VenueError
	if errors.As(err, &ve) {
		return ve.Retry
	}
	var ne *netError
	var be *BodyError
	return errors.As(err, &ne) || errors.As(err, &be)
}

// AuthError is a failure to authenticate a request (a login or token
// request that failed); it is not retried.
type AuthError struct{ Err error }

func (e *AuthError) Error() string { return "authenticate: " + e.Err.Error() }
func (e *AuthError) Unwrap() error { return e.Err }

func retryableStatus(s int) bool {
	switch s {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	case http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		return false
	}
	return s >= 500 && s <= 599
}

// retryAfter parses a Retry-After header (seconds or an HTTP date).
func retryAfter(h string) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(h, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(h); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

func oneLine(b []byte, max int) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "?")), " ")
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// guardedBody enforces the size limit and the idle timeout, and wraps read
// failures into *BodyError.
type guardedBody struct {
	r       io.Reader
	timer   *time.Timer
	timeout time.Duration
	max     int64
	n       int64
	ctx     context.Context
}

func (b *guardedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n += int64(n)
	if n > 0 {
		b.timer.Reset(b.timeout)
	}
	if b.n > b.max {
		return n, fmt.Errorf("%w (%d bytes)", ErrBodyTooLarge, b.max)
	}
	if err != nil && err != io.EOF {
		if cause := context.Cause(b.ctx); errors.Is(cause, errIdle) {
			err = fmt.Errorf("no data for %s", b.timeout)
		} else if errors.Is(cause, context.Canceled) || errors.Is(cause, context.DeadlineExceeded) {
			return n, cause
		}
		if undecodable(err) {
			return n, &EncodingError{Err: err}
		}
		return n, &BodyError{Err: err}
	}
	return n, err
}

// undecodable reports whether err is the transport's gzip decoder refusing
// the bytes it was sent (rather than a read of them failing).
func undecodable(err error) bool {
	var ce flate.CorruptInputError
	return errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) || errors.As(err, &ce)
}

// CAFileError is the error of a CA file that cannot be read or holds no
// certificate.
type CAFileError struct {
	Path string
	Err  error
}

func (e *CAFileError) Error() string { return fmt.Sprintf("CA file %s: %v", e.Path, e.Err) }
func (e *CAFileError) Unwrap() error { return e.Err }
