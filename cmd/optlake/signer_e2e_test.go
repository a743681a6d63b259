package main

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/optlake/optlake/internal/testenv"
)

// signerVenue is one venue whose profile's auth block is checked against
// ccxt's sign() (tools/ccxt/sign.mjs), an implementation of the venues'
// signing that no one on this project wrote.
type signerVenue struct {
	name    string            // the profile, deploy/venues/<name>.yaml
	variant string            // a test name when the auth block is not the profile's
	auth    string            // the auth block's YAML when not the profile's
	env     map[string]string // the credentials' ${ENV}
	wrong   string            // the ${ENV} a wrong-secret run corrupts
	creds   map[string]string // what ccxt is given (apiKey, secret, password, privateKey, walletAddress)
	options map[string]any    // ccxt options
	// endpoints of the test config: name → "METHOD path?params" and a body.
	endpoints []signerEndpoint
	// api maps a request path to ccxt's api and path arguments.
	api func(path string) (any, string)
	// stamp reads the request's timestamp (ms) and nonce (nil: the
	// timestamp) from what optlake sent.
	stamp func(r *http.Request, body string) (int64, any, error)
	// authParams are the query or form entries the auth block adds (left
	// out of the parameters given to ccxt, which adds its own).
	authParams []string
	// ignore lists ccxt headers that are no credentials (a broker's
	// attribution) and are not compared.
	ignore []string
	jwt    bool // the Authorization is a JWT: verified, claims compared
	// private lists the path prefixes of the venue's private endpoints
	// (the others are public: no credentials to check).
	private []string
}

func (v signerVenue) isPrivate(path string) bool {
	for _, p := range v.private {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// profileEnv is the credentials' environment of a profile of
// deploy/venues, in the shapes its auth block wants (a base64 secret, a
// PEM key, a hex session key).
func profileEnv(t *testing.T, profile string) map[string]string {
	for _, v := range signerVenues(t) {
		if v.name == profile && v.variant == "" {
			return v.env
		}
	}
	t.Fatalf("no credentials for profile %s", profile)
	return nil
}

type signerEndpoint struct {
	name, method, path, params, body string
}

func header(name string, unit int64) func(*http.Request, string) (int64, any, error) {
	return func(r *http.Request, _ string) (int64, any, error) {
		n, err := strconv.ParseInt(r.Header.Get(name), 10, 64)
		return n * unit, nil, err
	}
}

func prefixAPI(prefix string, api any) func(string) (any, string) {
	return func(p string) (any, string) { return api, strings.TrimPrefix(p, prefix) }
}

func signerVenues(t *testing.T) []signerVenue {
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalECPrivateKey(ecKey)
	ecPEM := string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: ecDER}))
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	edDER, _ := x509.MarshalPKCS8PrivateKey(edKey)
	edPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: edDER}))
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsaDER, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	rsaPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: rsaDER}))
	ethKey := "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
	krakenSecret := base64.StdEncoding.EncodeToString([]byte("kraken-secret-0123456789abcdefghijklmnopqrstuvwxyz-0123456789"))
	pemDir := t.TempDir()
	ecFile := filepath.Join(pemDir, "coinbase.pem")
	edFile := filepath.Join(pemDir, "binance-ed25519.pem")
	os.WriteFile(ecFile, []byte(ecPEM), 0o600)
	os.WriteFile(edFile, []byte(edPEM), 0o600)
	rsaFile := filepath.Join(pemDir, "binance-rsa.pem")
	os.WriteFile(rsaFile, []byte(rsaPEM), 0o600)
	const key, secret, pass = "sig-key-24680", "sig-secret-13579", "sig-pass-97531"
	plain := func(k, s string) (map[string]string, map[string]string) {
		return map[string]string{k: key, s: secret}, map[string]string{"apiKey": key, "secret": secret}
	}
	withPass := func(k, s, p string) (map[string]string, map[string]string) {
		e, c := plain(k, s)
		e[p], c["password"] = pass, pass
		return e, c
	}
	binanceStamp := func(r *http.Request, _ string) (int64, any, error) {
		n, err := strconv.ParseInt(r.URL.Query().Get("timestamp"), 10, 64)
		return n, nil, err
	}
	// ccxt adds recvWindow=10000 of its own accord; Binance's default
	// (5000) needs no parameter.
	binanceOptions := map[string]any{"recvWindow": nil}
	binanceEPs := []signerEndpoint{
		{"balance", "GET", "/eapi/v1/account", "", ""},
		{"positions", "GET", "/eapi/v1/position", "{symbol: BTC-261225-100000-C}", ""},
	}
	var vs []signerVenue
	add := func(v signerVenue) { vs = append(vs, v) }

	env, creds := plain("DERIBIT_CLIENT_ID", "DERIBIT_CLIENT_SECRET")
	add(signerVenue{name: "deribit", env: env, creds: creds, wrong: "DERIBIT_CLIENT_SECRET",
		endpoints: []signerEndpoint{
			{"summary", "GET", "/api/v2/private/get_account_summary", "{currency: BTC, extended: 'true'}", ""},
			{"positions", "GET", "/api/v2/private/get_positions", "{currency: BTC, kind: option}", ""},
		},
		api: prefixAPI("/api/v2/private/", "private"), private: []string{"/api/v2/private/"},
		stamp: func(r *http.Request, _ string) (int64, any, error) {
			f := map[string]string{}
			for _, kv := range strings.Split(strings.TrimPrefix(r.Header.Get("Authorization"), "deri-hmac-sha256 "), ",") {
				k, v, _ := strings.Cut(kv, "=")
				f[k] = v
			}
			n, err := strconv.ParseInt(f["ts"], 10, 64)
			return n, f["nonce"], err
		}})
	env, creds = plain("BINANCE_API_KEY", "BINANCE_API_SECRET")
	add(signerVenue{name: "binance", env: env, creds: creds, wrong: "BINANCE_API_SECRET", endpoints: binanceEPs, options: binanceOptions,
		api: prefixAPI("/eapi/v1/", "eapiPrivate"), stamp: binanceStamp, private: []string{"/eapi/v1/account", "/eapi/v1/position", "/eapi/v1/userTrades"}, authParams: []string{"timestamp", "signature"}})
	add(signerVenue{name: "binance", variant: "binance-ed25519",
		auth: `{type: template, key: '${BINANCE_API_KEY}', secret: '@${BINANCE_ED25519_KEY}',
  query: {timestamp: '{{ .Millis }}', signature: '{{ .Signature }}'},
  sign: '{{ ed25519 .Secret .Query | b64 }}', headers: {X-MBX-APIKEY: '{{ .Key }}'}}`,
		env:   map[string]string{"BINANCE_API_KEY": key, "BINANCE_ED25519_KEY": edFile},
		creds: map[string]string{"apiKey": key, "secret": edPEM}, wrong: "BINANCE_ED25519_KEY", endpoints: binanceEPs, options: binanceOptions,
		api: prefixAPI("/eapi/v1/", "eapiPrivate"), stamp: binanceStamp, private: []string{"/eapi/v1/account", "/eapi/v1/position", "/eapi/v1/userTrades"}, authParams: []string{"timestamp", "signature"}})
	add(signerVenue{name: "binance", variant: "binance-rsa",
		auth: `{type: template, key: '${BINANCE_API_KEY}', secret: '@${BINANCE_RSA_KEY}',
  query: {timestamp: '{{ .Millis }}', signature: '{{ .Signature }}'},
  sign: '{{ rsa "sha256" .Secret .Query | b64 }}', headers: {X-MBX-APIKEY: '{{ .Key }}'}}`,
		env:   map[string]string{"BINANCE_API_KEY": key, "BINANCE_RSA_KEY": rsaFile},
		creds: map[string]string{"apiKey": key, "secret": rsaPEM}, wrong: "BINANCE_RSA_KEY", endpoints: binanceEPs, options: binanceOptions,
		api: prefixAPI("/eapi/v1/", "eapiPrivate"), stamp: binanceStamp, authParams: []string{"timestamp", "signature"}})
	env, creds = withPass("OKX_API_KEY", "OKX_API_SECRET", "OKX_PASSPHRASE")
	add(signerVenue{name: "okx", env: env, creds: creds, wrong: "OKX_API_SECRET",
		endpoints: []signerEndpoint{
			{"balance", "GET", "/api/v5/account/balance", "", ""},
			{"positions", "GET", "/api/v5/account/positions", "{instType: OPTION, instId: BTC-USD-261225-100000-C}", ""},
		},
		api: prefixAPI("/api/v5/", "private"), private: []string{"/api/v5/account/"},
		stamp: func(r *http.Request, _ string) (int64, any, error) {
			ts, err := time.Parse(time.RFC3339Nano, r.Header.Get("OK-ACCESS-TIMESTAMP"))
			return ts.UnixMilli(), nil, err
		}})
	env, creds = plain("BYBIT_API_KEY", "BYBIT_API_SECRET")
	add(signerVenue{name: "bybit", env: env, creds: creds, wrong: "BYBIT_API_SECRET",
		endpoints: []signerEndpoint{
			{"balance", "GET", "/v5/account/wallet-balance", "{accountType: UNIFIED}", ""},
			{"positions", "GET", "/v5/position/list", "{category: option, baseCoin: BTC, limit: '200'}", ""},
		},
		api: prefixAPI("/", "private"), stamp: header("X-BAPI-TIMESTAMP", 1), private: []string{"/v5/account/", "/v5/position/"}, ignore: []string{"Referer"}})
	env, creds = plain("KRAKEN_API_KEY", "KRAKEN_API_SECRET")
	env["KRAKEN_API_SECRET"], creds["secret"] = krakenSecret, krakenSecret
	add(signerVenue{name: "kraken", env: env, creds: creds, wrong: "KRAKEN_API_SECRET",
		endpoints: []signerEndpoint{
			{"balance", "POST", "/0/private/Balance", "", ""},
			{"trade_balance", "POST", "/0/private/TradeBalance", "{asset: ZUSD}", ""},
			{"positions", "POST", "/0/private/OpenPositions", "{docalcs: 'true', consolidation: market}", ""},
		},
		api: prefixAPI("/0/private/", "private"), authParams: []string{"nonce"}, private: []string{"/0/private/"},
		stamp: func(_ *http.Request, body string) (int64, any, error) {
			f, err := url.ParseQuery(body)
			n, err2 := strconv.ParseInt(f.Get("nonce"), 10, 64)
			if err == nil {
				err = err2
			}
			return n, f.Get("nonce"), err
		}})
	env, creds = plain("GATE_API_KEY", "GATE_API_SECRET")
	add(signerVenue{name: "gate", env: env, creds: creds, wrong: "GATE_API_SECRET",
		endpoints: []signerEndpoint{
			{"balance", "GET", "/api/v4/options/accounts", "", ""},
			{"positions", "GET", "/api/v4/options/positions", "{underlying: BTC_USDT}", ""},
		},
		api: func(p string) (any, string) {
			typ, rest, _ := strings.Cut(strings.TrimPrefix(p, "/api/v4/"), "/")
			return []string{"private", typ}, rest
		},
		stamp: header("Timestamp", 1000), private: []string{"/api/v4/options/accounts", "/api/v4/options/positions"}})
	env, creds = withPass("KUCOIN_API_KEY", "KUCOIN_API_SECRET", "KUCOIN_PASSPHRASE")
	add(signerVenue{name: "kucoin", env: env, creds: creds, wrong: "KUCOIN_API_SECRET",
		endpoints: []signerEndpoint{
			{"balance", "GET", "/api/v1/accounts", "{type: trade}", ""},
			{"orders", "GET", "/api/v1/orders", "{status: active, currentPage: '1', pageSize: '50'}", ""},
			{"futures_overview", "GET", "/api/v1/account-overview", "{currency: USDT}", ""},
		},
		// The profile's account endpoints are KuCoin Futures' (ccxt's
		// futuresPrivate, signed the same way on its own host).
		api: func(p string) (any, string) {
			rest := strings.TrimPrefix(p, "/api/v1/")
			for _, f := range kucoinFuturesPrivate {
				if rest == f {
					return "futuresPrivate", rest
				}
			}
			return "private", rest
		},
		stamp:   header("KC-API-TIMESTAMP", 1),
		private: []string{"/api/v1/account-overview", "/api/v1/positions", "/api/v1/transaction-history"},
		// ccxt's own broker attribution (a partner id and its signature).
		ignore: []string{"KC-API-PARTNER", "KC-API-PARTNER-SIGN", "KC-API-PARTNER-VERIFY"}})
	add(signerVenue{name: "coinbase", env: map[string]string{"COINBASE_API_KEY_NAME": "organizations/org-1/apiKeys/" + key, "COINBASE_API_PRIVATE_KEY": "@" + ecFile},
		creds: map[string]string{"apiKey": "organizations/org-1/apiKeys/" + key, "secret": ecPEM}, wrong: "COINBASE_API_PRIVATE_KEY",
		endpoints: []signerEndpoint{
			{"accounts", "GET", "/api/v3/brokerage/accounts", "{limit: '250'}", ""},
			{"portfolios", "GET", "/api/v3/brokerage/portfolios", "", ""},
		},
		api: prefixAPI("/api/v3/", []string{"v3", "private"}), jwt: true, stamp: jwtStamp, private: []string{"/api/v3/brokerage/"}})
	// A CDP key of the newer kind: Ed25519 (64 bytes, base64), an EdDSA JWT
	// with a uris list.
	_, cdpKey, _ := ed25519.GenerateKey(rand.Reader)
	cdpSecret := base64.StdEncoding.EncodeToString(cdpKey)
	add(signerVenue{name: "coinbase", variant: "coinbase-eddsa",
		auth: `{type: template, key: '${COINBASE_API_KEY_NAME}', secret: '${COINBASE_API_SECRET}', headers: {Authorization: 'Bearer {{ jwt "EdDSA" (unb64 .Secret)
    (dict "sub" .Key "iss" "cdp" "aud" (list "cdp_service") "nbf" .Unix "iat" .Unix "exp" (add .Unix 120)
          "uris" (list (printf "%s %s%s" .Method .Host .Path)))
    (dict "kid" .Key "nonce" (random 16)) }}'}}`,
		env:   map[string]string{"COINBASE_API_KEY_NAME": key, "COINBASE_API_SECRET": cdpSecret},
		creds: map[string]string{"apiKey": key, "secret": cdpSecret}, wrong: "COINBASE_API_SECRET",
		endpoints: []signerEndpoint{{"accounts", "GET", "/api/v3/brokerage/accounts", "{limit: '250'}", ""}},
		api:       prefixAPI("/api/v3/", []string{"v3", "private"}), jwt: true, stamp: jwtStamp})
	env, creds = withPass("BITGET_API_KEY", "BITGET_API_SECRET", "BITGET_PASSPHRASE")
	add(signerVenue{name: "bitget", env: env, creds: creds, wrong: "BITGET_API_SECRET",
		endpoints: []signerEndpoint{
			{"balance", "GET", "/api/v2/mix/account/accounts", "{productType: USDT-FUTURES}", ""},
			{"positions", "GET", "/api/v2/mix/position/all-position", "{productType: USDT-FUTURES, marginCoin: USDT}", ""},
		},
		api: prefixAPI("/api/", []string{"private", "mix"}), stamp: header("ACCESS-TIMESTAMP", 1),
		private: []string{"/api/v2/mix/account/", "/api/v2/mix/position/"},
		// ccxt's own broker attribution.
		ignore: []string{"X-CHANNEL-API-CODE"}})
	env, creds = plain("DELTA_API_KEY", "DELTA_API_SECRET")
	add(signerVenue{name: "delta", env: env, creds: creds, wrong: "DELTA_API_SECRET",
		endpoints: []signerEndpoint{
			{"balance", "GET", "/v2/wallet/balances", "", ""},
			{"positions", "GET", "/v2/positions/margined", "{contract_types: call_options}", ""},
		},
		api: prefixAPI("/v2/", "private"), stamp: header("timestamp", 1000), private: []string{"/v2/wallet/", "/v2/positions/"}})
	add(signerVenue{name: "derive", env: map[string]string{"DERIVE_WALLET": "0x5e4B1a8e1f4b8bB5c7E0f3B2c1D0aB9C8d7E6f5A", "DERIVE_SESSION_KEY": ethKey, "DERIVE_SUBACCOUNT_ID": "30769"},
		creds:   map[string]string{"apiKey": "unused", "secret": "unused", "privateKey": ethKey, "walletAddress": "0x5e4B1a8e1f4b8bB5c7E0f3B2c1D0aB9C8d7E6f5A"},
		options: map[string]any{"deriveWalletAddress": "0x5e4B1a8e1f4b8bB5c7E0f3B2c1D0aB9C8d7E6f5A"},
		wrong:   "DERIVE_SESSION_KEY",
		endpoints: []signerEndpoint{
			{"subaccounts", "POST", "/private/get_subaccounts", "", `{"wallet":"0x5e4B1a8e1f4b8bB5c7E0f3B2c1D0aB9C8d7E6f5A"}`},
			{"positions", "POST", "/private/get_positions", "", `{"subaccount_id":30769}`},
		},
		api: prefixAPI("/private/", "private"), stamp: header("X-LyraTimestamp", 1), private: []string{"/private/"}})
	return vs
}

// kucoinFuturesPrivate are the KuCoin Futures account paths the kucoin
// profile reads (ccxt's futuresPrivate api).
var kucoinFuturesPrivate = []string{"account-overview", "positions", "transaction-history"}

// jwtStamp reads the time from a bearer JWT's nbf claim.
func jwtStamp(r *http.Request, _ string) (int64, any, error) {
	_, claims, err := jwtParts(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	if err != nil {
		return 0, nil, err
	}
	nbf, _ := claims["nbf"].(float64)
	return int64(nbf) * 1000, nil, nil
}

func jwtParts(token string) (head, claims map[string]any, err error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, nil, fmt.Errorf("not a JWT: %d parts", len(parts))
	}
	for i, dst := range []*map[string]any{&head, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err == nil {
			err = json.Unmarshal(b, dst)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("JWT part %d: %w", i+1, err)
		}
	}
	return head, claims, nil
}

// orderedParams is the query (or form) entries of raw in their order,
// less skip, as a JSON object (ccxt keeps the order it is given).
func orderedParams(raw string, skip []string) (json.RawMessage, error) {
	var b strings.Builder
	b.WriteByte('{')
	n := 0
	for _, kv := range strings.Split(raw, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		k, err1 := url.QueryUnescape(k)
		v, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad query entry %q", kv)
		}
		if contains(skip, k) {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		kj, _ := json.Marshal(k)
		vj, _ := json.Marshal(v)
		b.Write(kj)
		b.WriteByte(':')
		b.Write(vj)
	}
	b.WriteByte('}')
	return json.RawMessage(b.String()), nil
}

func sameJSON(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// oracleServer answers a private request only when it is exactly what
// ccxt's sign() makes of the same call (the same path, parameters, body,
// timestamp and nonce) with the right credentials; anything else gets a
// 401 naming the difference, which it also records.
type oracleServer struct {
	t    *testing.T
	v    signerVenue
	ccxt *testenv.CCXT
	base string
	// next answers the requests ccxt accepts (nil: one row of JSON).
	next     http.Handler
	mu       sync.Mutex
	refused  []string
	accepted int
}

func (o *oracleServer) refuse(w http.ResponseWriter, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	o.mu.Lock()
	o.refused = append(o.refused, msg)
	o.mu.Unlock()
	w.WriteHeader(http.StatusUnauthorized)
	fmt.Fprintf(w, `{"error": "signature refused"}`)
}

func (o *oracleServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	body := string(b)
	millis, nonce, err := o.v.stamp(r, body)
	if err != nil {
		o.refuse(w, "%s: no timestamp: %v", r.URL.Path, err)
		return
	}
	var params json.RawMessage
	switch {
	case r.Method == http.MethodGet:
		params, err = orderedParams(r.URL.RawQuery, o.v.authParams)
	case strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded"):
		params, err = orderedParams(body, o.v.authParams)
	default:
		params = json.RawMessage(body)
		if body == "" {
			params = json.RawMessage("{}")
		}
	}
	if err != nil {
		o.refuse(w, "%s: %v", r.URL.Path, err)
		return
	}
	api, path := o.v.api(r.URL.Path)
	req := map[string]any{"venue": o.v.name, "api": api, "path": path, "method": r.Method, "params": params,
		"credentials": o.v.creds, "millis": millis, "base": o.base, "options": o.v.options}
	if nonce != nil {
		req["nonce"] = nonce
	}
	var want struct {
		URL     string
		Headers map[string]string
		Body    *string
	}
	if err := o.ccxt.Call(req, &want); err != nil {
		o.refuse(w, "%s: %v", r.URL.Path, err)
		return
	}
	if got := r.URL.RequestURI(); strings.TrimPrefix(want.URL, o.base) != got {
		o.refuse(w, "url %s, ccxt signs %s", got, strings.TrimPrefix(want.URL, o.base))
		return
	}
	if want.Body != nil && *want.Body != body && !sameJSON(*want.Body, body) {
		// Two JSON bodies that differ only in spacing are the same request
		// where the signature does not cover the body (Derive's); where it
		// does, the signature check below tells them apart.
		o.refuse(w, "%s: body %q, ccxt sends %q", r.URL.Path, body, *want.Body)
		return
	}
	for name, v := range want.Headers {
		switch {
		case contains(o.v.ignore, name):
			continue
		case strings.EqualFold(name, "Content-Type") && body == "":
			continue // a bodiless request's content type means nothing
		case o.v.jwt && name == "Authorization":
			if msg := o.checkJWT(r.Header.Get(name), v); msg != "" {
				o.refuse(w, "%s: %s", r.URL.Path, msg)
				return
			}
			continue
		}
		if got := r.Header.Get(name); got != v {
			o.refuse(w, "%s: header %s differs from ccxt's", r.URL.Path, name)
			return
		}
	}
	o.mu.Lock()
	o.accepted++
	o.mu.Unlock()
	if o.next != nil {
		r.Body = io.NopCloser(strings.NewReader(body))
		o.next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `[{"id": 1, "venue": %q}]`, o.v.name)
}

// checkJWT verifies got's signature (node's crypto, with the right key)
// and compares its header and claims with ccxt's token want (an ECDSA
// signature is randomized, so the tokens themselves differ).
func (o *oracleServer) checkJWT(got, want string) string {
	var v struct {
		Valid  bool
		Header map[string]any
		Claims map[string]any
	}
	if err := o.ccxt.Call(map[string]any{"op": "jwt", "token": strings.TrimPrefix(got, "Bearer "), "key": o.v.creds["secret"]}, &v); err != nil {
		return "JWT: " + err.Error()
	}
	if !v.Valid {
		return "JWT: the signature does not verify"
	}
	wantHead, wantClaims, err := jwtParts(strings.TrimPrefix(want, "Bearer "))
	if err != nil {
		return "ccxt's JWT: " + err.Error()
	}
	if !reflect.DeepEqual(v.Claims, wantClaims) {
		return fmt.Sprintf("JWT claims %v, ccxt's %v", v.Claims, wantClaims)
	}
	for _, k := range []string{"alg", "kid", "typ"} {
		if v.Header[k] != wantHead[k] {
			return fmt.Sprintf("JWT header %s %v, ccxt's %v", k, v.Header[k], wantHead[k])
		}
	}
	if n, _ := v.Header["nonce"].(string); len(n) != len(wantHead["nonce"].(string)) {
		return fmt.Sprintf("JWT nonce %q, ccxt's is %d characters", n, len(wantHead["nonce"].(string)))
	}
	return ""
}

// authBlock is the auth: mapping of a profile, as YAML text.
func authBlock(t *testing.T, profile string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "venues", profile+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "auth" {
			out, err := yaml.Marshal(m.Content[i+1])
			if err != nil {
				t.Fatal(err)
			}
			return string(out)
		}
	}
	t.Fatalf("%s has no auth block", profile)
	return ""
}

// Every profile's auth block, in a real run of account endpoints, signs
// each request exactly as ccxt does (the Coinbase JWT: verified and its
// claims equal to ccxt's); a wrong secret fails the run with the endpoint
// named and neither secret anywhere.
func TestProfilesSignLikeCCXT(t *testing.T) {
	oracle := testenv.NewCCXT(t)
	for _, v := range signerVenues(t) {
		name := v.name
		if v.variant != "" {
			name = v.variant
		}
		t.Run(name, func(t *testing.T) {
			o := &oracleServer{t: t, v: v, ccxt: oracle}
			srv := httptest.NewServer(o)
			defer srv.Close()
			o.base = "https://" + strings.TrimPrefix(srv.URL, "http://")
			block := v.auth
			if block == "" {
				block = authBlock(t, v.name)
			}
			var cfg strings.Builder
			fmt.Fprintf(&cfg, "auth:\n%s\nendpoints:\n", indent(block))
			var names []string
			for _, ep := range v.endpoints {
				names = append(names, "my_"+ep.name)
				fmt.Fprintf(&cfg, "  my_%s:\n    kind: account\n    path: %s\n    method: %s\n", ep.name, ep.path, ep.method)
				if ep.params != "" {
					fmt.Fprintf(&cfg, "    params: %s\n", ep.params)
				}
				if ep.body != "" {
					fmt.Fprintf(&cfg, "    body: '%s'\n", ep.body)
				}
			}
			cfgPath := writeFile(t, t.TempDir(), "c.yaml", cfg.String())
			for _, good := range []bool{true, false} {
				for k, val := range v.env {
					t.Setenv(k, val)
				}
				wrongValue := "sig-wrong-00000"
				if !good {
					switch v.wrong {
					case "COINBASE_API_SECRET":
						_, k, _ := ed25519.GenerateKey(rand.Reader)
						wrongValue = base64.StdEncoding.EncodeToString(k)
					case "KRAKEN_API_SECRET":
						wrongValue = base64.StdEncoding.EncodeToString([]byte(wrongValue))
					case "DERIVE_SESSION_KEY":
						wrongValue = "0x" + hex.EncodeToString([]byte("a-wrong-session-key-of-32-bytes!"))
					case "BINANCE_RSA_KEY":
						k, _ := rsa.GenerateKey(rand.Reader, 2048)
						der, _ := x509.MarshalPKCS8PrivateKey(k)
						wrongValue = writeFile(t, t.TempDir(), "wrong.pem", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
					case "COINBASE_API_PRIVATE_KEY", "BINANCE_ED25519_KEY":
						k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
						der, _ := x509.MarshalECPrivateKey(k)
						if v.wrong == "BINANCE_ED25519_KEY" {
							_, ek, _ := ed25519.GenerateKey(rand.Reader)
							der, _ = x509.MarshalPKCS8PrivateKey(ek)
						}
						typ := map[bool]string{true: "PRIVATE KEY", false: "EC PRIVATE KEY"}[v.wrong == "BINANCE_ED25519_KEY"]
						p := writeFile(t, t.TempDir(), "wrong.pem", string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})))
						wrongValue = p
						if v.wrong == "COINBASE_API_PRIVATE_KEY" {
							wrongValue = "@" + p
						}
					}
					t.Setenv(v.wrong, wrongValue)
				}
				dir := t.TempDir()
				res := optlake(t, "run", "--config", cfgPath, "--api-url", srv.URL, "--data-dir", dir,
					"--endpoints", strings.Join(names, ","), "--max-attempts", "1", "--log-level", "debug")
				secrets := []string{"sig-wrong-00000", wrongValue}
				for _, k := range []string{"secret", "password", "privateKey"} {
					if val := v.creds[k]; val != "" && val != "unused" {
						secrets = append(secrets, val)
					}
				}
				if strings.HasSuffix(wrongValue, ".pem") {
					b, _ := os.ReadFile(strings.TrimPrefix(wrongValue, "@"))
					secrets = append(secrets, string(b))
				}
				for _, sec := range secrets {
					for _, line := range strings.Split(sec, "\n") {
						if len(line) > 20 && !strings.HasPrefix(line, "-----") {
							secrets = append(secrets, line) // a PEM key's lines, however it is laid out
						}
					}
				}
				secretNowhere(t, res, dir, secrets...)
				check := optlake(t, "config", "check", "--config", cfgPath, "--api-url", srv.URL, "--data-dir", dir)
				if check.code != exitOK {
					t.Errorf("config check: exit %d: %s", check.code, check.stderr)
				}
				secretNowhere(t, check, dir, secrets...)
				o.mu.Lock()
				refused, accepted := o.refused, o.accepted
				o.refused, o.accepted = nil, 0
				o.mu.Unlock()
				if good {
					if res.code != exitOK || len(refused) > 0 || accepted < len(v.endpoints) {
						t.Fatalf("exit %d, %d requests accepted, refused: %q\n%s", res.code, accepted, refused, res.stderr)
					}
					continue
				}
				if res.code == exitOK || !strings.Contains(res.stderr, "401") || !strings.Contains(res.stderr, "my_"+v.endpoints[0].name+": ") || len(refused) == 0 {
					t.Errorf("wrong secret: exit %d, refused %q: %s", res.code, refused, res.stderr)
				}
			}
		})
	}
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}
