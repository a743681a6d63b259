package testenv

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to a server, so a test can break them at a
// known point: Cut closes every open connection, and a trigger set with
// AfterUpstream runs once the clients have sent that many bytes (the copy
// waits for it, so nothing more reaches the server until it returns).
type Proxy struct {
	ln net.Listener

	mu      sync.Mutex
	conns   []net.Conn
	up      int64 // bytes forwarded client -> server, all connections
	trigger int64
	fn      func()
}

// NewProxy listens on a free loopback port and forwards to upstream
// (host:port) until the test ends.
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln}
	t.Cleanup(func() { ln.Close(); p.Cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { p.copyUp(u, c); u.Close() }()
			go func() { copyAll(c, u); c.Close() }()
		}
	}()
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every open connection and returns how many there were.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns) / 2
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	return n
}

// AfterUpstream runs fn once, as soon as the clients have sent n bytes in
// all (counted from now on, across connections), before those bytes are
// forwarded.
func (p *Proxy) AfterUpstream(n int64, fn func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.trigger, p.fn = p.up+n, fn
}

// Upstream is the number of bytes the clients have sent so far.
func (p *Proxy) Upstream() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.up
}

func (p *Proxy) copyUp(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			p.up += int64(n)
			var fn func()
			if p.fn != nil && p.up >= p.trigger {
				fn, p.fn = p.fn, nil
			}
			p.mu.Unlock()
			if fn != nil {
				fn()
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func copyAll(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
