// Package brokertest gives tests a fresh place on each of the brokers running beside them — a RabbitMQ queue,
// a JetStream stream, a Redis stream, an MQTT topic — with a consumer that reads what Adal published there, as
// one Message shape whatever the broker. Every place is removed when the test ends. A broker that does not
// answer fails the test, naming the command that starts it.
package brokertest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
)

// The brokers of every machine this project runs on, and how to start one that stopped.
const (
	RabbitMQURL = "amqp://guest:guest@127.0.0.1:5672/"
	NATSURL     = "nats://127.0.0.1:4222"
	RedisURL    = "redis://127.0.0.1:6379/0"
	MQTTURL     = "mqtt://127.0.0.1:1883"
)

var startCommands = map[string]string{
	"RabbitMQ": "rabbitmq-server -detached",
	"NATS":     "nats-server -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server",
	"Redis":    `redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save ""`,
	"MQTT":     "mosquitto -d -c /etc/mosquitto/mosquitto.conf",
}

// Message is what a consumer read: the body, the headers (AMQP headers, NATS headers, Redis fields, MQTT user
// properties) and the message id.
type Message struct {
	Body   []byte
	Header http.Header
	ID     string
}

// Place is a fresh destination on one broker: the settings a recipient publishes with, and its consumer.
type Place struct {
	// Settings are the DestinationInput fields of a recipient that publishes here.
	Settings map[string]any
	// Next returns the next message published here, failing the test if none comes within the timeout.
	Next func(timeout time.Duration) Message
}

func unique(prefix string) string { return fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()) }

func fail(t testing.TB, broker string, err error) {
	t.Helper()
	t.Fatalf("%s does not answer on loopback (%v); start it with: %s", broker, err, startCommands[broker])
}

// RabbitMQ declares a queue, bound to nothing but the default exchange: a recipient publishes to it with the
// queue's name as routing key.
func RabbitMQ(t testing.TB) Place {
	t.Helper()
	conn, err := amqp.Dial(RabbitMQURL)
	if err != nil {
		fail(t, "RabbitMQ", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ch.QueueDeclare(unique("adal-test"), false, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := ch.Consume(q.Name, "", true, true, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Place{
		Settings: map[string]any{"routingKey": q.Name},
		Next: func(timeout time.Duration) Message {
			t.Helper()
			select {
			case d := <-msgs:
				h := http.Header{}
				for k, v := range d.Headers {
					h.Set(k, fmt.Sprint(v))
				}
				return Message{Body: d.Body, Header: h, ID: d.MessageId}
			case <-time.After(timeout):
				t.Fatalf("no message on RabbitMQ queue %s within %v", q.Name, timeout)
				return Message{}
			}
		},
	}
}

// NATS creates a JetStream stream taking one subject.
func NATS(t testing.TB) Place {
	t.Helper()
	nc, err := nats.Connect(NATSURL, nats.Timeout(5*time.Second))
	if err != nil {
		fail(t, "NATS", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	name := strings.ReplaceAll(unique("ADALTEST"), "-", "_")
	subject := "adal.test." + name
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatalf("create JetStream stream (is JetStream on? nats-server needs -js): %v", err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return Place{
		Settings: map[string]any{"subject": subject},
		Next: func(timeout time.Duration) Message {
			t.Helper()
			m, err := cons.Next(jetstream.FetchMaxWait(timeout))
			if err != nil {
				t.Fatalf("no message on JetStream subject %s within %v: %v", subject, timeout, err)
			}
			return Message{Body: m.Data(), Header: http.Header(m.Headers()), ID: m.Headers().Get(jetstream.MsgIDHeader)}
		},
	}
}

// Redis names a stream key, deleted when the test ends.
func Redis(t testing.TB) Place {
	t.Helper()
	opts, _ := redis.ParseURL(RedisURL)
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		fail(t, "Redis", err)
	}
	stream := unique("adal-test")
	t.Cleanup(func() { _ = rdb.Del(context.Background(), stream).Err() })
	last := "0"
	return Place{
		Settings: map[string]any{"stream": stream},
		Next: func(timeout time.Duration) Message {
			t.Helper()
			res, err := rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{stream, last}, Count: 1, Block: timeout}).Result()
			if err != nil || len(res) == 0 || len(res[0].Messages) == 0 {
				t.Fatalf("no entry on Redis stream %s within %v: %v", stream, timeout, err)
			}
			e := res[0].Messages[0]
			last = e.ID
			m := Message{Header: http.Header{}}
			for k, v := range e.Values {
				s := fmt.Sprint(v)
				switch k {
				case "body":
					m.Body = []byte(s)
				case "id":
					m.ID = s
				default:
					m.Header.Set(k, s)
				}
			}
			return m
		},
	}
}

// MQTT subscribes at QoS 1 to a topic of its own.
func MQTT(t testing.TB) Place {
	t.Helper()
	conn, err := net.DialTimeout("tcp", "127.0.0.1:1883", 5*time.Second)
	if err != nil {
		fail(t, "MQTT", err)
	}
	msgs := make(chan *paho.Publish, 1024)
	var once sync.Once
	c := paho.NewClient(paho.ClientConfig{Conn: conn, OnPublishReceived: []func(paho.PublishReceived) (bool, error){
		func(p paho.PublishReceived) (bool, error) { msgs <- p.Packet; return true, nil },
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: unique("adal-test"), CleanStart: true, KeepAlive: 30}); err != nil {
		fail(t, "MQTT", err)
	}
	t.Cleanup(func() { once.Do(func() { _ = c.Disconnect(&paho.Disconnect{ReasonCode: 0}) }) })
	topic := "adal/test/" + unique("t")
	if _, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	return Place{
		Settings: map[string]any{"topic": topic},
		Next: func(timeout time.Duration) Message {
			t.Helper()
			select {
			case p := <-msgs:
				m := Message{Body: p.Payload, Header: http.Header{}}
				if p.Properties != nil {
					for _, u := range p.Properties.User {
						m.Header.Add(u.Key, u.Value)
					}
					m.ID = string(p.Properties.CorrelationData)
				}
				return m
			case <-time.After(timeout):
				t.Fatalf("no message on MQTT topic %s within %v", topic, timeout)
				return Message{}
			}
		},
	}
}
