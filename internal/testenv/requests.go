package testenv

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// RequestCounter is an HTTP reverse proxy in front of a server (versitygw)
// that counts the requests it forwards by method: what a command costs a
// bucket in requests, which a test can bound. The Host header passes
// through unchanged, so S3 signatures made for the proxy's address hold.
type RequestCounter struct {
	ln  net.Listener
	srv *http.Server

	mu     sync.Mutex
	counts map[string]int64
	log    func(method, uri string)
}

// NewRequestCounter listens on a free loopback port and forwards every
// request to upstream (http://host:port) until Close.
func NewRequestCounter(upstream string) (*RequestCounter, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &RequestCounter{ln: ln, counts: map[string]int64{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	c.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.counts[r.Method]++
		log := c.log
		c.mu.Unlock()
		if log != nil {
			log(r.Method, r.URL.RequestURI())
		}
		rp.ServeHTTP(w, r)
	})}
	go c.srv.Serve(ln)
	return c, nil
}

// Endpoint is the proxy's http:// URL.
func (c *RequestCounter) Endpoint() string { return "http://" + c.ln.Addr().String() }

// URL is the s3:// data directory URL for bucket/prefix through the proxy.
func (c *RequestCounter) URL(bucket, prefix string) string {
	return fmt.Sprintf("s3://%s/%s?endpoint=%s&region=%s", bucket, prefix, c.Endpoint(), S3Region)
}

// Reset returns the requests forwarded since the last Reset (or the
// start), by method, and starts counting afresh.
func (c *RequestCounter) Reset() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.counts
	c.counts = map[string]int64{}
	return n
}

// Log calls fn with every request's method and URI (path and query)
// from now on; nil stops it.
func (c *RequestCounter) Log(fn func(method, uri string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = fn
}

// StartVersityGWCounted is StartVersityGW with the root account's keys
// set (SetCredentials) and a RequestCounter in front of it, closed when
// the test ends: data directories from the counter's URL send it their
// requests.
func StartVersityGWCounted(t testing.TB, buckets ...string) (*VersityGW, *RequestCounter) {
	t.Helper()
	g := StartVersityGW(t, buckets...)
	g.SetCredentials(t)
	c, err := NewRequestCounter(g.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return g, c
}

// Close stops the proxy.
func (c *RequestCounter) Close() error { return c.srv.Close() }
