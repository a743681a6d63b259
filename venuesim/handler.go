package venuesim

import (
	"bytes"
	"compress/gzip"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Endpoint paths served under /v1/public/.
const (
	PathInstruments        = "/v1/public/get_instruments"
	PathAccountBalance     = "/v1/public/get_account_balance"
	PathAccountCollateral  = "/v1/public/get_account_collateral"
	PathAccountSummary     = "/v1/public/get_account_summary"
	PathExercisableOptions = "/v1/public/get_exercisable_options"
	PathPosition           = "/v1/public/get_position"
	PathPositions          = "/v1/public/get_positions"
	PathAllAccountBalances = "/v1/public/get_all_account_balances"
	PathPositionsWithMints = "/v1/public/get_positions_with_mints"
	PathHealth             = "/healthz"
)

// AccountHeader selects the account of the account endpoints ("main" when
// absent). Different accounts hold different, deterministic positions;
// accounts whose name starts with "empty" hold nothing.
const AccountHeader = "X-Account"

// maxInstrumentBytes bounds the JSON size of one instrument (used to declare a
// Content-Length that is certainly larger than a truncated body).
const maxInstrumentBytes = 2048

// Body faults.
const (
	bodyOK = iota
	bodyTruncate
	bodyMalformed
)

// decision is the fault outcome for one request.
type decision struct {
	status  int // 0: serve normally; else 429, 500 or 503
	body    int
	malKind int
}

// decide returns the faults for request n (1-based). It is a pure function of
// (seed, n): requests 1..FailFirst get 503; the next RateLimitFirst get 429;
// after that u = hash(seed, n) in [0,1) gives 500/503 (chosen by another hash
// bit) when u < ErrorRate and 429 when u < ErrorRate+RateLimitRate; a second,
// independent v = hash(seed, n) makes a 200 body truncated when
// v < TruncateRate and malformed when v < TruncateRate+MalformedRate.
func (s *Sim) decide(n int64) decision {
	f := &s.cfg.Faults
	switch {
	case n <= int64(f.FailFirst):
		return decision{status: http.StatusServiceUnavailable}
	case n <= int64(f.FailFirst)+int64(f.RateLimitFirst):
		return decision{status: http.StatusTooManyRequests}
	}
	h := hash3(s.seed, saltStatus, uint64(n))
	switch u := unit(h); {
	case u < f.ErrorRate:
		if h&1 == 0 {
			return decision{status: http.StatusInternalServerError}
		}
		return decision{status: http.StatusServiceUnavailable}
	case u < f.ErrorRate+f.RateLimitRate:
		return decision{status: http.StatusTooManyRequests}
	}
	hb := hash3(s.seed, saltBody, uint64(n))
	switch v := unit(hb); {
	case v < f.TruncateRate:
		return decision{body: bodyTruncate}
	case v < f.TruncateRate+f.MalformedRate:
		return decision{body: bodyMalformed, malKind: int(hb & 1)}
	}
	return decision{}
}

// Handler returns the HTTP handler serving every endpoint. It is safe for
// concurrent use; each request sees one consistent tick.
//
//   - GET /healthz → 200 "ok" (never faulted, not counted in Requests).
//   - GET /v1/public/get_instruments[?currency=BTC|ETH|SOL][&kind=option|future]
//     → a JSON array of {"instruments":[…]} groups, streamed, gzip when accepted.
//   - GET /v1/public/get_account_balance[?currency=…], get_account_collateral,
//     get_account_summary, get_exercisable_options, get_position?instrument_name=…,
//     get_positions[?currency=…&kind=…], get_all_account_balances,
//     get_positions_with_mints → account payloads (see AccountHeader).
//   - Any other path → 404; any method but GET → 405 (both JSON errors).
//
// With Config.Real, a RealVenue layer sits in front (authentication,
// envelopes, pages, error bodies; login at PathLogin, tokens at PathToken).
func (s *Sim) Handler() http.Handler {
	if !s.cfg.Real.Enabled() {
		return &handler{s: s}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.real == nil {
		s.real = newRealHandler(s.cfg.Real, &handler{s: s}, s.Tick)
	}
	return s.real
}

// Logins is the number of session logins and oauth2 tokens the RealVenue
// layer issued.
func (s *Sim) Logins() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.real == nil {
		return 0
	}
	return s.real.logins.Load() + s.real.tokenReqs.Load()
}

type handler struct {
	s *Sim
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.s
	if r.URL.Path == PathHealth {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok")
		return
	}
	s.catchUp()
	n := s.reqs.Add(1)
	dec := s.decide(n)
	if lat := s.cfg.Faults.Latency; lat > 0 {
		t := time.NewTimer(lat)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			s.logRequest(r, n, 0, "client gone during latency")
			return
		}
	}
	if dec.status != 0 {
		if dec.status == http.StatusTooManyRequests {
			secs := int64(math.Ceil(s.cfg.Faults.RetryAfter.Seconds()))
			w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
		}
		writeError(w, dec.status, strings.ToLower(http.StatusText(dec.status)))
		s.logRequest(r, n, dec.status, "status fault")
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		writeError(w, http.StatusMethodNotAllowed, "method not allowed")
		s.logRequest(r, n, http.StatusMethodNotAllowed, "")
		return
	}
	sn := s.snap.Load()
	switch r.URL.Path {
	case PathInstruments:
		s.serveInstruments(w, r, n, sn, dec)
		return
	case PathAccountBalance, PathAccountCollateral, PathAccountSummary, PathExercisableOptions,
		PathPosition, PathPositions, PathAllAccountBalances, PathPositionsWithMints:
	default:
		writeError(w, http.StatusNotFound, "not found")
		s.logRequest(r, n, http.StatusNotFound, "")
		return
	}
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, "unauthorized")
		s.logRequest(r, n, http.StatusUnauthorized, "")
		return
	}
	payload, err := s.accountPayload(r, sn)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		s.logRequest(r, n, http.StatusBadRequest, "")
		return
	}
	body, err := json.Marshal(payload)
	if err != nil {
		s.log.Error("venuesim: encode account payload", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error")
		return
	}
	s.writeBody(w, r, n, body, dec)
}

func (s *Sim) logRequest(r *http.Request, n int64, status int, fault string) {
	s.log.Debug("venuesim request", "n", n, "method", r.Method, "path", r.URL.Path, "status", status, "fault", fault)
}

// authorized checks Config.RequireHeader in constant time.
func (s *Sim) authorized(r *http.Request) bool {
	if s.authBroken {
		return false
	}
	if s.authName == "" {
		return true
	}
	ok := false
	for _, v := range r.Header.Values(s.authName) {
		if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(v)), []byte(s.authValue)) == 1 {
			ok = true
		}
	}
	return ok
}

// writeError writes a JSON error body {"error":{"code":N,"message":"…"}}.
func writeError(w http.ResponseWriter, status int, msg string) {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// acceptsGzip reports whether the request accepts a gzip response.
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, part := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
				continue
			}
			params = strings.ReplaceAll(params, " ", "")
			if q, ok := strings.CutPrefix(params, "q="); ok {
				if f, err := strconv.ParseFloat(q, 64); err == nil && f == 0 {
					return false
				}
			}
			return true
		}
	}
	return false
}

func (s *Sim) serveInstruments(w http.ResponseWriter, r *http.Request, n int64, sn *snapshot, dec decision) {
	f := listFilter{cur: -1, kinds: kindAll}
	q := r.URL.Query()
	if c := q.Get("currency"); c != "" && !strings.EqualFold(c, "any") {
		f.cur = -2
		for i, cur := range s.curs {
			if strings.EqualFold(c, cur.name) {
				f.cur = i
			}
		}
		if f.cur == -2 {
			writeError(w, http.StatusBadRequest, "unknown currency "+strconv.Quote(c))
			s.logRequest(r, n, http.StatusBadRequest, "")
			return
		}
	}
	switch k := strings.ToLower(q.Get("kind")); k {
	case "", "any":
	case "option":
		f.kinds = kindOption
	case "future":
		f.kinds = kindFuture
	default:
		writeError(w, http.StatusBadRequest, "unknown kind "+strconv.Quote(q.Get("kind")))
		s.logRequest(r, n, http.StatusBadRequest, "")
		return
	}
	count := f.count(sn)
	plan := streamPlan{cutAt: -1, malAt: -1}
	gz := acceptsGzip(r)
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Vary", "Accept-Encoding")
	if gz {
		hdr.Set("Content-Encoding", "gzip")
	}
	fault := ""
	switch dec.body {
	case bodyTruncate:
		fault = "truncated"
		plan.cutAt = count / 2
		groups := 4
		if s.cfg.GroupSize > 0 {
			groups += (plan.cutAt + 1) / s.cfg.GroupSize
		}
		bound := int64(16+32*groups) + int64(plan.cutAt+1)*maxInstrumentBytes
		if gz {
			bound += bound/100 + 1024
		}
		// Declared larger than anything written: the client sees an
		// unexpected EOF and the server closes the connection.
		hdr.Set("Content-Length", strconv.FormatInt(bound+1, 10))
	case bodyMalformed:
		fault = "malformed"
		plan.malAt, plan.malKind = count/2, dec.malKind
	}
	w.WriteHeader(http.StatusOK)
	var dst io.Writer = w
	var zw *gzip.Writer
	if gz {
		zw, _ = gzip.NewWriterLevel(w, gzip.BestSpeed) // valid level: no error
		dst = zw
	}
	err := s.streamListing(dst, sn, f, plan)
	if zw != nil && err == nil {
		if dec.body == bodyTruncate {
			err = zw.Flush() // no gzip footer either
		} else {
			err = zw.Close()
		}
	}
	if err != nil {
		s.log.Debug("venuesim: streaming get_instruments", "n", n, "err", err)
	}
	s.logRequest(r, n, http.StatusOK, fault)
}

// writeBody sends a complete 200 JSON body, applying body faults and gzip.
func (s *Sim) writeBody(w http.ResponseWriter, r *http.Request, n int64, body []byte, dec decision) {
	fault := ""
	if dec.body == bodyMalformed {
		body = breakBody(body)
		fault = "malformed"
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Vary", "Accept-Encoding")
	if acceptsGzip(r) {
		var zb bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&zb, gzip.BestSpeed)
		_, _ = zw.Write(body) // writes to a bytes.Buffer cannot fail
		_ = zw.Close()
		body = zb.Bytes()
		hdr.Set("Content-Encoding", "gzip")
	}
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	if dec.body == bodyTruncate {
		body = body[:len(body)/2]
		fault = "truncated"
	}
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(body); err != nil {
		s.log.Debug("venuesim: write body", "n", n, "err", err)
	}
	s.logRequest(r, n, http.StatusOK, fault)
}

// breakBody makes a non-empty JSON document syntactically invalid: a stray
// '}' right after the structural comma nearest the middle ("…,}…"), or a
// stray ',' after the opening bracket when there is no comma.
func breakBody(b []byte) []byte {
	best := -1
	inStr, esc := false, false
	for i, c := range b {
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && c == ',':
			if best < 0 || abs(i-len(b)/2) < abs(best-len(b)/2) {
				best = i
			}
		}
	}
	if best < 0 { // no comma: "[," / "{," is invalid too
		out := make([]byte, 0, len(b)+1)
		out = append(out, b[0], ',')
		return append(out, b[1:]...)
	}
	out := make([]byte, 0, len(b)+1)
	out = append(out, b[:best+1]...)
	out = append(out, '}')
	return append(out, b[best+1:]...)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// errorf builds a client error for the account endpoints.
func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
