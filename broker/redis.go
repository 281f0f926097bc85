package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/adal-relay/adal/destination"
)

// Bounds of a Redis destination's connections. The attempt's context bounds every command and every wait
// for a connection; the I/O timeout only backs it up for work done outside an attempt.
const (
	redisPoolSize    = 16
	redisDialTimeout = 10 * time.Second
	redisIOTimeout   = time.Minute
)

// redisClient publishes to one Redis server. go-redis keeps its own pool and dials again after a broken
// connection, so the client stays usable until it is closed.
type redisClient struct {
	rdb    *redis.Client
	closed atomic.Bool
}

// connectRedis opens a client for t and checks it with a PING, so that a server that cannot be reached or
// refuses the credentials fails the open rather than every publish after it.
func connectRedis(ctx context.Context, t destination.Target, dial DialFunc, tlsConf *tls.Config, name string) (client, error) {
	opts, err := redis.ParseURL(t.URL)
	if err != nil {
		// A url.Error quotes the whole URL, password included.
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("the Redis URL is not usable: %w", err)
	}
	// Redis takes a client name of printable characters without spaces only.
	opts.ClientName = strings.Map(func(r rune) rune {
		if r <= ' ' || r > '~' {
			return '-'
		}
		return r
	}, name)
	opts.TLSConfig = tlsConf
	// A custom dialer replaces go-redis's own, TLS included: the connection goes through the egress guard
	// first, and TLS runs over it.
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil || tlsConf == nil {
			return conn, err
		}
		tc := tls.Client(conn, tlsConf)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return tc, nil
	}
	opts.PoolSize, opts.MaxActiveConns = redisPoolSize, redisPoolSize
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = redisDialTimeout, redisIOTimeout, redisIOTimeout
	opts.PoolTimeout = redisIOTimeout
	opts.ContextTimeoutEnabled = true
	// One dial per try: a failed open is retried by the Publisher after its back-off, and a failed publish by
	// the delivery's schedule. Retrying XADD here could also add an entry twice when only the reply was lost.
	opts.DialerRetries = 1
	opts.MaxRetries = -1

	rdb := redis.NewClient(opts)
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		var rerr redis.Error
		if !errors.As(err, &rerr) {
			return nil, err
		}
		// NOAUTH and WRONGPASS, or the answer of a server without HELLO to AUTH.
		if redis.IsAuthError(err) || strings.Contains(rerr.Error(), "AUTH") {
			user := opts.Username
			if user == "" {
				user = "default"
			}
			return nil, refused("Redis refused the credentials of user %q: %s", user, rerr.Error())
		}
		return nil, refused("Redis refused the connection: %s", rerr.Error())
	}
	return &redisClient{rdb: rdb}, nil
}

// publish adds m to the stream as one entry, trimming the stream to about MaxLen entries on the way.
func (c *redisClient) publish(ctx context.Context, t destination.Target, m Message) (string, error) {
	maxLen := t.Settings.MaxLen
	if maxLen <= 0 {
		maxLen = destination.DefaultMaxLen
	}
	names := make([]string, 0, len(m.Header))
	for name := range m.Header {
		names = append(names, name)
	}
	// Sorted, so that every entry lists its headers in the same order.
	slices.Sort(names)
	values := make([]any, 0, 6+2*len(names))
	values = append(values, "id", m.ID, "content-type", m.ContentType, "body", m.Body)
	for _, name := range names {
		values = append(values, name, headerValue(m.Header[name]))
	}
	id, err := c.rdb.XAdd(ctx, &redis.XAddArgs{Stream: t.Settings.Stream, MaxLen: maxLen, Approx: true, Values: values}).Result()
	if err != nil {
		var rerr redis.Error
		if errors.As(err, &rerr) {
			return "", refused("Redis refused XADD: %s", rerr.Error())
		}
		return "", err
	}
	return fmt.Sprintf("entry %s of stream %q", id, t.Settings.Stream), nil
}

func (c *redisClient) alive() bool { return !c.closed.Load() }

func (c *redisClient) close() {
	if c.closed.CompareAndSwap(false, true) {
		_ = c.rdb.Close()
	}
}
