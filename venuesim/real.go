package venuesim

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The authentication schemes of RealVenue.Auth.
const (
	AuthBearer   = "bearer"          // Authorization: Bearer Key
	AuthBasic    = "basic"           // user Key, password Secret
	AuthQueryKey = "query_key"       // ?api_key=Key
	AuthOAuth2   = "oauth2"          // client credentials at PathToken (client Key, secret Secret)
	AuthSession  = "session"         // login at PathLogin with {"user": Key, "password": Secret}
	AuthDeri     = "deri-hmac"       // JSON-RPC exchange: Authorization: deri-hmac-sha256 id=,ts=,sig=,nonce=
	AuthQuerySig = "query-signature" // X-MBX-APIKEY header; timestamp and signature (hex) query parameters
	AuthB64Sig   = "base64-header"   // OK-ACCESS-KEY/-SIGN/-TIMESTAMP headers: base64 over ISO ts+method+path+body
)

// AuthSchemes lists the schemes of RealVenue.Auth.
var AuthSchemes = []string{AuthBearer, AuthBasic, AuthQueryKey, AuthOAuth2, AuthSession, AuthDeri, AuthQuerySig, AuthB64Sig}

// The pagination styles of RealVenue.Paginate.
const (
	PageCursor  = "cursor"      // ?cursor=&limit=, body next_cursor
	PageNextURL = "next_url"    // body next (a relative URL)
	PageLink    = "link_header" // Link: <…>; rel="next"
	PageOffset  = "offset"      // ?offset=&limit=, body total
	PagePage    = "page"        // ?page=&per_page= (from 1), body total
)

// PaginateStyles lists the styles of RealVenue.Paginate.
var PaginateStyles = []string{PageCursor, PageNextURL, PageLink, PageOffset, PagePage}

// The envelopes of RealVenue.Envelope.
const (
	EnvelopeJSONRPC = "jsonrpc" // {"jsonrpc":"2.0","id":…,"result":…,"usIn":…,"usOut":…}
	EnvelopeData    = "data"    // {"code":"0","msg":"","data":…}
)

// Login and token paths of the session and oauth2 schemes.
const (
	PathLogin = "/auth/login"
	PathToken = "/oauth/token"
)

// RealVenue makes the simulator behave like a real exchange: it requires
// authentication on every endpoint but the public listing, wraps answers in an envelope, splits
// them into pages and reports errors inside 200 bodies. The zero value
// changes nothing.
type RealVenue struct {
	Auth   string // one of AuthSchemes; "" none
	Key    string // token, user, API key or client id
	Secret string // password, signing secret or client secret
	// TokenTTL is the lifetime of oauth2 and session tokens (default 1h).
	TokenTTL time.Duration
	// SessionUses: a session token is refused (401) after this many
	// requests; 0: never.
	SessionUses int
	Envelope    string // "", EnvelopeJSONRPC or EnvelopeData
	// Bare lists bare instruments (no {"instruments": [...]} groups), as
	// a real venue does; an envelope or pages imply it.
	Bare bool
	// Paginate splits the listing (bare instruments) and array account
	// payloads into pages of PageSize (default 100) elements.
	Paginate string
	PageSize int
	// PageLoop: every page from the second on points back at the second
	// (a venue whose cursor never ends).
	PageLoop bool
	// FailPage answers this page (1-based) 500, always.
	FailPage int
	// PageCap: a page holds at most this many elements, whatever the
	// limit asked (a venue's own maximum page size); 0: none.
	PageCap int
	// PageSkew: a page holds the limit asked plus this many elements (-1:
	// one short, 1: one long); offset pages start where asked.
	PageSkew int
	// ShiftWalks: the listing moves under the first N walks of its pages
	// (a walk starts with the first page): after the first page, an
	// instrument is listed at its front (ShiftDelist: its first instrument
	// is delisted), as on a live venue between two page requests.
	ShiftWalks  int
	ShiftDelist bool
	// VenueErrorFirst answers the first N requests (after authentication)
	// 200 with {"error": {"code": VenueErrorCode, "message": …}}.
	VenueErrorFirst int
	VenueErrorCode  int // default 10028 (too_many_requests)
}

// Enabled reports whether rv changes anything.
func (rv RealVenue) Enabled() bool {
	return rv.Auth != "" || rv.Envelope != "" || rv.Paginate != "" || rv.VenueErrorFirst > 0 || rv.Bare
}

// Check reports a scheme, style or envelope that does not exist.
func (rv RealVenue) Check() error {
	in := func(v string, list ...string) bool {
		for _, l := range list {
			if v == l {
				return true
			}
		}
		return v == ""
	}
	switch {
	case !in(rv.Auth, AuthSchemes...):
		return fmt.Errorf("auth %q: want one of %s", rv.Auth, strings.Join(AuthSchemes, ", "))
	case !in(rv.Paginate, PaginateStyles...):
		return fmt.Errorf("paginate %q: want one of %s", rv.Paginate, strings.Join(PaginateStyles, ", "))
	case !in(rv.Envelope, EnvelopeJSONRPC, EnvelopeData):
		return fmt.Errorf("envelope %q: want jsonrpc or data", rv.Envelope)
	case rv.Auth != "" && rv.Key == "":
		return fmt.Errorf("auth %s needs a key", rv.Auth)
	}
	return nil
}

// realHandler is the RealVenue layer in front of the simulator's handler.
type realHandler struct {
	rv     RealVenue
	inner  http.Handler
	errors atomic.Int64
	id     atomic.Int64

	mu     sync.Mutex
	tokens map[string]*issued
	// listing is the last listing paginated, so that its later pages do
	// not rebuild it: a 1M-instrument listing in 100 pages would be built
	// 100 times. tick reports the simulator's tick, part of the key.
	tick    func() int
	listing struct {
		key   string
		items []any // json.RawMessage instruments
	}
	// walks counts the listing's first pages (RealVenue.ShiftWalks).
	walks atomic.Int64
	// Logins and TokenRequests count the session logins and oauth2 token
	// requests served.
	logins, tokenReqs atomic.Int64
}

type issued struct {
	expires time.Time
	uses    int
}

func newRealHandler(rv RealVenue, inner http.Handler, tick func() int) *realHandler {
	if rv.TokenTTL <= 0 {
		rv.TokenTTL = time.Hour
	}
	if rv.PageSize <= 0 {
		rv.PageSize = 100
	}
	if rv.VenueErrorCode == 0 {
		rv.VenueErrorCode = 10028
	}
	return &realHandler{rv: rv, inner: inner, tokens: map[string]*issued{}, tick: tick}
}

func (h *realHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case PathHealth:
		h.inner.ServeHTTP(w, r)
		return
	case PathLogin:
		h.login(w, r)
		return
	case PathToken:
		h.token(w, r)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	// Like a real exchange, the listing is public.
	if simPath(r.URL.Path) != PathInstruments && !h.authorized(r, body) {
		writeError(w, http.StatusUnauthorized, "unauthorized")
		return
	}
	if n := h.errors.Add(1); n <= int64(h.rv.VenueErrorFirst) {
		h.write(w, r, nil, map[string]any{"code": h.rv.VenueErrorCode, "message": "too_many_requests"}, nil)
		return
	}
	size := h.rv.PageSize
	if l, err := strconv.Atoi(r.URL.Query().Get("limit") + r.URL.Query().Get("per_page")); err == nil && l > 0 {
		size = l
	}
	if h.rv.PageCap > 0 {
		size = min(size, h.rv.PageCap)
	}
	size = max(1, size+h.rv.PageSkew)
	page := h.pageOf(r.URL.Query(), size)
	if h.rv.Paginate != "" && page == h.rv.FailPage {
		writeError(w, http.StatusInternalServerError, "internal error")
		return
	}
	// The simulator's own answer, without the real-venue parameters.
	in := r.Clone(r.Context())
	in.Method = http.MethodGet
	in.Header.Del("Accept-Encoding")
	q := in.URL.Query()
	for _, k := range []string{"api_key", "timestamp", "signature", "cursor", "limit", "offset", "page", "per_page", "page_token"} {
		q.Del(k)
	}
	in.URL.RawQuery = q.Encode()
	in.URL.Path = simPath(in.URL.Path)
	in.RequestURI = ""
	// A real venue lists bare instruments (with an envelope or pages).
	bare := in.URL.Path == PathInstruments && (h.rv.Bare || h.rv.Envelope+h.rv.Paginate != "")
	key := ""
	if bare && h.rv.Paginate != "" {
		key = in.URL.String() + "@" + strconv.Itoa(h.tick())
		// The first page builds the listing anew (the simulator's faults
		// apply to it); the next ones of the same tick reuse it.
		if page == 1 {
			h.walks.Add(1)
		}
		if items := h.cachedListing(key); items != nil && page > 1 {
			h.paginate(w, r, h.shift(items), page, size)
			return
		}
	}
	rec := httptest.NewRecorder()
	h.inner.ServeHTTP(rec, in)
	if rec.Code != http.StatusOK {
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		return
	}
	var payload any
	if bare {
		items, err := flatten(rec.Body.Bytes())
		if err != nil {
			writeError(w, http.StatusInternalServerError, "internal error")
			return
		}
		if key != "" {
			h.mu.Lock()
			h.listing.key, h.listing.items = key, items
			h.mu.Unlock()
		}
		payload = items
	} else {
		d := json.NewDecoder(rec.Body)
		d.UseNumber()
		if err := d.Decode(&payload); err != nil {
			writeError(w, http.StatusInternalServerError, "internal error")
			return
		}
	}
	if h.rv.Paginate == "" {
		h.write(w, r, payload, nil, nil)
		return
	}
	h.paginate(w, r, pageItems(payload), page, size)
}

// aliases map the last segment of a real venue's path to the simulator's
// endpoint, so that a profile with the venue's own paths runs against it.
var aliases = map[string]string{
	"exchangeInfo": PathInstruments, "instruments": PathInstruments,
	"account": PathAccountSummary, "balance": PathAccountBalance,
	"position": PathPositions, "positions": PathPositions,
}

// simPath is the simulator's path for a request path: its own, an alias,
// or /v1/public/ and the last segment (/api/v2/private/get_positions).
func simPath(p string) string {
	if strings.HasPrefix(p, "/v1/public/") {
		return p
	}
	base := p[strings.LastIndexByte(p, '/')+1:]
	if a, ok := aliases[base]; ok {
		return a
	}
	return "/v1/public/" + base
}

// flatten turns the seed's [{"instruments": [...]}] groups into one array
// of the instruments as sent (json.RawMessage: far smaller than decoded
// maps for a listing of millions).
func flatten(body []byte) ([]any, error) {
	var groups []struct {
		Instruments []json.RawMessage `json:"instruments"`
	}
	if err := json.Unmarshal(body, &groups); err != nil {
		return nil, err
	}
	out := []any{}
	for _, g := range groups {
		for _, in := range g.Instruments {
			out = append(out, in)
		}
	}
	return out, nil
}

// cachedListing returns the listing cached under key, or nil.
func (h *realHandler) cachedListing(key string) []any {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.listing.key != key {
		return nil
	}
	return h.listing.items
}

// pageItems is what a paginated answer splits: an array's elements, the
// array of an object whose only member is one ({"positions": [...]}), or
// the value as one element.
func pageItems(payload any) []any {
	switch x := payload.(type) {
	case []any:
		return x
	case map[string]any:
		if len(x) == 1 {
			for _, v := range x {
				if list, ok := v.([]any); ok {
					return list
				}
			}
		}
	}
	return []any{payload}
}

// pageOf is the 1-based page a request asks for.
func (h *realHandler) pageOf(q url.Values, size int) int {
	switch h.rv.Paginate {
	case PageCursor, PageNextURL, PageLink:
		tok := q.Get("cursor") + q.Get("page_token") + q.Get("page")
		if n, err := strconv.Atoi(strings.TrimPrefix(tok, "p")); err == nil && n > 0 {
			return n
		}
	case PageOffset:
		if n, err := strconv.Atoi(q.Get("offset")); err == nil && n > 0 {
			return n/size + 1
		}
	case PagePage:
		if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 0 {
			return n
		}
	}
	return 1
}

// shift is the listing as a later page of a walk sees it: moved by one
// instrument during the first RealVenue.ShiftWalks walks.
func (h *realHandler) shift(items []any) []any {
	if h.walks.Load() > int64(h.rv.ShiftWalks) || len(items) == 0 {
		return items
	}
	if h.rv.ShiftDelist {
		return items[1:]
	}
	first, _ := items[0].(json.RawMessage)
	var m map[string]any
	if json.Unmarshal(first, &m) != nil {
		return items
	}
	m["instrument_name"] = fmt.Sprint(m["instrument_name"]) + "-LISTED"
	b, _ := json.Marshal(m)
	return append([]any{json.RawMessage(b)}, items...)
}

func (h *realHandler) paginate(w http.ResponseWriter, r *http.Request, items []any, page, size int) {
	lo := min((page-1)*size, len(items))
	if h.rv.Paginate == PageOffset {
		off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		lo = min(max(0, off), len(items))
	}
	hi := min(lo+size, len(items))
	chunk := items[lo:hi]
	next := page + 1
	if h.rv.PageLoop && page >= 2 {
		next = 2
	}
	more := hi < len(items) || h.rv.PageLoop
	nextURL := func(param string) string {
		u := *r.URL
		q := u.Query()
		for _, k := range []string{"api_key", "timestamp", "signature"} {
			q.Del(k)
		}
		q.Set(param, "p"+strconv.Itoa(next))
		u.RawQuery = q.Encode()
		return u.RequestURI()
	}
	var page_ any = map[string]any{"data": chunk}
	hdr := http.Header{}
	switch h.rv.Paginate {
	case PageCursor:
		var c any
		if more {
			c = "p" + strconv.Itoa(next)
		}
		page_ = map[string]any{"data": chunk, "next_cursor": c}
	case PageNextURL:
		var n any
		if more {
			n = nextURL("page_token")
		}
		page_ = map[string]any{"data": chunk, "next": n}
	case PageLink:
		page_ = chunk
		if more {
			hdr.Set("Link", fmt.Sprintf(`<%s>; rel="next", <%s>; rel="first"`, nextURL("page"), r.URL.Path))
		}
	case PageOffset, PagePage:
		page_ = map[string]any{"data": chunk, "total": len(items)}
	}
	h.write(w, r, page_, nil, hdr)
}

// write sends a result (or an error) in the envelope.
func (h *realHandler) write(w http.ResponseWriter, r *http.Request, result any, verr map[string]any, hdr http.Header) {
	var doc any
	now := time.Now().UnixMicro()
	switch h.rv.Envelope {
	case EnvelopeJSONRPC:
		m := map[string]any{"jsonrpc": "2.0", "id": h.id.Add(1), "usIn": now, "usOut": now + 120, "usDiff": 120, "testnet": true}
		if verr != nil {
			m["error"] = verr
		} else {
			m["result"] = result
		}
		doc = m
	case EnvelopeData:
		m := map[string]any{"code": "0", "msg": "", "data": result}
		if verr != nil {
			m = map[string]any{"error": verr}
		}
		doc = m
	default:
		doc = result
		if verr != nil {
			doc = map[string]any{"error": verr}
		}
	}
	b, _ := json.Marshal(doc)
	for k, vs := range hdr {
		w.Header()[k] = vs
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

func (h *realHandler) authorized(r *http.Request, body []byte) bool {
	rv := h.rv
	q := r.URL.Query()
	switch rv.Auth {
	case "":
		return true
	case AuthBearer:
		return equal(r.Header.Get("Authorization"), "Bearer "+rv.Key)
	case AuthBasic:
		u, p, ok := r.BasicAuth()
		return ok && equal(u, rv.Key) && equal(p, rv.Secret)
	case AuthQueryKey:
		return equal(q.Get("api_key"), rv.Key)
	case AuthOAuth2, AuthSession:
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			return false
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		t := h.tokens[tok]
		if t == nil || time.Now().After(t.expires) || (rv.Auth == AuthSession && rv.SessionUses > 0 && t.uses >= rv.SessionUses) {
			return false
		}
		t.uses++
		return true
	case AuthDeri:
		// Authorization: deri-hmac-sha256 id=KEY,ts=TS,sig=SIG,nonce=NONCE
		v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "deri-hmac-sha256 ")
		if !ok {
			return false
		}
		f := map[string]string{}
		for _, kv := range strings.Split(v, ",") {
			k, val, _ := strings.Cut(strings.TrimSpace(kv), "=")
			f[k] = val
		}
		pq := r.URL.EscapedPath()
		if r.URL.RawQuery != "" {
			pq += "?" + r.URL.RawQuery
		}
		text := f["ts"] + "\n" + f["nonce"] + "\n" + r.Method + "\n" + pq + "\n" + string(body) + "\n"
		return equal(f["id"], rv.Key) && fresh(f["ts"]) && equal(f["sig"], hex.EncodeToString(mac(rv.Secret, text)))
	case AuthQuerySig:
		// The signature is the last parameter, over everything before it.
		raw := r.URL.RawQuery
		i := strings.LastIndex(raw, "&signature=")
		if i < 0 || !equal(r.Header.Get("X-MBX-APIKEY"), rv.Key) || !fresh(q.Get("timestamp")) {
			return false
		}
		return equal(raw[i+len("&signature="):], hex.EncodeToString(mac(rv.Secret, raw[:i])))
	case AuthB64Sig:
		ts := r.Header.Get("OK-ACCESS-TIMESTAMP")
		t, err := time.Parse("2006-01-02T15:04:05.000Z", ts)
		if err != nil || time.Since(t).Abs() > 5*time.Minute || !equal(r.Header.Get("OK-ACCESS-KEY"), rv.Key) {
			return false
		}
		pq := r.URL.EscapedPath()
		if r.URL.RawQuery != "" {
			pq += "?" + r.URL.RawQuery
		}
		want := base64.StdEncoding.EncodeToString(mac(rv.Secret, ts+r.Method+pq+string(body)))
		return equal(r.Header.Get("OK-ACCESS-SIGN"), want)
	}
	return false
}

// fresh accepts a millisecond timestamp within 5 minutes of now.
func fresh(ms string) bool {
	n, err := strconv.ParseInt(ms, 10, 64)
	return err == nil && time.Since(time.UnixMilli(n)).Abs() < 5*time.Minute
}

func mac(secret, text string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(text))
	return m.Sum(nil)
}

func (h *realHandler) issue() (string, int) {
	var b [16]byte
	rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	h.mu.Lock()
	h.tokens[tok] = &issued{expires: time.Now().Add(h.rv.TokenTTL)}
	h.mu.Unlock()
	return tok, int(h.rv.TokenTTL.Seconds())
}

// login serves the session scheme's login: POST {"user", "password"}.
func (h *realHandler) login(w http.ResponseWriter, r *http.Request) {
	var in struct{ User, Password string }
	if r.Method != http.MethodPost || json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&in) != nil ||
		h.rv.Auth != AuthSession || !equal(in.User, h.rv.Key) || !equal(in.Password, h.rv.Secret) {
		writeError(w, http.StatusUnauthorized, "invalid credentials")
		return
	}
	h.logins.Add(1)
	tok, ttl := h.issue()
	h.write(w, r, map[string]any{"token": tok, "expires_in": ttl}, nil, nil)
}

// token serves oauth2 client credentials (client id and secret as basic
// auth or form fields).
func (h *realHandler) token(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if r.Method != http.MethodPost || r.PostForm.Get("grant_type") != "client_credentials" ||
		h.rv.Auth != AuthOAuth2 || !equal(id, h.rv.Key) || !equal(secret, h.rv.Secret) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":"invalid_client"}`)
		return
	}
	h.tokenReqs.Add(1)
	tok, ttl := h.issue()
	b, _ := json.Marshal(map[string]any{"access_token": tok, "token_type": "bearer", "expires_in": ttl})
	w.Header().Set("Content-Type", "application/json")
	w.Write(bytes.TrimSpace(b))
}
