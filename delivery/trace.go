package delivery

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/tracing"
)

// The spans of a request's trace after its intake (docs/observability.md): each claim of one of its deliveries
// and each attempt, children of the span the request stored as its trace_parent, whichever process makes them.
// A claim or an attempt of a request stored while tracing was off has no trace, and makes no span.
const (
	SpanClaim   = "adal.claim"
	SpanAttempt = "adal.attempt"
	SpanReplay  = "adal.replay"
)

// Attribute keys of the engine's spans.
const (
	AttrRequest    = attribute.Key("adal.request.id")
	AttrDelivery   = attribute.Key("adal.delivery.id")
	AttrRecipient  = attribute.Key("adal.recipient.id")
	AttrTenant     = attribute.Key("adal.tenant.id")
	AttrAttempt    = attribute.Key("adal.attempt.number")
	AttrMaxAttempt = attribute.Key("adal.attempt.max")
	AttrLane       = attribute.Key("adal.claim.lane")
	AttrClaimed    = attribute.Key("adal.claim.size")
	AttrReplayOf   = attribute.Key("adal.replay.of")
	AttrHTTPStatus = attribute.Key("http.response.status_code")
	AttrErrorKind  = attribute.Key("error.type")
)

// The claims' lanes, as AttrLane names them.
const (
	ClaimDirect  = "direct"  // the scheduler's claim of the direct and capped lanes
	ClaimProbe   = "probe"   // a disabled recipient's probe
	ClaimHandoff = "handoff" // stored claimed by intake, for a worker that was free
	ClaimCLI     = "cli"     // the CLI lane's claim, for an adal CLI attached here
)

// TraceClaim records the claim of c, one of the size claimed together by lane from start to end, as a span of
// the trace of its request (parent, the request's TraceParent).
func TraceClaim(t *tracing.Tracer, parent string, c Claim, lane string, size int, start, end time.Time) {
	if !t.On() || parent == "" {
		return
	}
	span, ok := t.StartChild(parent, trace.SpanID{}, SpanClaim, trace.WithTimestamp(start))
	if !ok {
		return
	}
	if span.IsRecording() {
		span.SetAttributes(AttrDelivery.Int(c.DeliveryID), AttrRequest.Int(c.RequestID),
			AttrRecipient.Int(c.RecipientID), AttrTenant.Int(c.TenantID), AttrAttempt.Int(c.Attempt),
			AttrMaxAttempt.Int(c.MaxAttempts), AttrLane.String(lane), AttrClaimed.Int(size))
	}
	span.End(trace.WithTimestamp(end))
}

// StartAttempt starts the span of c's attempt in its request's trace (parent): at start, or now when start is
// zero, and with the span ID id when it is valid (an attempt whose traceparent was sent before its span was
// made: tracing.ChildTraceParent). It returns nil when tracing is off or the request has no trace.
func StartAttempt(t *tracing.Tracer, parent string, c Claim, start time.Time, id trace.SpanID) trace.Span {
	if !t.On() || parent == "" {
		return nil
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
	if !start.IsZero() {
		opts = append(opts, trace.WithTimestamp(start))
	}
	span, ok := t.StartChild(parent, id, SpanAttempt, opts...)
	if !ok {
		return nil
	}
	if span.IsRecording() {
		span.SetAttributes(AttrDelivery.Int(c.DeliveryID), AttrRequest.Int(c.RequestID),
			AttrRecipient.Int(c.RecipientID), AttrTenant.Int(c.TenantID), AttrAttempt.Int(c.Attempt),
			AttrMaxAttempt.Int(c.MaxAttempts))
	}
	return span
}

// EndAttempt ends an attempt's span with its outcome, at end or now when end is zero: the HTTP status, if any
// came, and for a failed attempt its error kind and the status Error with the attempt's message.
func EndAttempt(span trace.Span, o Outcome, end time.Time) {
	if span.IsRecording() {
		if o.HTTPStatus != 0 {
			span.SetAttributes(AttrHTTPStatus.Int(o.HTTPStatus))
		}
		if !o.Succeeded() {
			kind := o.ErrorKind
			if kind == "" {
				kind = ErrHTTPStatus // a status outside 2xx that no sender classified
			}
			span.SetAttributes(AttrErrorKind.String(string(kind)))
			span.SetStatus(codes.Error, o.ErrorMessage)
		}
	}
	if end.IsZero() {
		span.End()
		return
	}
	span.End(trace.WithTimestamp(end))
}

// traceReplay starts the span that takes a replay of orig in: the root of a new trace, since a replay is a new
// request, linked to the trace of the original when it has one. It returns nil when tracing is off.
func (s *Service) traceReplay(orig *ent.Request) trace.Span {
	t := s.cfg.Tracer
	if !t.On() {
		return nil
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(AttrReplayOf.Int(orig.ID), AttrTenant.Int(orig.TenantID))}
	if sc, ok := tracing.ParseTraceParent(orig.TraceParent); ok {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	_, span := t.Start(context.Background(), SpanReplay, opts...)
	return span
}
