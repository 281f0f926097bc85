package broker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/broker"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/destination"
	"github.com/adal-relay/adal/egress"
	"github.com/adal-relay/adal/webhook"
)

// The tests run against the Redis server of the machine, on loopback, without a password.
const (
	redisTestAddr = "127.0.0.1:6379"
	redisTestURL  = "redis://" + redisTestAddr + "/0"
)

// redisTestAdmin is a direct connection to the test server, to look at streams behind the publisher's back.
// The test fails when the server does not answer: these tests are about the real broker.
func redisTestAdmin(t *testing.T) *redis.Client {
	t.Helper()
	admin := redis.NewClient(&redis.Options{Addr: redisTestAddr, DB: 0})
	t.Cleanup(func() { _ = admin.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := admin.Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis does not answer on %s (%v): start it, e.g. redis-server --bind 127.0.0.1 --port 6379 --daemonize yes", redisTestAddr, err)
	}
	return admin
}

// redisTestStream names a stream of the test's own, deleted when it ends.
func redisTestStream(t *testing.T, admin *redis.Client) string {
	t.Helper()
	stream := "adal-test:" + brokerTestRandom()
	t.Cleanup(func() { _ = admin.Del(context.Background(), stream).Err() })
	return stream
}

// brokerTestPublisher is a publisher allowed to reach loopback, closed when the test ends.
func brokerTestPublisher(t *testing.T) *broker.Publisher {
	t.Helper()
	p := broker.NewPublisher(broker.Config{Egress: egress.Policy{AllowPrivate: true}})
	t.Cleanup(p.Close)
	return p
}

func brokerTestRandom() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// redisOutgoing is an attempt to publish body to stream as message id.
func redisOutgoing(url, stream string, maxLen int64, id string, body []byte) delivery.Outgoing {
	return delivery.Outgoing{
		Destination: &destination.Target{Method: destination.RedisStream, URL: url,
			Settings: destination.Settings{Stream: stream, MaxLen: maxLen}},
		MessageID: id, Method: http.MethodPost, Path: "/orders?x=1", Body: body,
		Header:    http.Header{"Content-Type": {"application/json"}},
		RequestID: "1", Attempt: 1, Timeout: 5 * time.Second,
	}
}

// redisEntry is one stream entry as Redis stores it: its id and its fields in order.
type redisEntry struct {
	id     string
	fields []string // name, value, name, value...
}

func (e redisEntry) get(name string) (string, bool) {
	for i := 0; i+1 < len(e.fields); i += 2 {
		if e.fields[i] == name {
			return e.fields[i+1], true
		}
	}
	return "", false
}

// redisRange reads the whole stream with XRANGE, keeping the order of each entry's fields, which go-redis's
// XRange would lose in a map.
func redisRange(t *testing.T, admin *redis.Client, stream string) []redisEntry {
	t.Helper()
	reply, err := admin.Do(t.Context(), "XRANGE", stream, "-", "+").Slice()
	require.NoError(t, err)
	entries := make([]redisEntry, 0, len(reply))
	for _, r := range reply {
		pair := r.([]any)
		e := redisEntry{id: pair[0].(string)}
		for _, f := range pair[1].([]any) {
			e.fields = append(e.fields, f.(string))
		}
		entries = append(entries, e)
	}
	return entries
}

var redisAnswer = regexp.MustCompile(`^entry (\d+-\d+) of stream "(.*)"$`)

// TestRedisPublishesEntry publishes a signed message and reads it back: its fields in order, the body byte
// for byte, the headers an HTTP recipient would get, and the signature over the body.
func TestRedisPublishesEntry(t *testing.T) {
	admin := redisTestAdmin(t)
	stream := redisTestStream(t, admin)
	p := brokerTestPublisher(t)

	key := webhook.NewKey()
	out := redisOutgoing(redisTestURL, stream, 1000, "msg-"+brokerTestRandom(), []byte("{\"a\":1}\x00\xff binary"))
	out.Header.Add("X-Custom", "first")
	out.Header.Add("X-Custom", "second")
	out.Signer = webhook.Signer{ID: out.MessageID, Keys: [][]byte{key}, Headers: webhook.AdalSignatureHeaders}
	o := p.Send(t.Context(), out)
	require.True(t, o.Succeeded(), "outcome: %+v", o)
	require.Empty(t, o.ErrorKind)
	m := redisAnswer.FindStringSubmatch(o.Answer)
	require.NotNil(t, m, "answer %q", o.Answer)
	require.Equal(t, stream, m[2])

	entries := redisRange(t, admin, stream)
	require.Len(t, entries, 1)
	e := entries[0]
	require.Equal(t, m[1], e.id, "the answer names the entry")
	require.GreaterOrEqual(t, len(e.fields), 6)
	require.Equal(t, []string{"id", out.MessageID, "content-type", "application/json", "body", string(out.Body)}, e.fields[:6])
	want := map[string]string{
		"X-Adal-Request-Id": "1",
		"X-Adal-Attempt":    "1",
		"X-Adal-Method":     http.MethodPost,
		"X-Adal-Path":       "/orders?x=1",
		"X-Custom":          "first, second",
		"Content-Type":      "application/json",
		"X-Adal-Webhook-Id": out.MessageID,
	}
	for name, value := range want {
		got, ok := e.get(name)
		require.True(t, ok, "field %s is missing: %q", name, e.fields)
		require.Equal(t, value, got, "field %s", name)
	}

	// The signature is the one an HTTP recipient would get at the same timestamp, over the same body.
	ts, ok := e.get("X-Adal-Webhook-Timestamp")
	require.True(t, ok)
	sec, err := strconv.ParseInt(ts, 10, 64)
	require.NoError(t, err)
	signed := http.Header{}
	out.Signer.Sign(signed, time.Unix(sec, 0), out.Body)
	sig, ok := e.get("X-Adal-Webhook-Signature")
	require.True(t, ok)
	require.Equal(t, signed.Get("X-Adal-Webhook-Signature"), sig)
}

// TestRedisTrimsToMaxLen publishes many more entries than MaxLen: the stream stays about MaxLen long. Trimming
// is approximate, Redis removing whole nodes of the stream only, so up to a node's worth more is kept.
func TestRedisTrimsToMaxLen(t *testing.T) {
	admin := redisTestAdmin(t)
	stream := redisTestStream(t, admin)
	p := brokerTestPublisher(t)

	nodeMax := int64(100)
	if cfg, err := admin.ConfigGet(t.Context(), "stream-node-max-entries").Result(); err == nil {
		if n, err := strconv.ParseInt(cfg["stream-node-max-entries"], 10, 64); err == nil && n > 0 {
			nodeMax = n
		}
	}
	const maxLen = 10
	total := 3 * nodeMax
	for i := range total {
		o := p.Send(t.Context(), redisOutgoing(redisTestURL, stream, maxLen, fmt.Sprintf("m-%d", i), []byte("{}")))
		require.True(t, o.Succeeded(), "publish %d: %+v", i, o)
	}
	n, err := admin.XLen(t.Context(), stream).Result()
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, int64(maxLen))
	require.LessOrEqual(t, n, maxLen+nodeMax, "the stream is trimmed to about %d entries", maxLen)
	require.Less(t, n, total)

	// The newest entries are the ones kept.
	entries := redisRange(t, admin, stream)
	last, _ := entries[len(entries)-1].get("id")
	require.Equal(t, fmt.Sprintf("m-%d", total-1), last)
}

// TestRedisWrongTypeIsRefused publishes to a key that holds a string: Redis answers WRONGTYPE, the attempt
// fails as BROKER_REFUSED, and the connection stays usable for the next publish.
func TestRedisWrongTypeIsRefused(t *testing.T) {
	admin := redisTestAdmin(t)
	key := redisTestStream(t, admin)
	require.NoError(t, admin.Set(t.Context(), key, "not a stream", 0).Err())
	p := brokerTestPublisher(t)

	o := p.Send(t.Context(), redisOutgoing(redisTestURL, key, 100, "m-1", []byte("{}")))
	require.False(t, o.Succeeded())
	require.Equal(t, delivery.ErrBrokerRefused, o.ErrorKind, "outcome: %+v", o)
	require.Contains(t, o.ErrorMessage, "Redis refused XADD: WRONGTYPE")
	require.Empty(t, o.Answer)

	stream := redisTestStream(t, admin)
	o = p.Send(t.Context(), redisOutgoing(redisTestURL, stream, 100, "m-2", []byte("{}")))
	require.True(t, o.Succeeded(), "the next publish on the same connection: %+v", o)
}

// TestRedisRefusesWrongCredentials connects as a user the server does not know. Redis answers WRONGPASS; the
// attempt fails as BROKER_REFUSED without the password in its message, and so does the next one, at once,
// while the back-off lasts.
//
// A password without a user name would not do: go-redis then authenticates as "default", and a server without
// a password (its default user "nopass") accepts any password for it.
func TestRedisRefusesWrongCredentials(t *testing.T) {
	admin := redisTestAdmin(t)
	stream := redisTestStream(t, admin)
	p := brokerTestPublisher(t)
	const password = "s3cret-Pa55word"
	url := "redis://adal-nobody:" + password + "@" + redisTestAddr + "/0"

	for i := range 2 {
		o := p.Send(t.Context(), redisOutgoing(url, stream, 100, "m-1", []byte("{}")))
		require.Equal(t, delivery.ErrBrokerRefused, o.ErrorKind, "attempt %d: %+v", i, o)
		require.Contains(t, o.ErrorMessage, `Redis refused the credentials of user "adal-nobody"`)
		require.Contains(t, o.ErrorMessage, "WRONGPASS")
		require.NotContains(t, o.ErrorMessage, password)
	}
	n, err := admin.Exists(t.Context(), stream).Result()
	require.NoError(t, err)
	require.Zero(t, n, "nothing was published")
}

// TestRedisUnreachable publishes to a port nobody listens on: the attempt fails as CONNECTION.
func TestRedisUnreachable(t *testing.T) {
	p := brokerTestPublisher(t)
	addr := brokerTestFreePort(t)
	o := p.Send(t.Context(), redisOutgoing("redis://"+addr+"/0", "s", 100, "m-1", []byte("{}")))
	require.Equal(t, delivery.ErrConnection, o.ErrorKind, "outcome: %+v", o)
	require.Contains(t, o.ErrorMessage, addr)
}

// TestRedisConcurrentPublishes publishes from many goroutines at once over the pooled connection: every
// publish succeeds and lands once.
func TestRedisConcurrentPublishes(t *testing.T) {
	admin := redisTestAdmin(t)
	stream := redisTestStream(t, admin)
	p := brokerTestPublisher(t)

	const n = 200
	outcomes := make([]delivery.Outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			outcomes[i] = p.Send(t.Context(), redisOutgoing(redisTestURL, stream, 10*n, fmt.Sprintf("m-%d", i), []byte(strconv.Itoa(i))))
		})
	}
	wg.Wait()
	for i, o := range outcomes {
		require.True(t, o.Succeeded(), "publish %d: %+v", i, o)
	}
	seen := map[string]bool{}
	for _, e := range redisRange(t, admin, stream) {
		id, _ := e.get("id")
		body, _ := e.get("body")
		require.Equal(t, "m-"+body, id)
		require.False(t, seen[id], "%s was added twice", id)
		seen[id] = true
	}
	require.Len(t, seen, n)
}

// brokerTestFreePort is a loopback address nobody listens on, for a while at least.
func brokerTestFreePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}
