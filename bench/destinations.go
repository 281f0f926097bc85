package bench

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"

	"github.com/adal-relay/adal/destination"
)

// The brokers the destinations scenario publishes to unless told otherwise: those CI starts on loopback.
const (
	defaultRabbitMQURL = "amqp://guest:guest@127.0.0.1:5672/"
	defaultNATSURL     = "nats://127.0.0.1:4222"
	defaultRedisURL    = "redis://127.0.0.1:6379/0"
	defaultMQTTURL     = "mqtt://127.0.0.1:1883"
)

// brokerKind is one broker of the destinations scenario.
type brokerKind struct {
	name  string // as its row names it
	slug  string // in its database's name
	start string // how to start one on loopback, for the error when it does not answer
	url   func(Config) string
	// place makes a fresh place for n messages on the broker at rawURL.
	place func(ctx context.Context, rawURL string, n int) (*brokerPlace, error)
}

var brokerKinds = []brokerKind{
	{"RabbitMQ", "rabbitmq", "rabbitmq-server -detached", func(c Config) string { return c.RabbitMQURL }, rabbitMQPlace},
	{"NATS JetStream", "nats", "nats-server -a 127.0.0.1 -p 4222 -js", func(c Config) string { return c.NATSURL }, natsPlace},
	{"Redis Streams", "redis", `redis-server --daemonize yes --bind 127.0.0.1 --save ""`, func(c Config) string { return c.RedisURL }, redisPlace},
	{"MQTT", "mqtt", "mosquitto -d", func(c Config) string { return c.MQTTURL }, mqttPlace},
}

// brokerPlace is a fresh place on a broker that a burn-down's recipients publish to.
type brokerPlace struct {
	method   string         // the recipients' method
	url      string         // the broker's URL, with its credentials
	settings map[string]any // the recipients' DestinationInput
	what     string         // the place, as a row's settings name it
	// count is how many messages the place holds; nil where the broker keeps no count.
	count  func(ctx context.Context) (int64, error)
	remove func()
}

// held describes what the place holds after n publishes; the error says it is not n messages.
func (pl *brokerPlace) held(ctx context.Context, n int64) (string, error) {
	if pl.count == nil {
		return "no count: the broker keeps none for a topic nobody subscribes to (every attempt succeeded on its PUBACK)", nil
	}
	got, err := pl.count(ctx)
	if err != nil {
		return "not counted", fmt.Errorf("count %s: %w", pl.what, err)
	}
	s := fmt.Sprintf("%d messages in %s", got, pl.what)
	if got != n {
		return s, fmt.Errorf("%s holds %d messages for %d deliveries", pl.what, got, n)
	}
	return s, nil
}

// destinations measures what a broker recipient's attempt costs against an HTTP one's: the dispatch
// burn-down of DestinationDeliveries due deliveries, to the receiver first, then to each broker in turn with
// every recipient publishing to one fresh place made for it (and removed after). Each row gives attempts/s,
// the brokers' also as a ratio to HTTP's in the same run, and the cost per attempt; there is no budget. A
// broker row is void unless its place holds exactly one message per delivery, where the broker can tell. A
// destination that cannot run is an error, and the others still run.
func (b *Runner) destinations(ctx context.Context) error {
	n := b.cfg.DestinationDeliveries
	var httpRate float64
	var errs []error
	err := b.burnDown(ctx, "destinations_http", n, func(bd *burnDown) bool {
		httpRate = bd.rate
		bd.row.Scenario = "destinations HTTP"
		bd.row.Target = "none: the reference of the brokers' ratios"
		return true
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("HTTP: %w", err))
	}
	for _, k := range brokerKinds {
		if ctx.Err() != nil {
			break
		}
		if err := b.brokerBurnDown(ctx, k, n, httpRate); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", k.name, err))
		}
	}
	// One line: Run puts the error in a row of the Markdown table.
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return errors.New(strings.Join(msgs, "; "))
}

// brokerBurnDown makes k's place, burns n deliveries down to it and removes it.
func (b *Runner) brokerBurnDown(ctx context.Context, k brokerKind, n int, httpRate float64) error {
	rawURL := k.url(b.cfg)
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	place, err := k.place(pctx, rawURL, n)
	cancel()
	if err != nil {
		return fmt.Errorf("make a place on %s: %w (not running? start one with: %s)", destination.Redact(rawURL), err, k.start)
	}
	defer place.remove()
	b.logf("destinations: %s, %s", k.name, place.what)
	return b.burnDownTo(ctx, "destinations_"+k.slug, n, place, func(bd *burnDown) bool {
		bd.row.Scenario = "destinations " + k.name
		if httpRate > 0 {
			bd.row.Figure = fmt.Sprintf("%.0f attempts/s (%.2f× HTTP)", bd.rate, bd.rate/httpRate)
		} else {
			bd.row.Figure = fmt.Sprintf("%.0f attempts/s (no HTTP rate in this run)", bd.rate)
		}
		bd.row.Target = "none: reported"
		return true
	})
}

// unique is a fresh suffix for a place's name.
func unique() string {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return hex.EncodeToString(rnd[:])
}

// rabbitMQPlace declares a durable queue, as a deployment's would be (Adal publishes persistent messages),
// reached through the default exchange with the queue's name as routing key.
func rabbitMQPlace(ctx context.Context, rawURL string, n int) (*brokerPlace, error) {
	conn, err := amqp.DialConfig(rawURL, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second),
		Properties: amqp.Table{"connection_name": "adal-bench"}})
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, err
	}
	name := "adal-bench-" + unique()
	if _, err := ch.QueueDeclare(name, true, false, false, false, nil); err != nil {
		conn.Close()
		return nil, fmt.Errorf("declare queue %s: %w", name, err)
	}
	return &brokerPlace{
		method: string(destination.RabbitMQ), url: rawURL, settings: map[string]any{"routingKey": name},
		what: "RabbitMQ durable queue " + name + " (default exchange)",
		count: func(context.Context) (int64, error) {
			q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
			return int64(q.Messages), err
		},
		remove: func() {
			if _, err := ch.QueueDelete(name, false, false, false); err != nil {
				fmt.Fprintf(os.Stderr, "bench: delete RabbitMQ queue %s: %v\n", name, err)
			}
			conn.Close()
		},
	}, nil
}

// natsPlace creates a JetStream stream on a subject of its own, in file storage (a stream's default), taking
// n messages and refusing more.
func natsPlace(ctx context.Context, rawURL string, n int) (*brokerPlace, error) {
	nc, err := nats.Connect(rawURL, nats.Timeout(10*time.Second), nats.Name("adal-bench"))
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	suffix := unique()
	name, subject := "ADAL_BENCH_"+strings.ToUpper(suffix), "adal.bench."+suffix
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject},
		Storage: jetstream.FileStorage, MaxMsgs: int64(n), Discard: jetstream.DiscardNew})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("create JetStream stream %s (is JetStream on? nats-server needs -js): %w", name, err)
	}
	return &brokerPlace{
		method: string(destination.NATS), url: rawURL, settings: map[string]any{"subject": subject},
		what: "JetStream stream " + name + " (file storage) on " + subject,
		count: func(ctx context.Context) (int64, error) {
			info, err := s.Info(ctx)
			if err != nil {
				return 0, err
			}
			return int64(info.State.Msgs), nil
		},
		remove: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := js.DeleteStream(ctx, name); err != nil {
				fmt.Fprintf(os.Stderr, "bench: delete JetStream stream %s: %v\n", name, err)
			}
			nc.Close()
		},
	}, nil
}

// redisPlace names a stream key whose maxLen keeps every one of the n entries: XADD's approximate trim never
// goes below it.
func redisPlace(ctx context.Context, rawURL string, n int) (*brokerPlace, error) {
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(opts)
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, err
	}
	key := "adal-bench-" + unique()
	return &brokerPlace{
		method: string(destination.RedisStream), url: rawURL, settings: map[string]any{"stream": key, "maxLen": n},
		what:  fmt.Sprintf("Redis stream %s (maxLen %d)", key, n),
		count: func(ctx context.Context) (int64, error) { return rdb.XLen(ctx, key).Result() },
		remove: func() {
			if err := rdb.Del(context.Background(), key).Err(); err != nil {
				fmt.Fprintf(os.Stderr, "bench: delete Redis stream %s: %v\n", key, err)
			}
			rdb.Close()
		},
	}, nil
}

// mqttPlace names a topic nobody subscribes to: the broker still answers each QoS 1 publish with its PUBACK,
// and keeps nothing to count. Connecting once checks that the broker answers and takes the URL's credentials.
func mqttPlace(ctx context.Context, rawURL string, n int) (*brokerPlace, error) {
	t := destination.Target{Method: destination.MQTT, URL: rawURL}
	addr, err := t.Address()
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	var conn net.Conn
	if t.TLS() {
		host, _, _ := net.SplitHostPort(addr)
		conn, err = (&tls.Dialer{NetDialer: &d, Config: &tls.Config{ServerName: host}}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	c := paho.NewClient(paho.ClientConfig{Conn: conn})
	cp := &paho.Connect{ClientID: "adal-bench-" + unique(), CleanStart: true, KeepAlive: 30}
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		cp.Username, cp.UsernameFlag = u.User.Username(), true
		if pw, ok := u.User.Password(); ok {
			cp.Password, cp.PasswordFlag = []byte(pw), true
		}
	}
	if _, err := c.Connect(ctx, cp); err != nil {
		conn.Close()
		return nil, err
	}
	_ = c.Disconnect(&paho.Disconnect{ReasonCode: 0})
	topic := "adal/bench/" + unique()
	return &brokerPlace{
		method: string(destination.MQTT), url: rawURL, settings: map[string]any{"topic": topic},
		what: "MQTT topic " + topic + " (QoS 1, no subscriber)", remove: func() {},
	}, nil
}

// attemptsMade is how many attempts the process has inserted so far, read from the attempts' id sequence
// (ids are drawn one by one, so on a fresh database it counts them) without a scan of the table.
func (p *Process) attemptsMade(ctx context.Context) (int64, error) {
	var n int64
	err := p.DB.QueryRowContext(ctx,
		`SELECT COALESCE(pg_sequence_last_value(pg_get_serial_sequence('attempts', 'id')::regclass), 0)`).Scan(&n)
	return n, err
}

// failedAttempt is an error naming the first failed attempt, if there is one.
func (p *Process) failedAttempt() error {
	var kind, msg string
	err := p.DB.QueryRow(`SELECT error_kind, error_message FROM attempts WHERE status <> 'SUCCEEDED' LIMIT 1`).Scan(&kind, &msg)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	}
	return fmt.Errorf("an attempt failed: %s: %s", kind, msg)
}
