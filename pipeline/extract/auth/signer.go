package auth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"text/template"
	"time"
)

// KeyError is a mistake in one key of a Spec (e.g. "headers.API-Sign"),
// so that a config file can point at its line.
type KeyError struct {
	Key string
	Err error
}

func (e *KeyError) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *KeyError) Unwrap() error { return e.Err }

// SignData is what the templates of type template see. Secrets are
// fields like any other: a template decides where they go, and Apply's
// errors never quote a rendered value.
type SignData struct {
	Key, Secret, Passphrase string
	Vars                    map[string]string // the vars: key (secrets)
	Timestamp               string            // in the unit of timestamp:
	Time                    time.Time
	Unix, Millis            int64
	Nonce                   string // 16 random hex characters
	Method                  string // GET, POST
	Host                    string // the API's host (and port)
	Path                    string // the escaped path
	// Params is the endpoint's own query string (URL-encoded, sorted);
	// Query the query as sent: the auth's entries first, then Params
	// (unless params: body).
	Params, Query string
	PathQuery     string // Path, and ?Query when there is one
	Body          string // the body as sent (after the body: template)
	Signature     string // the sign: template's output
}

// templateSigner renders each part of a request from Go templates
// (text/template with Funcs): the endpoint's own parameters and body when
// they are templates, the auth's query entries, its body, the signature,
// then the headers and the query entries that use .Signature.
type templateSigner struct {
	spec        Spec
	env         Env
	stamp       func(time.Time) string
	paramsBody  bool
	body, sign  *template.Template
	headers     []ttkv
	before      []ttkv // query entries ahead of the endpoint's parameters
	after       []ttkv // query entries that carry .Signature, appended
	contentType string
	inline      sync.Map // an endpoint's parameter or body template → *template.Template
}

type ttkv struct {
	name string
	t    *template.Template
}

func parseSignTemplate(name, text string) (*template.Template, error) {
	t, err := template.New(name).Funcs(Funcs).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, &KeyError{name, err}
	}
	return t, nil
}

func newTemplateSigner(s Spec, env Env) (*templateSigner, error) {
	ts := &templateSigner{spec: s, env: env, contentType: s.ContentType}
	var err error
	if ts.stamp, err = stamper(s.Timestamp); err != nil {
		return nil, &KeyError{"timestamp", errors.New(strings.TrimPrefix(err.Error(), "auth hmac: "))}
	}
	switch s.Params {
	case "", "query":
	case "body":
		ts.paramsBody = true
	default:
		return nil, &KeyError{"params", fmt.Errorf("%q: want query or body", s.Params)}
	}
	if s.Sign != "" {
		if ts.sign, err = parseSignTemplate("sign", s.Sign); err != nil {
			return nil, err
		}
	}
	if s.Body != "" {
		if ts.body, err = parseSignTemplate("body", s.Body); err != nil {
			return nil, err
		}
	}
	for _, kv := range s.Headers {
		t, err := parseSignTemplate("headers."+kv.Name, kv.Value)
		if err != nil {
			return nil, err
		}
		ts.headers = append(ts.headers, ttkv{kv.Name, t})
	}
	for _, kv := range s.Query {
		t, err := parseSignTemplate("query."+kv.Name, kv.Value)
		if err != nil {
			return nil, err
		}
		if strings.Contains(kv.Value, ".Signature") {
			ts.after = append(ts.after, ttkv{kv.Name, t})
		} else {
			ts.before = append(ts.before, ttkv{kv.Name, t})
		}
	}
	if len(ts.headers) == 0 && len(ts.after) == 0 && len(ts.before) == 0 {
		return nil, errors.New("auth template: the credentials go nowhere: give headers or query entries")
	}
	used := len(ts.after) > 0
	for _, kv := range s.Headers {
		used = used || strings.Contains(kv.Value, ".Signature")
	}
	switch {
	case s.Sign != "" && !used:
		return nil, &KeyError{"sign", errors.New("the signature goes nowhere: no header or query entry uses .Signature")}
	case s.Sign == "" && used:
		return nil, &KeyError{"sign", errors.New("is required: a header or query entry uses .Signature")}
	}
	// A dry run: a template that cannot render (a key that is not PEM, a
	// secret that is not base64, a function given the wrong arguments)
	// fails here, at config check, not at the first private request.
	req, _ := http.NewRequest(http.MethodPost, "http://venue.invalid/check?a=1", nil)
	if err := ts.Apply(context.Background(), req, []byte("{}")); err != nil {
		return nil, err
	}
	d := ts.data(req, nil)
	for _, text := range s.Inline {
		if _, err := ts.inlineRender("endpoint template", text, d); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

func render(t *template.Template, d *SignData) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, d); err != nil {
		return "", &KeyError{t.Name(), err}
	}
	return b.String(), nil
}

// data is what the templates see of req before any of them is rendered.
func (ts *templateSigner) data(req *http.Request, body []byte) *SignData {
	now := ts.env.Now()
	d := &SignData{
		Key: ts.spec.Key, Secret: ts.spec.Secret, Passphrase: ts.spec.Passphrase, Vars: map[string]string{},
		Timestamp: ts.stamp(now), Time: now, Unix: now.Unix(), Millis: now.UnixMilli(),
		Nonce: ts.env.Nonce(), Method: req.Method, Host: req.URL.Host, Path: req.URL.EscapedPath(),
		Params: req.URL.RawQuery, Body: string(body),
	}
	for _, kv := range ts.spec.Vars {
		d.Vars[kv.Name] = kv.Value
	}
	return d
}

func (ts *templateSigner) Apply(_ context.Context, req *http.Request, body []byte) error {
	d := ts.data(req, body)
	if err := ts.renderInline(req, d); err != nil {
		return err
	}
	if strings.Contains(d.Body, "{{") && contains(ts.spec.Inline, d.Body) {
		v, err := ts.inlineRender("endpoint body", d.Body, d)
		if err != nil {
			return err
		}
		d.Body = v
		setBody(req, v)
	}
	var q []string
	for _, kv := range ts.before {
		v, err := render(kv.t, d)
		if err != nil {
			return err
		}
		q = append(q, url.QueryEscape(kv.name)+"="+url.QueryEscape(v))
	}
	if d.Params != "" && !ts.paramsBody {
		q = append(q, d.Params)
	}
	req.URL.RawQuery = strings.Join(q, "&")
	d.Query = req.URL.RawQuery
	d.PathQuery = d.Path
	if d.Query != "" {
		d.PathQuery += "?" + d.Query
	}
	newBody := body != nil
	switch {
	case ts.body != nil:
		v, err := render(ts.body, d)
		if err != nil {
			return err
		}
		d.Body, newBody = v, true
	case ts.paramsBody:
		d.Body, newBody = d.Params, true
	}
	if newBody {
		setBody(req, d.Body)
		if ts.contentType != "" {
			req.Header.Set("Content-Type", ts.contentType)
		}
	}
	if ts.sign != nil {
		v, err := render(ts.sign, d)
		if err != nil {
			return err
		}
		d.Signature = v
	}
	for _, kv := range ts.headers {
		v, err := render(kv.t, d)
		if err != nil {
			return err
		}
		req.Header.Set(kv.name, v)
	}
	for _, kv := range ts.after {
		v, err := render(kv.t, d)
		if err != nil {
			return err
		}
		if req.URL.RawQuery != "" {
			req.URL.RawQuery += "&"
		}
		req.URL.RawQuery += url.QueryEscape(kv.name) + "=" + url.QueryEscape(v)
	}
	return nil
}

// renderInline renders the endpoint's own parameters that are templates
// (Spec.Inline), in place: the archive records them as configured.
func (ts *templateSigner) renderInline(req *http.Request, d *SignData) error {
	if !strings.Contains(d.Params, "%7B%7B") {
		return nil
	}
	parts := strings.Split(d.Params, "&")
	for i, kv := range parts {
		k, v, _ := strings.Cut(kv, "=")
		val, err := url.QueryUnescape(v)
		if err != nil || !strings.Contains(val, "{{") || !contains(ts.spec.Inline, val) {
			continue // a value the venue sent (a cursor) is never a template
		}
		name, _ := url.QueryUnescape(k)
		out, err := ts.inlineRender("params."+name, val, d)
		if err != nil {
			return err
		}
		parts[i] = k + "=" + url.QueryEscape(out)
	}
	d.Params = strings.Join(parts, "&")
	req.URL.RawQuery = d.Params
	return nil
}

func (ts *templateSigner) inlineRender(name, text string, d *SignData) (string, error) {
	t, ok := ts.inline.Load(text)
	if !ok {
		p, err := parseSignTemplate(name, text)
		if err != nil {
			return "", err
		}
		t, _ = ts.inline.LoadOrStore(text, p)
	}
	return render(t.(*template.Template), d)
}

func setBody(req *http.Request, b string) {
	req.ContentLength = int64(len(b))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(b)), nil }
	req.Body, _ = req.GetBody()
	if b == "" {
		req.Body = http.NoBody
	}
}
