package delivery

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/adal-relay/adal/destauth"
	"github.com/adal-relay/adal/destination"
	"github.com/adal-relay/adal/egress"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/webhook"
)

// ErrorKind classifies a failed attempt. The values are the GraphQL enum values (Attempt.errorKind), so a
// user can filter on them and the panel can explain them without parsing messages.
type ErrorKind string

// The error kinds an attempt records (Attempt.errorKind). An attempt without error has the empty kind.
const (
	// ErrHTTPStatus: the recipient answered, but not with a 2xx (including 1xx and 3xx: redirects are not
	// followed).
	ErrHTTPStatus ErrorKind = "HTTP_STATUS"
	// ErrTimeout: no complete response (headers and body) within the attempt's timeout.
	ErrTimeout ErrorKind = "TIMEOUT"
	// ErrDNS: the recipient's host name could not be resolved.
	ErrDNS ErrorKind = "DNS"
	// ErrTLS: the TLS handshake failed (untrusted or invalid certificate, protocol mismatch, alert).
	ErrTLS ErrorKind = "TLS"
	// ErrConnection: no usable connection: refused, reset, closed early, or refused by the egress guard.
	ErrConnection ErrorKind = "CONNECTION"
	// ErrCLILocal: a CLI recipient's local service could not be reached by the adal CLI.
	ErrCLILocal ErrorKind = "CLI_LOCAL"
	// ErrInterrupted: the attempt was cut short on our side (shutdown, or a lease the rescuer found
	// expired), so its result is unknown.
	ErrInterrupted ErrorKind = "INTERRUPTED"
	// ErrBrokerRefused: a broker recipient's broker answered but did not take the message: a negative
	// confirm, an unroutable message, no stream for the subject, an error reason code, a message over its
	// size limit, or credentials it refused.
	ErrBrokerRefused ErrorKind = "BROKER_REFUSED"
	// ErrAuth: the receiver's credentials could not be obtained: the OAuth2 token endpoint failed or refused,
	// or the client certificate could not be loaded.
	ErrAuth ErrorKind = "AUTH"
)

// Valid reports whether k is one of the known kinds (the empty kind, "no error", is not one).
func (k ErrorKind) Valid() bool {
	switch k {
	case ErrHTTPStatus, ErrTimeout, ErrDNS, ErrTLS, ErrConnection, ErrCLILocal, ErrInterrupted, ErrBrokerRefused, ErrAuth, ErrTransform:
		return true
	}
	return false
}

// DefaultTimeout bounds a whole attempt, reading the response body included, when the recipient sets none.
const DefaultTimeout = 30 * time.Second

// MaxStoredResponse caps the response body kept for Outgoing.KeepResponse, so a recipient answering with
// gigabytes cannot make the relay hold them; the rest is still read, and discarded.
const MaxStoredResponse = 64 << 10

// Outgoing is one attempt to deliver a request: over HTTP, or to a broker when Destination is set.
type Outgoing struct {
	// URL is the full target URL; webhook.JoinTarget builds it from the recipient URL and the inbound path and
	// query. Unused for a broker.
	URL string
	// Destination, for a broker recipient, is where the message is published (package broker); nil for HTTP.
	Destination *destination.Target
	// Path is the request's path after /in/{key}, with its query: a broker message carries it as X-Adal-Path.
	Path string
	// MessageID names the message to a broker, the same on every attempt of one delivery, so that a broker
	// that deduplicates (JetStream) takes an attempt whose answer was lost only once.
	MessageID string
	// Method is forwarded as is; empty means GET, as in net/http.
	Method string
	// Header holds the inbound headers; hop-by-hop, Host, Content-Length and X-Adal-* are dropped on the way.
	Header http.Header
	// Body is forwarded byte for byte.
	Body []byte
	// RequestID is sent as X-Adal-Request-Id.
	RequestID string
	// Attempt is the attempt number, sent as X-Adal-Attempt.
	Attempt int
	// IdempotencyKey is sent as X-Adal-Idempotency when non-empty.
	IdempotencyKey string
	// Verified is sent as X-Adal-Verified when set: the request's sender verification outcome.
	Verified *bool
	// Timeout bounds the whole attempt including reading the response body; 0 means DefaultTimeout.
	Timeout time.Duration
	// KeepResponse asks for the response body (up to MaxStoredResponse) in Outcome.ResponseBody; only
	// outbound jobs that opted in want it, deliveries never store it.
	KeepResponse bool
	// Signer signs the attempt over Body, timestamped when it starts (SignerOf); outbound jobs have none.
	Signer webhook.Signer
	// Traceparent, when set, is sent as the traceparent header in place of any the sender sent: the W3C trace
	// context of the attempt's span, for a recipient with sendTraceparent while tracing is on.
	Traceparent string
	// Auth is how the attempt authenticates to the receiver (HTTP only); nil authenticates nothing.
	Auth *destauth.Config
}

// Outcome is what an attempt records: timing, status and, on failure, a kind and a human-readable message.
type Outcome struct {
	// StartedAt and FinishedAt bracket the attempt, response body included.
	StartedAt, FinishedAt time.Time
	// HTTPStatus is the response status, 0 when no response arrived.
	HTTPStatus int
	// ErrorKind is empty on success.
	ErrorKind ErrorKind
	// ErrorMessage explains the failure to a human; it never contains the request or response body.
	ErrorMessage string
	// ResponseBody is only set with Outgoing.KeepResponse, at most MaxStoredResponse bytes.
	ResponseBody []byte
	// ResponseTruncated tells that ResponseBody was cut at MaxStoredResponse.
	ResponseTruncated bool
	// RetryAfter is when a recipient answering 429 or 503 asked to be called again (its Retry-After, in
	// seconds or as an HTTP date); zero when it did not say. NextAttempt decides how far it is heeded.
	RetryAfter time.Time
	// Answer is what a broker answered (its confirm, stream sequence, entry id or reason code), stored with
	// the attempt; empty for HTTP, whose answer is HTTPStatus.
	Answer string
	// TransformVersion is the number of the recipient's transformation version that ran; nil when none did.
	TransformVersion *int
	// Cancelled says the transformation cancelled the delivery: it ends CANCELED, and the attempt is recorded
	// (kind TRANSFORM) without counting against the recipient's health.
	Cancelled bool
}

// Succeeded reports whether the attempt counts as delivered: a 2xx answer read completely, or a broker's
// confirmation.
func (o Outcome) Succeeded() bool {
	if o.ErrorKind != "" {
		return false
	}
	return o.HTTPStatus >= 200 && o.HTTPStatus <= 299 || o.HTTPStatus == 0 && o.Answer != ""
}

// Duration is how long the attempt took, as shown on the attempt (durationMs).
func (o Outcome) Duration() time.Duration { return o.FinishedAt.Sub(o.StartedAt) }

// HTTPSender makes direct HTTP attempts. It is safe for concurrent use and meant to be shared: it keeps
// connections to recipients alive between attempts.
type HTTPSender struct {
	client *http.Client
	now    func() time.Time
	// tokens caches the OAuth2 tokens of recipients that authenticate with one.
	tokens *destauth.Tokens
	// certs keeps a client per client certificate; nil when the transport is not an *http.Transport (tests).
	certs *certClients
}

// NewHTTPSender returns a sender whose connections go through the egress guard with policy p and are kept for up to inFlight attempts at once to one recipient. now stamps
// StartedAt/FinishedAt so callers can use the same clock as the scheduler; nil means time.Now.
func NewHTTPSender(p egress.Policy, inFlight int, now func() time.Time) *HTTPSender {
	return newHTTPSender(egress.NewTransport(p, inFlight), now)
}

func newHTTPSender(rt http.RoundTripper, now func() time.Time) *HTTPSender {
	if now == nil {
		now = time.Now
	}
	s := &HTTPSender{now: now, client: newClient(rt), tokens: destauth.NewTokens(nil)}
	if tr, ok := rt.(*http.Transport); ok {
		s.certs = &certClients{base: tr, limit: maxCertClients, byKey: map[[sha256.Size]byte]*list.Element{}, lru: list.New()}
	}
	return s
}

func newClient(rt http.RoundTripper) *http.Client {
	return &http.Client{
		Transport: rt,
		// A redirect is an answer, not a delivery: following it would deliver somewhere the tenant never
		// configured (and past the check of the original target).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// CloseIdleConnections releases pooled connections, for shutdown and tests.
func (s *HTTPSender) CloseIdleConnections() {
	s.client.CloseIdleConnections()
	if s.certs != nil {
		s.certs.closeIdle()
	}
}

// errAttemptTimeout is the cause of the attempt's own deadline, to tell it from the caller's.
var errAttemptTimeout = errors.New("attempt timeout")

// Send makes one attempt and reports its outcome; it never returns an error because every failure is an
// outcome to record. Cancelling ctx interrupts the attempt (ErrInterrupted).
func (s *HTTPSender) Send(ctx context.Context, out Outgoing) Outcome {
	timeout := out.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	o := Outcome{StartedAt: s.now()}

	actx, cancel := context.WithTimeoutCause(ctx, timeout, errAttemptTimeout)
	defer cancel()

	req, err := http.NewRequestWithContext(actx, out.Method, out.URL, bytes.NewReader(out.Body))
	if err != nil {
		o.ErrorKind, o.ErrorMessage = ErrConnection, "invalid request: "+invalidRequestReason(err)
		o.FinishedAt = s.now()
		return o
	}
	req.Header = out.Headers(o.StartedAt)
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", webhook.UserAgent)
	}

	client := s.client
	var token string
	if out.Auth != nil {
		var kind ErrorKind
		client, token, kind, o.ErrorMessage = s.authenticate(ctx, actx, out.Auth, timeout)
		if kind != "" {
			o.ErrorKind, o.FinishedAt = kind, s.now()
			return o
		}
		out.Auth.Apply(req.Header, token)
	}

	resp, err := client.Do(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && out.Auth != nil && out.Auth.OAuth2 != nil {
		// The receiver may have revoked the token, or see it expired before we do: one more try, at once, with a
		// new one. Its answer is the attempt's.
		discard(resp.Body)
		s.tokens.Invalidate(out.Auth.OAuth2, token)
		if token, err = s.tokens.Token(actx, s.client, out.Auth.OAuth2); err != nil {
			o.ErrorKind, o.ErrorMessage = tokenFailure(ctx, actx, err, timeout)
			o.FinishedAt = s.now()
			return o
		}
		again, _ := http.NewRequestWithContext(actx, out.Method, out.URL, bytes.NewReader(out.Body)) // built once already
		again.Header = req.Header.Clone()
		out.Auth.Apply(again.Header, token)
		req = again
		resp, err = client.Do(req)
	}
	if err != nil {
		o.ErrorKind, o.ErrorMessage = classify(ctx, actx, err, req.URL.Host, timeout, 0)
		o.FinishedAt = s.now()
		return o
	}
	o.HTTPStatus = resp.StatusCode
	body, truncated, err := readBody(resp.Body, out.KeepResponse)
	_ = resp.Body.Close()
	if out.KeepResponse {
		o.ResponseBody, o.ResponseTruncated = body, truncated
	}
	switch {
	case err != nil:
		o.ErrorKind, o.ErrorMessage = classify(ctx, actx, err, req.URL.Host, timeout, resp.StatusCode)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		o.ErrorKind, o.ErrorMessage = ErrHTTPStatus, statusMessage(resp)
	}
	o.FinishedAt = s.now()
	if webhook.AsksToWait(resp.StatusCode) {
		o.RetryAfter = webhook.ParseRetryAfter(resp.Header.Get("Retry-After"), o.FinishedAt)
	}
	return o
}

// authenticate is what an attempt with auth needs before its request: the client presenting its client
// certificate, and its OAuth2 token. A failure is returned as the attempt's kind and message.
func (s *HTTPSender) authenticate(parent, attempt context.Context, auth *destauth.Config, timeout time.Duration) (*http.Client, string, ErrorKind, string) {
	client := s.client
	if auth.ClientCertificate != nil {
		if s.certs == nil {
			return nil, "", ErrAuth, "this sender cannot present client certificates"
		}
		var err error
		if client, err = s.certs.client(auth.ClientCertificate); err != nil {
			return nil, "", ErrAuth, "the client certificate could not be loaded: " + err.Error()
		}
	}
	if auth.OAuth2 == nil {
		return client, "", "", ""
	}
	// The token comes through the sender's guarded client, without the client certificate: token endpoints
	// are usually elsewhere than the receiver and do not ask for one.
	token, err := s.tokens.Token(attempt, s.client, auth.OAuth2)
	if err != nil {
		kind, msg := tokenFailure(parent, attempt, err, timeout)
		return nil, "", kind, msg
	}
	return client, token, "", ""
}

// tokenFailure classifies a failure to get an OAuth2 token: the attempt's own deadline or interruption as
// for any attempt, anything else as ErrAuth.
func tokenFailure(parent, attempt context.Context, err error, timeout time.Duration) (ErrorKind, string) {
	if errors.Is(parent.Err(), context.Canceled) {
		return ErrInterrupted, "attempt interrupted before it completed: " + context.Cause(parent).Error()
	}
	var te *destauth.TokenError
	errors.As(err, &te)
	if attempt.Err() != nil {
		where := "the OAuth2 token endpoint"
		if te != nil {
			where += " at " + te.Host
		}
		return ErrTimeout, fmt.Sprintf("no response within %s: %s did not answer in time", timeout, where)
	}
	if te != nil && te.Err != nil && te.Status == 0 {
		// Unreached: say why in the words used for a receiver out of reach.
		kind, msg := classify(parent, attempt, te.Err, te.Host, timeout, 0)
		if kind != ErrTimeout {
			return ErrAuth, "could not get an OAuth2 token: " + msg
		}
	}
	return ErrAuth, err.Error()
}

// discard reads a little of a body that is not kept, so that its connection may serve the retry, and
// closes it.
func discard(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, MaxStoredResponse))
	_ = body.Close()
}

// maxCertClients bounds the client certificates whose connections are kept: each has its own pool, since a
// connection is authenticated by the certificate it was opened with.
const maxCertClients = 256

// certClients keeps a client per client certificate, least recently used first to go.
type certClients struct {
	base  *http.Transport
	limit int

	mu    sync.Mutex
	lru   *list.List // of *certClient, most recently used first
	byKey map[[sha256.Size]byte]*list.Element
}

type certClient struct {
	key    [sha256.Size]byte
	client *http.Client
	tr     *http.Transport
}

func (c *certClients) client(cc *destauth.ClientCertificate) (*http.Client, error) {
	key := cc.Fingerprint()
	if cl := c.lookup(key); cl != nil {
		return cl, nil
	}
	pair, err := cc.KeyPair() // outside the lock: parsing a key takes a while
	if err != nil {
		return nil, err
	}
	// A clone keeps the guarded dialer and the trust of the sender's transport.
	tr := c.base.Clone()
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	// Always presented, even when the server's list of acceptable authorities does not name its issuer (as
	// Certificates alone would do): the recipient chose it, and the server's refusal says more than silence.
	tr.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	added := &certClient{key: key, client: newClient(tr), tr: tr}

	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok { // another attempt got there first
		c.lru.MoveToFront(e)
		return e.Value.(*certClient).client, nil
	}
	c.byKey[key] = c.lru.PushFront(added)
	for c.lru.Len() > c.limit {
		old := c.lru.Remove(c.lru.Back()).(*certClient)
		delete(c.byKey, old.key)
		// Connections still in use finish their request and are closed once idle for long enough.
		old.tr.CloseIdleConnections()
	}
	return added.client, nil
}

func (c *certClients) lookup(key [sha256.Size]byte) *http.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		c.lru.MoveToFront(e)
		return e.Value.(*certClient).client
	}
	return nil
}

func (c *certClients) closeIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.lru.Front(); e != nil; e = e.Next() {
		e.Value.(*certClient).tr.CloseIdleConnections()
	}
}

// Headers are the headers an attempt starting at started carries, to an HTTP recipient or on a broker
// message alike: the received ones meant for the recipient, Adal's own, and the signature over Body.
func (out Outgoing) Headers(started time.Time) http.Header {
	h := webhook.Forwarded(out.Header)
	h.Set(webhook.HeaderRequestID, out.RequestID)
	h.Set(webhook.HeaderAttempt, strconv.Itoa(out.Attempt))
	if out.IdempotencyKey != "" {
		h.Set(webhook.HeaderIdempotency, out.IdempotencyKey)
	}
	webhook.SetVerified(h, out.Verified)
	if out.Traceparent != "" {
		h[webhook.HeaderTraceparent] = []string{out.Traceparent}
	}
	out.Signer.Sign(h, started, out.Body)
	return h
}

// readBody reads the whole body: an attempt is only complete once the recipient has sent all of it, and
// reading it lets the connection be reused. Only with keep is (the start of) it retained.
func readBody(body io.Reader, keep bool) (kept []byte, truncated bool, err error) {
	if keep {
		var buf bytes.Buffer
		if _, err = io.Copy(&buf, io.LimitReader(body, MaxStoredResponse)); err != nil {
			return buf.Bytes(), false, err
		}
		kept = buf.Bytes()
	}
	n, err := io.Copy(io.Discard, body)
	return kept, keep && n > 0, err
}

// classify turns a transport or body-read error into a kind and a message. host is the URL's host[:port];
// messages name it rather than the URL, whose query may carry secrets. status is non-zero when the error
// happened while reading the body.
func classify(parent, attempt context.Context, err error, host string, timeout time.Duration, status int) (ErrorKind, string) {
	if errors.Is(parent.Err(), context.Canceled) {
		return ErrInterrupted, "attempt interrupted before it completed: " + context.Cause(parent).Error()
	}
	var forbidden *egress.ForbiddenTargetError
	if errors.As(err, &forbidden) {
		return ErrConnection, fmt.Sprintf("refused to connect to %s: %s", host, forbidden.Error())
	}
	if attempt.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return ErrTimeout, timeoutMessage(err, timeout, status)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		name := dnsErr.Name
		if name == "" {
			name = hostname(host)
		}
		switch {
		case dnsErr.IsNotFound:
			return ErrDNS, fmt.Sprintf("could not resolve host %q: no such host", name)
		case dnsErr.IsTimeout:
			return ErrDNS, fmt.Sprintf("could not resolve host %q: DNS lookup timed out", name)
		default:
			return ErrDNS, fmt.Sprintf("could not resolve host %q: %s", name, dnsErr.Err)
		}
	}
	if isTLS(err) {
		return ErrTLS, fmt.Sprintf("TLS handshake with %s failed: %s", host, innermost(err))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ErrTimeout, timeoutMessage(err, timeout, status)
	}
	during := ""
	if status != 0 {
		during = fmt.Sprintf(" while sending the response body (status %d)", status)
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ErrConnection, fmt.Sprintf("connection to %s refused", host)
	case errors.Is(err, syscall.ECONNRESET):
		return ErrConnection, fmt.Sprintf("connection to %s was reset by the recipient%s", host, during)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ErrConnection, fmt.Sprintf("recipient %s closed the connection before a complete response%s", host, during)
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return ErrConnection, fmt.Sprintf("recipient %s is unreachable: %s", host, innermost(err))
	}
	return ErrConnection, fmt.Sprintf("connection to %s failed%s: %s", host, during, innermost(err))
}

func timeoutMessage(err error, timeout time.Duration, status int) string {
	if status != 0 {
		return fmt.Sprintf("no complete response within %s: the response body (status %d) was still arriving", timeout, status)
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.As(err, &dnsErr):
		return fmt.Sprintf("no response within %s: still resolving the host name", timeout)
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return fmt.Sprintf("no response within %s: still connecting", timeout)
	case strings.Contains(err.Error(), "TLS handshake timeout"):
		return fmt.Sprintf("no response within %s: the TLS handshake timed out", timeout)
	}
	return fmt.Sprintf("no response within %s: the recipient did not send response headers in time", timeout)
}

// IsTLS reports whether err is a failed TLS handshake, for senders of other protocols to classify alike.
func IsTLS(err error) bool { return isTLS(err) }

func isTLS(err error) bool {
	var (
		certVerify *tls.CertificateVerificationError
		recordHdr  tls.RecordHeaderError
		alert      tls.AlertError
		echReject  *tls.ECHRejectionError
		unknownCA  x509.UnknownAuthorityError
		invalid    x509.CertificateInvalidError
		hostname   x509.HostnameError
		opErr      *net.OpError
	)
	switch {
	case errors.As(err, &certVerify), errors.As(err, &recordHdr), errors.As(err, &alert), errors.As(err, &echReject),
		errors.As(err, &unknownCA), errors.As(err, &invalid), errors.As(err, &hostname):
		return true
	case errors.As(err, &opErr) && opErr.Op == "remote error": // an alert sent by the peer
		return true
	}
	// crypto/tls reports many handshake failures as plain errors, all prefixed "tls: ", and net/http turns
	// the RecordHeaderError of a plain-HTTP answer into a plain error of its own.
	msg := innermost(err)
	return strings.HasPrefix(msg, "tls: ") || strings.HasPrefix(msg, "x509: ") ||
		strings.Contains(msg, "server gave HTTP response to HTTPS client")
}

// innermost strips the url.Error wrapper (method and full URL, which may carry secrets in its query) and
// keeps the transport's own wording.
func innermost(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

func hostname(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return host
}

// invalidRequestReason explains a request that could not even be built (bad method or URL) without echoing
// the URL, which may carry secrets.
func invalidRequestReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return "malformed target URL: " + ue.Err.Error()
	}
	return err.Error()
}

// maxLocation caps how much of a redirect target is quoted in a message.
const maxLocation = 256

func statusMessage(resp *http.Response) string {
	msg := "recipient answered " + strconv.Itoa(resp.StatusCode)
	if text := http.StatusText(resp.StatusCode); text != "" {
		msg += " " + text
	}
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		msg += " (redirects are not followed"
		if loc := resp.Header.Get("Location"); loc != "" {
			if len(loc) > maxLocation {
				loc = loc[:maxLocation] + "…"
			}
			msg += fmt.Sprintf("; Location: %q", loc)
		}
		msg += ")"
	}
	return msg
}

// TargetOf is where an attempt of a broker recipient publishes; nil for a DIRECT_HTTP or CLI recipient.
func TargetOf(r *ent.Recipient) *destination.Target {
	if !destination.IsBroker(r.Method.String()) {
		return nil
	}
	t := &destination.Target{Method: destination.Method(r.Method), URL: r.DestinationURL}
	if r.Destination != nil {
		t.Settings = *r.Destination
	}
	return t
}
