package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/adal-relay/adal/destination"
)

const (
	// amqpCloseTimeout bounds the close handshake of a connection we give up, so that a broker that stopped
	// answering cannot hold whoever closes it.
	amqpCloseTimeout = 2 * time.Second
	// exchangeRecheck is how long an exchange found to exist is taken to exist without asking again.
	exchangeRecheck = time.Minute
)

// amqpClient is one RabbitMQ connection with one channel in confirm mode, shared by concurrent publishes.
// The broker closes a channel for a fault of one message (an exchange that does not exist, a message over its
// size limit), failing every publish in flight on it: the connection stays, and the next publish opens
// another channel. Exchanges are checked on a channel of their own before the first publish to them, so that
// a recipient naming a missing one does not take the others' publishes down with it.
type amqpClient struct {
	conn    *amqp.Connection
	lostBy  atomic.Pointer[amqp.Error] // why the connection closed, once it has
	current atomic.Pointer[amqpChannel]
	opening chan struct{} // a token held while opening a channel, so that one attempt opens for all

	mu        sync.Mutex
	exchanges map[string]time.Time // exchanges found to exist, and when
}

// connectAMQP connects to t's RabbitMQ: credentials and virtual host from the URL, TLS with tlsConf, the
// connection named name for the broker's management views.
func connectAMQP(ctx context.Context, t destination.Target, dial DialFunc, tlsConf *tls.Config, name string) (client, error) {
	uri, err := amqp.ParseURI(t.URL)
	if err != nil {
		// The parser's message may quote the URL, and with it the password.
		return nil, errors.New("the RabbitMQ URL does not parse")
	}
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(name)

	// amqp091's dial hook takes no context and its handshakes none either: closing the connection when ctx
	// ends is what bounds connecting, the TLS and AMQP handshakes and opening the first channel. DialConfig
	// calls the hook on this goroutine.
	stop := func() bool { return true }
	cfg := amqp.Config{
		TLSClientConfig: tlsConf,
		Properties:      props,
		Dial: func(network, addr string) (net.Conn, error) {
			conn, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			stop = context.AfterFunc(ctx, func() { conn.Close() })
			return conn, nil
		},
	}
	conn, err := amqp.DialConfig(t.URL, cfg)
	if err != nil {
		if err := attemptEnded(ctx); err != nil {
			return nil, err
		}
		return nil, amqpConnectError(err, uri)
	}
	c := &amqpClient{conn: conn, opening: make(chan struct{}, 1), exchanges: map[string]time.Time{}}
	ch, err := c.openChannel()
	if !stop() || err != nil {
		conn.CloseDeadline(time.Now().Add(amqpCloseTimeout))
		if err := attemptEnded(ctx); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("RabbitMQ did not open a channel: %w", err)
	}
	c.current.Store(ch)
	closes := conn.NotifyClose(make(chan *amqp.Error, 1))
	go func() {
		for e := range closes {
			c.lostBy.Store(e)
		}
	}()
	return c, nil
}

// attemptEnded is the attempt's own end when a connect failed because of it: ctx is done, or its deadline
// has passed, which a dial or a read may see an instant before ctx does. The pool holds no back-off for it.
func attemptEnded(ctx context.Context) error {
	if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) {
		<-ctx.Done()
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// amqpConnectError says why RabbitMQ did not let us in, as a refusal when the broker answered so.
func amqpConnectError(err error, uri amqp.URI) error {
	var e *amqp.Error
	if !errors.As(err, &e) {
		return err
	}
	vhost := uri.Vhost
	if vhost == "" {
		vhost = "/"
	}
	switch {
	case e == amqp.ErrVhost:
		return refused("RabbitMQ refused user %q access to virtual host %q", uri.Username, vhost)
	case e == amqp.ErrSASL:
		return refused("RabbitMQ offers no login mechanism the relay supports (PLAIN)")
	case e.Code == amqp.AccessRefused:
		// RabbitMQ drops the socket on a failed login rather than saying why: amqp091 then reports the
		// credentials, the only thing checked at that step.
		return refused("RabbitMQ refused the credentials of user %q (%s)", uri.Username, e.Reason)
	case e.Code == amqp.NotAllowed:
		return refused("RabbitMQ refused the connection of user %q to virtual host %q: %s", uri.Username, vhost, e.Reason)
	case e.Server:
		return fmt.Errorf("RabbitMQ closed the connection while opening it: %s (%d)", e.Reason, e.Code)
	}
	return fmt.Errorf("the connection closed during the AMQP handshake: %s", e.Reason)
}

func (c *amqpClient) alive() bool { return !c.conn.IsClosed() }

// lost is the error of a publish that found the connection closed.
func (c *amqpClient) lost() error {
	if e := c.lostBy.Load(); e != nil {
		return fmt.Errorf("the connection to RabbitMQ is lost: %s", e.Reason)
	}
	return errors.New("the connection to RabbitMQ is lost")
}

func (c *amqpClient) close() { c.conn.CloseDeadline(time.Now().Add(amqpCloseTimeout)) }

// publish sends m with mandatory set, so that a message no queue takes comes back rather than vanishing, and
// waits for its confirm.
func (c *amqpClient) publish(ctx context.Context, t destination.Target, m Message) (string, error) {
	exchange, key := t.Settings.Exchange, t.Settings.RoutingKey
	headers := make(amqp.Table, len(m.Header))
	for k, v := range m.Header {
		headers[k] = headerValue(v)
	}
	pub := amqp.Publishing{
		Headers:      headers,
		ContentType:  m.ContentType,
		DeliveryMode: amqp.Persistent,
		MessageId:    m.ID,
		Timestamp:    time.Now(),
		Body:         m.Body,
	}
	w := &amqpWaiter{exchange: exchange, key: key, id: m.ID, size: len(m.Body), result: make(chan error, 1)}
	if err := c.checkExchange(ctx, exchange); err != nil {
		return "", err
	}

	// A channel the broker has just closed, for another message's fault, refuses the publish before anything
	// is sent: trying again on a new channel is then safe.
	const tries = 3
	for try := 1; ; try++ {
		ch, err := c.channel(ctx)
		if err != nil {
			return "", err
		}
		err = ch.publish(ctx, exchange, key, pub, w)
		switch {
		case err == nil:
		case !c.alive():
			return "", c.lost()
		case errors.Is(err, amqp.ErrClosed) && try < tries:
			continue
		case errors.Is(err, amqp.ErrClosed):
			return "", fmt.Errorf("RabbitMQ closed the channel %d times before the message could be sent, for other messages it refused", tries)
		default:
			return "", err
		}
		break
	}
	select {
	case err := <-w.result:
		if err != nil {
			// The exchange may be what was refused: the next publish to it checks it again.
			c.mu.Lock()
			delete(c.exchanges, exchange)
			c.mu.Unlock()
			return "", err
		}
		return fmt.Sprintf("confirmed by RabbitMQ (exchange %q, routing key %q)", exchange, key), nil
	case <-ctx.Done():
		// The waiter stays registered until its confirm comes or the channel closes: the dispatcher writes
		// into its buffered result and moves on.
		return "", context.Cause(ctx)
	}
}

// checkExchange makes sure exchange exists, asking RabbitMQ on a channel of its own, which a missing exchange
// closes instead of the shared one. The default exchange always exists.
func (c *amqpClient) checkExchange(ctx context.Context, exchange string) error {
	if exchange == "" {
		return nil
	}
	c.mu.Lock()
	seen, ok := c.exchanges[exchange]
	c.mu.Unlock()
	if ok && time.Since(seen) < exchangeRecheck {
		return nil
	}
	// amqp091's calls take no context: the call runs apart, and the attempt ends with ctx.
	done := make(chan error, 1)
	go func() {
		ch, err := c.conn.Channel()
		if err == nil {
			// Passive: the kind and flags are not compared, only the name is looked up.
			err = ch.ExchangeDeclarePassive(exchange, amqp.ExchangeDirect, false, false, false, false, nil)
			if err == nil {
				ch.Close()
			}
		}
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	var e *amqp.Error
	switch {
	case err == nil:
		c.mu.Lock()
		c.exchanges[exchange] = time.Now()
		c.mu.Unlock()
		return nil
	case !c.alive():
		return c.lost()
	case errors.As(err, &e) && e.Server:
		return refused("cannot publish to exchange %q: %s (%d)", exchange, e.Reason, e.Code)
	}
	return fmt.Errorf("checking exchange %q: %w", exchange, err)
}

// channel is the open channel, or a new one when the broker has closed the last.
func (c *amqpClient) channel(ctx context.Context) (*amqpChannel, error) {
	if ch := c.current.Load(); ch != nil && !ch.ch.IsClosed() {
		return ch, nil
	}
	select {
	case c.opening <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	defer func() { <-c.opening }()
	if ch := c.current.Load(); ch != nil && !ch.ch.IsClosed() {
		return ch, nil
	}
	// Opening a channel is a call amqp091 does not bound; a broker that stops answering is found by the
	// heartbeat, which closes the connection and ends it.
	ch, err := c.openChannel()
	if err != nil {
		if !c.alive() {
			return nil, c.lost()
		}
		return nil, fmt.Errorf("RabbitMQ did not open a channel: %w", err)
	}
	c.current.Store(ch)
	return ch, nil
}

// openChannel opens a channel in confirm mode and starts its dispatcher.
func (c *amqpClient) openChannel() (*amqpChannel, error) {
	raw, err := c.conn.Channel()
	if err != nil {
		return nil, err
	}
	ch := &amqpChannel{ch: raw, conn: c.conn, sem: make(chan struct{}, 1), waiting: map[uint64]*amqpWaiter{}}
	// Returns go to an unbuffered channel: amqp091's reader hands a return over before it reads the ack of
	// the same message, so the dispatcher has recorded the return by the time it sees that ack.
	returns := raw.NotifyReturn(make(chan amqp.Return))
	confirms := raw.NotifyPublish(make(chan amqp.Confirmation, 256))
	closes := raw.NotifyClose(make(chan *amqp.Error, 1))
	if err := raw.Confirm(false); err != nil {
		raw.Close()
		return nil, err
	}
	go ch.dispatch(returns, confirms, closes)
	return ch, nil
}

// amqpChannel is a channel in confirm mode and the publishes waiting for their confirm, by delivery tag.
type amqpChannel struct {
	ch   *amqp.Channel
	conn *amqp.Connection
	sem  chan struct{} // held from taking a delivery tag to publishing, so that tags match publishes

	mu      sync.Mutex
	waiting map[uint64]*amqpWaiter
}

// amqpWaiter is a publish waiting for its confirm.
type amqpWaiter struct {
	exchange, key, id string
	size              int
	returned          *amqp.Return // set by the dispatcher, under amqpChannel.mu
	result            chan error   // buffered: the dispatcher never waits for the publisher
}

// publish registers w under the message's delivery tag and publishes. The send runs apart so that a broker
// pushing back on the socket holds the send, not the attempt, which ends with ctx.
func (ch *amqpChannel) publish(ctx context.Context, exchange, key string, pub amqp.Publishing, w *amqpWaiter) error {
	sent := make(chan error, 1)
	go func() {
		select {
		case ch.sem <- struct{}{}:
		case <-ctx.Done():
			sent <- context.Cause(ctx)
			return
		}
		defer func() { <-ch.sem }()
		if ctx.Err() != nil {
			// Nobody waits for this message any more: do not send it.
			sent <- context.Cause(ctx)
			return
		}
		tag := ch.ch.GetNextPublishSeqNo()
		ch.mu.Lock()
		ch.waiting[tag] = w
		ch.mu.Unlock()
		err := ch.ch.Publish(exchange, key, true, false, pub)
		if err != nil {
			// amqp091 takes the tag back when a publish fails, for the next one.
			ch.mu.Lock()
			delete(ch.waiting, tag)
			ch.mu.Unlock()
		}
		sent <- err
	}()
	select {
	case err := <-sent:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// dispatch answers the waiters: each confirm answers its own, a return marks its own before the ack that
// follows it, and once the channel is closed the ones left fail with the broker's reason.
func (ch *amqpChannel) dispatch(returns <-chan amqp.Return, confirms <-chan amqp.Confirmation, closes <-chan *amqp.Error) {
	var closeErr *amqp.Error
	for returns != nil || confirms != nil || closes != nil {
		select {
		case r, ok := <-returns:
			if !ok {
				returns = nil
				continue
			}
			ch.returned(r)
		case c, ok := <-confirms:
			if !ok {
				confirms = nil
				continue
			}
			ch.confirmed(c)
		case e, ok := <-closes:
			if !ok {
				closes = nil
				continue
			}
			closeErr = e
		}
	}
	ch.closed(closeErr)
}

// returned marks the waiter a return is for. A return carries no delivery tag, only the message: it goes to
// the oldest waiter with the same exchange, routing key and message id not yet returned, since the broker
// returns messages in the order they were published, each before its own ack.
func (ch *amqpChannel) returned(r amqp.Return) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	var tag uint64
	for t, w := range ch.waiting {
		if w.returned == nil && w.exchange == r.Exchange && w.key == r.RoutingKey && w.id == r.MessageId && (tag == 0 || t < tag) {
			tag = t
		}
	}
	if tag != 0 {
		ch.waiting[tag].returned = &r
	}
}

func (ch *amqpChannel) confirmed(c amqp.Confirmation) {
	ch.mu.Lock()
	w := ch.waiting[c.DeliveryTag]
	delete(ch.waiting, c.DeliveryTag)
	ch.mu.Unlock()
	if w == nil {
		return
	}
	switch {
	case w.returned != nil:
		r := w.returned
		if w.exchange == "" {
			w.result <- refused("no queue is named %q: the default exchange routes by queue name (%d %s)", w.key, r.ReplyCode, r.ReplyText)
		} else {
			w.result <- refused("no queue is bound to exchange %q with routing key %q (%d %s)", w.exchange, w.key, r.ReplyCode, r.ReplyText)
		}
	case !c.Ack:
		w.result <- refused("RabbitMQ refused the message (negative acknowledgement): a queue it routes to did not take it, such as a full queue set to reject publishes")
	default:
		w.result <- nil
	}
}

// closed fails the publishes still waiting once the channel is closed. When the broker closed the channel
// for a message's fault, the messages its reason names are refused; the others on the channel at that moment
// fail as a transport error would, since they were not refused but may not have been taken either.
func (ch *amqpChannel) closed(e *amqp.Error) {
	ch.mu.Lock()
	waiting := ch.waiting
	ch.waiting = map[uint64]*amqpWaiter{}
	ch.mu.Unlock()
	if len(waiting) == 0 {
		return
	}
	if e == nil || ch.conn.IsClosed() {
		reason := "it was closed"
		if e != nil {
			reason = e.Reason
		}
		for _, w := range waiting {
			w.result <- fmt.Errorf("the connection to RabbitMQ was lost before it confirmed the message: %s", reason)
		}
		return
	}
	fault := map[*amqpWaiter]bool{}
	for _, w := range waiting {
		if amqpFault(e.Reason, w) {
			fault[w] = true
		}
	}
	for _, w := range waiting {
		switch {
		case fault[w] || len(fault) == 0:
			w.result <- refused("RabbitMQ refused the message and closed the channel: %s (%d)", e.Reason, e.Code)
		default:
			w.result <- fmt.Errorf("RabbitMQ closed the channel for another message before confirming this one: %s (%d)", e.Reason, e.Code)
		}
	}
}

// amqpFault reports whether a channel's close reason is about w: it names w's exchange (missing, or access
// refused), or a message size that is w's.
func amqpFault(reason string, w *amqpWaiter) bool {
	if w.exchange != "" && strings.Contains(reason, "exchange '"+w.exchange+"'") {
		return true
	}
	if _, after, ok := strings.Cut(reason, "message size "); ok {
		n, _, _ := strings.Cut(after, " ")
		return n == strconv.Itoa(w.size)
	}
	return false
}
