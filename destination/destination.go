// Package destination describes where a broker recipient publishes — RabbitMQ, NATS JetStream, Redis Streams
// or MQTT — and checks a description before it is stored. It holds no connection: package broker publishes.
//
// A broker recipient has two parts: its URL, which carries the credentials and is write-only (the API shows it
// without its password: Redact), and its Settings, the rest (exchange, subject, stream, topic, TLS trust),
// which are shown as stored.
package destination

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Method is a broker recipient's delivery method, as the recipients' method column spells it.
type Method string

// The broker methods. DIRECT_HTTP and CLI are not destinations of this package.
const (
	RabbitMQ    Method = "RABBITMQ"
	NATS        Method = "NATS"
	RedisStream Method = "REDIS_STREAM"
	MQTT        Method = "MQTT"
)

// Methods lists the broker methods, in the order the API documents them.
var Methods = []Method{RabbitMQ, NATS, RedisStream, MQTT}

// IsBroker reports whether method (a recipients.method value) publishes to a broker.
func IsBroker(method string) bool {
	switch Method(method) {
	case RabbitMQ, NATS, RedisStream, MQTT:
		return true
	}
	return false
}

// Settings are a broker recipient's settings beside its URL. Each method reads its own fields; Validate refuses
// the others, so that what is stored is what is used.
type Settings struct {
	// Exchange is the RabbitMQ exchange published to; empty is the default exchange, where RoutingKey names
	// a queue.
	Exchange string `json:"exchange,omitempty"`
	// RoutingKey is the RabbitMQ routing key of every message.
	RoutingKey string `json:"routingKey,omitempty"`
	// Subject is the NATS subject published to; a JetStream stream must take it.
	Subject string `json:"subject,omitempty"`
	// Stream is the Redis stream's key.
	Stream string `json:"stream,omitempty"`
	// MaxLen trims the Redis stream to about this many entries at each XADD.
	MaxLen int64 `json:"maxLen,omitempty"`
	// Topic is the MQTT topic published to, at QoS 1.
	Topic string `json:"topic,omitempty"`
	// CACertificate is a PEM bundle trusted, besides the system's roots, for the broker's certificate (TLS
	// URLs only): for a broker with a certificate of a private authority.
	CACertificate string `json:"caCertificate,omitempty"`
}

// Bounds of the settings.
const (
	MaxURLLength     = 2048
	MaxNameLength    = 255 // exchange, routing key, subject, stream and topic
	DefaultMaxLen    = 100_000
	MaxMaxLen        = 100_000_000
	MaxCACertificate = 64 << 10
)

// Schemes lists the URL schemes of each method: plain first, then TLS.
var Schemes = map[Method][2]string{
	RabbitMQ:    {"amqp", "amqps"},
	NATS:        {"nats", "tls"},
	RedisStream: {"redis", "rediss"},
	MQTT:        {"mqtt", "mqtts"},
}

// DefaultPorts are the ports a URL without one connects to, plain and TLS.
var DefaultPorts = map[Method][2]int{
	RabbitMQ:    {5672, 5671},
	NATS:        {4222, 4222},
	RedisStream: {6379, 6379},
	MQTT:        {1883, 8883},
}

// Target is everything a publish needs: the method, the URL with its credentials, and the settings.
type Target struct {
	Method   Method
	URL      string
	Settings Settings
}

// TLS reports whether the target's URL asks for TLS.
func (t Target) TLS() bool {
	u, err := url.Parse(t.URL)
	return err == nil && u.Scheme == Schemes[t.Method][1]
}

// Address is the host:port the target connects to, with the method's default port when the URL has none.
func (t Target) Address() (string, error) {
	u, err := url.Parse(t.URL)
	if err != nil {
		return "", err
	}
	port := u.Port()
	if port == "" {
		i := 0
		if t.TLS() {
			i = 1
		}
		port = strconv.Itoa(DefaultPorts[t.Method][i])
	}
	return hostPort(u.Hostname(), port), nil
}

func hostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}

// Key identifies the connection a target uses: targets with the same URL and trust share one.
func (t Target) Key() string {
	return string(t.Method) + "\x00" + t.URL + "\x00" + t.Settings.CACertificate
}

// CertPool is the pool the broker's certificate is checked against: the system's roots and CACertificate.
func (s Settings) CertPool() (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if s.CACertificate != "" && !pool.AppendCertsFromPEM([]byte(s.CACertificate)) {
		return nil, errors.New("caCertificate holds no PEM certificate")
	}
	return pool, nil
}

// Redact is rawURL as the API shows it: its password, if any, replaced by xxxxx. A URL that does not parse is
// shown as nothing.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Redacted()
}

// Validate checks a broker recipient's URL and settings, with messages meant for whoever typed them, and fills
// the defaults (a Redis stream's MaxLen). It connects to nothing: a broker that cannot be reached is told by
// the first attempt.
func Validate(m Method, rawURL string, s *Settings) error {
	schemes, ok := Schemes[m]
	if !ok {
		return fmt.Errorf("method %s is not a broker method", m)
	}
	if err := validateURL(m, schemes, rawURL); err != nil {
		return err
	}
	tls := strings.HasPrefix(rawURL, schemes[1]+"://")
	if s.CACertificate != "" {
		if !tls {
			return fmt.Errorf("caCertificate is only for TLS URLs (%s://)", schemes[1])
		}
		if len(s.CACertificate) > MaxCACertificate {
			return fmt.Errorf("caCertificate must be at most %d bytes", MaxCACertificate)
		}
		if err := checkPEM(s.CACertificate); err != nil {
			return err
		}
	}
	used := map[string]bool{}
	switch m {
	case RabbitMQ:
		used["exchange"], used["routingKey"] = true, true
		if s.Exchange == "" && s.RoutingKey == "" {
			return errors.New("RABBITMQ needs an exchange, a routingKey, or both (the default exchange routes by routingKey to the queue of that name)")
		}
		if err := checkName("exchange", s.Exchange, false); err != nil {
			return err
		}
		if err := checkName("routingKey", s.RoutingKey, false); err != nil {
			return err
		}
		if strings.HasPrefix(s.Exchange, "amq.") && s.Exchange != "amq.direct" && s.Exchange != "amq.topic" &&
			s.Exchange != "amq.fanout" && s.Exchange != "amq.headers" && s.Exchange != "amq.match" {
			return fmt.Errorf("exchange %q: names starting with amq. are reserved by RabbitMQ", s.Exchange)
		}
	case NATS:
		used["subject"] = true
		if err := checkSubject(s.Subject); err != nil {
			return err
		}
	case RedisStream:
		used["stream"], used["maxLen"] = true, true
		if err := checkName("stream", s.Stream, true); err != nil {
			return err
		}
		if s.MaxLen == 0 {
			s.MaxLen = DefaultMaxLen
		}
		if s.MaxLen < 1 || s.MaxLen > MaxMaxLen {
			return fmt.Errorf("maxLen must be between 1 and %d", MaxMaxLen)
		}
	case MQTT:
		used["topic"] = true
		if err := checkTopic(s.Topic); err != nil {
			return err
		}
	}
	for name, set := range map[string]bool{
		"exchange": s.Exchange != "", "routingKey": s.RoutingKey != "", "subject": s.Subject != "",
		"stream": s.Stream != "", "maxLen": s.MaxLen != 0, "topic": s.Topic != "",
	} {
		if set && !used[name] {
			return fmt.Errorf("%s is not a setting of %s recipients", name, m)
		}
	}
	return nil
}

func validateURL(m Method, schemes [2]string, rawURL string) error {
	want := fmt.Sprintf("%s://host:port or %s://host:port", schemes[0], schemes[1])
	if rawURL == "" {
		return fmt.Errorf("url is required for %s recipients: %s, with user and password if the broker asks", m, want)
	}
	if len(rawURL) > MaxURLLength {
		return fmt.Errorf("url must be at most %d characters", MaxURLLength)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("url does not parse: %s", strings.TrimPrefix(err.Error(), "parse "+strconv.Quote(rawURL)+": "))
	}
	if u.Scheme != schemes[0] && u.Scheme != schemes[1] {
		return fmt.Errorf("url scheme %q is not one of %s: %s", u.Scheme, m, want)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("url names no host: %s", want)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("url port %q is not a port number", p)
		}
	}
	if u.Fragment != "" || u.RawQuery != "" {
		return errors.New("url must have no query or fragment: settings are fields of their own")
	}
	switch m {
	case RabbitMQ:
		// The path is the virtual host: "/" or empty is the default one, "/name" another.
		if strings.Count(strings.TrimPrefix(u.Path, "/"), "/") > 0 {
			return errors.New("url path is the virtual host: one segment at most (use %2F for a / in its name)")
		}
	case RedisStream:
		if db := strings.TrimPrefix(u.Path, "/"); db != "" {
			if n, err := strconv.Atoi(db); err != nil || n < 0 || n > 15 {
				return fmt.Errorf("url path %q must be a database number from 0 to 15", u.Path)
			}
		}
	default:
		if u.Path != "" && u.Path != "/" {
			return fmt.Errorf("url must have no path for %s recipients", m)
		}
	}
	return nil
}

func checkName(field, v string, required bool) error {
	switch {
	case v == "" && required:
		return fmt.Errorf("%s is required", field)
	case len(v) > MaxNameLength:
		return fmt.Errorf("%s must be at most %d bytes", field, MaxNameLength)
	case !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0:
		return fmt.Errorf("%s must be UTF-8 text without control characters", field)
	}
	return nil
}

// checkSubject accepts a NATS subject a message can be published to: dot-separated tokens, none empty, no
// wildcard, no white space.
func checkSubject(s string) error {
	if err := checkName("subject", s, true); err != nil {
		return err
	}
	for _, tok := range strings.Split(s, ".") {
		switch {
		case tok == "":
			return fmt.Errorf("subject %q has an empty token (two dots, or a dot at an end)", s)
		case tok == "*" || tok == ">":
			return fmt.Errorf("subject %q has a wildcard: messages are published to one subject", s)
		case strings.ContainsAny(tok, " \t"):
			return fmt.Errorf("subject %q has white space", s)
		}
	}
	return nil
}

// checkTopic accepts an MQTT topic a message can be published to: no wildcard, not a $-topic of the broker.
func checkTopic(t string) error {
	if err := checkName("topic", t, true); err != nil {
		return err
	}
	switch {
	case strings.ContainsAny(t, "+#"):
		return fmt.Errorf("topic %q has a wildcard (+ or #): messages are published to one topic", t)
	case strings.HasPrefix(t, "$"):
		return fmt.Errorf("topic %q starts with $, which brokers keep for themselves", t)
	}
	return nil
}

func checkPEM(bundle string) error {
	rest := []byte(bundle)
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("caCertificate holds a %s block: only certificates are trusted", block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("caCertificate: %s", err.Error())
		}
		n++
	}
	if n == 0 {
		return errors.New("caCertificate holds no PEM certificate")
	}
	return nil
}
