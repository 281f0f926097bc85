// Package inbound accepts webhooks: ANY /in/{key}[/…]. A request is acknowledged only after it is stored, its
// credit debited and its deliveries created, all in one transaction.
package inbound

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/rejection"
	"github.com/adal-relay/adal/routing"
	"github.com/adal-relay/adal/tracing"
	"github.com/adal-relay/adal/verify"
)

// DefaultMaxBody is the largest body accepted unless configured otherwise.
const DefaultMaxBody = 1 << 20

// DefaultBodyBudget bounds the bytes of bodies in flight in one process unless configured otherwise. A body is
// held about twice on its way to the database (read, then encoded into the statement), so this keeps intake's
// bodies to a modest share of a process's memory, while thousands of webhooks of ordinary size (a few KiB)
// still fit at once: more than the committers store together.
const DefaultBodyBudget = 32 << 20

// Prefix is the path under which inbound requests arrive.
const Prefix = "/in/"

// Config configures intake.
type Config struct {
	Client   *ent.Client
	Delivery *delivery.Service
	// MaxBody caps request bodies; larger ones get 413. Default DefaultMaxBody.
	MaxBody int64
	// BodyBudget bounds the bytes of bodies being read or stored at once; past it intake answers 503 with
	// Retry-After. Default DefaultBodyBudget, and never less than MaxBody.
	BodyBudget int64
	Logger     *slog.Logger
	// Now is the clock of the rate limits; default time.Now.
	Now func() time.Time
	// Observe, if set, hears the HTTP status of every answer (metrics).
	Observe func(status int)
	// Committers is how many batches may commit at once (default 2; SQLite has one writer, use 1); beyond the
	// first, only batches that have grown crowded commit beside another. The relay sets it from
	// ADAL_INTAKE_COMMITTERS.
	Committers int
	// MaxBatch bounds the requests stored in one transaction. Default 256.
	MaxBatch int
	// Dispatch, if set, takes new deliveries straight from intake when it has workers free for them, rather
	// than from the table after a wake and a claim (delivery.Handoff).
	Dispatch Dispatcher
	// NoCredit, if set, hears of each tenant a request was refused for want of credit (402); it must not
	// block (alerting.Service.NoCredit).
	NoCredit func(tenantID int)
	// Rejections, if set, keeps the requests refused for failing verification (rejection.Recorder).
	Rejections Rejections
	// Rejected, if set, hears the reason of every such refusal (metrics).
	Rejected func(verify.Reason)
	// Tracer traces intake (nil: off): a span per request, continuing the sender's traceparent, whose trace
	// context the request stores, and a span per batch commit, linked to its requests' spans.
	Tracer *tracing.Tracer
}

// Rejections keeps refused requests off intake's path: Record must not block.
type Rejections interface {
	Record(rejection.Entry)
}

// Dispatcher starts deliveries that intake stores already claimed (scheduler.Scheduler).
type Dispatcher interface {
	// Reserve offers worker slots that are free now, before a batch is stored: up to want[t] of them for the
	// deliveries of tenant t, as far as the tenant's fair share of the workers allows.
	Reserve(want map[int]int) delivery.Handoff
	// Run starts, once their batch committed, the deliveries it stored claimed under h, and takes back the
	// slots of h they did not use — all of them when the batch did not commit (claimed is nil).
	Run(h delivery.Handoff, claimed []delivery.Claimed)
}

// Handler serves inbound requests.
type Handler struct {
	cfg     Config
	batch   *batcher
	limits  *limiter
	bodies  *bodyBudget
	schemas *schemas
}

// New returns an inbound handler.
func New(cfg Config) *Handler {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.BodyBudget = max(cmp.Or(cfg.BodyBudget, DefaultBodyBudget), cfg.MaxBody)
	cfg.Committers = cmp.Or(cfg.Committers, 2)
	cfg.MaxBatch = cmp.Or(cfg.MaxBatch, 256)
	return &Handler{
		cfg:     cfg,
		batch:   newBatcher(cfg.Client, cfg.Delivery, cfg.Dispatch, cfg.NoCredit, cfg.Logger, cfg.Committers, cfg.MaxBatch, cfg.Tracer),
		limits:  newLimiter(cfg.Client, cfg.Now),
		bodies:  &bodyBudget{limit: cfg.BodyBudget},
		schemas: newSchemas(cfg.Client, cfg.Now),
	}
}

// Close stops intake's committers; requests still queued are answered 503.
func (h *Handler) Close() { h.batch.close() }

// Incoming is a request as received, before it is stored.
type Incoming struct {
	Method     string
	Path       string
	Query      string
	Header     http.Header
	Body       []byte
	SourceAddr string
	// Verified is the outcome of the server's verification; nil when it verifies nothing.
	Verified *bool
	// EventType is the request's type as its server reads it, and SchemaError why its body did not follow
	// the type's schema under shadow validation.
	EventType, SchemaError string
}

// ServeHTTP accepts one request: 202 {"requestId"} (or the server's own answer) after commit, 402 without
// credit, 404 for an unknown or deleted server, 405 for a method the server does not accept, 401 for a request
// that fails its enforced verification, 413 for an oversized body, 429 over the server's or the tenant's rate,
// 503 when too many bodies are in flight or the database cannot take it. The key, the method and the rates are
// checked before the body is read, so a request refused for them costs no more than its headers; verification
// needs the body, and refuses before anything is stored.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Tracer.On() {
		h.serveTraced(w, r)
		return
	}
	h.serve(w, r)
}

// serve is ServeHTTP, and returns the status it answered.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request) int {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), Prefix)
	key, suffix, _ := strings.Cut(rest, "/")
	if suffix != "" || strings.HasSuffix(rest, "/") {
		suffix = "/" + suffix
	}
	// Until the body is read, every answer closes an HTTP/1 connection: net/http would otherwise read a small
	// unread body before answering, to keep the connection alive, and the point of answering early is not to.
	// HTTP/2 resets the unread stream by itself.
	if r.ProtoMajor < 2 {
		w.Header().Set("Connection", "close")
	}
	if key == "" {
		return h.answer(w, http.StatusNotFound, map[string]string{"error": "unknown server"})
	}
	info, err := h.limits.lookup(r.Context(), key)
	if err != nil {
		return h.unavailable(w, "look up server", err)
	}
	if info == nil {
		return h.answer(w, http.StatusNotFound, map[string]string{"error": "unknown server"})
	}
	if !info.senders.allows(r.Method) {
		w.Header().Set("Allow", info.senders.allow)
		return h.answer(w, http.StatusMethodNotAllowed, map[string]string{"error": "method not allowed; allowed: " + info.senders.allow})
	}
	if r.ContentLength > h.cfg.MaxBody {
		return h.tooLarge(w)
	}
	if ok, wait := h.limits.allow(info); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
		return h.answer(w, http.StatusTooManyRequests, map[string]string{"error": "rate limit exceeded; retry later"})
	}
	reserved := h.cfg.MaxBody // a body of unknown length may take up to the limit
	if r.ContentLength >= 0 {
		reserved = r.ContentLength
	}
	if !h.bodies.reserve(reserved) {
		w.Header().Set("Retry-After", "1")
		return h.answer(w, http.StatusServiceUnavailable, map[string]string{"error": "too many request bodies in flight; retry"})
	}
	defer h.bodies.release(reserved)
	w.Header().Del("Connection")
	body, err := readBody(w, r, h.cfg.MaxBody)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return h.tooLarge(w)
		}
		return h.answer(w, http.StatusBadRequest, map[string]string{"error": "could not read body"})
	}
	host, _, splitErr := net.SplitHostPort(r.RemoteAddr)
	if splitErr != nil {
		host = r.RemoteAddr
	}
	verified, answered := h.verify(w, r, info, suffix, body, host)
	if answered != 0 {
		return answered
	}
	eventType, schemaError, answered := h.checkType(r.Context(), w, info, r.Header, body)
	if answered != 0 {
		return answered
	}
	if h.cfg.Tracer.On() {
		traceServer(r.Context(), info, len(body))
	}
	req, err := h.Accept(r.Context(), key, Incoming{
		Method:      r.Method,
		Path:        suffix,
		Query:       r.URL.RawQuery,
		Header:      r.Header.Clone(),
		Body:        body,
		SourceAddr:  host,
		Verified:    verified,
		EventType:   eventType,
		SchemaError: schemaError,
	})
	if err != nil {
		switch fault.KindOf(err) {
		case fault.NotFound:
			return h.answer(w, http.StatusNotFound, map[string]string{"error": "unknown server"})
		case fault.InsufficientCredits:
			return h.answer(w, http.StatusPaymentRequired, map[string]string{"error": "no credits left"})
		default:
			return h.unavailable(w, "accept request", err)
		}
	}
	if h.cfg.Tracer.On() {
		traceAccepted(r.Context(), req.ID)
	}
	if s := info.senders; s != nil && s.response != nil {
		h.observe(s.response.status)
		s.response.write(w)
		return s.response.status
	}
	return h.answer(w, http.StatusAccepted, map[string]any{"requestId": fmt.Sprint(req.ID)})
}

// Accept stores the request for the server with the given inbound key, debits one credit and creates one
// pending delivery per recipient, in one transaction. The server is looked up in that transaction, together
// with those of the requests sharing it: a batch reads its servers in two statements whatever its size, the
// connection pool serves only the committers, and a server deleted before the commit is never written to.
func (h *Handler) Accept(ctx context.Context, key string, in Incoming) (*ent.Request, error) {
	item := delivery.Incoming{
		Key: routing.NewKey(),
		Request: delivery.NewRequest{
			Method: in.Method, Path: in.Path, Query: escapeInvalidUTF8(in.Query), Header: in.Header, Body: in.Body,
			SourceAddr: in.SourceAddr, Verified: in.Verified, EventType: in.EventType, SchemaError: in.SchemaError,
		},
	}
	if h.cfg.Tracer.On() {
		item.Request.TraceParent = tracing.TraceParent(trace.SpanContextFromContext(ctx))
	}
	return h.batch.submit(ctx, key, item)
}

// escapeInvalidUTF8 percent-encodes the bytes of s that are not UTF-8. HTTP servers pass raw bytes ≥ 0x80 of a
// request target through, text columns refuse them (PostgreSQL) and URIs must not carry them raw anyway
// (RFC 3986): %XX is what such a byte means in a query, and what the recipient will decode.
func escapeInvalidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(&b, "%%%02X", s[i])
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func (h *Handler) tooLarge(w http.ResponseWriter) int {
	return h.answer(w, http.StatusRequestEntityTooLarge, map[string]string{
		"error": fmt.Sprintf("body larger than %d bytes", h.cfg.MaxBody),
	})
}

// unavailable answers 503 for a failure of the database: the sender should retry.
func (h *Handler) unavailable(w http.ResponseWriter, what string, err error) int {
	h.cfg.Logger.Error(what, "err", err)
	w.Header().Set("Retry-After", "1")
	return h.answer(w, http.StatusServiceUnavailable, map[string]string{"error": "could not store the request; retry"})
}

// answer writes v as the JSON answer with status, and returns status.
func (h *Handler) answer(w http.ResponseWriter, status int, v any) int {
	h.observe(status)
	writeJSON(w, status, v)
	return status
}

func (h *Handler) observe(status int) {
	if h.cfg.Observe != nil {
		h.cfg.Observe(status)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// readBody reads the whole body, of at most limit bytes. A body of declared length is read into one buffer of
// that size (the server reads no further than its Content-Length); io.ReadAll would start at 512 bytes and
// copy its way up.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= limit {
		body := make([]byte, n)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
}
