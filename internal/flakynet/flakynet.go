// Package flakynet is a TCP proxy for tests whose network misbehaves on demand: it cuts its connections (the
// peer sees them end), or freezes them (the bytes stop flowing but nobody is told, as with a laptop that
// slept or a network that dropped off), while new connections go through.
package flakynet

import (
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Proxy forwards the connections it accepts to a target address.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   []*pair
	upgrade int // connections whose first request asked for a websocket
}

// pair is one proxied connection: client side and target side.
type pair struct {
	client, target net.Conn

	mu     sync.Mutex
	frozen bool
}

// New starts a proxy on a loopback port in front of targetURL's host; it stops with the test.
func New(t testing.TB, targetURL string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(targetURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: u.Host}
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.Cut() })
	return p
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		pr := &pair{client: c, target: up}
		p.mu.Lock()
		p.conns = append(p.conns, pr)
		p.mu.Unlock()
		go p.pipe(pr, c, up, true)
		go p.pipe(pr, up, c, false)
	}
}

// pipe copies from src to dst until either ends, dropping what arrives while the pair is frozen.
func (p *Proxy) pipe(pr *pair, src, dst net.Conn, fromClient bool) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	first := fromClient
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if first {
				first = false
				if strings.Contains(strings.ToLower(string(buf[:n])), "upgrade: websocket") {
					p.mu.Lock()
					p.upgrade++
					p.mu.Unlock()
				}
			}
			pr.mu.Lock()
			frozen := pr.frozen
			pr.mu.Unlock()
			if !frozen {
				if _, err := dst.Write(buf[:n]); err != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// Addr is the proxy's host:port, for URLs of other schemes.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is the proxy's base URL.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Cut drops every open connection; new ones are accepted again.
func (p *Proxy) Cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, pr := range conns {
		pr.client.Close()
		pr.target.Close()
	}
}

// Stop closes the listener and every open connection: the port refuses connections from then on.
func (p *Proxy) Stop() {
	p.ln.Close()
	p.Cut()
}

// Freeze silently stops every open connection: what either side sends is dropped, and neither is told.
// New connections go through.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range p.conns {
		pr.mu.Lock()
		pr.frozen = true
		pr.mu.Unlock()
	}
}

// Websockets is how many connections asked for a websocket upgrade so far.
func (p *Proxy) Websockets() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.upgrade
}
