package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/adal-relay/adal/destination"
)

// natsPingInterval is how often an idle connection is checked; two pings unanswered close it.
const natsPingInterval = 20 * time.Second

// natsClient is one NATS connection publishing to JetStream. nats.go's own reconnection is off: a connection
// that breaks is closed, and the pool opens a new one, through the egress guard and with the back-off that
// every broker gets.
type natsClient struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// connectNATS connects to t's NATS server: user and password (or a token) from the URL, TLS with tlsConf,
// the connection named name.
func connectNATS(ctx context.Context, t destination.Target, dial DialFunc, tlsConf *tls.Config, name string) (client, error) {
	u, err := url.Parse(t.URL)
	if err != nil {
		// The parser's message quotes the URL, and with it the password.
		return nil, errors.New("the NATS URL does not parse")
	}
	addr, err := t.Address()
	if err != nil {
		return nil, errors.New("the NATS URL does not parse")
	}
	timeout := 30 * time.Second
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
	}
	if timeout <= 0 {
		return nil, attemptEnded(ctx)
	}
	d := &natsDialer{ctx: ctx, dial: dial}
	opts := []nats.Option{
		nats.Name(name),
		nats.NoReconnect(),
		nats.SetCustomDialer(d),
		// Our dialer resolves the name, with ctx and the egress guard; nats.go would look it up on its own.
		nats.SkipHostLookup(),
		// nats.go sets this deadline on the connection for the handshake, replacing any of ours. It is left
		// past ctx's, whose end closes the connection (natsDialer): a handshake cut short then reads as
		// the attempt's timeout, not as the broker's failure.
		nats.Timeout(timeout + time.Second),
		// Finds a connection that went silent well before the default two minutes would, so that attempts
		// stop waiting on it and the pool opens another.
		nats.PingInterval(natsPingInterval),
		// Failures reach the attempts that meet them; nats.go would print them to stderr.
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
	}
	scheme := "nats"
	if tlsConf != nil {
		scheme = "tls"
		opts = append(opts, nats.Secure(tlsConf))
	}
	// Credentials go as options rather than in the server URL, which nats.go splits at commas.
	user := ""
	if u.User != nil {
		user = u.User.Username()
		if pass, ok := u.User.Password(); ok {
			opts = append(opts, nats.UserInfo(user, pass))
		} else {
			opts = append(opts, nats.Token(user))
			user = ""
		}
	}

	nc, err := nats.Connect(scheme+"://"+addr, opts...)
	stopped := d.stop()
	if err == nil && !stopped {
		nc.Close()
		err = context.Cause(ctx)
	}
	if err != nil {
		return nil, natsConnectError(ctx, err, d, user)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &natsClient{nc: nc, js: js}, nil
}

func natsConnectError(ctx context.Context, err error, d *natsDialer, user string) error {
	if err := attemptEnded(ctx); err != nil {
		return err
	}
	switch {
	case errors.Is(err, nats.ErrNoServers) && d.lastErr() != nil:
		// nats.go reports a refused connection as "no servers available": the dial's own error says more.
		return d.lastErr()
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked):
		if user == "" {
			return refused("the NATS server refused the connection: %s (check the token or user in the URL)", err.Error())
		}
		return refused("the NATS server refused the credentials of user %q: %s", user, err.Error())
	}
	return err
}

// natsDialer dials through the egress guard, within ctx: the dial, then the handshake, end when it does.
type natsDialer struct {
	ctx  context.Context
	dial DialFunc

	mu       sync.Mutex
	err      error       // the last dial's error
	stopFunc func() bool // stops closing the connection when ctx ends
}

func (d *natsDialer) Dial(network, address string) (net.Conn, error) {
	conn, err := d.dial(d.ctx, network, address)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = err
	if err != nil {
		return nil, err
	}
	d.stopFunc = context.AfterFunc(d.ctx, func() { conn.Close() })
	return conn, nil
}

func (d *natsDialer) lastErr() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// stop reports false when ctx ended and closed the connection.
func (d *natsDialer) stop() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopFunc == nil {
		return true
	}
	return d.stopFunc()
}

func (c *natsClient) alive() bool { return !c.nc.IsClosed() }

func (c *natsClient) close() { c.nc.Close() }

// publish publishes m to JetStream with m.ID as Nats-Msg-Id, so that the stream stores a delivery once
// however many attempts reach it within its duplicate window.
func (c *natsClient) publish(ctx context.Context, t destination.Target, m Message) (string, error) {
	subject := t.Settings.Subject
	msg := &nats.Msg{Subject: subject, Header: nats.Header(m.Header.Clone()), Data: m.Body}
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	if m.ContentType != "" {
		msg.Header.Set("Content-Type", m.ContentType)
	}
	var opts []jetstream.PublishOpt
	if m.ID != "" {
		opts = append(opts, jetstream.WithMsgID(m.ID))
	}
	ack, err := c.js.PublishMsg(ctx, msg, opts...)
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return "", context.Cause(ctx)
	case errors.Is(err, nats.ErrMaxPayload):
		// Headers count: the limit is on what is sent after the subject.
		size := msg.Size() - len(msg.Subject) - len(msg.Reply)
		return "", refused("message of %d bytes is over the NATS server's limit of %d bytes", size, c.nc.MaxPayload())
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return "", refused("no JetStream stream takes subject %q", subject)
	case errors.Is(err, jetstream.ErrInvalidJSAck):
		return "", refused("what answered on subject %q is not JetStream: a service subscribed to it replies instead of a stream", subject)
	case errors.As(err, &apiErr):
		return "", refused("JetStream refused the message: %s (error %d)", apiErr.Description, apiErr.ErrorCode)
	case !c.alive():
		return "", fmt.Errorf("the connection to the NATS server is lost: %w", err)
	default:
		return "", err
	}
	answer := fmt.Sprintf("stream %q sequence %d", ack.Stream, ack.Sequence)
	if ack.Duplicate {
		answer += " (duplicate: already stored)"
	}
	return answer, nil
}
