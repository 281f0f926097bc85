package broker_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adal-relay/adal/broker"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/destination"
	"github.com/adal-relay/adal/egress"
	"github.com/adal-relay/adal/webhook"
)

// The brokers these tests publish to, on this machine.
const (
	rabbitAddr = "127.0.0.1:5672"
	rabbitURL  = "amqp://guest:guest@" + rabbitAddr + "/"
	natsAddr   = "127.0.0.1:4222"
	natsURL    = "nats://" + natsAddr
)

// newLoopbackPublisher is a publisher allowed to reach the brokers on loopback, closed when t ends.
func newLoopbackPublisher(t *testing.T) *broker.Publisher {
	t.Helper()
	p := broker.NewPublisher(broker.Config{Egress: egress.Policy{AllowPrivate: true}, Name: "adal-test"})
	t.Cleanup(p.Close)
	return p
}

// signingKey signs the attempts of testOutgoing, so that tests can check the signature a consumer gets.
var signingKey = []byte("0123456789abcdef0123456789abcdef")

// testOutgoing is an attempt to publish body to target as message id, with headers a sender would send and a
// signature.
func testOutgoing(target destination.Target, id string, body []byte) delivery.Outgoing {
	return delivery.Outgoing{
		Destination: &target,
		Path:        "/orders?src=test",
		MessageID:   id,
		Method:      "POST",
		Header: http.Header{
			"Content-Type": {"application/json"},
			"X-Custom":     {"a", "b"},
			"Connection":   {"close"},
		},
		Body:      body,
		RequestID: "1",
		Attempt:   1,
		Timeout:   10 * time.Second,
		Signer:    webhook.Signer{ID: "req-" + id, Keys: [][]byte{signingKey}, Headers: webhook.AdalSignatureHeaders},
	}
}

// checkSigned fails t unless get (a received message's header lookup) carries the headers testOutgoing makes,
// with a signature over body that checks.
func checkSigned(t *testing.T, brokerName string, get func(string) string, id string, body []byte) {
	t.Helper()
	want := map[string]string{
		webhook.HeaderRequestID: "1",
		webhook.HeaderAttempt:   "1",
		"X-Adal-Method":         "POST",
		"X-Adal-Path":           "/orders?src=test",
		"Content-Type":          "application/json",
		"X-Adal-Webhook-Id":     "req-" + id,
	}
	for name, v := range want {
		if got := get(name); got != v {
			t.Errorf("%s message header %s = %q, want %q", brokerName, name, got, v)
		}
	}
	if got := get("Connection"); got != "" {
		t.Errorf("%s message carries the hop-by-hop header Connection: %q", brokerName, got)
	}
	ts := get("X-Adal-Webhook-Timestamp")
	mac := hmac.New(sha256.New, signingKey)
	mac.Write([]byte("req-" + id + "." + ts + "."))
	mac.Write(body)
	if got, want := get("X-Adal-Webhook-Signature"), "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)); got != want {
		t.Errorf("%s message signature = %q, want %q (timestamp %q)", brokerName, got, want, ts)
	}
}

// uniqueName is a name no other test run uses, for queues, exchanges, streams and subjects.
func uniqueName(prefix string) string {
	return prefix + "-" + strings.ToLower(rand.Text()[:12])
}

// wantKind fails t unless o failed with kind.
func wantKind(t *testing.T, what string, o delivery.Outcome, kind delivery.ErrorKind) {
	t.Helper()
	if o.Succeeded() || o.ErrorKind != kind {
		t.Fatalf("%s: outcome %s %q (answer %q), want %s", what, o.ErrorKind, o.ErrorMessage, o.Answer, kind)
	}
	t.Logf("%s: %s in %s: %s", what, o.ErrorKind, o.Duration().Round(time.Millisecond), o.ErrorMessage)
}

// wantSuccess fails t unless o succeeded.
func wantSuccess(t *testing.T, what string, o delivery.Outcome) {
	t.Helper()
	if !o.Succeeded() {
		t.Fatalf("%s: outcome %s %q, want a success", what, o.ErrorKind, o.ErrorMessage)
	}
}

// eventually calls try until it reports true, failing t with try's last word after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, try func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, last := try()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %s", what, timeout, last)
		}
		<-tick.C
	}
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// tcpProxy listens on a loopback port and forwards each connection to target; or, as a black hole, accepts
// connections and never answers. The test can cut it (stop listening, drop every connection) and bring it
// back on the same port.
type tcpProxy struct {
	t         *testing.T
	target    string // empty for a black hole
	addr      string
	accepted  atomic.Int64
	mu        sync.Mutex
	ln        net.Listener
	conns     map[net.Conn]bool
	listening sync.WaitGroup
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	p := &tcpProxy{t: t, target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() {
		p.cut()
		p.listening.Wait()
	})
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.listening.Add(1)
	go func() {
		defer p.listening.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.accepted.Add(1)
			if !p.track(c) {
				c.Close()
				return
			}
			if p.target != "" {
				go p.forward(c)
			}
		}
	}()
}

// track records c so that cut closes it; false when the proxy has been cut meanwhile.
func (p *tcpProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *tcpProxy) forward(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(up) {
		up.Close()
		c.Close()
		return
	}
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
	c.Close()
}

// cut stops listening and drops every connection.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// restore listens again on the same port.
func (p *tcpProxy) restore() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("listening again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// TestPoolReconnectsAfterCut cuts the connection to each broker under a publisher: the next attempt fails,
// and once the broker can be reached again, attempts succeed again without anyone resetting the pool.
func TestPoolReconnectsAfterCut(t *testing.T) {
	t.Run("RabbitMQ", func(t *testing.T) {
		admin := newRabbitAdmin(t)
		queue := admin.declareQueue(t, uniqueName("adal-cut"))
		proxy := startProxy(t, rabbitAddr)
		target := destination.Target{Method: destination.RabbitMQ, URL: "amqp://guest:guest@" + proxy.addr + "/", Settings: destination.Settings{RoutingKey: queue}}
		testReconnect(t, proxy, target)
	})
	t.Run("NATS", func(t *testing.T) {
		subject := newNATSStream(t, uniqueName("adal-cut"))
		proxy := startProxy(t, natsAddr)
		target := destination.Target{Method: destination.NATS, URL: "nats://" + proxy.addr, Settings: destination.Settings{Subject: subject}}
		testReconnect(t, proxy, target)
	})
}

func testReconnect(t *testing.T, proxy *tcpProxy, target destination.Target) {
	p := newLoopbackPublisher(t)
	ctx := context.Background()
	wantSuccess(t, "first attempt", p.Send(ctx, testOutgoing(target, "m1", []byte(`{"n":1}`))))

	proxy.cut()
	o := p.Send(ctx, testOutgoing(target, "m2", []byte(`{"n":2}`)))
	wantKind(t, "attempt after the connection was cut", o, delivery.ErrConnection)

	proxy.restore()
	n := 3
	eventually(t, 15*time.Second, "attempts succeed once the broker is back", func() (bool, string) {
		o := p.Send(ctx, testOutgoing(target, "m"+strconv.Itoa(n), []byte(`{}`)))
		n++
		return o.Succeeded(), string(o.ErrorKind) + " " + o.ErrorMessage
	})
}

// TestPoolBlackHoleTimesOutAlone publishes to a broker that accepts connections and never answers: its
// attempts time out each within its own timeout, while attempts to a live broker on the same publisher go
// through meanwhile.
func TestPoolBlackHoleTimesOutAlone(t *testing.T) {
	t.Run("RabbitMQ", func(t *testing.T) {
		queue := newRabbitAdmin(t).declareQueue(t, uniqueName("adal-bh"))
		hole := startProxy(t, "")
		good := destination.Target{Method: destination.RabbitMQ, URL: rabbitURL, Settings: destination.Settings{RoutingKey: queue}}
		stuck := destination.Target{Method: destination.RabbitMQ, URL: "amqp://guest:guest@" + hole.addr + "/", Settings: destination.Settings{RoutingKey: queue}}
		testBlackHole(t, hole, good, stuck)
	})
	t.Run("NATS", func(t *testing.T) {
		subject := newNATSStream(t, uniqueName("adal-bh"))
		hole := startProxy(t, "")
		good := destination.Target{Method: destination.NATS, URL: natsURL, Settings: destination.Settings{Subject: subject}}
		stuck := destination.Target{Method: destination.NATS, URL: "nats://" + hole.addr, Settings: destination.Settings{Subject: subject}}
		testBlackHole(t, hole, good, stuck)
	})
}

func testBlackHole(t *testing.T, hole *tcpProxy, good, stuck destination.Target) {
	p := newLoopbackPublisher(t)
	const timeout = 2 * time.Second
	outcomes := make(chan delivery.Outcome, 2)
	for range 2 {
		go func() {
			out := testOutgoing(stuck, "stuck", []byte(`{}`))
			out.Timeout = timeout
			outcomes <- p.Send(context.Background(), out)
		}()
	}
	eventually(t, 5*time.Second, "the black hole accepts a connection", func() (bool, string) {
		return hole.accepted.Load() > 0, "no connection accepted"
	})
	for i := range 5 {
		wantSuccess(t, "attempt to the live broker while the other one hangs", p.Send(context.Background(), testOutgoing(good, "good"+strconv.Itoa(i), []byte(`{}`))))
		if len(outcomes) > 0 {
			t.Fatalf("an attempt to the black hole ended before the live broker's attempt %d did", i+1)
		}
	}
	for range 2 {
		o := <-outcomes
		wantKind(t, "attempt to the black hole", o, delivery.ErrTimeout)
		if !strings.Contains(o.ErrorMessage, "no confirmation from "+hole.addr+" within 2s") {
			t.Errorf("black hole timeout message = %q", o.ErrorMessage)
		}
		if d := o.Duration(); d < timeout || d > timeout+time.Second {
			t.Errorf("black hole attempt took %s, want about its timeout %s", d, timeout)
		}
	}
	// A connect cut short by the attempt's own timeout says nothing about the broker: the next attempt
	// connects again rather than failing at once.
	before := hole.accepted.Load()
	out := testOutgoing(stuck, "stuck", []byte(`{}`))
	out.Timeout = 200 * time.Millisecond
	wantKind(t, "next attempt to the black hole", p.Send(context.Background(), out), delivery.ErrTimeout)
	if hole.accepted.Load() == before {
		t.Errorf("the attempt after a timed-out connect did not connect again")
	}
}

// TestPoolBackoffFailsAtOnce connects to a port that hangs up at once: the next attempt, made during the
// back-off, fails with the same reason without connecting, and attempts connect again once it has passed.
func TestPoolBackoffFailsAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })

	target := destination.Target{Method: destination.RabbitMQ, URL: "amqp://guest:guest@" + ln.Addr().String() + "/", Settings: destination.Settings{RoutingKey: "q"}}
	p := newLoopbackPublisher(t)
	first := p.Send(context.Background(), testOutgoing(target, "m", []byte(`{}`)))
	wantKind(t, "attempt to a port that hangs up", first, delivery.ErrConnection)
	if accepted.Load() != 1 {
		t.Fatalf("first attempt made %d connections, want 1", accepted.Load())
	}

	second := p.Send(context.Background(), testOutgoing(target, "m", []byte(`{}`)))
	wantKind(t, "attempt during the back-off", second, delivery.ErrConnection)
	if accepted.Load() != 1 {
		t.Errorf("the attempt during the back-off connected (%d connections)", accepted.Load())
	}
	if !strings.HasPrefix(second.ErrorMessage, first.ErrorMessage) || !strings.Contains(second.ErrorMessage, "connecting again in") {
		t.Errorf("attempt during the back-off says %q, want the first one's reason %q and when it connects again", second.ErrorMessage, first.ErrorMessage)
	}
	if d := second.Duration(); d > 100*time.Millisecond {
		t.Errorf("attempt during the back-off took %s, want it to fail at once", d)
	}

	eventually(t, 5*time.Second, "an attempt connects again after the back-off", func() (bool, string) {
		p.Send(context.Background(), testOutgoing(target, "m", []byte(`{}`)))
		return accepted.Load() >= 2, "no second connection"
	})
}

// TestPoolEgressGuard publishes with the zero egress policy, which allows public addresses only:
// no connection to a broker on loopback is made.
func TestPoolEgressGuard(t *testing.T) {
	p := broker.NewPublisher(broker.Config{})
	t.Cleanup(p.Close)
	for _, target := range []destination.Target{
		{Method: destination.RabbitMQ, URL: rabbitURL, Settings: destination.Settings{RoutingKey: "q"}},
		{Method: destination.NATS, URL: natsURL, Settings: destination.Settings{Subject: "adal.guard"}},
	} {
		o := p.Send(context.Background(), testOutgoing(target, "m", []byte(`{}`)))
		wantKind(t, string(target.Method)+" on loopback", o, delivery.ErrConnection)
		if !strings.Contains(o.ErrorMessage, "refused to connect") || !strings.Contains(o.ErrorMessage, "loopback") {
			t.Errorf("%s on loopback: message %q, want the egress guard's refusal", target.Method, o.ErrorMessage)
		}
	}
}

// TestPoolConnectionRefused publishes to a loopback port nothing listens on.
func TestPoolConnectionRefused(t *testing.T) {
	p := newLoopbackPublisher(t)
	addr := closedPort(t)
	for _, target := range []destination.Target{
		{Method: destination.RabbitMQ, URL: "amqp://guest:guest@" + addr + "/", Settings: destination.Settings{RoutingKey: "q"}},
		{Method: destination.NATS, URL: "nats://" + addr, Settings: destination.Settings{Subject: "adal.refused"}},
	} {
		o := p.Send(context.Background(), testOutgoing(target, "m", []byte(`{}`)))
		wantKind(t, string(target.Method)+" on a closed port", o, delivery.ErrConnection)
		if !strings.Contains(o.ErrorMessage, "connection refused") {
			t.Errorf("%s on a closed port: message %q, want it to say the connection was refused", target.Method, o.ErrorMessage)
		}
	}
}
