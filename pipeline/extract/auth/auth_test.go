package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseTemplate(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{"{timestamp}\n{nonce}\n", "T\nN\n", ""},
		{"id={key},sig={signature}", "id=K,sig=S", ""},
		{"{{literal}} {key}", "{literal} K", ""},
		{"plain", "plain", ""},
		{"{when}", "", "unknown placeholder {when}"},
		{"{key", "", "not closed"},
		{"key}", "", "closes nothing"},
	} {
		tpl, err := ParseTemplate(tc.in, Placeholders...)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if got := tpl.Render(map[string]string{"timestamp": "T", "nonce": "N", "key": "K", "signature": "S"}); got != tc.want {
			t.Errorf("%q renders %q, want %q", tc.in, got, tc.want)
		}
	}
}

func sign(secret, text string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(text))
	return m.Sum(nil)
}

// The signer against the venues' documented layouts, computed here by hand.
func TestHMACLayouts(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 123e6, time.UTC)
	ms := strconv.FormatInt(now.UnixMilli(), 10)
	env := Env{Base: &url.URL{Scheme: "https", Host: "v.example"}, Now: func() time.Time { return now }, Nonce: func() string { return "n0nce" }}
	for _, tc := range []struct {
		name   string
		spec   Spec
		method string
		url    string
		body   string
		check  func(t *testing.T, req *http.Request)
	}{
		{"deri-hmac", Spec{Type: HMAC, Key: "id1", Secret: "sec",
			Sign:    "{timestamp}\n{nonce}\n{method}\n{path_query}\n{body}\n",
			Headers: []KV{{"Authorization", "deri-hmac-sha256 id={key},ts={timestamp},sig={signature},nonce={nonce}"}}},
			"POST", "https://v.example/api/v2/private/get_positions?currency=BTC", `{"a":1}`,
			func(t *testing.T, req *http.Request) {
				sig := hex.EncodeToString(sign("sec", ms+"\nn0nce\nPOST\n/api/v2/private/get_positions?currency=BTC\n{\"a\":1}\n"))
				want := "deri-hmac-sha256 id=id1,ts=" + ms + ",sig=" + sig + ",nonce=n0nce"
				if got := req.Header.Get("Authorization"); got != want {
					t.Errorf("Authorization %q, want %q", got, want)
				}
			}},
		{"query-signature", Spec{Type: HMAC, Key: "k", Secret: "sec", Sign: "{query}",
			Headers: []KV{{"X-MBX-APIKEY", "{key}"}}, Query: []KV{{"signature", "{signature}"}, {"timestamp", "{timestamp}"}}},
			"GET", "https://v.example/eapi/v1/account?b=2&a=1", "",
			func(t *testing.T, req *http.Request) {
				signed := "a=1&b=2&timestamp=" + ms
				want := signed + "&signature=" + hex.EncodeToString(sign("sec", signed))
				if req.URL.RawQuery != want || req.Header.Get("X-MBX-APIKEY") != "k" {
					t.Errorf("query %q, want %q", req.URL.RawQuery, want)
				}
			}},
		{"base64-header", Spec{Type: HMAC, Key: "k", Secret: "sec", Encoding: "base64", Timestamp: "iso",
			Sign: "{timestamp}{method}{path_query}{body}", Headers: []KV{{"OK-ACCESS-SIGN", "{signature}"}, {"OK-ACCESS-TIMESTAMP", "{timestamp}"}}},
			"GET", "https://v.example/api/v5/account/balance?ccy=BTC", "",
			func(t *testing.T, req *http.Request) {
				want := base64.StdEncoding.EncodeToString(sign("sec", "2026-11-25T10:00:00.123ZGET/api/v5/account/balance?ccy=BTC"))
				if req.Header.Get("OK-ACCESS-SIGN") != want || req.Header.Get("OK-ACCESS-TIMESTAMP") != "2026-11-25T10:00:00.123Z" {
					t.Errorf("headers %v, want sign %q", req.Header, want)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := New(tc.spec, env)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(tc.method, tc.url, strings.NewReader(tc.body))
			var body []byte
			if tc.body != "" {
				body = []byte(tc.body)
			}
			if err := a.Apply(context.Background(), req, body); err != nil {
				t.Fatal(err)
			}
			tc.check(t, req)
		})
	}
}

// Check names the key, never a value.
func TestCheckNamesNoSecret(t *testing.T) {
	for _, s := range []Spec{
		{Type: HMAC, Key: "kkkk-secret", Secret: "ssss-secret", Sign: "{bad}", Headers: []KV{{"A", "{signature}"}}},
		{Type: HMAC, Key: "kkkk-secret", Secret: "ssss-secret", Sign: "{key}"},
		{Type: Basic, Password: "ssss-secret"},
		{Type: "nope", Token: "ssss-secret"},
	} {
		err := s.Check()
		if err == nil || strings.Contains(err.Error(), "kkkk-secret") || strings.Contains(err.Error(), "ssss-secret") {
			t.Errorf("%+v: error %v", s.Type, err)
		}
	}
}

func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"{timestamp}\n{nonce}\n{method}\n{path_query}\n{body}\n", "{{x}}", "{", "}", "a{key}b{signature}", "{}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tpl, err := ParseTemplate(s, Placeholders...)
		if err != nil {
			return
		}
		// Every placeholder the template uses, and only those, shows up
		// in the rendering where its value is a unique marker. The marker
		// opens and closes with different bytes the template lacks: with
		// one byte for both, "{method}query{path_query}" rendered the
		// marker of "query" across its neighbours' (testdata seed).
		vars := map[string]string{}
		for _, p := range Placeholders {
			vars[p] = "\x01" + p + "\x02"
		}
		out := tpl.Render(vars)
		for _, p := range Placeholders {
			if tpl.Uses(p) != strings.Contains(out, vars[p]) && !strings.ContainsAny(s, "\x01\x02") {
				t.Fatalf("%q: Uses(%s)=%v but rendering %q", s, p, tpl.Uses(p), out)
			}
		}
		// Without values the rendering is the literal text, braces unescaped.
		lit := tpl.Render(nil)
		if len(lit) > len(s) {
			t.Fatalf("%q: literal rendering %q is longer than the template", s, lit)
		}
	})
}
