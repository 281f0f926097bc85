package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/destination"
	"github.com/adal-relay/adal/webhook"
)

// The tests run against the Mosquitto broker of the machine (loopback, anonymous, MQTT v5), and against
// private Mosquitto processes they start for settings of their own.
const (
	mqttTestAddr  = "127.0.0.1:1883"
	mosquittoPath = "/usr/sbin/mosquitto"
)

// mqttOutgoing is an attempt to publish body to topic at url as message id.
func mqttOutgoing(url, topic, id string, body []byte) delivery.Outgoing {
	return delivery.Outgoing{
		Destination: &destination.Target{Method: destination.MQTT, URL: url, Settings: destination.Settings{Topic: topic}},
		MessageID:   id, Method: http.MethodPost, Path: "/hook", Body: body,
		Header:    http.Header{"Content-Type": {"application/json"}},
		RequestID: "1", Attempt: 1, Timeout: 5 * time.Second,
	}
}

func mqttTestTopic() string { return "adal-test/" + brokerTestRandom() }

// mqttSubscribe connects a second client to the broker at addr and subscribes it to topic at QoS 1; the
// messages it gets come on the channel. The test fails when the broker does not answer.
func mqttSubscribe(t *testing.T, addr, topic string) <-chan *paho.Publish {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("the MQTT broker does not answer on %s (%v): start Mosquitto, e.g. mosquitto -d with `listener 1883 127.0.0.1` and `allow_anonymous true` in its configuration", addr, err)
	}
	got := make(chan *paho.Publish, 1000)
	c := paho.NewClient(paho.ClientConfig{
		Conn: conn,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(r paho.PublishReceived) (bool, error) {
			got <- r.Packet
			return true, nil
		}},
	})
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: "adal-test-sub-" + brokerTestRandom(), CleanStart: true, KeepAlive: 30}); err != nil {
		t.Fatalf("the MQTT broker on %s did not take an MQTT v5 connection (%v): Mosquitto 2 or later is needed", addr, err)
	}
	t.Cleanup(func() { _ = c.Disconnect(&paho.Disconnect{}) })
	_, err = c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}})
	require.NoError(t, err)
	return got
}

// mqttReceive waits for the message with correlation data id, skipping others.
func mqttReceive(t *testing.T, got <-chan *paho.Publish, id string) *paho.Publish {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-got:
			if m.Properties != nil && string(m.Properties.CorrelationData) == id {
				return m
			}
		case <-deadline:
			t.Fatalf("message %s did not reach the subscriber within 10s", id)
		}
	}
}

// mosquittoProcess is a private Mosquitto process on a loopback port, for the settings of one test.
type mosquittoProcess struct {
	t      *testing.T
	port   int
	config string
	cmd    *exec.Cmd
	exited chan struct{}
	out    mosquittoOutput
}

// mosquittoOutput collects the broker's output, read by the test while the process may still write.
type mosquittoOutput struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *mosquittoOutput) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *mosquittoOutput) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startMosquitto starts a broker on a free loopback port with the given configuration lines besides the
// listener, and stops it when the test ends.
func startMosquitto(t *testing.T, lines ...string) *mosquittoProcess {
	t.Helper()
	if _, err := os.Stat(mosquittoPath); err != nil {
		t.Fatalf("Mosquitto is not installed at %s (%v): install it, e.g. apt-get install mosquitto", mosquittoPath, err)
	}
	_, port, _ := net.SplitHostPort(brokerTestFreePort(t))
	m := &mosquittoProcess{t: t, config: filepath.Join(t.TempDir(), "mosquitto.conf")}
	m.port, _ = strconv.Atoi(port)
	conf := fmt.Sprintf("listener %d 127.0.0.1\n", m.port)
	for _, l := range lines {
		conf += l + "\n"
	}
	require.NoError(t, os.WriteFile(m.config, []byte(conf), 0o644))
	t.Cleanup(m.stop)
	m.start()
	return m
}

func (m *mosquittoProcess) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.port)) }

func (m *mosquittoProcess) url() string { return "mqtt://" + m.addr() }

// start runs the broker and waits until its port takes connections.
func (m *mosquittoProcess) start() {
	m.t.Helper()
	m.cmd = exec.Command(mosquittoPath, "-c", m.config)
	m.cmd.Stdout, m.cmd.Stderr = &m.out, &m.out
	require.NoError(m.t, m.cmd.Start())
	exited, cmd := make(chan struct{}), m.cmd
	go func() { _ = cmd.Wait(); close(exited) }()
	m.exited = exited
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", m.addr(), time.Second)
		if err == nil {
			_ = conn.Close()
			break
		}
		select {
		case <-exited:
			m.t.Fatalf("mosquitto exited at start: %s", m.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("mosquitto did not listen on %s within 10s: %s", m.addr(), m.out.String())
		}
	}
}

// stop kills the broker at once, as a crash would, and waits until it is gone.
func (m *mosquittoProcess) stop() {
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Kill()
	<-m.exited
	m.cmd = nil
}

// mqttEventually polls cond until it holds, failing the test after timeout.
func mqttEventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: not within %s", what, timeout)
		}
	}
}

// TestMQTTPublishesMessage publishes a signed message and receives it with a subscriber: payload, content
// type, message id as correlation data, and the headers as user properties, repeated values apart. Header
// values a broker would not take as MQTT strings reach it cleaned.
func TestMQTTPublishesMessage(t *testing.T) {
	topic := mqttTestTopic()
	got := mqttSubscribe(t, mqttTestAddr, topic)
	p := brokerTestPublisher(t)

	out := mqttOutgoing("mqtt://"+mqttTestAddr, topic, "msg-"+brokerTestRandom(), []byte("{\"a\":1}\x00\xff binary"))
	out.Header.Add("X-Custom", "first")
	out.Header.Add("X-Custom", "second")
	out.Header.Set("X-Odd", "tab\there, bad \xff byte")
	out.Signer = webhook.Signer{ID: out.MessageID, Keys: [][]byte{webhook.NewKey()}, Headers: webhook.AdalSignatureHeaders}
	o := p.Send(t.Context(), out)
	require.True(t, o.Succeeded(), "outcome: %+v", o)
	require.Equal(t, "PUBACK 0x00 success", o.Answer)

	m := mqttReceive(t, got, out.MessageID)
	require.Equal(t, topic, m.Topic)
	require.Equal(t, byte(1), m.QoS)
	require.False(t, m.Retain)
	require.Equal(t, out.Body, m.Payload)
	require.Equal(t, "application/json", m.Properties.ContentType)
	user := m.Properties.User
	require.Equal(t, "1", user.Get("X-Adal-Request-Id"))
	require.Equal(t, "1", user.Get("X-Adal-Attempt"))
	require.Equal(t, "/hook", user.Get("X-Adal-Path"))
	require.Equal(t, []string{"first", "second"}, user.GetAll("X-Custom"))
	require.Equal(t, "tab here, bad \uFFFD byte", user.Get("X-Odd"))
	require.Equal(t, out.MessageID, user.Get("X-Adal-Webhook-Id"))

	// The signature is the one an HTTP recipient would get at the same timestamp, over the same body.
	sec, err := strconv.ParseInt(user.Get("X-Adal-Webhook-Timestamp"), 10, 64)
	require.NoError(t, err)
	signed := http.Header{}
	out.Signer.Sign(signed, time.Unix(sec, 0), out.Body)
	require.Equal(t, signed.Get("X-Adal-Webhook-Signature"), user.Get("X-Adal-Webhook-Signature"))
}

// TestMQTTNoSubscriberSucceeds publishes to a topic nobody listens to: the broker takes the message and says
// so with reason code 0x10, which is a success.
func TestMQTTNoSubscriberSucceeds(t *testing.T) {
	mqttSubscribe(t, mqttTestAddr, mqttTestTopic()) // fails the test early when the broker is not there
	p := brokerTestPublisher(t)
	o := p.Send(t.Context(), mqttOutgoing("mqtt://"+mqttTestAddr, mqttTestTopic(), "m-1", []byte("{}")))
	require.True(t, o.Succeeded(), "outcome: %+v", o)
	require.Equal(t, "PUBACK 0x10 no matching subscribers", o.Answer)
}

// TestMQTTRefusesMessageOverMaxPacketSize publishes a message bigger than the broker's Maximum Packet Size:
// the attempt fails as BROKER_REFUSED without sending it, and the connection carries the next, small one.
func TestMQTTRefusesMessageOverMaxPacketSize(t *testing.T) {
	b := startMosquitto(t, "allow_anonymous true", "max_packet_size 1024")
	topic := mqttTestTopic()
	got := mqttSubscribe(t, b.addr(), topic)
	p := brokerTestPublisher(t)

	o := p.Send(t.Context(), mqttOutgoing(b.url(), topic, "big", bytes.Repeat([]byte("x"), 2000)))
	require.Equal(t, delivery.ErrBrokerRefused, o.ErrorKind, "outcome: %+v", o)
	require.Regexp(t, `^message of \d+ bytes is over the MQTT broker's limit of 1024 bytes$`, o.ErrorMessage)

	o = p.Send(t.Context(), mqttOutgoing(b.url(), topic, "small", []byte("{}")))
	require.True(t, o.Succeeded(), "outcome: %+v", o)
	m := mqttReceive(t, got, "small")
	require.Equal(t, []byte("{}"), m.Payload)
	select {
	case m := <-got:
		t.Fatalf("the subscriber got another message: %s", m.Properties.CorrelationData)
	default:
	}
}

// TestMQTTRefusesCredentials connects with credentials to a broker that takes none: the CONNACK's reason
// code fails the attempt as BROKER_REFUSED, without the password in its message.
func TestMQTTRefusesCredentials(t *testing.T) {
	b := startMosquitto(t, "allow_anonymous false")
	p := brokerTestPublisher(t)
	const password = "s3cret-Pa55word"
	o := p.Send(t.Context(), mqttOutgoing("mqtt://alice:"+password+"@"+b.addr(), mqttTestTopic(), "m-1", []byte("{}")))
	require.Equal(t, delivery.ErrBrokerRefused, o.ErrorKind, "outcome: %+v", o)
	require.Contains(t, o.ErrorMessage, `the MQTT broker refused the credentials of user "alice": CONNACK 0x8`)
	require.NotContains(t, o.ErrorMessage, password)
}

// TestMQTTBrokerGoneAndBack stops the broker between two publishes: the next attempt fails as CONNECTION;
// once the broker is back on its port, a later attempt connects again and delivers.
func TestMQTTBrokerGoneAndBack(t *testing.T) {
	b := startMosquitto(t, "allow_anonymous true")
	topic := mqttTestTopic()
	p := brokerTestPublisher(t)

	o := p.Send(t.Context(), mqttOutgoing(b.url(), topic, "before", []byte("{}")))
	require.True(t, o.Succeeded(), "outcome: %+v", o)

	b.stop()
	o = p.Send(t.Context(), mqttOutgoing(b.url(), topic, "while-gone", []byte("{}")))
	require.Equal(t, delivery.ErrConnection, o.ErrorKind, "outcome: %+v", o)
	require.Contains(t, o.ErrorMessage, b.addr())

	b.start()
	got := mqttSubscribe(t, b.addr(), topic)
	var last delivery.Outcome
	id := 0
	mqttEventually(t, 15*time.Second, "a publish after the broker came back", func() bool {
		id++
		last = p.Send(t.Context(), mqttOutgoing(b.url(), topic, fmt.Sprintf("after-%d", id), []byte("{}")))
		return last.Succeeded()
	})
	require.Equal(t, "PUBACK 0x00 success", last.Answer)
	mqttReceive(t, got, fmt.Sprintf("after-%d", id))
}

// TestMQTTConnectionLostWhilePublishing publishes to a peer that takes the connection and drops it on the
// first PUBLISH, without a PUBACK: a real broker does so on a packet it finds malformed. The attempt fails as
// CONNECTION as soon as the connection is gone, not at its timeout, and the next attempt connects anew.
func TestMQTTConnectionLostWhilePublishing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	var accepted atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer func() { _ = conn.Close() }()
				if _, err := packets.ReadPacket(conn); err != nil { // CONNECT
					return
				}
				if _, err := packets.NewControlPacket(packets.CONNACK).WriteTo(conn); err != nil {
					return
				}
				for {
					pk, err := packets.ReadPacket(conn)
					if err != nil || pk.Type == packets.PUBLISH {
						return
					}
				}
			}()
		}
	}()
	p := brokerTestPublisher(t)
	url := "mqtt://" + ln.Addr().String()

	for i := range 2 {
		out := mqttOutgoing(url, mqttTestTopic(), fmt.Sprintf("m-%d", i), []byte("{}"))
		out.Timeout = 20 * time.Second
		o := p.Send(t.Context(), out)
		require.Equal(t, delivery.ErrConnection, o.ErrorKind, "attempt %d: %+v", i, o)
		require.Contains(t, o.ErrorMessage, "no PUBACK from the MQTT broker")
		require.Less(t, o.Duration(), 10*time.Second, "the attempt ended with the connection")
	}
	require.Equal(t, int32(2), accepted.Load(), "each attempt had a connection of its own")
}

// TestMQTTConcurrentPublishes publishes from many goroutines at once over one connection: every publish is
// confirmed and reaches the subscriber.
func TestMQTTConcurrentPublishes(t *testing.T) {
	topic := mqttTestTopic()
	got := mqttSubscribe(t, mqttTestAddr, topic)
	p := brokerTestPublisher(t)

	const n = 200
	outcomes := make([]delivery.Outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			outcomes[i] = p.Send(t.Context(), mqttOutgoing("mqtt://"+mqttTestAddr, topic, fmt.Sprintf("m-%d", i), []byte(strconv.Itoa(i))))
		})
	}
	wg.Wait()
	for i, o := range outcomes {
		require.True(t, o.Succeeded(), "publish %d: %+v", i, o)
	}
	seen := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for len(seen) < n {
		select {
		case m := <-got:
			id := string(m.Properties.CorrelationData)
			require.Equal(t, "m-"+string(m.Payload), id)
			seen[id] = true
		case <-deadline:
			t.Fatalf("the subscriber got %d of %d messages within 10s", len(seen), n)
		}
	}
}
