package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"
)

// health watches the local services listen forwards to, so that a service that stopped is said at once
// rather than discovered from failed deliveries. The check is a TCP connect to the forward URL's host and
// port, not an HTTP request: it never reaches the service's handlers (no log line, no side effect, no 404 for
// a path it does not serve), and a listening port is what "up" means for a forward.
type health struct {
	out   *output
	every time.Duration // between checks while a service is up; a third of it while it is down

	mu     sync.Mutex
	byAddr map[string]*localCheck
	order  []*localCheck
}

// dialTimeout bounds one check.
const dialTimeout = 3 * time.Second

func newHealth(out *output, every time.Duration) *health {
	return &health{out: out, every: every, byAddr: map[string]*localCheck{}}
}

// localCheck is the state of one local address (host:port), shared by the forwards to it.
type localCheck struct {
	h    *health
	addr string
	poke chan struct{}

	mu    sync.Mutex
	urls  []string
	known bool
	up    bool
}

// watch returns the check of forward's address, creating it.
func (h *health) watch(forward string) *localCheck {
	addr := hostPort(forward)
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.byAddr[addr]
	if c == nil {
		c = &localCheck{h: h, addr: addr, poke: make(chan struct{}, 1)}
		h.byAddr[addr] = c
		h.order = append(h.order, c)
	}
	c.urls = append(c.urls, forward)
	return c
}

// hostPort is the address a forward URL connects to.
func hostPort(forward string) string {
	u, err := url.Parse(forward)
	if err != nil {
		return forward
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// run checks every address until ctx ends.
func (h *health) run(ctx context.Context) {
	h.mu.Lock()
	checks := append([]*localCheck(nil), h.order...)
	h.mu.Unlock()
	for _, c := range checks {
		go c.loop(ctx)
	}
}

// checkNow makes every check run at once (after the computer slept, say).
func (h *health) checkNow() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.order {
		c.wake()
	}
}

func (c *localCheck) wake() {
	select {
	case c.poke <- struct{}{}:
	default:
	}
}

func (c *localCheck) loop(ctx context.Context) {
	d := net.Dialer{Timeout: min(dialTimeout, c.h.every)}
	for {
		conn, err := d.DialContext(ctx, "tcp", c.addr)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			conn.Close()
			c.set(true, nil)
		} else {
			c.set(false, errors.New(localError(err)))
		}
		c.mu.Lock()
		wait := c.h.every
		if !c.up {
			wait = c.h.every / 3
		}
		c.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-c.poke:
			t.Stop()
		case <-t.C:
		}
	}
}

// observe learns from a delivery: a refused connection means down, any HTTP answer up.
func (c *localCheck) observe(o outcome) {
	switch {
	case c == nil:
	case unreachable(o):
		c.set(false, errors.New(o.ErrorMessage))
		c.wake() // check again on the short interval
	case o.HTTPStatus != 0:
		c.set(true, nil)
	}
}

// localEvent says a local service stopped accepting connections (local_down) or does again (local_up).
type localEvent struct {
	eventHead
	Address string   `json:"address"`
	URLs    []string `json:"urls"`
	Error   string   `json:"error,omitempty"`
}

// set records the state and tells a change: down whenever it goes down (also at the first check), up only
// when it comes back.
func (c *localCheck) set(up bool, why error) {
	c.mu.Lock()
	changed := !c.known || c.up != up
	wasKnown := c.known
	c.known, c.up = true, up
	urls := append([]string(nil), c.urls...)
	c.mu.Unlock()
	if !changed || (up && !wasKnown) {
		return
	}
	out := c.h.out
	now := out.now()
	if up {
		out.emit(now, localEvent{eventHead: head("local_up", now), Address: c.addr, URLs: urls},
			out.paint(green, fmt.Sprintf("local service %s is back", c.addr)))
		return
	}
	out.emit(now, localEvent{eventHead: head("local_down", now), Address: c.addr, URLs: urls, Error: why.Error()},
		out.paint(yellow, fmt.Sprintf("local service %s is down (%v): deliveries to it fail until it is back; checking every %s",
			c.addr, why, c.h.every/3)))
}
