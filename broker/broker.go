// Package broker makes the attempts of broker recipients: it publishes a delivery to RabbitMQ (publisher
// confirms), NATS JetStream (publish acknowledgement), a Redis stream (XADD) or MQTT (QoS 1, PUBACK), with the
// same outcome an HTTP attempt has — success once the broker confirms, a failed attempt with its kind otherwise.
//
// Connections are pooled per destination (method, URL with credentials, trust), shared by every recipient
// that names the same one, opened on first use and again after they break. Opening one holds only the
// attempts to that destination, each within its own timeout; after a failed connect, attempts to it fail at
// once, with the reason, until a short back-off has passed — so a broker that is down costs its own
// recipients' attempts and no one else's workers. Every connection goes through the egress guard.
package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/destination"
	"github.com/adal-relay/adal/egress"
)

// Message is what a broker attempt publishes.
type Message struct {
	// ID names the message, the same on every attempt of one delivery (AMQP message-id, Nats-Msg-Id, MQTT
	// correlation data, Redis field id).
	ID string
	// Header is what an HTTP recipient would get as headers: the received ones, Adal's and the signature.
	Header http.Header
	// ContentType is the received Content-Type, also set as the protocol's own content type where it has one.
	ContentType string
	Body        []byte
}

// client is one connection to one broker destination, safe for concurrent publishes.
type client interface {
	// publish sends m and waits for the broker's confirmation, returning it as a short answer for the attempt
	// record. A *RefusedError says the broker answered and did not take m; other errors are transport ones.
	publish(ctx context.Context, t destination.Target, m Message) (answer string, err error)
	// alive reports whether the connection can take another publish; a dead one is closed and opened again.
	alive() bool
	close()
}

// connector opens a client for t. dial connects through the egress guard; tlsConf is nil for plain URLs.
type connector func(ctx context.Context, t destination.Target, dial DialFunc, tlsConf *tls.Config, name string) (client, error)

// DialFunc opens a TCP connection.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// RefusedError is a broker's refusal of a message or of the connection: the attempt fails as BROKER_REFUSED.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

func refused(format string, args ...any) error {
	return &RefusedError{Reason: fmt.Sprintf(format, args...)}
}

// Config configures a Publisher.
type Config struct {
	// Egress is the policy every connection to a broker is checked against, as HTTP recipients' are.
	Egress egress.Policy
	// Name prefixes the client names brokers see (MQTT client ids, NATS and RabbitMQ connection names).
	Name string
	// Idle closes a connection unused for this long. Default 5 minutes.
	Idle time.Duration
	Now  func() time.Time
}

// Publisher makes broker attempts over pooled connections. It is safe for concurrent use; Close closes every
// connection.
type Publisher struct {
	cfg        Config
	dial       DialFunc
	connectors map[destination.Method]connector

	mu       sync.Mutex
	pool     map[string]*entry
	lastReap time.Time
	seq      int
	closed   bool
}

// entry is one destination's connection, or the reason the last try to open it failed.
type entry struct {
	connecting chan struct{} // a token held while opening, so that one attempt opens for all

	mu       sync.Mutex
	c        client
	err      error     // why the last open failed
	retryAt  time.Time // attempts before it fail with err at once
	backoff  time.Duration
	lastUsed time.Time
}

// Back-off after a failed connect: from the first to the longest wait, doubling.
const (
	firstBackoff = 250 * time.Millisecond
	maxBackoff   = 5 * time.Second
)

// NewPublisher returns a publisher with no connection open.
func NewPublisher(cfg Config) *Publisher {
	if cfg.Idle <= 0 {
		cfg.Idle = 5 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Name == "" {
		cfg.Name = "adal"
	}
	return &Publisher{
		cfg:  cfg,
		dial: egress.NewDialer(cfg.Egress).DialContext,
		connectors: map[destination.Method]connector{
			destination.RabbitMQ:    connectAMQP,
			destination.NATS:        connectNATS,
			destination.RedisStream: connectRedis,
			destination.MQTT:        connectMQTT,
		},
		pool: map[string]*entry{},
	}
}

// Close closes every pooled connection; publishes after it fail.
func (p *Publisher) Close() {
	p.mu.Lock()
	pool := p.pool
	p.pool, p.closed = map[string]*entry{}, true
	p.mu.Unlock()
	for _, e := range pool {
		e.mu.Lock()
		if e.c != nil {
			e.c.close()
			e.c = nil
		}
		e.mu.Unlock()
	}
}

// Send makes one attempt to out.Destination and reports its outcome; like delivery.HTTPSender.Send it never
// fails otherwise. Cancelling ctx interrupts the attempt.
func (p *Publisher) Send(ctx context.Context, out delivery.Outgoing) delivery.Outcome {
	timeout := out.Timeout
	if timeout <= 0 {
		timeout = delivery.DefaultTimeout
	}
	o := delivery.Outcome{StartedAt: p.cfg.Now()}
	actx, cancel := context.WithTimeoutCause(ctx, timeout, errAttemptTimeout)
	defer cancel()

	t := *out.Destination
	h := out.Headers(o.StartedAt)
	h.Set("X-Adal-Method", out.Method)
	h.Set("X-Adal-Path", out.Path)
	m := Message{ID: out.MessageID, Header: h, ContentType: h.Get("Content-Type"), Body: out.Body}

	answer, err := p.publish(actx, t, m)
	o.FinishedAt = p.cfg.Now()
	if err != nil {
		o.ErrorKind, o.ErrorMessage = classify(ctx, actx, err, t, timeout)
		return o
	}
	o.Answer = answer
	return o
}

var errAttemptTimeout = errors.New("attempt timeout")

// publish takes the destination's connection, opening it if need be, and publishes m on it. A connection that
// a transport error left unusable is dropped, so the next attempt opens a new one.
func (p *Publisher) publish(ctx context.Context, t destination.Target, m Message) (string, error) {
	e, c, err := p.client(ctx, t)
	if err != nil {
		return "", err
	}
	answer, err := c.publish(ctx, t, m)
	if err != nil && !c.alive() {
		e.mu.Lock()
		if e.c == c {
			e.c = nil
		}
		e.mu.Unlock()
		c.close()
	}
	return answer, err
}

// client returns t's open connection, or opens one: one attempt opens while the others to t wait for it,
// each no longer than its own context allows. After a failed open, attempts fail with its error at once until
// the back-off has passed.
func (p *Publisher) client(ctx context.Context, t destination.Target) (*entry, client, error) {
	e, err := p.entry(t.Key())
	if err != nil {
		return nil, nil, err
	}
	for {
		if c, err := e.current(p.cfg.Now()); c != nil || err != nil {
			return e, c, err
		}
		select {
		case e.connecting <- struct{}{}:
		case <-ctx.Done():
			return nil, nil, context.Cause(ctx)
		}
		if c, err := e.current(p.cfg.Now()); c != nil || err != nil {
			<-e.connecting
			return e, c, err
		}
		c, err := p.open(ctx, t)
		now := p.cfg.Now()
		e.mu.Lock()
		if err != nil && ctx.Err() == nil && !timedOut(err) {
			// Only a failure of the broker's own counts for the back-off: an attempt that ran out of time
			// while connecting (the dialer may say so a moment before the context does) says nothing the
			// next one should not find out for itself.
			e.backoff = min(max(2*e.backoff, firstBackoff), maxBackoff)
			e.err, e.retryAt = err, now.Add(e.backoff)
		}
		if err == nil {
			e.c, e.err, e.backoff, e.lastUsed = c, nil, 0, now
		}
		e.mu.Unlock()
		<-e.connecting
		if err != nil {
			return nil, nil, err
		}
		return e, c, nil
	}
}

// current is e's live connection, or the error of its last open while the back-off lasts; neither when it
// must be opened.
func (e *entry) current(now time.Time) (client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.c != nil {
		if e.c.alive() {
			e.lastUsed = now
			return e.c, nil
		}
		e.c.close()
		e.c = nil
	}
	if e.err != nil && now.Before(e.retryAt) {
		return nil, &backoffError{err: e.err, retryIn: e.retryAt.Sub(now)}
	}
	return nil, nil
}

// backoffError is the failure of an attempt made during the back-off: the last open's error, and when the
// next open will be tried.
type backoffError struct {
	err     error
	retryIn time.Duration
}

func (e *backoffError) Error() string {
	return fmt.Sprintf("%s (connecting again in %s)", e.err.Error(), e.retryIn.Round(time.Millisecond))
}

func (e *backoffError) Unwrap() error { return e.err }

// entry is the pool's entry for key, made on first use. Entries whose connection has been idle for
// Config.Idle are closed and dropped, at most once a minute, on the way.
func (p *Publisher) entry(key string) (*entry, error) {
	now := p.cfg.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("the publisher is shut down")
	}
	if now.Sub(p.lastReap) > time.Minute {
		p.lastReap = now
		for k, e := range p.pool {
			if k != key && e.idle(now, p.cfg.Idle) {
				delete(p.pool, k)
			}
		}
	}
	e, ok := p.pool[key]
	if !ok {
		e = &entry{connecting: make(chan struct{}, 1), lastUsed: now}
		p.pool[key] = e
	}
	return e, nil
}

// idle closes e's connection and reports true when e has not been used for longer than idle and nobody is
// opening it.
func (e *entry) idle(now time.Time, idle time.Duration) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if now.Sub(e.lastUsed) <= idle || len(e.connecting) > 0 {
		return false
	}
	if e.c != nil {
		go e.c.close()
		e.c = nil
	}
	return true
}

// open connects to t through the egress guard, with TLS when its URL asks.
func (p *Publisher) open(ctx context.Context, t destination.Target) (client, error) {
	connect, ok := p.connectors[t.Method]
	if !ok {
		return nil, fmt.Errorf("no publisher for method %s", t.Method)
	}
	var tlsConf *tls.Config
	if t.TLS() {
		pool, err := t.Settings.CertPool()
		if err != nil {
			return nil, err
		}
		addr, err := t.Address()
		if err != nil {
			return nil, err
		}
		host, _, _ := net.SplitHostPort(addr)
		tlsConf = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: host}
	}
	p.mu.Lock()
	p.seq++
	name := fmt.Sprintf("%s-%d", p.cfg.Name, p.seq)
	p.mu.Unlock()
	return connect(ctx, t, p.dial, tlsConf, name)
}

// classify turns a failed publish into an attempt's kind and message; messages name the broker's host, never
// its URL, which carries credentials.
func classify(parent, attempt context.Context, err error, t destination.Target, timeout time.Duration) (delivery.ErrorKind, string) {
	host, _ := t.Address()
	var refusal *RefusedError
	var forbidden *egress.ForbiddenTargetError
	var dnsErr *net.DNSError
	switch {
	case errors.Is(parent.Err(), context.Canceled):
		return delivery.ErrInterrupted, "attempt interrupted before it completed: " + context.Cause(parent).Error()
	case errors.As(err, &refusal):
		var wait *backoffError
		if errors.As(err, &wait) {
			return delivery.ErrBrokerRefused, fmt.Sprintf("%s (connecting again in %s)", refusal.Reason, wait.retryIn.Round(time.Millisecond))
		}
		return delivery.ErrBrokerRefused, refusal.Reason
	case errors.As(err, &forbidden):
		return delivery.ErrConnection, fmt.Sprintf("refused to connect to %s: %s", host, forbidden.Error())
	case attempt.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return delivery.ErrTimeout, fmt.Sprintf("no confirmation from %s within %s", host, timeout)
	case errors.As(err, &dnsErr):
		return delivery.ErrDNS, fmt.Sprintf("could not resolve host %q: %s", dnsErr.Name, dnsErr.Err)
	case delivery.IsTLS(err):
		return delivery.ErrTLS, fmt.Sprintf("TLS handshake with %s failed: %s", host, err.Error())
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return delivery.ErrTimeout, fmt.Sprintf("no confirmation from %s within %s", host, timeout)
	}
	return delivery.ErrConnection, fmt.Sprintf("%s: %s", host, strings.TrimSpace(err.Error()))
}

// timedOut reports whether err is a deadline passing rather than an answer.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// headerValue joins a header's values as one string, as protocols with single-valued headers carry them.
func headerValue(values []string) string { return strings.Join(values, ", ") }

// HTTP makes an HTTP attempt (delivery.HTTPSender).
type HTTP interface {
	Send(ctx context.Context, out delivery.Outgoing) delivery.Outcome
}

// Sender makes each attempt the way its recipient delivers: a broker recipient's through the Publisher, any
// other over HTTP.
type Sender struct {
	HTTP    HTTP
	Brokers *Publisher
}

// Send makes one attempt.
func (s Sender) Send(ctx context.Context, out delivery.Outgoing) delivery.Outcome {
	if out.Destination != nil {
		return s.Brokers.Send(ctx, out)
	}
	return s.HTTP.Send(ctx, out)
}
