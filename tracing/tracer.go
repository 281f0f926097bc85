package tracing

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"hash/fnv"
	"math/rand/v2"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// scope names Adal's instrumentation on every span.
const scope = "github.com/adal-relay/adal"

// Tracer starts Adal's spans. A nil Tracer — Service's when tracing is off — is off: On is false and nothing
// is recorded (Start hands out the no-op tracer's span). Instrumented code asks On first, and otherwise builds
// no attribute, option, context or string.
type Tracer struct {
	tracer     trace.Tracer
	propagator propagation.TraceContext // W3C traceparent and tracestate
}

func newTracer(p *sdktrace.TracerProvider) *Tracer { return &Tracer{tracer: p.Tracer(scope)} }

// On reports whether tracing is on.
func (t *Tracer) On() bool { return t != nil }

// Start starts a span under ctx's span, if any; off, the no-op tracer's span, which records nothing.
func (t *Tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if t == nil {
		return noop.Tracer{}.Start(ctx, name, opts...)
	}
	return t.tracer.Start(ctx, name, opts...)
}

// Extract returns ctx carrying the remote span context of h's traceparent (and tracestate), when h has a
// valid one: a span started under it continues the sender's trace. Otherwise ctx is returned as it is.
func (t *Tracer) Extract(ctx context.Context, h http.Header) context.Context {
	if t == nil || h.Get("Traceparent") == "" {
		return ctx
	}
	return t.propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// StartChild starts a span under the span a stored traceparent names (TraceParent): a span of that trace,
// however long ago and in whichever process it was stored. With a valid id the span gets that span ID, so a
// traceparent naming it can be sent before the span is made (ChildTraceParent). ok is false, and no span is
// started, when tracing is off or parent names no span.
func (t *Tracer) StartChild(parent string, id trace.SpanID, name string, opts ...trace.SpanStartOption) (span trace.Span, ok bool) {
	if t == nil || parent == "" {
		return nil, false
	}
	sc, ok := ParseTraceParent(parent)
	if !ok {
		return nil, false
	}
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), sc)
	if id.IsValid() {
		ctx = context.WithValue(ctx, spanIDKey{}, id)
	}
	_, span = t.tracer.Start(ctx, name, opts...)
	return span, true
}

// traceParentLen is the length of a version 00 traceparent: 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>.
const traceParentLen = 55

// TraceParent is sc as a W3C traceparent header value (version 00), or "" when sc is not valid: what a request
// stores in requests.trace_parent, and what an attempt sends as its traceparent.
func TraceParent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	return formatTraceParent(sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

func formatTraceParent(tid trace.TraceID, sid trace.SpanID, flags trace.TraceFlags) string {
	var b [traceParentLen]byte
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(flags & trace.FlagsSampled)})
	return string(b[:])
}

// ParseTraceParent reads a traceparent TraceParent wrote: a version 00 value with a valid trace and span id.
// The span context it returns is remote: a span started under it is its child.
func ParseTraceParent(s string) (trace.SpanContext, bool) {
	if len(s) != traceParentLen || s[0] != '0' || s[1] != '0' || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return trace.SpanContext{}, false
	}
	tid, err := trace.TraceIDFromHex(s[3:35])
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(s[36:52])
	if err != nil {
		return trace.SpanContext{}, false
	}
	var flags [1]byte
	if _, err := hex.Decode(flags[:], []byte(s[53:55])); err != nil {
		return trace.SpanContext{}, false
	}
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]) & trace.FlagsSampled, Remote: true,
	}), true
}

// ChildTraceParent is the traceparent of the child of parent (a stored traceparent) whose span ID is id, or ""
// when parent names no span: what an attempt made elsewhere (by the adal CLI) sends, before its span is
// recorded with that ID (StartChild).
func ChildTraceParent(parent string, id trace.SpanID) string {
	sc, ok := ParseTraceParent(parent)
	if !ok || !id.IsValid() {
		return ""
	}
	return formatTraceParent(sc.TraceID(), id, sc.TraceFlags())
}

// SpanIDOf derives a span ID from key, the same in every process: the span of a CLI attempt is recorded by the
// process its report reaches, under the ID its traceparent named when another process handed it out, both
// derived from the attempt's lease token.
func SpanIDOf(key string) trace.SpanID {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	var id trace.SpanID
	binary.BigEndian.PutUint64(id[:], h.Sum64()|1) // never zero, which names no span
	return id
}

// spanIDKey carries the span ID StartChild asks for to idGenerator.
type spanIDKey struct{}

// idGenerator makes random trace and span IDs, as the SDK's own does, but gives a span the ID its context asks
// for (StartChild).
type idGenerator struct{}

// NewIDs returns a random trace ID and span ID, neither zero.
func (idGenerator) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, randomSpanID()
}

// NewSpanID returns the span ID ctx asks for, or a random one.
func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if id, ok := ctx.Value(spanIDKey{}).(trace.SpanID); ok {
		return id
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
