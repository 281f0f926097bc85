package relay_test

import (
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/internal/brokertest"
	"github.com/adal-relay/adal/internal/flakynet"
	"github.com/adal-relay/adal/internal/swverify"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

// brokers are the four broker methods with the URL of the broker running beside the tests and a fresh place
// on it.
var brokers = []struct {
	method string
	url    string
	place  func(testing.TB) brokertest.Place
}{
	{"RABBITMQ", brokertest.RabbitMQURL, brokertest.RabbitMQ},
	{"NATS", brokertest.NATSURL, brokertest.NATS},
	{"REDIS_STREAM", brokertest.RedisURL, brokertest.Redis},
	{"MQTT", brokertest.MQTTURL, brokertest.MQTT},
}

type brokerRecipient struct {
	ID            string
	URL           string
	SigningSecret string
	Destination   struct {
		HasPassword bool
		TLS         bool
	}
}

const createBrokerRecipient = `mutation($in: CreateRecipientInput!){ createRecipient(input: $in){
	id url signingSecret destination { hasPassword tls } } }`

// TestBrokerRecipientsGetEachRequestSigned sends one request to a server with a recipient of each broker method
// and reads it off each broker: the body as sent, Adal's headers, a signature a Standard Webhooks receiver
// accepts and the same message id on every attempt; each delivery succeeds with the broker's answer recorded.
func TestBrokerRecipientsGetEachRequestSigned(t *testing.T) {
	env, tn, srv := relaytest.StartWithServer(t, 100)
	places := make([]brokertest.Place, len(brokers))
	secrets := make([]string, len(brokers))
	for i, b := range brokers {
		places[i] = b.place(t)
		var out struct{ CreateRecipient brokerRecipient }
		env.MustGraphQL(tn.Owner, createBrokerRecipient, map[string]any{"in": map[string]any{
			"serverId": srv.ID, "name": b.method, "method": b.method, "url": b.url, "destination": places[i].Settings,
		}}, &out)
		secrets[i] = out.CreateRecipient.SigningSecret
		require.Equal(t, b.url == brokertest.RabbitMQURL, out.CreateRecipient.Destination.HasPassword, b.method)
		require.NotContains(t, out.CreateRecipient.URL, "guest:guest", "the password is write-only")
	}

	body := `{"type":"order.paid","id":42}`
	id := env.SendWith(srv.Key, "/orders/42?x=1", body, http.Header{"Content-Type": {"application/json"}, "X-Shop": {"north"}})
	for i, b := range brokers {
		m := places[i].Next(15 * time.Second)
		require.Equal(t, body, string(m.Body), b.method)
		require.Equal(t, id, m.Header.Get("X-Adal-Request-Id"), b.method)
		require.Equal(t, "north", m.Header.Get("X-Shop"), b.method)
		require.Equal(t, "/orders/42?x=1", m.Header.Get("X-Adal-Path"), b.method)
		require.NotEmpty(t, m.ID, b.method)
		require.NoError(t, swverify.Verify(secrets[i], swverify.Adal, m.Header, m.Body, time.Now()), b.method)
	}

	var out struct {
		Request struct {
			Status     string
			Deliveries []struct {
				Status    string
				Recipient struct{ Method string }
				Attempts  []struct {
					Status, Answer string
					ErrorKind      *string
				}
			}
		}
	}
	relaytest.Eventually(t, 10*time.Second, "every delivery recorded", func() bool {
		env.MustGraphQL(tn.Owner, `query($id: ID!){ request(id: $id){ status deliveries { status recipient { method }
			attempts { status answer errorKind } } } }`, map[string]any{"id": id}, &out)
		return out.Request.Status == "DELIVERED"
	})
	require.Len(t, out.Request.Deliveries, len(brokers))
	for _, d := range out.Request.Deliveries {
		require.Equal(t, "SUCCEEDED", d.Status, d.Recipient.Method)
		require.Len(t, d.Attempts, 1, d.Recipient.Method)
		require.NotEmpty(t, d.Attempts[0].Answer, "%s: the broker's answer is kept", d.Recipient.Method)
		require.Nil(t, d.Attempts[0].ErrorKind)
	}
}

// TestBrokerRecipientSettingsAreChecked refuses what cannot be published to, with a message naming the field,
// and stores nothing.
func TestBrokerRecipientSettingsAreChecked(t *testing.T) {
	env, tn, srv := relaytest.StartWithServer(t, 10)
	cases := []struct {
		name, method, url string
		dest              map[string]any
		want              string
	}{
		{"unknown scheme", "RABBITMQ", "http://127.0.0.1:5672/", map[string]any{"routingKey": "q"}, `url scheme "http"`},
		{"no destination", "NATS", brokertest.NATSURL, nil, "destination is required"},
		{"no subject", "NATS", brokertest.NATSURL, map[string]any{}, "subject is required"},
		{"wildcard subject", "NATS", brokertest.NATSURL, map[string]any{"subject": "orders.*"}, "wildcard"},
		{"another method's field", "REDIS_STREAM", brokertest.RedisURL, map[string]any{"stream": "s", "topic": "t"}, "topic is not a setting of REDIS_STREAM"},
		{"wildcard topic", "MQTT", brokertest.MQTTURL, map[string]any{"topic": "a/#"}, "wildcard"},
		{"no url", "MQTT", "", map[string]any{"topic": "a"}, "url is required"},
		{"CA on a plain URL", "MQTT", brokertest.MQTTURL, map[string]any{"topic": "a", "caCertificate": "x"}, "only for TLS URLs"},
		{"destination on HTTP", "DIRECT_HTTP", "http://127.0.0.1:1/", map[string]any{"topic": "a"}, "only for broker recipients"},
	}
	for _, c := range cases {
		in := map[string]any{"serverId": srv.ID, "name": c.name, "method": c.method, "url": c.url}
		if c.dest != nil {
			in["destination"] = c.dest
		}
		res := env.GraphQL(tn.Owner, createBrokerRecipient, map[string]any{"in": in})
		require.Equal(t, "INVALID_INPUT", res.Code(), c.name)
		require.Contains(t, res.Errors[0].Message, c.want, c.name)
	}
	n, err := env.DB.Client.Recipient.Query().Count(viewer.SystemContext(env.Ctx))
	require.NoError(t, err)
	require.Zero(t, n, "nothing stored")
}

// TestUnreachableBrokerIsTheFirstAttemptsToTell accepts a recipient whose broker does not answer, and its first
// attempt says why; an update of the settings alone keeps the URL and its password.
func TestUnreachableBrokerIsTheFirstAttemptsToTell(t *testing.T) {
	env, tn, srv := relaytest.StartWithServer(t, 10)
	closed := closedPort(t)
	var out struct{ CreateRecipient brokerRecipient }
	env.MustGraphQL(tn.Owner, createBrokerRecipient, map[string]any{"in": map[string]any{
		"serverId": srv.ID, "name": "down", "method": "RABBITMQ", "url": "amqp://app:s3cret@" + closed + "/",
		"destination": map[string]any{"routingKey": "orders"}, "maxAttempts": 2,
	}}, &out)
	rec := out.CreateRecipient
	require.Equal(t, "amqp://app:xxxxx@"+closed+"/", rec.URL)
	id := env.Send(srv.Key, "", "{}")
	var d struct {
		Request struct {
			Deliveries []struct {
				Attempts []struct {
					ErrorKind    string
					ErrorMessage string
				}
			}
		}
	}
	relaytest.Eventually(t, 10*time.Second, "the first attempt", func() bool {
		env.MustGraphQL(tn.Owner, `query($id: ID!){ request(id: $id){ deliveries { attempts { errorKind errorMessage } } } }`,
			map[string]any{"id": id}, &d)
		return len(d.Request.Deliveries) == 1 && len(d.Request.Deliveries[0].Attempts) == 1
	})
	a := d.Request.Deliveries[0].Attempts[0]
	require.Equal(t, "CONNECTION", a.ErrorKind)
	require.Contains(t, a.ErrorMessage, closed)
	require.NotContains(t, a.ErrorMessage, "s3cret")

	var upd struct{ UpdateRecipient brokerRecipient }
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ updateRecipient(id: $id, input: {destination: {routingKey: "invoices"}}){
		id url signingSecret destination { hasPassword tls } } }`, map[string]any{"id": rec.ID}, &upd)
	require.True(t, upd.UpdateRecipient.Destination.HasPassword, "the password stays when only the settings change")
	stored, err := env.DB.Client.Recipient.Get(viewer.SystemContext(env.Ctx), relaytest.RowID(t, rec.ID))
	require.NoError(t, err)
	require.Equal(t, "amqp://app:s3cret@"+closed+"/", stored.DestinationURL)
	require.Equal(t, "invoices", stored.Destination.RoutingKey)
}

// TestBrokerThatStopsAcceptingHoldsNoOneElse stops the port a recipient's broker listens on: its attempts
// fail at once, and the other recipient of the same server gets every request meanwhile.
func TestBrokerThatStopsAcceptingHoldsNoOneElse(t *testing.T) {
	env, tn, srv := relaytest.StartWithServer(t, 1000, func(c *relay.Config) { c.Workers = 8 })
	proxy := flakynet.New(t, "tcp://127.0.0.1:4222")
	down, fine := brokertest.NATS(t), brokertest.Redis(t)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "NATS", "url": "nats://" + proxy.Addr(),
		"destination": down.Settings, "maxAttempts": 1})
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "REDIS_STREAM", "url": brokertest.RedisURL,
		"destination": fine.Settings})
	env.Send(srv.Key, "", "warm-up")
	down.Next(10 * time.Second)
	fine.Next(10 * time.Second)
	// The broker's confirmation may still be on its way after the consumer has the message.
	relaytest.Eventually(t, 10*time.Second, "the warm-up to be recorded", func() bool {
		return len(env.Deliveries(delivery.StatusEQ(delivery.StatusSUCCEEDED))) == 2
	})

	proxy.Stop()
	const n = 40
	for range n {
		env.Send(srv.Key, "", "after")
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, d := range env.Deliveries() {
				t.Logf("delivery %d recipient %d %s attempts %d next %v lane %v count %d", d.ID, d.RecipientID, d.Status, len(d.Edges.Attempts), d.NextAttemptAt, d.Lane, d.AttemptCount)
				for _, a := range d.Edges.Attempts {
					t.Logf("   %v %v %s %s", a.Status, a.ErrorKind, a.ErrorMessage, a.FinishedAt.Sub(a.StartedAt))
				}
			}
		}
	})
	for range n {
		require.Equal(t, "after", string(fine.Next(10*time.Second).Body))
	}
	relaytest.Eventually(t, 10*time.Second, "the stopped broker's attempts to fail", func() bool {
		return len(env.Deliveries(delivery.StatusEQ(delivery.StatusFAILED))) == n
	})
	for _, d := range env.Deliveries(delivery.StatusEQ(delivery.StatusFAILED)) {
		require.Equal(t, "CONNECTION", string(*d.Edges.Attempts[0].ErrorKind))
	}
}

// TestBrokerThatHangsHoldsOnlyItsTenantsShare puts a recipient's broker behind a proxy that stops passing
// bytes without closing anything: its attempts wait for their timeout, within their tenant's share of the
// workers, while another tenant's broker recipient gets every request.
func TestBrokerThatHangsHoldsOnlyItsTenantsShare(t *testing.T) {
	env, stuckTenant, stuckSrv := relaytest.StartWithServer(t, 1000, func(c *relay.Config) { c.Workers = 8 })
	fineTenant, fineSrv := env.NewTenantServer(1000)
	proxy := flakynet.New(t, "tcp://127.0.0.1:4222")
	stuck, fine := brokertest.NATS(t), brokertest.Redis(t)
	env.NewRecipient(stuckTenant, stuckSrv.ID, map[string]any{"method": "NATS", "url": "nats://" + proxy.Addr(),
		"destination": stuck.Settings, "timeoutSeconds": 2, "maxAttempts": 1})
	env.NewRecipient(fineTenant, fineSrv.ID, map[string]any{"method": "REDIS_STREAM", "url": brokertest.RedisURL,
		"destination": fine.Settings})
	env.Send(stuckSrv.Key, "", "warm-up")
	stuck.Next(10 * time.Second)

	proxy.Freeze() // the NATS connection stays open, and nothing comes back through it
	const n = 40
	for range n {
		env.Send(stuckSrv.Key, "", "stuck")
		env.Send(fineSrv.Key, "", "fine")
	}
	for range n {
		require.Equal(t, "fine", string(fine.Next(10*time.Second).Body))
	}
	relaytest.Eventually(t, 30*time.Second, "the stuck broker's attempts to time out", func() bool {
		return len(env.Deliveries(delivery.StatusEQ(delivery.StatusFAILED))) > 0
	})
	for _, d := range env.Deliveries(delivery.StatusEQ(delivery.StatusFAILED)) {
		require.Equal(t, "TIMEOUT", string(*d.Edges.Attempts[0].ErrorKind))
	}
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestRefusedBrokerDeliveryIsRetriedByHand fails a delivery the broker cannot route, then retries it by hand
// once the recipient names a queue that exists: the retry is charged one credit and reaches the queue.
func TestRefusedBrokerDeliveryIsRetriedByHand(t *testing.T) {
	env, tn, srv := relaytest.StartWithServer(t, 10)
	place := brokertest.RabbitMQ(t)
	rec := env.NewRecipient(tn, srv.ID, map[string]any{"method": "RABBITMQ", "url": brokertest.RabbitMQURL,
		"destination": map[string]any{"routingKey": "adal-test-no-such-queue"}, "maxAttempts": 1})
	env.Send(srv.Key, "", "first")
	var failed []*ent.Delivery
	relaytest.Eventually(t, 10*time.Second, "the unroutable delivery to fail", func() bool {
		failed = env.Deliveries(delivery.StatusEQ(delivery.StatusFAILED))
		return len(failed) == 1
	})
	a := failed[0].Edges.Attempts[0]
	require.Equal(t, "BROKER_REFUSED", string(*a.ErrorKind))
	require.Contains(t, a.ErrorMessage, `no queue is named "adal-test-no-such-queue"`)

	env.MustGraphQL(tn.Owner, `mutation($id: ID!, $d: DestinationInput!){ updateRecipient(id: $id, input: {destination: $d}){ id } }`,
		map[string]any{"id": rec, "d": place.Settings}, nil)
	var out struct{ RetryDelivery struct{ ID string } }
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ retryDelivery(id: $id){ id } }`,
		map[string]any{"id": strconv.Itoa(failed[0].ID)}, &out)
	require.Equal(t, "first", string(place.Next(10*time.Second).Body))
	relaytest.Eventually(t, 10*time.Second, "the retry to succeed", func() bool {
		return len(env.Deliveries(delivery.StatusEQ(delivery.StatusSUCCEEDED))) == 1
	})
	var bal struct {
		Viewer struct{ Tenant struct{ CreditBalance int } }
	}
	env.MustGraphQL(tn.Owner, `{ viewer { tenant { creditBalance } } }`, nil, &bal)
	require.Equal(t, 8, bal.Viewer.Tenant.CreditBalance, "one credit for the request, one for the retry")
}
