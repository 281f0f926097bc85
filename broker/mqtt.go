package broker

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"

	"github.com/adal-relay/adal/destination"
)

const (
	// mqttKeepAlive is how often an idle connection is checked, so that a broker gone silent is noticed.
	mqttKeepAlive = 30
	// mqttPacketTimeout backs up the attempt's context, which bounds every wait for the broker.
	mqttPacketTimeout = time.Minute
	// Limits of the protocol itself: a packet's remaining length, and a UTF-8 string's length.
	mqttMaxRemaining = 268_435_455
	mqttMaxString    = 65_535
)

// mqttClient publishes to one MQTT v5 broker over one connection. paho does not reconnect: once the
// connection is lost the client is dead, and the Publisher opens a new one.
type mqttClient struct {
	pc   *paho.Client
	conn net.Conn
	// maxPacket is the broker's Maximum Packet Size from its CONNACK; 0 when it set none.
	maxPacket uint32

	// life ends when the connection does, with the reason as its cause: paho forgets the publishes waiting
	// for a PUBACK when the connection drops, so they wait on life as well.
	life context.Context
	end  context.CancelCauseFunc
}

// errMQTTClosed ends a client closed by the Publisher.
var errMQTTClosed = errors.New("the connection was closed")

// connectMQTT connects to t's broker with a clean session: QoS 1 publishes wait for their PUBACK within the
// attempt, so nothing needs to survive the connection.
func connectMQTT(ctx context.Context, t destination.Target, dial DialFunc, tlsConf *tls.Config, name string) (client, error) {
	u, err := url.Parse(t.URL)
	if err != nil {
		// A url.Error quotes the whole URL, password included.
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("the MQTT URL is not usable: %w", err)
	}
	addr, err := t.Address()
	if err != nil {
		return nil, err
	}
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tlsConf != nil {
		tc := tls.Client(conn, tlsConf)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		conn = tc
	}

	c := &mqttClient{conn: conn}
	c.life, c.end = context.WithCancelCause(context.Background())
	c.pc = paho.NewClient(paho.ClientConfig{
		// Publishes write concurrently, and a tls.Conn does not take concurrent writes.
		Conn:          packets.NewThreadSafeConn(conn),
		PacketTimeout: mqttPacketTimeout,
		OnClientError: c.fail,
		OnServerDisconnect: func(d *paho.Disconnect) {
			c.fail(fmt.Errorf("the MQTT broker closed the connection: %s", mqttReason("DISCONNECT", d.ReasonCode, disconnectReasonString(d))))
		},
	})
	cp := &paho.Connect{ClientID: mqttClientID(name), CleanStart: true, KeepAlive: mqttKeepAlive}
	user := ""
	if u.User != nil {
		user = u.User.Username()
		cp.Username, cp.UsernameFlag = user, user != ""
		if pw, ok := u.User.Password(); ok {
			cp.Password, cp.PasswordFlag = []byte(pw), true
		}
	}
	ca, err := c.pc.Connect(ctx, cp)
	if err != nil {
		// paho closes the connection itself when Connect fails.
		c.end(errMQTTClosed)
		if ca == nil || ca.ReasonCode < 0x80 {
			return nil, err
		}
		reason := mqttReason("CONNACK", ca.ReasonCode, connackReasonString(ca))
		if ca.ReasonCode == packets.ConnackBadUsernameOrPassword || ca.ReasonCode == packets.ConnackNotAuthorized {
			return nil, refused("the MQTT broker refused the credentials of user %q: %s", user, reason)
		}
		return nil, refused("the MQTT broker refused the connection: %s", reason)
	}
	if ca.Properties != nil && ca.Properties.MaximumPacketSize != nil {
		c.maxPacket = *ca.Properties.MaximumPacketSize
	}
	return c, nil
}

// mqttClientID is name with a random suffix: a broker takes a client id for a session and disconnects the
// older of two connections that share one, so two relays with the same name must not send the same id.
func mqttClientID(name string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return name + "-" + hex.EncodeToString(b)
}

// publish sends m at QoS 1 and waits, within ctx, for the broker's PUBACK.
func (c *mqttClient) publish(ctx context.Context, t destination.Target, m Message) (string, error) {
	p, err := mqttPublish(t, m)
	if err != nil {
		return "", err
	}
	// A packet over the broker's limit would make it drop the connection, and the other publishes on it
	// with it: it is refused here, unsent.
	size, remaining := mqttPacketSize(p)
	switch {
	case c.maxPacket > 0 && size > int(c.maxPacket):
		return "", refused("message of %d bytes is over the MQTT broker's limit of %d bytes", size, c.maxPacket)
	case remaining > mqttMaxRemaining:
		return "", refused("message of %d bytes is over MQTT's limit of %d bytes after the header", remaining, mqttMaxRemaining)
	}

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.life, cancel)()
	pr, err := c.pc.Publish(pctx, p)
	if pr != nil && pr.ReasonCode >= 0x80 {
		reason := ""
		if pr.Properties != nil {
			reason = pr.Properties.ReasonString
		}
		return "", refused("the MQTT broker did not take the message: %s", mqttReason("PUBACK", pr.ReasonCode, reason))
	}
	switch {
	case err == nil && pr != nil:
		return mqttReason("PUBACK", pr.ReasonCode, ""), nil
	case errors.Is(err, paho.ErrInvalidArguments):
		// What the broker announced it does not take (QoS 1, for one).
		return "", refused("the MQTT broker cannot take the message: %s", err.Error())
	case ctx.Err() != nil:
		return "", err
	}
	// Every other failure of a publish means the connection is gone or confused: the next attempt gets a
	// new one.
	if err == nil {
		err = errors.New("no answer")
	}
	c.end(err)
	return "", fmt.Errorf("no PUBACK from the MQTT broker: %w", context.Cause(c.life))
}

// mqttPublish is m as an MQTT PUBLISH to t's topic. Headers go as user properties, one per value: MQTT v5
// lets them repeat, so values stay apart as HTTP sent them.
func mqttPublish(t destination.Target, m Message) (*paho.Publish, error) {
	contentType, err := mqttString("Content-Type", m.ContentType)
	if err != nil {
		return nil, err
	}
	props := &paho.PublishProperties{ContentType: contentType, CorrelationData: []byte(m.ID)}
	names := make([]string, 0, len(m.Header))
	for name := range m.Header {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		key, err := mqttString("header name "+name, name)
		if err != nil {
			return nil, err
		}
		for _, v := range m.Header[name] {
			value, err := mqttString("header "+name, v)
			if err != nil {
				return nil, err
			}
			props.User = append(props.User, paho.UserProperty{Key: key, Value: value})
		}
	}
	return &paho.Publish{QoS: 1, Topic: t.Settings.Topic, Payload: m.Body, Properties: props}, nil
}

// mqttString makes s a string an MQTT broker accepts: brokers drop the connection on a string that is not
// UTF-8 or holds a control character or a non-character (Mosquitto does), which HTTP header values may. Such
// characters are replaced: a control character (tab included) by a space, the others by U+FFFD. A string
// over MQTT's length limit refuses the message, as paho would cut it.
func mqttString(what, s string) (string, error) {
	clean := true
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			clean = false
			break
		}
	}
	if !clean {
		var b strings.Builder
		b.Grow(len(s))
		for _, r := range s {
			switch {
			case r < 0x20 || r >= 0x7f && r <= 0x9f:
				r = ' '
			case r >= 0xfdd0 && r <= 0xfdef || r&0xfffe == 0xfffe:
				r = utf8.RuneError
			}
			b.WriteRune(r) // an invalid byte comes as utf8.RuneError, written as U+FFFD
		}
		s = b.String()
	}
	if len(s) > mqttMaxString {
		return "", refused("%s is %d bytes, over MQTT's limit of %d bytes for a string", what, len(s), mqttMaxString)
	}
	return s, nil
}

// mqttPacketSize is the size of p on the wire, and its remaining length: what follows the fixed header
// (variable header with the properties, and payload).
func mqttPacketSize(p *paho.Publish) (size, remaining int) {
	for _, b := range p.Packet().Buffers() {
		remaining += len(b)
	}
	vbi := 1 // the remaining length's own bytes, 7 bits each
	for rest := remaining >> 7; rest > 0; rest >>= 7 {
		vbi++
	}
	return 1 + vbi + remaining, remaining
}

// fail ends the client with the reason paho gave; the first reason is kept.
func (c *mqttClient) fail(err error) { c.end(err) }

func (c *mqttClient) alive() bool {
	if c.life.Err() != nil {
		return false
	}
	select {
	case <-c.pc.Done():
		return false
	default:
		return true
	}
}

// close says goodbye to the broker. The write deadline keeps a broker that no longer reads from holding
// the close, and unblocks a publish stuck writing to it.
func (c *mqttClient) close() {
	c.end(errMQTTClosed)
	_ = c.conn.SetWriteDeadline(time.Now().Add(time.Second))
	_ = c.pc.Disconnect(&paho.Disconnect{ReasonCode: packets.DisconnectNormalDisconnection})
}

func connackReasonString(ca *paho.Connack) string {
	if ca.Properties == nil {
		return ""
	}
	return ca.Properties.ReasonString
}

func disconnectReasonString(d *paho.Disconnect) string {
	if d.Properties == nil {
		return ""
	}
	return d.Properties.ReasonString
}

// mqttReason is a reason code as an answer or an error shows it: the packet, the code, its name and the
// broker's own words, if it gave some.
func mqttReason(packet string, code byte, brokerSays string) string {
	name := mqttReasonNames[code]
	switch {
	case code == 0 && packet == "DISCONNECT":
		name = "normal disconnection"
	case name == "":
		name = "unknown reason code"
	}
	s := fmt.Sprintf("%s 0x%02x %s", packet, code, name)
	if brokerSays != "" {
		s += " (" + brokerSays + ")"
	}
	return s
}

// mqttReasonNames are the MQTT v5 reason codes of CONNACK, PUBACK and DISCONNECT.
var mqttReasonNames = map[byte]string{
	0x00: "success",
	0x04: "disconnect with will message",
	0x10: "no matching subscribers",
	0x80: "unspecified error",
	0x81: "malformed packet",
	0x82: "protocol error",
	0x83: "implementation specific error",
	0x84: "unsupported protocol version",
	0x85: "client identifier not valid",
	0x86: "bad user name or password",
	0x87: "not authorized",
	0x88: "server unavailable",
	0x89: "server busy",
	0x8a: "banned",
	0x8b: "server shutting down",
	0x8c: "bad authentication method",
	0x8d: "keep alive timeout",
	0x8e: "session taken over",
	0x90: "topic name invalid",
	0x91: "packet identifier in use",
	0x93: "receive maximum exceeded",
	0x94: "topic alias invalid",
	0x95: "packet too large",
	0x96: "message rate too high",
	0x97: "quota exceeded",
	0x98: "administrative action",
	0x99: "payload format invalid",
	0x9a: "retain not supported",
	0x9b: "QoS not supported",
	0x9c: "use another server",
	0x9d: "server moved",
	0x9f: "connection rate exceeded",
}
