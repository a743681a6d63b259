package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/optlake/optlake/pipeline/extract/dotpath"
)

// expiryMargin is how long before its expiry a token is replaced.
const expiryMargin = 30 * time.Second

// session logs in with one request, keeps the token it returns until
// shortly before expires_in, and logs in again after a 401 (Refresh).
type session struct {
	spec    Spec
	env     Env
	headers []tkv

	mu      sync.Mutex
	token   string
	expires time.Time // zero: no known expiry
}

func newSession(s Spec, env Env) (*session, error) {
	ss := &session{spec: s, env: env}
	hs := s.Headers
	if len(hs) == 0 {
		hs = []KV{{"Authorization", "Bearer {token}"}}
	}
	for _, kv := range hs {
		t, err := ParseTemplate(kv.Value, "token")
		if err != nil {
			return nil, fmt.Errorf("auth session: headers.%s: %w", kv.Name, err)
		}
		ss.headers = append(ss.headers, tkv{kv.Name, t})
	}
	if s.Login.Method != "" && s.Login.Method != http.MethodGet && s.Login.Method != http.MethodPost {
		return nil, fmt.Errorf("auth session: login.method %q: want GET or POST", s.Login.Method)
	}
	return ss, nil
}

func (s *session) Apply(ctx context.Context, req *http.Request, _ []byte) error {
	tok, err := s.current(ctx)
	if err != nil {
		return err
	}
	vars := map[string]string{"token": tok}
	for _, kv := range s.headers {
		req.Header.Set(kv.name, kv.t.Render(vars))
	}
	return nil
}

// Refresh forgets the token: the next Apply logs in again.
func (s *session) Refresh() {
	s.mu.Lock()
	s.token = ""
	s.mu.Unlock()
}

func (s *session) current(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != "" && (s.expires.IsZero() || s.env.Now().Before(s.expires.Add(-expiryMargin))) {
		return s.token, nil
	}
	tok, life, err := s.login(ctx)
	if err != nil {
		return "", err
	}
	s.token, s.expires = tok, time.Time{}
	if life > 0 {
		s.expires = s.env.Now().Add(life)
	}
	return tok, nil
}

func (s *session) login(ctx context.Context) (string, time.Duration, error) {
	u, err := resolve(s.env.Base, s.spec.Login.Path)
	if err != nil {
		return "", 0, fmt.Errorf("session login: %w", err)
	}
	if len(s.spec.Login.Query) > 0 {
		q := u.Query()
		for _, kv := range s.spec.Login.Query {
			q.Set(kv.Name, kv.Value)
		}
		u.RawQuery = q.Encode()
	}
	method := s.spec.Login.Method
	if method == "" {
		method = http.MethodPost
	}
	var body io.Reader
	if s.spec.Login.Body != "" {
		body = strings.NewReader(s.spec.Login.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return "", 0, fmt.Errorf("session login: build request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.env.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", 0, fmt.Errorf("session login: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", 0, fmt.Errorf("session login: read answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The answer is not quoted: a login answer may echo credentials.
		return "", 0, fmt.Errorf("session login: HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	var doc any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil {
		return "", 0, fmt.Errorf("session login: answer is not JSON")
	}
	v, ok := dotpath.Lookup(doc, s.spec.TokenPath)
	tok, isStr := v.(string)
	if !ok || !isStr || tok == "" {
		return "", 0, fmt.Errorf("session login: no token string at %q in the answer", s.spec.TokenPath)
	}
	var life time.Duration
	if s.spec.ExpiresPath != "" {
		if v, ok := dotpath.Lookup(doc, s.spec.ExpiresPath); ok {
			if f, err := strconv.ParseFloat(fmt.Sprint(v), 64); err == nil && f > 0 {
				life = time.Duration(f * float64(time.Second))
			}
		}
	}
	return tok, life, nil
}

// resolve makes p absolute against the API URL (p may be absolute itself,
// on the same host).
func resolve(base *url.URL, p string) (*url.URL, error) {
	ref, err := url.Parse(p)
	if err != nil {
		return nil, fmt.Errorf("path %q: %w", p, err)
	}
	if ref.IsAbs() {
		return ref, nil
	}
	u := *base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/" + strings.TrimPrefix(ref.Path, "/")
	u.RawQuery = ref.RawQuery
	return &u, nil
}

// oauth2CC is OAuth2 client credentials: golang.org/x/oauth2's token
// source, which reuses the token until shortly before it expires.
type oauth2CC struct {
	ts oauth2.TokenSource
}

func newOAuth2(s Spec, env Env) (*oauth2CC, error) {
	u, err := resolve(env.Base, s.TokenURL)
	if err != nil {
		return nil, fmt.Errorf("auth oauth2: token_url: %w", err)
	}
	cfg := &clientcredentials.Config{ClientID: s.ClientID, ClientSecret: s.ClientSecret, TokenURL: u.String(), Scopes: s.Scopes}
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, env.Client)
	ts := oauth2.ReuseTokenSourceWithExpiry(nil, cfg.TokenSource(ctx), expiryMargin)
	return &oauth2CC{ts: ts}, nil
}

func (o *oauth2CC) Apply(_ context.Context, req *http.Request, _ []byte) error {
	tok, err := o.ts.Token()
	if err != nil {
		// oauth2's errors may quote the token endpoint's answer: keep
		// only the kind of failure.
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil {
			return fmt.Errorf("oauth2 token: HTTP %d %s", re.Response.StatusCode, http.StatusText(re.Response.StatusCode))
		}
		return fmt.Errorf("oauth2 token: request failed")
	}
	tok.SetAuthHeader(req)
	return nil
}
