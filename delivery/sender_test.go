package delivery

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/destauth"
	"github.com/adal-relay/adal/egress"
	"github.com/adal-relay/adal/webhook"
)

// received is what a test server saw of one request, captured in the handler and checked in the test
// goroutine (require must not run in a handler).
type received struct {
	method, host, path, rawQuery string
	header                       http.Header
	body                         []byte
	contentLength                int64
	transferEncoding             []string
	proto                        string
}

// capture answers status to every request and hands each request it saw to the returned channel.
func capture(status int) (http.Handler, <-chan received) {
	ch := make(chan received, 16)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ch <- received{
			method: r.Method, host: r.Host, path: r.URL.EscapedPath(), rawQuery: r.URL.RawQuery,
			header: r.Header.Clone(), body: body, contentLength: r.ContentLength,
			transferEncoding: r.TransferEncoding, proto: r.Proto,
		}
		w.WriteHeader(status)
	}), ch
}

func newServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	return startServer(t, h, (*httptest.Server).Start)
}

// newTLSServer serves h over TLS with a certificate no client trusts by default.
func newTLSServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	return startServer(t, h, (*httptest.Server).StartTLS)
}

func startServer(t *testing.T, h http.Handler, start func(*httptest.Server)) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused TLS handshakes would only add noise
	start(srv)
	t.Cleanup(srv.Close)
	return srv
}

// releaseOnCleanup closes release when the test ends. Call it after newServer: cleanups run last-in
// first-out, so handlers blocked on release are let go before the server waits for them.
func releaseOnCleanup(t *testing.T, release chan struct{}) {
	t.Cleanup(func() { close(release) })
}

func newSender(t *testing.T, allowPrivate bool) *HTTPSender {
	t.Helper()
	s := NewHTTPSender(egress.Policy{AllowPrivate: allowPrivate}, 0, nil)
	t.Cleanup(s.CloseIdleConnections)
	return s
}

func send(t *testing.T, s *HTTPSender, out Outgoing) Outcome {
	t.Helper()
	if out.RequestID == "" {
		out.RequestID = "req-1"
	}
	if out.Attempt == 0 {
		out.Attempt = 1
	}
	if out.Method == "" {
		out.Method = http.MethodPost
	}
	o := s.Send(t.Context(), out)
	t.Logf("outcome: status=%d kind=%q message=%q", o.HTTPStatus, o.ErrorKind, o.ErrorMessage)
	require.False(t, o.FinishedAt.Before(o.StartedAt))
	if o.Succeeded() {
		require.Empty(t, o.ErrorKind)
		require.Empty(t, o.ErrorMessage)
	} else {
		require.True(t, o.ErrorKind.Valid(), "kind %q", o.ErrorKind)
		require.NotEmpty(t, o.ErrorMessage)
	}
	return o
}

func TestSendForwardsHeadersAndStripsHopByHop(t *testing.T) {
	t.Parallel()
	h, got := capture(http.StatusOK)
	srv := newServer(t, h)

	header := http.Header{
		"Content-Type":        {"application/json"},
		"Authorization":       {"Bearer end-to-end"},
		"User-Agent":          {"Stripe/1.0"},
		"X-Custom":            {"a", "b"},
		"Connection":          {"keep-alive, X-Drop-Me", "x-also-drop"},
		"X-Drop-Me":           {"1"},
		"X-Also-Drop":         {"1"},
		"Keep-Alive":          {"timeout=5"},
		"Proxy-Authorization": {"Basic c2VjcmV0"},
		"Proxy-Authenticate":  {"Basic"},
		"Proxy-Connection":    {"keep-alive"},
		"Te":                  {"trailers"},
		"Trailer":             {"X-T"},
		"Trailers":            {"X-T"},
		"Transfer-Encoding":   {"chunked"},
		"Upgrade":             {"websocket"},
		"Expect":              {"100-continue"},
		"Host":                {"evil.example"},
		"Content-Length":      {"999"},
		"X-Adal-Request-Id":   {"spoofed"},
		"x-adal-attempt":      {"99"}, // not canonical: must be caught all the same
		"X-Adal-Idempotency":  {"spoofed"},
		"X-Adal-Other":        {"spoofed"},
	}
	o := send(t, newSender(t, true), Outgoing{
		URL: srv.URL + "/hook", Header: header, Body: []byte(`{"a":1}`), RequestID: "req-42", Attempt: 3,
	})
	require.True(t, o.Succeeded())
	r := <-got

	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	require.Equal(t, "Bearer end-to-end", r.header.Get("Authorization"))
	require.Equal(t, "Stripe/1.0", r.header.Get("User-Agent"))
	require.Equal(t, []string{"a", "b"}, r.header.Values("X-Custom"))
	for _, name := range []string{
		"X-Drop-Me", "X-Also-Drop", "Keep-Alive", "Proxy-Authorization", "Proxy-Authenticate", "Proxy-Connection",
		"Te", "Trailer", "Trailers", "Upgrade", "Expect", "X-Adal-Other",
	} {
		require.Empty(t, r.header.Values(name), name)
	}
	require.Empty(t, r.transferEncoding)
	require.Equal(t, srv.Listener.Addr().String(), r.host, "Host comes from the target URL")
	require.Equal(t, int64(len(`{"a":1}`)), r.contentLength, "Content-Length is recomputed")
	require.Equal(t, []string{"req-42"}, r.header.Values(webhook.HeaderRequestID))
	require.Equal(t, []string{"3"}, r.header.Values(webhook.HeaderAttempt))
	require.Empty(t, r.header.Values(webhook.HeaderIdempotency), "no key, no header, and never the spoofed one")
	require.Equal(t, header.Get("Host"), "evil.example", "the caller's header is not modified")
}

func TestSendDefaultUserAgent(t *testing.T) {
	t.Parallel()
	h, got := capture(http.StatusOK)
	srv := newServer(t, h)
	send(t, newSender(t, true), Outgoing{URL: srv.URL})
	require.Equal(t, webhook.UserAgent, (<-got).header.Get("User-Agent"))
}

func TestSendIdempotencyHeader(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"", "key-7f3a"} {
		t.Run("key="+key, func(t *testing.T) {
			t.Parallel()
			h, got := capture(http.StatusOK)
			srv := newServer(t, h)
			send(t, newSender(t, true), Outgoing{URL: srv.URL, IdempotencyKey: key})
			r := <-got
			if key == "" {
				require.NotContains(t, r.header, webhook.HeaderIdempotency)
			} else {
				require.Equal(t, []string{key}, r.header.Values(webhook.HeaderIdempotency))
			}
		})
	}
}

func TestSendPreservesMethodBodyPathQuery(t *testing.T) {
	t.Parallel()
	binary := []byte{0, 1, 2, 0xff, '\r', '\n', 0}
	large := []byte(strings.Repeat("x", 1<<20))
	tests := []struct {
		name, method, suffix, query string
		body                        []byte
		wantPath                    string
	}{
		{"post json", http.MethodPost, "/events", "a=1&b=2", []byte(`{"ok":true}`), "/base/events"},
		{"put binary", http.MethodPut, "", "", binary, "/base"},
		{"patch encoded path", http.MethodPatch, "/a%2Fb/c%20d", "q=%20x&q=y", []byte("x"), "/base/a%2Fb/c%20d"},
		{"delete no body", http.MethodDelete, "/x/", "", nil, "/base/x/"},
		{"get no body", http.MethodGet, "", "only=query", nil, "/base"},
		{"custom method", "PURGE", "/p", "", []byte("z"), "/base/p"},
		{"large body", http.MethodPost, "", "", large, "/base"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, got := capture(http.StatusNoContent)
			srv := newServer(t, h)
			target, err := webhook.JoinTarget(srv.URL+"/base", tt.suffix, tt.query)
			require.NoError(t, err)
			o := send(t, newSender(t, true), Outgoing{URL: target, Method: tt.method, Body: tt.body})
			require.True(t, o.Succeeded())
			r := <-got
			require.Equal(t, tt.method, r.method)
			require.Equal(t, tt.wantPath, r.path)
			require.Equal(t, tt.query, r.rawQuery)
			require.Equal(t, len(tt.body), len(r.body))
			require.Equal(t, string(tt.body), string(r.body))
			require.Equal(t, int64(len(tt.body)), max(r.contentLength, 0))
		})
	}
}

func TestSendSuccessStatuses(t *testing.T) {
	t.Parallel()
	for _, status := range []int{200, 201, 202, 204, 299} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			h, _ := capture(status)
			srv := newServer(t, h)
			o := send(t, newSender(t, true), Outgoing{URL: srv.URL})
			require.True(t, o.Succeeded())
			require.Equal(t, status, o.HTTPStatus)
			require.Empty(t, o.ErrorKind)
			require.Nil(t, o.ResponseBody)
		})
	}
}

func TestSendFailureStatuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status int
		want   string
	}{
		{301, "recipient answered 301 Moved Permanently (redirects are not followed; Location: "},
		{302, "recipient answered 302 Found (redirects are not followed; Location: "},
		{307, "recipient answered 307 Temporary Redirect (redirects are not followed; Location: "},
		{400, "recipient answered 400 Bad Request"},
		{404, "recipient answered 404 Not Found"},
		{429, "recipient answered 429 Too Many Requests"},
		{500, "recipient answered 500 Internal Server Error"},
		{503, "recipient answered 503 Service Unavailable"},
		{599, "recipient answered 599"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			var redirected atomic.Int32
			mux := http.NewServeMux()
			mux.HandleFunc("/elsewhere", func(http.ResponseWriter, *http.Request) { redirected.Add(1) })
			mux.HandleFunc("/hook", func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Location", "/elsewhere")
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, "SECRET-RESPONSE-BODY")
			})
			srv := newServer(t, mux)
			o := send(t, newSender(t, true), Outgoing{URL: srv.URL + "/hook", Body: []byte("SECRET-REQUEST-BODY")})
			require.False(t, o.Succeeded())
			require.Equal(t, ErrHTTPStatus, o.ErrorKind)
			require.Equal(t, tt.status, o.HTTPStatus)
			require.True(t, strings.HasPrefix(o.ErrorMessage, tt.want), o.ErrorMessage)
			require.NotContains(t, o.ErrorMessage, "SECRET")
			require.Nil(t, o.ResponseBody)
			require.Zero(t, redirected.Load(), "redirects are not followed")
		})
	}
}

func TestSendTimeoutWaitingForResponse(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := newServer(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	releaseOnCleanup(t, release)
	o := send(t, newSender(t, true), Outgoing{URL: srv.URL, Timeout: 100 * time.Millisecond})
	require.Equal(t, ErrTimeout, o.ErrorKind)
	require.Zero(t, o.HTTPStatus)
	require.Contains(t, o.ErrorMessage, "no response within 100ms")
}

func TestSendTimeoutDuringSlowBody(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "SECRET-PARTIAL-BODY")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	releaseOnCleanup(t, release)
	for _, keep := range []bool{false, true} {
		o := send(t, newSender(t, true), Outgoing{URL: srv.URL, Timeout: 100 * time.Millisecond, KeepResponse: keep})
		require.False(t, o.Succeeded(), "a 2xx whose body never completes is not a delivery")
		require.Equal(t, ErrTimeout, o.ErrorKind)
		require.Equal(t, http.StatusOK, o.HTTPStatus)
		require.Contains(t, o.ErrorMessage, "no complete response within 100ms")
		require.Contains(t, o.ErrorMessage, "body")
		require.NotContains(t, o.ErrorMessage, "SECRET")
	}
}

func TestSendConnectionRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there any more

	o := send(t, newSender(t, true), Outgoing{URL: "http://" + addr + "/hook?token=SECRET-TOKEN"})
	require.Equal(t, ErrConnection, o.ErrorKind)
	require.Zero(t, o.HTTPStatus)
	require.Equal(t, "connection to "+addr+" refused", o.ErrorMessage)
	require.NotContains(t, o.ErrorMessage, "SECRET", "the URL's query may hold secrets")
}

// hijack lets a handler misbehave at the TCP level.
func hijack(t *testing.T, write string) *httptest.Server {
	return newServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		_, _ = buf.WriteString(write)
		_ = buf.Flush()
		_ = conn.Close()
	}))
}

func TestSendConnectionClosedEarly(t *testing.T) {
	t.Parallel()
	t.Run("before headers", func(t *testing.T) {
		t.Parallel()
		srv := hijack(t, "")
		o := send(t, newSender(t, true), Outgoing{URL: srv.URL})
		require.Equal(t, ErrConnection, o.ErrorKind)
		require.Zero(t, o.HTTPStatus)
		require.Contains(t, o.ErrorMessage, "closed the connection before a complete response")
	})
	t.Run("during body", func(t *testing.T) {
		t.Parallel()
		srv := hijack(t, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nSECRET")
		o := send(t, newSender(t, true), Outgoing{URL: srv.URL})
		require.False(t, o.Succeeded())
		require.Equal(t, ErrConnection, o.ErrorKind)
		require.Equal(t, http.StatusOK, o.HTTPStatus)
		require.Contains(t, o.ErrorMessage, "closed the connection before a complete response while sending the response body (status 200)")
		require.NotContains(t, o.ErrorMessage, "SECRET")
	})
}

func TestSendTLSErrors(t *testing.T) {
	t.Parallel()
	t.Run("untrusted certificate", func(t *testing.T) {
		t.Parallel()
		h, got := capture(http.StatusOK)
		srv := newTLSServer(t, h)
		o := send(t, newSender(t, true), Outgoing{URL: srv.URL})
		require.Equal(t, ErrTLS, o.ErrorKind)
		require.Zero(t, o.HTTPStatus)
		require.Contains(t, o.ErrorMessage, "TLS handshake with "+srv.Listener.Addr().String()+" failed")
		require.Contains(t, o.ErrorMessage, "certificate")
		require.Empty(t, got)
	})
	t.Run("plain HTTP behind https URL", func(t *testing.T) {
		t.Parallel()
		h, _ := capture(http.StatusOK)
		srv := newServer(t, h)
		o := send(t, newSender(t, true), Outgoing{URL: strings.Replace(srv.URL, "http://", "https://", 1)})
		require.Equal(t, ErrTLS, o.ErrorKind, o.ErrorMessage)
	})
	t.Run("wrong host name", func(t *testing.T) {
		t.Parallel()
		h, _ := capture(http.StatusOK)
		srv := newTLSServer(t, h)
		// Trusted CA, but the certificate is for 127.0.0.1/example.com, not for the name we ask for.
		tr := egress.NewTransport(egress.Policy{AllowPrivate: true}, 0)
		tr.TLSClientConfig.RootCAs = x509.NewCertPool()
		tr.TLSClientConfig.RootCAs.AddCert(srv.Certificate())
		tr.TLSClientConfig.ServerName = "not-in-the-cert.test"
		s := newHTTPSender(tr, nil)
		t.Cleanup(s.CloseIdleConnections)
		o := send(t, s, Outgoing{URL: srv.URL})
		require.Equal(t, ErrTLS, o.ErrorKind)
		require.Contains(t, o.ErrorMessage, "not-in-the-cert.test")
	})
}

// TestSendHTTP2 runs the forwarding rules over HTTP/2, where a leftover Connection header would be a
// protocol error.
func TestSendHTTP2(t *testing.T) {
	t.Parallel()
	h, got := capture(http.StatusAccepted)
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	tr := egress.NewTransport(egress.Policy{AllowPrivate: true}, 0)
	tr.TLSClientConfig.RootCAs = x509.NewCertPool()
	tr.TLSClientConfig.RootCAs.AddCert(srv.Certificate())
	s := newHTTPSender(tr, nil)
	t.Cleanup(s.CloseIdleConnections)

	o := send(t, s, Outgoing{
		URL: srv.URL + "/h2", Body: []byte("hello"),
		Header: http.Header{"Connection": {"keep-alive"}, "Keep-Alive": {"1"}, "Te": {"gzip"}, "X-Ok": {"1"}},
	})
	require.True(t, o.Succeeded(), o.ErrorMessage)
	require.Equal(t, http.StatusAccepted, o.HTTPStatus)
	r := <-got
	require.Equal(t, "HTTP/2.0", r.proto)
	require.Equal(t, "1", r.header.Get("X-Ok"))
	require.Equal(t, "hello", string(r.body))
}

// fakeNXDOMAINResolver answers every DNS query with "no such name", in memory: the test sends no DNS
// traffic anywhere, not even for a .invalid name.
func fakeNXDOMAINResolver(queries *atomic.Int32) *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			client, server := net.Pipe()
			go func() {
				defer server.Close()
				r := bufio.NewReader(server)
				for {
					// Not a PacketConn, so the resolver uses TCP framing: 2-byte length, then the message.
					var n uint16
					if binary.Read(r, binary.BigEndian, &n) != nil {
						return
					}
					msg := make([]byte, n)
					if _, err := io.ReadFull(r, msg); err != nil || len(msg) < 12 {
						return
					}
					queries.Add(1)
					// Keep header and question; drop the rest (EDNS0 OPT).
					end := 12
					for end < len(msg) && msg[end] != 0 {
						end += int(msg[end]) + 1
					}
					end += 1 + 4 // root label, QTYPE, QCLASS
					if end > len(msg) {
						return
					}
					resp := append([]byte(nil), msg[:end]...)
					resp[2] = 0x80 | msg[2]&0x79 // QR, opcode and RD echoed
					resp[3] = 0x80 | 3           // RA, RCODE 3 = NXDOMAIN
					binary.BigEndian.PutUint16(resp[6:], 0)
					binary.BigEndian.PutUint16(resp[8:], 0)
					binary.BigEndian.PutUint16(resp[10:], 0)
					frame := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
					if _, err := server.Write(append(frame, resp...)); err != nil {
						return
					}
				}
			}()
			return client, nil
		},
	}
}

func TestSendDNSError(t *testing.T) {
	t.Parallel()
	var queries atomic.Int32
	d := egress.NewDialer(egress.Policy{})
	d.Resolver = fakeNXDOMAINResolver(&queries)
	tr := egress.NewTransport(egress.Policy{}, 0)
	tr.DialContext = d.DialContext
	s := newHTTPSender(tr, nil)
	t.Cleanup(s.CloseIdleConnections)

	o := send(t, s, Outgoing{URL: "http://adal-test-nonexistent.invalid/hook"})
	require.Equal(t, ErrDNS, o.ErrorKind)
	require.Zero(t, o.HTTPStatus)
	require.Equal(t, `could not resolve host "adal-test-nonexistent.invalid": no such host`, o.ErrorMessage)
	require.Positive(t, queries.Load(), "the in-memory resolver answered")
}

func TestSendEgressRefusal(t *testing.T) {
	t.Parallel()
	h, got := capture(http.StatusOK)
	srv := newServer(t, h)
	o := send(t, newSender(t, false), Outgoing{URL: srv.URL + "/hook"})
	require.False(t, o.Succeeded())
	require.Equal(t, ErrConnection, o.ErrorKind)
	require.Zero(t, o.HTTPStatus)
	require.Equal(t, "refused to connect to "+srv.Listener.Addr().String()+
		": target address 127.0.0.1 is not allowed (loopback); list its range in ADAL_ALLOWED_TARGET_CIDRS or set ADAL_ALLOW_PRIVATE_TARGETS=true to allow", o.ErrorMessage)
	require.Empty(t, got, "nothing reached the server")
}

func TestSendInterrupted(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	arrived := make(chan struct{})
	var once sync.Once
	srv := newServer(t, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(arrived) })
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	releaseOnCleanup(t, release)
	ctx, cancel := context.WithCancelCause(t.Context())
	go func() {
		<-arrived
		cancel(errors.New("relay shutting down"))
	}()
	o := newSender(t, true).Send(ctx, Outgoing{URL: srv.URL, Method: http.MethodPost, Attempt: 1})
	require.Equal(t, ErrInterrupted, o.ErrorKind)
	require.Equal(t, "attempt interrupted before it completed: relay shutting down", o.ErrorMessage)
}

func TestSendInvalidRequest(t *testing.T) {
	t.Parallel()
	s := newSender(t, true)
	o := s.Send(t.Context(), Outgoing{URL: "http://127.0.0.1/", Method: "BAD METHOD"})
	require.Equal(t, ErrConnection, o.ErrorKind)
	require.Contains(t, o.ErrorMessage, "invalid request")
	o = s.Send(t.Context(), Outgoing{URL: "http://127.0.0.1:bad/?token=SECRET", Method: http.MethodGet})
	require.Equal(t, ErrConnection, o.ErrorKind)
	require.Contains(t, o.ErrorMessage, "malformed target URL")
	require.NotContains(t, o.ErrorMessage, "SECRET")
}

func TestSendKeepResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		size      int
		keep      bool
		wantLen   int
		truncated bool
	}{
		{"not kept", 1000, false, 0, false},
		{"kept small", 1000, true, 1000, false},
		{"kept exactly the cap", MaxStoredResponse, true, MaxStoredResponse, false},
		{"kept and capped", MaxStoredResponse + 1, true, MaxStoredResponse, true},
		{"large not kept", 4 << 20, false, 0, false},
		{"large capped", 4 << 20, true, MaxStoredResponse, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			payload := strings.Repeat("r", tt.size)
			srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, payload)
			}))
			o := send(t, newSender(t, true), Outgoing{URL: srv.URL, KeepResponse: tt.keep})
			require.True(t, o.Succeeded())
			require.Len(t, o.ResponseBody, tt.wantLen)
			if !tt.keep {
				require.Nil(t, o.ResponseBody)
			}
			require.Equal(t, payload[:tt.wantLen], string(o.ResponseBody))
			require.Equal(t, tt.truncated, o.ResponseTruncated)
		})
	}
}

func TestSendUsesClock(t *testing.T) {
	t.Parallel()
	h, _ := capture(http.StatusOK)
	srv := newServer(t, h)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var ticks atomic.Int64
	clock := func() time.Time { return t0.Add(time.Duration(ticks.Add(1)) * time.Second) }
	s := NewHTTPSender(egress.Policy{AllowPrivate: true}, 0, clock)
	t.Cleanup(s.CloseIdleConnections)
	o := send(t, s, Outgoing{URL: srv.URL})
	require.Equal(t, t0.Add(time.Second), o.StartedAt)
	require.Equal(t, t0.Add(2*time.Second), o.FinishedAt)
	require.Equal(t, time.Second, o.Duration())
}

func TestErrorKindValid(t *testing.T) {
	t.Parallel()
	for _, k := range []ErrorKind{ErrHTTPStatus, ErrTimeout, ErrDNS, ErrTLS, ErrConnection, ErrCLILocal, ErrInterrupted, ErrBrokerRefused, ErrAuth} {
		require.True(t, k.Valid(), k)
	}
	require.False(t, ErrorKind("").Valid())
	require.False(t, ErrorKind("timeout").Valid())
}

func TestOutcomeSucceeded(t *testing.T) {
	t.Parallel()
	require.True(t, Outcome{HTTPStatus: 200}.Succeeded())
	require.True(t, Outcome{HTTPStatus: 299}.Succeeded())
	require.False(t, Outcome{HTTPStatus: 199}.Succeeded())
	require.False(t, Outcome{HTTPStatus: 300}.Succeeded())
	require.False(t, Outcome{}.Succeeded())
	require.False(t, Outcome{HTTPStatus: 200, ErrorKind: ErrTimeout}.Succeeded())
}

// TestSenderReadsRetryAfter: the sender carries Retry-After of a 429 or a 503, in seconds or as an HTTP date,
// and ignores it on other statuses.
func TestSenderReadsRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	answers := map[string]struct {
		status     int
		retryAfter string
	}{
		"/seconds":  {http.StatusTooManyRequests, "120"},
		"/date":     {http.StatusServiceUnavailable, "Mon, 01 Jun 2026 12:10:00 GMT"},
		"/other":    {http.StatusInternalServerError, "120"},
		"/bad":      {http.StatusTooManyRequests, "later"},
		"/no-value": {http.StatusServiceUnavailable, ""},
	}
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := answers[r.URL.Path]
		if a.retryAfter != "" {
			w.Header().Set("Retry-After", a.retryAfter)
		}
		w.WriteHeader(a.status)
	}))
	s := NewHTTPSender(egress.Policy{AllowPrivate: true}, 0, func() time.Time { return now })
	t.Cleanup(s.CloseIdleConnections)
	send := func(path string) Outcome {
		return s.Send(context.Background(), Outgoing{Method: http.MethodPost, URL: srv.URL + path, Attempt: 1})
	}

	o := send("/seconds")
	require.Equal(t, 429, o.HTTPStatus)
	require.Equal(t, ErrHTTPStatus, o.ErrorKind, "the attempt still fails")
	require.True(t, now.Add(2*time.Minute).Equal(o.RetryAfter), "%v", o.RetryAfter)
	o = send("/date")
	require.Equal(t, 503, o.HTTPStatus)
	require.True(t, now.Add(10*time.Minute).Equal(o.RetryAfter), "%v", o.RetryAfter)
	for _, path := range []string{"/other", "/bad", "/no-value"} {
		require.True(t, send(path).RetryAfter.IsZero(), path)
	}
}

// authReceiver answers 200 to every request whose Authorization is in accepted (any request when accepted
// is nil) and 401 to the others, and hands each request it saw to the returned channel.
func authReceiver(t *testing.T, accepted func(authorization string) bool) (*httptest.Server, <-chan received) {
	t.Helper()
	ch := make(chan received, 64)
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ch <- received{method: r.Method, header: r.Header.Clone(), body: body}
		if accepted != nil && !accepted(r.Header.Get("Authorization")) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	return srv, ch
}

// tokenEndpoint is a local OAuth2 token endpoint: answer writes the answer to its n-th request (from 1); by
// default, tok-n for an hour.
type tokenEndpoint struct {
	*httptest.Server
	requests atomic.Int32
}

func newTokenEndpoint(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *tokenEndpoint {
	t.Helper()
	if answer == nil {
		answer = func(n int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":3600}`, n)
		}
	}
	te := &tokenEndpoint{}
	te.Server = newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm() // read to its end, the body lets the server notice a client that gives up
		answer(int(te.requests.Add(1)), w, r)
	}))
	return te
}

const authSecret = "client-secret-never-shown"

func (te *tokenEndpoint) auth() *destauth.Config {
	return &destauth.Config{OAuth2: &destauth.OAuth2{TokenURL: te.URL + "/token", ClientID: "relay", ClientSecret: authSecret}}
}

func TestSendAuthHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		auth destauth.Config
		want http.Header
	}{
		{"custom headers", destauth.Config{Headers: map[string]string{"x-api-key": "k1", "User-Agent": "ours", "Content-Type": "text/plain"}},
			http.Header{"X-Api-Key": {"k1"}, "User-Agent": {"ours"}, "Content-Type": {"text/plain"}, "Authorization": {"Bearer end-to-end"}}},
		{"basic", destauth.Config{Basic: &destauth.Basic{Username: "relay", Password: "pw"}},
			http.Header{"Authorization": {"Basic cmVsYXk6cHc="}, "Content-Type": {"application/json"}}},
		{"bearer and a header", destauth.Config{Bearer: "static-token", Headers: map[string]string{"X-Tenant": "t1"}},
			http.Header{"Authorization": {"Bearer static-token"}, "X-Tenant": {"t1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, tt.auth.Validate())
			srv, got := authReceiver(t, nil)
			o := send(t, newSender(t, true), Outgoing{
				URL: srv.URL, Body: []byte(`{}`), Auth: &tt.auth,
				Header: http.Header{"Authorization": {"Bearer end-to-end"}, "Content-Type": {"application/json"}, "X-Api-Key": {"sender's"}},
			})
			require.True(t, o.Succeeded())
			r := <-got
			for name, values := range tt.want {
				require.Equal(t, values, r.header.Values(name), name)
			}
			require.Equal(t, "req-1", r.header.Get(webhook.HeaderRequestID), "the relay's own headers stay")
		})
	}
}

func TestSendOAuth2TokenFetchedOnce(t *testing.T) {
	t.Parallel()
	te := newTokenEndpoint(t, nil)
	srv, got := authReceiver(t, func(a string) bool { return a == "Bearer tok-1" })
	s := newSender(t, true)
	auth := te.auth()
	for i := range 5 {
		o := send(t, s, Outgoing{URL: srv.URL, Attempt: i + 1, Auth: auth})
		require.True(t, o.Succeeded(), o.ErrorMessage)
		require.Equal(t, "Bearer tok-1", (<-got).header.Get("Authorization"))
	}
	require.EqualValues(t, 1, te.requests.Load(), "one token for every attempt")
}

// TestSendOAuth2RefreshOn401: a receiver refusing the cached token gets, within the same attempt, one more
// request with a new token; its answer is the attempt's.
func TestSendOAuth2RefreshOn401(t *testing.T) {
	t.Parallel()
	t.Run("new token accepted", func(t *testing.T) {
		t.Parallel()
		te := newTokenEndpoint(t, nil)
		srv, got := authReceiver(t, func(a string) bool { return a == "Bearer tok-2" })
		s := newSender(t, true)
		o := send(t, s, Outgoing{URL: srv.URL, Body: []byte("payload"), Auth: te.auth()})
		require.True(t, o.Succeeded(), o.ErrorMessage)
		require.Equal(t, http.StatusOK, o.HTTPStatus)
		first, second := <-got, <-got
		require.Equal(t, "Bearer tok-1", first.header.Get("Authorization"))
		require.Equal(t, "Bearer tok-2", second.header.Get("Authorization"))
		require.Equal(t, "payload", string(second.body), "the body is sent again")
		require.Equal(t, first.header.Get(webhook.HeaderRequestID), second.header.Get(webhook.HeaderRequestID))

		o = send(t, s, Outgoing{URL: srv.URL, Auth: te.auth()})
		require.True(t, o.Succeeded())
		require.Equal(t, "Bearer tok-2", (<-got).header.Get("Authorization"), "the new token is cached")
		require.EqualValues(t, 2, te.requests.Load())
	})
	t.Run("refused again", func(t *testing.T) {
		t.Parallel()
		te := newTokenEndpoint(t, nil)
		srv, got := authReceiver(t, func(string) bool { return false })
		o := send(t, newSender(t, true), Outgoing{URL: srv.URL, Auth: te.auth()})
		require.Equal(t, ErrHTTPStatus, o.ErrorKind)
		require.Equal(t, http.StatusUnauthorized, o.HTTPStatus)
		require.Len(t, got, 2, "one retry, not more")
		require.EqualValues(t, 2, te.requests.Load())
	})
	t.Run("not for static credentials", func(t *testing.T) {
		t.Parallel()
		srv, got := authReceiver(t, func(string) bool { return false })
		o := send(t, newSender(t, true), Outgoing{URL: srv.URL, Auth: &destauth.Config{Bearer: "static"}})
		require.Equal(t, http.StatusUnauthorized, o.HTTPStatus)
		require.Len(t, got, 1)
	})
}

func TestSendOAuth2ConcurrentAttemptsShareOneFetch(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	te := newTokenEndpoint(t, func(n int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprintf(w, `{"access_token":"tok-%d","expires_in":3600}`, n)
	})
	srv, got := authReceiver(t, func(a string) bool { return a == "Bearer tok-1" })
	s := newSender(t, true)
	auth := te.auth()
	const attempts = 16
	outcomes := make(chan Outcome, attempts)
	var wg sync.WaitGroup
	for i := range attempts {
		wg.Go(func() {
			outcomes <- s.Send(t.Context(), Outgoing{Method: http.MethodPost, URL: srv.URL, Attempt: i + 1, Auth: auth})
		})
	}
	require.Eventually(t, func() bool { return te.requests.Load() == 1 }, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond) // let the others line up behind the fetch
	close(release)
	wg.Wait()
	close(outcomes)
	for o := range outcomes {
		require.True(t, o.Succeeded(), o.ErrorMessage)
	}
	require.Len(t, got, attempts)
	require.EqualValues(t, 1, te.requests.Load())
}

func TestSendOAuth2TokenEndpointFails(t *testing.T) {
	t.Parallel()
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		te := newTokenEndpoint(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"invalid_client","error_description":"Client authentication failed"}`)
		})
		srv, got := authReceiver(t, nil)
		o := send(t, newSender(t, true), Outgoing{URL: srv.URL, Auth: te.auth()})
		require.Equal(t, ErrAuth, o.ErrorKind)
		require.Zero(t, o.HTTPStatus)
		require.Equal(t, "OAuth2 token endpoint at "+te.Listener.Addr().String()+" answered 401: invalid_client (Client authentication failed)", o.ErrorMessage)
		require.NotContains(t, o.ErrorMessage, authSecret)
		require.Empty(t, got, "the receiver is not called without a token")
	})
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		srv, got := authReceiver(t, nil)
		auth := &destauth.Config{OAuth2: &destauth.OAuth2{TokenURL: "http://" + addr + "/token?key=SECRET", ClientID: "relay", ClientSecret: authSecret}}
		o := send(t, newSender(t, true), Outgoing{URL: srv.URL, Auth: auth})
		require.Equal(t, ErrAuth, o.ErrorKind)
		require.Equal(t, "could not get an OAuth2 token: connection to "+addr+" refused", o.ErrorMessage, "no URL query, no secret")
		require.Empty(t, got)
	})
	t.Run("behind the egress guard", func(t *testing.T) {
		t.Parallel()
		te := newTokenEndpoint(t, nil)
		o := send(t, newSender(t, false), Outgoing{URL: "https://receiver.example/hook", Auth: te.auth()})
		require.Equal(t, ErrAuth, o.ErrorKind)
		require.Contains(t, o.ErrorMessage, "could not get an OAuth2 token: refused to connect to "+te.Listener.Addr().String()+": target address 127.0.0.1 is not allowed (loopback)")
		require.Zero(t, te.requests.Load())
	})
	t.Run("hangs", func(t *testing.T) {
		t.Parallel()
		te := newTokenEndpoint(t, func(_ int, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		srv, got := authReceiver(t, nil)
		o := send(t, newSender(t, true), Outgoing{URL: srv.URL, Auth: te.auth(), Timeout: 200 * time.Millisecond})
		require.Equal(t, ErrTimeout, o.ErrorKind)
		require.Equal(t, "no response within 200ms: the OAuth2 token endpoint at "+te.Listener.Addr().String()+" did not answer in time", o.ErrorMessage)
		require.GreaterOrEqual(t, o.Duration(), 200*time.Millisecond)
		require.Less(t, o.Duration(), 2*time.Second, "the attempt ends at its timeout")
		require.Empty(t, got)
	})
	t.Run("interrupted", func(t *testing.T) {
		t.Parallel()
		te := newTokenEndpoint(t, func(_ int, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(100*time.Millisecond, cancel)
		o := newSender(t, true).Send(ctx, Outgoing{Method: http.MethodPost, URL: "http://127.0.0.1:1/", Auth: te.auth()})
		require.Equal(t, ErrInterrupted, o.ErrorKind, o.ErrorMessage)
	})
}

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Adal test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue returns a client certificate for cn signed by the CA, with its key.
func (ca *testCA) issue(t *testing.T, cn string) *destauth.ClientCertificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return &destauth.ClientCertificate{
		CertificatePEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		KeyPEM:         string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})),
	}
}

// newMTLSServer serves over TLS and requires a client certificate signed by ca; it answers 200 and reports
// the client certificate's common name and how many connections it accepted.
func newMTLSServer(t *testing.T, ca *testCA) (srv *httptest.Server, names <-chan string, conns *atomic.Int32) {
	t.Helper()
	ch := make(chan string, 16)
	conns = &atomic.Int32{}
	srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ch <- r.TLS.PeerCertificates[0].Subject.CommonName
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.pool}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, ch, conns
}

// trustingSender is a sender, open to loopback, that trusts srv's certificate.
func trustingSender(t *testing.T, srv *httptest.Server) *HTTPSender {
	t.Helper()
	tr := egress.NewTransport(egress.Policy{AllowPrivate: true}, 0)
	tr.TLSClientConfig.RootCAs = x509.NewCertPool()
	tr.TLSClientConfig.RootCAs.AddCert(srv.Certificate())
	s := newHTTPSender(tr, nil)
	t.Cleanup(s.CloseIdleConnections)
	return s
}

func TestSendMTLS(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	srv, names, conns := newMTLSServer(t, ca)
	s := trustingSender(t, srv)

	auth := &destauth.Config{ClientCertificate: ca.issue(t, "client-a")}
	require.NoError(t, auth.Validate())
	for i := range 3 {
		o := send(t, s, Outgoing{URL: srv.URL, Attempt: i + 1, Auth: auth})
		require.True(t, o.Succeeded(), o.ErrorMessage)
		require.Equal(t, "client-a", <-names)
	}
	require.EqualValues(t, 1, conns.Load(), "one connection pool per certificate, kept between attempts")

	o := send(t, s, Outgoing{URL: srv.URL, Auth: &destauth.Config{ClientCertificate: ca.issue(t, "client-b")}})
	require.True(t, o.Succeeded(), o.ErrorMessage)
	require.Equal(t, "client-b", <-names)

	t.Run("without certificate", func(t *testing.T) {
		o := send(t, s, Outgoing{URL: srv.URL})
		require.Equal(t, ErrTLS, o.ErrorKind)
		require.Contains(t, o.ErrorMessage, "TLS handshake with "+srv.Listener.Addr().String()+" failed")
	})
	t.Run("certificate of another authority", func(t *testing.T) {
		o := send(t, s, Outgoing{URL: srv.URL, Auth: &destauth.Config{ClientCertificate: newTestCA(t).issue(t, "stranger")}})
		require.Equal(t, ErrTLS, o.ErrorKind)
	})
	t.Run("unusable certificate", func(t *testing.T) {
		cc := ca.issue(t, "client-c")
		cc.KeyPEM = ca.issue(t, "client-d").KeyPEM
		o := send(t, s, Outgoing{URL: srv.URL, Auth: &destauth.Config{ClientCertificate: cc}})
		require.Equal(t, ErrAuth, o.ErrorKind)
		require.Equal(t, "the client certificate could not be loaded: clientCertificate: private key does not match public key", o.ErrorMessage)
	})
	require.Empty(t, names)
}

func TestSendMTLSWithOAuth2(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	srv, names, _ := newMTLSServer(t, ca)
	te := newTokenEndpoint(t, nil)
	auth := te.auth()
	auth.ClientCertificate = ca.issue(t, "client-a")
	o := send(t, trustingSender(t, srv), Outgoing{URL: srv.URL, Auth: auth})
	require.True(t, o.Succeeded(), o.ErrorMessage)
	require.Equal(t, "client-a", <-names)
	require.EqualValues(t, 1, te.requests.Load())
}

func TestCertClientsKeepTheMostRecent(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	s := newSender(t, true)
	s.certs.limit = 2
	a, b, c := ca.issue(t, "a"), ca.issue(t, "b"), ca.issue(t, "c")
	client := func(cc *destauth.ClientCertificate) *http.Client {
		cl, err := s.certs.client(cc)
		require.NoError(t, err)
		return cl
	}
	ca1, cb := client(a), client(b)
	require.Same(t, ca1, client(a), "one client per certificate")
	client(c) // b is the least recently used
	require.Equal(t, 2, s.certs.lru.Len())
	require.Same(t, ca1, client(a))
	require.NotSame(t, cb, client(b), "b was let go and is built anew")
	s.CloseIdleConnections()
}
