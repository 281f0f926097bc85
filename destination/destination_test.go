package destination_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/destination"
)

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		method destination.Method
		url    string
		s      destination.Settings
		want   string // empty: valid
	}{
		{"rabbit default exchange", destination.RabbitMQ, "amqp://u:p@mq:5672/shop", destination.Settings{RoutingKey: "orders"}, ""},
		{"rabbit exchange alone", destination.RabbitMQ, "amqps://mq", destination.Settings{Exchange: "fanout"}, ""},
		{"rabbit nothing", destination.RabbitMQ, "amqp://mq", destination.Settings{}, "needs an exchange, a routingKey"},
		{"rabbit reserved", destination.RabbitMQ, "amqp://mq", destination.Settings{Exchange: "amq.rabbitmq.trace"}, "reserved"},
		{"rabbit vhost path", destination.RabbitMQ, "amqp://mq/a/b", destination.Settings{RoutingKey: "q"}, "virtual host"},
		{"nats", destination.NATS, "tls://n:4222", destination.Settings{Subject: "orders.paid"}, ""},
		{"nats empty token", destination.NATS, "nats://n", destination.Settings{Subject: "orders..paid"}, "empty token"},
		{"nats wildcard", destination.NATS, "nats://n", destination.Settings{Subject: "orders.>"}, "wildcard"},
		{"redis default maxLen", destination.RedisStream, "redis://r/2", destination.Settings{Stream: "s"}, ""},
		{"redis bad db", destination.RedisStream, "redis://r/16", destination.Settings{Stream: "s"}, "database number"},
		{"redis maxLen", destination.RedisStream, "redis://r", destination.Settings{Stream: "s", MaxLen: -1}, "maxLen must be"},
		{"mqtt", destination.MQTT, "mqtts://m", destination.Settings{Topic: "shop/orders"}, ""},
		{"mqtt dollar", destination.MQTT, "mqtt://m", destination.Settings{Topic: "$SYS/x"}, "starts with $"},
		{"mqtt control", destination.MQTT, "mqtt://m", destination.Settings{Topic: "a\tb"}, "control characters"},
		{"mqtt path", destination.MQTT, "mqtt://m/x", destination.Settings{Topic: "a"}, "no path"},
		{"wrong scheme", destination.MQTT, "amqp://m", destination.Settings{Topic: "a"}, `url scheme "amqp"`},
		{"query", destination.NATS, "nats://n?x=1", destination.Settings{Subject: "a"}, "no query"},
		{"no host", destination.NATS, "nats://:4222", destination.Settings{Subject: "a"}, "names no host"},
		{"bad port", destination.NATS, "nats://n:99999", destination.Settings{Subject: "a"}, "not a port"},
		{"foreign field", destination.NATS, "nats://n", destination.Settings{Subject: "a", Stream: "s"}, "stream is not a setting of NATS"},
		{"CA on plain", destination.NATS, "nats://n", destination.Settings{Subject: "a", CACertificate: "x"}, "only for TLS URLs"},
		{"CA not PEM", destination.NATS, "tls://n", destination.Settings{Subject: "a", CACertificate: "x"}, "no PEM certificate"},
	}
	for _, c := range cases {
		s := c.s
		err := destination.Validate(c.method, c.url, &s)
		if c.want == "" {
			require.NoError(t, err, c.name)
			continue
		}
		require.ErrorContains(t, err, c.want, c.name)
	}
	s := destination.Settings{Stream: "s"}
	require.NoError(t, destination.Validate(destination.RedisStream, "redis://r", &s))
	require.EqualValues(t, destination.DefaultMaxLen, s.MaxLen, "the default is filled in")
}

func TestRedactAndAddress(t *testing.T) {
	require.Equal(t, "amqp://app:xxxxx@mq:5672/shop", destination.Redact("amqp://app:s3cret@mq:5672/shop"))
	require.Equal(t, "nats://n:4222", destination.Redact("nats://n:4222"))
	for _, c := range []struct {
		t    destination.Target
		want string
	}{
		{destination.Target{Method: destination.RabbitMQ, URL: "amqps://mq"}, "mq:5671"},
		{destination.Target{Method: destination.MQTT, URL: "mqtt://[::1]"}, "[::1]:1883"},
		{destination.Target{Method: destination.RedisStream, URL: "rediss://r:7000"}, "r:7000"},
	} {
		got, err := c.t.Address()
		require.NoError(t, err)
		require.Equal(t, c.want, got)
	}
}
