package auth

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func templateEnv() Env {
	now := time.Date(2026, 11, 25, 10, 0, 0, 123e6, time.UTC)
	return Env{Base: &url.URL{Scheme: "https", Host: "v.example"}, Now: func() time.Time { return now }, Nonce: func() string { return "n0nce" }}
}

func applyTemplate(t *testing.T, s Spec, method, rawURL, body string) *http.Request {
	t.Helper()
	s.Type = Templated
	a, err := New(s, templateEnv())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(method, rawURL, nil)
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	if err := a.Apply(context.Background(), req, b); err != nil {
		t.Fatal(err)
	}
	return req
}

func mac(h func() hash.Hash, key, text []byte) []byte {
	m := hmac.New(h, key)
	m.Write(text)
	return m.Sum(nil)
}

// Kraken's nesting: a base64-decoded secret, an HMAC-SHA512 over the path
// and the SHA-256 of nonce + form body; the endpoint's parameters move
// into the body after the nonce, with the configured Content-Type.
func TestTemplateNestedDigestAndFormBody(t *testing.T) {
	secret := []byte("raw secret bytes")
	req := applyTemplate(t, Spec{Key: "k", Secret: base64.StdEncoding.EncodeToString(secret), Params: "body",
		Body:        "nonce={{ .Millis }}{{ with .Params }}&{{ . }}{{ end }}",
		ContentType: "application/x-www-form-urlencoded",
		Sign:        `{{ hmac "sha512" (unb64 .Secret) (print .Path (hash "sha256" (print .Millis .Body))) | b64 }}`,
		Headers:     []KV{{"API-Key", "{{ .Key }}"}, {"API-Sign", "{{ .Signature }}"}}},
		"POST", "https://v.example/0/private/TradeBalance?asset=ZUSD", "")
	body, _ := io.ReadAll(req.Body)
	wantBody := "nonce=1795600800123&asset=ZUSD"
	if string(body) != wantBody || req.ContentLength != int64(len(wantBody)) || req.URL.RawQuery != "" {
		t.Fatalf("body %q (length %d), query %q; want body %q and no query", body, req.ContentLength, req.URL.RawQuery, wantBody)
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
		t.Errorf("Content-Type %q", ct)
	}
	inner := sha256.Sum256([]byte("1795600800123" + wantBody))
	want := base64.StdEncoding.EncodeToString(mac(sha512.New, secret, append([]byte("/0/private/TradeBalance"), inner[:]...)))
	if got := req.Header.Get("API-Sign"); got != want {
		t.Errorf("API-Sign %q, want %q", got, want)
	}
}

// The auth's query entries go ahead of the endpoint's parameters, the
// signature's last; Gate's body digest is signed even for a GET.
func TestTemplateQueryOrderAndBodyDigest(t *testing.T) {
	req := applyTemplate(t, Spec{Key: "k", Secret: "sec", Timestamp: "s",
		Query: []KV{{"signature", "{{ .Signature }}"}, {"timestamp", "{{ .Millis }}"}},
		Sign:  `{{ hmac "sha512" .Secret (printf "%s\n%s\n%s\n%s\n%s" .Method .Path .Query (hash "sha512" .Body | hex) .Timestamp) | hex }}`},
		"GET", "https://v.example/api/v4/options/positions?underlying=BTC_USDT", "")
	empty := sha512.Sum512(nil)
	signed := "timestamp=1795600800123&underlying=BTC_USDT"
	sig := hex.EncodeToString(mac(sha512.New, []byte("sec"), []byte("GET\n/api/v4/options/positions\n"+signed+"\n"+hex.EncodeToString(empty[:])+"\n1795600800")))
	if want := signed + "&signature=" + sig; req.URL.RawQuery != want {
		t.Errorf("query %q, want %q", req.URL.RawQuery, want)
	}
}

// KuCoin v2: the passphrase itself HMAC-signed.
func TestTemplateSignedPassphrase(t *testing.T) {
	req := applyTemplate(t, Spec{Key: "k", Secret: "sec", Passphrase: "pass",
		Headers: []KV{{"KC-API-PASSPHRASE", `{{ hmac "sha256" .Secret .Passphrase | b64 }}`}}}, "GET", "https://v.example/api/v1/accounts", "")
	if got, want := req.Header.Get("KC-API-PASSPHRASE"), base64.StdEncoding.EncodeToString(mac(sha256.New, []byte("sec"), []byte("pass"))); got != want {
		t.Errorf("passphrase %q, want %q", got, want)
	}
}

// Ed25519 and RSA signatures verify with the public halves of their keys.
func TestTemplateEd25519AndRSA(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	edPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsaPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rk)}))
	req := applyTemplate(t, Spec{Key: "k", Secret: edPEM, Vars: []KV{{"rsa", rsaPEM}},
		Headers: []KV{{"X-Ed", "{{ ed25519 .Secret .PathQuery | b64 }}"}, {"X-Rsa", `{{ rsa "sha256" .Vars.rsa .PathQuery | b64 }}`}}},
		"GET", "https://v.example/x?a=1", "")
	ed, _ := base64.StdEncoding.DecodeString(req.Header.Get("X-Ed"))
	if !ed25519.Verify(pub, []byte("/x?a=1"), ed) {
		t.Error("the Ed25519 signature does not verify")
	}
	rs, _ := base64.StdEncoding.DecodeString(req.Header.Get("X-Rsa"))
	h := sha256.Sum256([]byte("/x?a=1"))
	if err := rsa.VerifyPKCS1v15(&rk.PublicKey, crypto.SHA256, h[:], rs); err != nil {
		t.Errorf("the RSA signature does not verify: %v", err)
	}
}

// A JWT per request for each algorithm family, with a claims template;
// golang-jwt's parser checks the signature with the public key.
func TestTemplateJWT(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsaPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rk)}))
	for _, tc := range []struct {
		alg, secret string
		verify      any
	}{
		{"EdDSA", base64.StdEncoding.EncodeToString(priv), pub},
		{"RS256", rsaPEM, &rk.PublicKey},
		{"HS256", "hs-secret", []byte("hs-secret")},
	} {
		t.Run(tc.alg, func(t *testing.T) {
			key := ".Secret"
			if tc.alg == "EdDSA" {
				key = "(unb64 .Secret)"
			}
			req := applyTemplate(t, Spec{Key: "kid-1", Secret: tc.secret, Headers: []KV{{"Authorization",
				`Bearer {{ jwt "` + tc.alg + `" ` + key + ` (dict "sub" .Key "exp" (add .Unix 120) "uri" (printf "%s %s%s" .Method .Host .Path)) (dict "kid" .Key) }}`}}},
				"GET", "https://api.v.example/api/v3/brokerage/accounts?limit=1", "")
			tok, err := jwt.Parse(strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer "),
				func(*jwt.Token) (any, error) { return tc.verify, nil }, jwt.WithTimeFunc(templateEnv().Now))
			if err != nil {
				t.Fatal(err)
			}
			c := tok.Claims.(jwt.MapClaims)
			if c["uri"] != "GET api.v.example/api/v3/brokerage/accounts" || c["sub"] != "kid-1" || c["exp"] != float64(1795600800+120) || tok.Header["kid"] != "kid-1" || tok.Method.Alg() != tc.alg {
				t.Errorf("header %v claims %v", tok.Header, c)
			}
		})
	}
}

// personal_sign of web3.js's documented example (web3.eth.accounts.sign
// of "Some data" with its sample key).
func TestTemplateEIP191(t *testing.T) {
	req := applyTemplate(t, Spec{Key: "k", Secret: "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318",
		Headers: []KV{{"X-Sig", `0x{{ eip191 .Secret "Some data" | hex }}`}}}, "GET", "https://v.example/x", "")
	want := "0xb91467e570a6466aa9e9876cbcd013baba02900b8979d43fe208a4a4f339f5fd6007e74cd82e037b800186422fc2da167c747ef045e5d18a5f5d4300f8e1a0291c"
	if got := req.Header.Get("X-Sig"); got != want {
		t.Errorf("signature %s, want %s", got, want)
	}
}

// A mistake is reported with its key, at construction (a dry run renders
// every template), and never quotes a secret.
func TestTemplateMistakes(t *testing.T) {
	const secret = "ssss-not-base64-!!"
	for _, tc := range []struct {
		spec      Spec
		key, want string
	}{
		{Spec{Secret: secret, Sign: "{{ hmac .Secret }}", Headers: []KV{{"A", "{{ .Signature }}"}}}, "sign", "wrong number of args"},
		{Spec{Secret: secret, Sign: "{{ hmac \"sha999\" .Secret .Body }}", Headers: []KV{{"A", "{{ .Signature }}"}}}, "sign", "unknown hash"},
		{Spec{Secret: secret, Headers: []KV{{"A", "{{ unb64 .Secret }}"}}}, "headers.A", "not base64"},
		{Spec{Secret: secret, Headers: []KV{{"A", "{{ jwt \"ES256\" .Secret (dict) }}"}}}, "headers.A", "not PEM"},
		{Spec{Secret: secret, Headers: []KV{{"A", "{{ nosuch .Secret }}"}}}, "headers.A", "function \"nosuch\" not defined"},
		{Spec{Secret: secret, Headers: []KV{{"A", "{{ .Vars.missing }}"}}}, "headers.A", "missing"},
		{Spec{Secret: secret, Headers: []KV{{"A", "{{ .Secrets }}"}}}, "headers.A", "Secrets"},
		{Spec{Secret: secret, Params: "form", Headers: []KV{{"A", "x"}}}, "params", "want query or body"},
		{Spec{Secret: secret, Timestamp: "ns", Headers: []KV{{"A", "x"}}}, "timestamp", "want s, ms"},
		{Spec{Secret: secret, Headers: []KV{{"A", "{{ eip191 .Secret .Timestamp }}"}}}, "headers.A", "not 32 bytes"},
		{Spec{Secret: "0x" + strings.Repeat("00", 32), Headers: []KV{{"A", "{{ eip191 .Secret .Timestamp }}"}}}, "headers.A", "not a secp256k1 private key"},
		{Spec{Secret: strings.Repeat("ff", 32), Headers: []KV{{"A", "{{ eip191 .Secret .Timestamp }}"}}}, "headers.A", "not a secp256k1 private key"},
		{Spec{Secret: secret, Sign: "{{ .Body }}", Headers: []KV{{"A", "{{ .Key }}"}}}, "sign", "the signature goes nowhere"},
		{Spec{Secret: secret, Query: []KV{{"sig", "{{ .Signature }}"}}}, "sign", "is required"},
		// A secret given where an algorithm goes (arguments swapped) is
		// not quoted back in the function's error.
		{Spec{Secret: secret, Headers: []KV{{"A", "{{ hash .Secret .Body }}"}}}, "headers.A", "unknown hash"},
		{Spec{Secret: secret, Headers: []KV{{"A", "{{ hmac .Secret \"sha256\" .Body }}"}}}, "headers.A", "unknown hash"},
		{Spec{Secret: secret, Headers: []KV{{"A", "{{ rsa .Secret \"k\" .Body }}"}}}, "headers.A", "unknown hash"},
		{Spec{Secret: secret, Headers: []KV{{"A", "{{ jwt .Secret \"k\" (dict) }}"}}}, "headers.A", "unknown algorithm"},
	} {
		tc.spec.Type = Templated
		err := tc.spec.Check()
		var ke *KeyError
		if err == nil || !errors.As(err, &ke) || ke.Key != tc.key || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error %v, want key %s and %q", tc.key, err, tc.key, tc.want)
		}
	}
}

// An endpoint's own parameter values and body may be templates too (a
// time window, a wallet in a JSON body); what is signed is the rendering.
func TestTemplateEndpointParamsAndBody(t *testing.T) {
	q := url.Values{"end": {"{{ .Millis }}"}, "start": {"{{ add .Millis -3600000 }}"}, "x": {"{a}"}, "cursor": {"{{ .Secret }}"}}
	req := applyTemplate(t, Spec{Key: "0xabc", Secret: "sec", Inline: []string{"{{ .Millis }}", "{{ add .Millis -3600000 }}", `{"wallet":"{{ .Key }}"}`},
		Sign:    `{{ hmac "sha256" .Secret (print .PathQuery .Body) | hex }}`,
		Headers: []KV{{"S", "{{ .Signature }}"}}},
		"POST", "https://v.example/private/get?"+q.Encode(), `{"wallet":"{{ .Key }}"}`)
	body, _ := io.ReadAll(req.Body)
	// cursor came from the venue (not in Inline): sent as it is.
	wantQuery := "cursor=%7B%7B+.Secret+%7D%7D&end=1795600800123&start=1795597200123&x=%7Ba%7D"
	if req.URL.RawQuery != wantQuery || string(body) != `{"wallet":"0xabc"}` {
		t.Fatalf("query %q body %q, want %q and the wallet", req.URL.RawQuery, body, wantQuery)
	}
	if got, want := req.Header.Get("S"), hex.EncodeToString(mac(sha256.New, []byte("sec"), []byte("/private/get?"+wantQuery+`{"wallet":"0xabc"}`))); got != want {
		t.Errorf("signature %s, want %s", got, want)
	}
}

// Whatever the template, building the signer (its dry run included) never
// panics, and an error never quotes a secret the template text lacks.
func FuzzTemplateSigner(f *testing.F) {
	for _, s := range []string{
		`{{ hmac "sha256" .Secret .Query | hex }}`, `{{ unb64 .Secret }}`, `{{ jwt "ES256" .Secret (dict "a" 1) }}`,
		`{{ eip191 .Secret .Timestamp | hex }}`, `{{ printf "%d" .Secret }}`, `{{ index .Vars "x" }}`, `{{ add .Secret 1 }}`,
		`{{ form .Secret }}`, `{{ ed25519 .Passphrase .Body }}`, `{{ rsa "sha256" .Secret .Body }}`, `{{ json .Vars }}`, `{{`,
		`{{ hmac .Secret "sha256" .Body }}`, `{{ jwt .Passphrase "k" (dict) }}`,
	} {
		f.Add(s)
	}
	const secret, pass, v = "S3CR3T-fuzz-value", "P4SS-fuzz-value", "V4R-fuzz-value"
	f.Fuzz(func(t *testing.T, text string) {
		s := Spec{Type: Templated, Key: "k", Secret: secret, Passphrase: pass, Vars: []KV{{"x", v}},
			Sign: text, Headers: []KV{{"A", "{{ .Signature }}"}, {"B", text}}}
		err := s.Check()
		if err == nil {
			return
		}
		for _, sec := range []string{secret, pass, v} {
			if strings.Contains(err.Error(), sec) && !strings.Contains(text, sec) {
				t.Fatalf("%q: the error quotes a secret: %v", text, err)
			}
		}
	})
}
