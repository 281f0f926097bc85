package broker_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/destination"
)

// rabbitAdmin declares what a test publishes to, deletes it when the test ends, and reads what arrived.
type rabbitAdmin struct {
	conn *amqp.Connection
	ch   *amqp.Channel
}

func newRabbitAdmin(t *testing.T) *rabbitAdmin {
	t.Helper()
	conn, err := amqp.DialConfig(rabbitURL, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
	if err != nil {
		t.Fatalf("RabbitMQ does not answer on %s as guest/guest (%v): start it (service rabbitmq-server start, or docker run -p 5672:5672 rabbitmq:3)", rabbitAddr, err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("RabbitMQ: opening a channel: %v", err)
	}
	return &rabbitAdmin{conn: conn, ch: ch}
}

// cleanup runs f on a channel of its own when t ends, since the test may have left a.ch closed.
func (a *rabbitAdmin) cleanup(t *testing.T, f func(*amqp.Channel) error) {
	t.Cleanup(func() {
		ch, err := a.conn.Channel()
		if err == nil {
			err = f(ch)
			ch.Close()
		}
		if err != nil {
			t.Errorf("RabbitMQ cleanup: %v", err)
		}
	})
}

func (a *rabbitAdmin) declareQueue(t *testing.T, name string) string {
	t.Helper()
	if _, err := a.ch.QueueDeclare(name, false, false, false, false, nil); err != nil {
		t.Fatalf("declaring queue %s: %v", name, err)
	}
	a.cleanup(t, func(ch *amqp.Channel) error { _, err := ch.QueueDelete(name, false, false, false); return err })
	return name
}

// declareBound declares a direct exchange and a queue bound to it with key.
func (a *rabbitAdmin) declareBound(t *testing.T, exchange, queue, key string) {
	t.Helper()
	a.declareExchange(t, exchange)
	a.declareQueue(t, queue)
	if err := a.ch.QueueBind(queue, key, exchange, false, nil); err != nil {
		t.Fatalf("binding queue %s to exchange %s: %v", queue, exchange, err)
	}
}

func (a *rabbitAdmin) declareExchange(t *testing.T, name string) {
	t.Helper()
	if err := a.ch.ExchangeDeclare(name, amqp.ExchangeDirect, false, false, false, false, nil); err != nil {
		t.Fatalf("declaring exchange %s: %v", name, err)
	}
	a.cleanup(t, func(ch *amqp.Channel) error { return ch.ExchangeDelete(name, false, false) })
}

// receive consumes n messages from queue.
func (a *rabbitAdmin) receive(t *testing.T, queue string, n int) []amqp.Delivery {
	t.Helper()
	deliveries, err := a.ch.Consume(queue, "", true, false, false, false, nil)
	if err != nil {
		t.Fatalf("consuming from %s: %v", queue, err)
	}
	var got []amqp.Delivery
	timeout := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case d := <-deliveries:
			got = append(got, d)
		case <-timeout:
			t.Fatalf("RabbitMQ queue %s: %d messages within 10s, want %d", queue, len(got), n)
		}
	}
	return got
}

func amqpHeader(d amqp.Delivery) func(string) string {
	return func(name string) string {
		v, _ := d.Headers[name].(string)
		return v
	}
}

// TestAMQPPublishConfirmed publishes to an exchange and to the default exchange, and checks what a consumer
// of the queue gets.
func TestAMQPPublishConfirmed(t *testing.T) {
	admin := newRabbitAdmin(t)
	exchange, queue := uniqueName("adal-x"), uniqueName("adal-q")
	admin.declareBound(t, exchange, queue, "orders.created")
	p := newLoopbackPublisher(t)

	body := []byte(`{"order":42}`)
	target := destination.Target{Method: destination.RabbitMQ, URL: rabbitURL, Settings: destination.Settings{Exchange: exchange, RoutingKey: "orders.created"}}
	o := p.Send(context.Background(), testOutgoing(target, "msg-1", body))
	wantSuccess(t, "publish to a bound exchange", o)
	if want := fmt.Sprintf("confirmed by RabbitMQ (exchange %q, routing key %q)", exchange, "orders.created"); o.Answer != want {
		t.Errorf("answer = %q, want %q", o.Answer, want)
	}

	direct := destination.Target{Method: destination.RabbitMQ, URL: rabbitURL, Settings: destination.Settings{RoutingKey: queue}}
	wantSuccess(t, "publish to the default exchange", p.Send(context.Background(), testOutgoing(direct, "msg-2", []byte(`{}`))))

	got := admin.receive(t, queue, 2)
	d := got[0]
	if string(d.Body) != string(body) || d.MessageId != "msg-1" || d.ContentType != "application/json" {
		t.Errorf("RabbitMQ message: body %q, id %q, content type %q; want %q, msg-1, application/json", d.Body, d.MessageId, d.ContentType, body)
	}
	if d.DeliveryMode != amqp.Persistent || d.Timestamp.IsZero() {
		t.Errorf("RabbitMQ message: delivery mode %d, timestamp %v; want persistent and a timestamp", d.DeliveryMode, d.Timestamp)
	}
	checkSigned(t, "RabbitMQ", amqpHeader(d), "msg-1", body)
	if v := amqpHeader(d)("X-Custom"); v != "a, b" {
		t.Errorf("RabbitMQ message header X-Custom = %q, want both values joined: \"a, b\"", v)
	}
	if got[1].MessageId != "msg-2" {
		t.Errorf("message through the default exchange has id %q, want msg-2", got[1].MessageId)
	}
}

// TestAMQPUnroutable publishes messages no queue takes: RabbitMQ returns them, the attempts are refused, and
// the connection goes on publishing.
func TestAMQPUnroutable(t *testing.T) {
	admin := newRabbitAdmin(t)
	exchange, queue := uniqueName("adal-x"), uniqueName("adal-q")
	admin.declareBound(t, exchange, queue, "in")
	p := newLoopbackPublisher(t)

	nowhere := destination.Target{Method: destination.RabbitMQ, URL: rabbitURL, Settings: destination.Settings{Exchange: exchange, RoutingKey: "nowhere"}}
	o := p.Send(context.Background(), testOutgoing(nowhere, "m", []byte(`{}`)))
	wantKind(t, "unroutable message", o, delivery.ErrBrokerRefused)
	if want := fmt.Sprintf("no queue is bound to exchange %q with routing key \"nowhere\" (312 NO_ROUTE)", exchange); o.ErrorMessage != want {
		t.Errorf("message %q, want %q", o.ErrorMessage, want)
	}

	noQueue := destination.Target{Method: destination.RabbitMQ, URL: rabbitURL, Settings: destination.Settings{RoutingKey: uniqueName("adal-none")}}
	o = p.Send(context.Background(), testOutgoing(noQueue, "m", []byte(`{}`)))
	wantKind(t, "message to a queue that does not exist", o, delivery.ErrBrokerRefused)
	if !strings.Contains(o.ErrorMessage, "no queue is named") {
		t.Errorf("message %q, want it to say no queue has that name", o.ErrorMessage)
	}

	in := destination.Target{Method: destination.RabbitMQ, URL: rabbitURL, Settings: destination.Settings{Exchange: exchange, RoutingKey: "in"}}
	wantSuccess(t, "routable message after the returns", p.Send(context.Background(), testOutgoing(in, "m", []byte(`{}`))))
}

// TestAMQPMissingExchange publishes to an exchange that does not exist: the attempt is refused with the
// broker's reason, and the next ones on the same connection work.
func TestAMQPMissingExchange(t *testing.T) {
	admin := newRabbitAdmin(t)
	queue := admin.declareQueue(t, uniqueName("adal-q"))
	p := newLoopbackPublisher(t)
	missing := uniqueName("adal-missing")
	bad := destination.Target{Method: destination.RabbitMQ, URL: rabbitURL, Settings: destination.Settings{Exchange: missing, RoutingKey: "k"}}
	good := destination.Target{Method: destination.RabbitMQ, URL: rabbitURL, Settings: destination.Settings{RoutingKey: queue}}

	for i := range 2 {
		o := p.Send(context.Background(), testOutgoing(bad, "bad", []byte(`{}`)))
		wantKind(t, "publish to a missing exchange", o, delivery.ErrBrokerRefused)
		if !strings.Contains(o.ErrorMessage, "NOT_FOUND") || !strings.Contains(o.ErrorMessage, missing) {
			t.Errorf("message %q, want RabbitMQ's NOT_FOUND naming exchange %s", o.ErrorMessage, missing)
		}
		wantSuccess(t, fmt.Sprintf("publish %d after the refusal", i+1), p.Send(context.Background(), testOutgoing(good, "good", []byte(`{}`))))
	}
	admin.receive(t, queue, 2)
}

// TestAMQPRefusedLogin connects with a wrong password, and to a virtual host that does not exist: refusals,
// and no message shows the password.
func TestAMQPRefusedLogin(t *testing.T) {
	newRabbitAdmin(t)
	p := newLoopbackPublisher(t)
	const password = "not-the-password-7f3a"
	wrong := destination.Target{Method: destination.RabbitMQ, URL: "amqp://guest:" + password + "@" + rabbitAddr + "/", Settings: destination.Settings{RoutingKey: "q"}}
	for _, what := range []string{"wrong password", "wrong password during the back-off"} {
		o := p.Send(context.Background(), testOutgoing(wrong, "m", []byte(`{}`)))
		wantKind(t, what, o, delivery.ErrBrokerRefused)
		if !strings.Contains(o.ErrorMessage, `RabbitMQ refused the credentials of user "guest"`) {
			t.Errorf("%s: message %q, want it to name the refused user", what, o.ErrorMessage)
		}
		if strings.Contains(o.ErrorMessage, password) {
			t.Errorf("%s: message %q shows the password", what, o.ErrorMessage)
		}
	}

	vhost := uniqueName("adal-nohost")
	noHost := destination.Target{Method: destination.RabbitMQ, URL: "amqp://guest:guest@" + rabbitAddr + "/" + vhost, Settings: destination.Settings{RoutingKey: "q"}}
	o := p.Send(context.Background(), testOutgoing(noHost, "m", []byte(`{}`)))
	wantKind(t, "missing virtual host", o, delivery.ErrBrokerRefused)
	if !strings.Contains(o.ErrorMessage, vhost) || strings.Contains(o.ErrorMessage, "guest:guest") {
		t.Errorf("missing virtual host: message %q, want it to name %s and no password", o.ErrorMessage, vhost)
	}
}

// TestAMQPConcurrentPublishes shares one connection between many attempts at once, some routable and some
// not: each attempt gets its own confirm or return.
func TestAMQPConcurrentPublishes(t *testing.T) {
	admin := newRabbitAdmin(t)
	exchange, queue := uniqueName("adal-x"), uniqueName("adal-q")
	admin.declareBound(t, exchange, queue, "in")
	p := newLoopbackPublisher(t)
	in := destination.Target{Method: destination.RabbitMQ, URL: rabbitURL, Settings: destination.Settings{Exchange: exchange, RoutingKey: "in"}}
	out := destination.Target{Method: destination.RabbitMQ, URL: rabbitURL, Settings: destination.Settings{Exchange: exchange, RoutingKey: "out"}}

	const n = 200
	outcomes := make([]delivery.Outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			target := in
			if i%4 == 3 {
				target = out
			}
			outcomes[i] = p.Send(context.Background(), testOutgoing(target, fmt.Sprintf("m%d", i), []byte(fmt.Sprintf(`{"i":%d}`, i))))
		})
	}
	wg.Wait()
	routed := 0
	for i, o := range outcomes {
		if i%4 == 3 {
			if o.ErrorKind != delivery.ErrBrokerRefused || !strings.Contains(o.ErrorMessage, `routing key "out"`) {
				t.Errorf("unroutable publish %d: outcome %s %q, want it refused", i, o.ErrorKind, o.ErrorMessage)
			}
			continue
		}
		wantSuccess(t, fmt.Sprintf("publish %d", i), o)
		routed++
	}
	seen := map[string]bool{}
	for _, d := range admin.receive(t, queue, routed) {
		if want := fmt.Sprintf(`{"i":%s}`, strings.TrimPrefix(d.MessageId, "m")); string(d.Body) != want || seen[d.MessageId] {
			t.Errorf("message %s: body %q (want %q), seen before: %v", d.MessageId, d.Body, want, seen[d.MessageId])
		}
		seen[d.MessageId] = true
	}
}

// TestAMQPExchangeDeleted publishes to an exchange deleted after the connection found it: RabbitMQ closes
// the shared channel, refusing that message; the next publishes work, and publishes in flight on the closed
// channel for other exchanges are not refused but fail as a lost connection would, to be tried again.
func TestAMQPExchangeDeleted(t *testing.T) {
	admin := newRabbitAdmin(t)
	queue := admin.declareQueue(t, uniqueName("adal-q"))
	gone := uniqueName("adal-gone")
	p := newLoopbackPublisher(t)
	bad := destination.Target{Method: destination.RabbitMQ, URL: rabbitURL, Settings: destination.Settings{Exchange: gone, RoutingKey: queue}}
	good := destination.Target{Method: destination.RabbitMQ, URL: rabbitURL, Settings: destination.Settings{RoutingKey: queue}}

	// deleteAfterUse publishes once to the exchange, so that the connection knows it, then deletes it.
	deleteAfterUse := func() {
		t.Helper()
		if err := admin.ch.ExchangeDeclare(gone, amqp.ExchangeDirect, false, false, false, false, nil); err != nil {
			t.Fatalf("declaring exchange %s: %v", gone, err)
		}
		if err := admin.ch.QueueBind(queue, queue, gone, false, nil); err != nil {
			t.Fatalf("binding queue %s to exchange %s: %v", queue, gone, err)
		}
		wantSuccess(t, "publish to the exchange before it is deleted", p.Send(context.Background(), testOutgoing(bad, "before", []byte(`{}`))))
		if err := admin.ch.ExchangeDelete(gone, false, false); err != nil {
			t.Fatalf("deleting exchange %s: %v", gone, err)
		}
	}

	deleteAfterUse()
	o := p.Send(context.Background(), testOutgoing(bad, "after", []byte(`{}`)))
	wantKind(t, "publish to the deleted exchange", o, delivery.ErrBrokerRefused)
	if !strings.Contains(o.ErrorMessage, "closed the channel") || !strings.Contains(o.ErrorMessage, "NOT_FOUND") || !strings.Contains(o.ErrorMessage, gone) {
		t.Errorf("message %q, want RabbitMQ's NOT_FOUND for exchange %s, which closed the channel", o.ErrorMessage, gone)
	}
	wantSuccess(t, "publish after the channel was closed", p.Send(context.Background(), testOutgoing(good, "good", []byte(`{}`))))
	o = p.Send(context.Background(), testOutgoing(bad, "again", []byte(`{}`)))
	wantKind(t, "publish to the deleted exchange again", o, delivery.ErrBrokerRefused)
	if strings.Contains(o.ErrorMessage, "closed the channel") {
		t.Errorf("message %q: the exchange refused once should be checked before publishing again", o.ErrorMessage)
	}

	deleteAfterUse()
	const n = 200
	outcomes := make([]delivery.Outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			target := good
			if i%10 == 0 {
				target = bad
			}
			outcomes[i] = p.Send(context.Background(), testOutgoing(target, fmt.Sprintf("m%d", i), []byte(`{}`)))
		})
	}
	wg.Wait()
	bystanders := 0
	for i, o := range outcomes {
		switch {
		case i%10 == 0 && o.Succeeded():
			t.Errorf("publish %d to the deleted exchange succeeded: %q", i, o.Answer)
		case i%10 != 0 && o.ErrorKind == delivery.ErrBrokerRefused:
			t.Errorf("publish %d to a queue that exists was refused: %q", i, o.ErrorMessage)
		case i%10 != 0 && !o.Succeeded():
			bystanders++
			if bystanders == 1 {
				t.Logf("publish %d failed along with the channel: %s %q", i, o.ErrorKind, o.ErrorMessage)
			}
			if o.ErrorKind != delivery.ErrConnection {
				t.Errorf("publish %d to a queue that exists: %s %q, want a success or CONNECTION", i, o.ErrorKind, o.ErrorMessage)
			}
		}
	}
	t.Logf("%d of %d publishes to the queue failed along with the channel", bystanders, n-n/10)
	wantSuccess(t, "publish after the others", p.Send(context.Background(), testOutgoing(good, "last", []byte(`{}`))))
}
