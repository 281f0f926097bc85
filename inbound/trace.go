package inbound

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/adal-relay/adal/delivery"
)

// The spans of intake (docs/observability.md).
const (
	// SpanIntake is one inbound request, from its headers to its answer: the root of the request's trace, or
	// the child of the sender's span when it sent a valid traceparent.
	SpanIntake = "adal.intake"
	// SpanCommit is one batch's store, linked to the intake span of each of its requests.
	SpanCommit = "adal.intake.commit"
)

// Attribute keys of intake's spans beyond the delivery engine's (delivery.Attr*).
const (
	attrServer      = attribute.Key("adal.server.id")
	attrBodySize    = attribute.Key("http.request.body.size")
	attrMethod      = attribute.Key("http.request.method")
	attrBatchSize   = attribute.Key("adal.batch.size")
	attrBatchStored = attribute.Key("adal.batch.stored")
)

// serveTraced serves r within its intake span, which continues the sender's trace when its traceparent is
// valid; the request stores the span's trace context (Accept), so that its deliveries join the trace.
func (h *Handler) serveTraced(w http.ResponseWriter, r *http.Request) {
	ctx := h.cfg.Tracer.Extract(r.Context(), r.Header)
	ctx, span := h.cfg.Tracer.Start(ctx, SpanIntake, trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	status := h.serve(w, r.WithContext(ctx))
	if span.IsRecording() {
		span.SetAttributes(attrMethod.String(r.Method), delivery.AttrHTTPStatus.Int(status))
		if status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	}
}

// traceServer notes on ctx's intake span the server a request is for and the size of its body.
func traceServer(ctx context.Context, info *keyInfo, body int) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrServer.Int(info.serverID), delivery.AttrTenant.Int(info.tenantID), attrBodySize.Int(body))
	}
}

// traceAccepted notes on ctx's intake span the ID of the request it stored.
func traceAccepted(ctx context.Context, requestID int) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(delivery.AttrRequest.Int(requestID))
	}
}

// startCommit starts the span of a batch's store. One commit stores the requests of many traces, and a span
// has one parent: the commit is a root of its own, linked to each request's intake span, rather than a child
// of one of them chosen at random or a copy in each (one more span per request, on intake's hottest path).
// endCommit links each intake span back, so a request's trace leads to the commit that stored it.
func (b *batcher) startCommit(live []*pendingAccept) trace.Span {
	links := make([]trace.Link, 0, len(live))
	for _, p := range live {
		if sc := trace.SpanContextFromContext(p.ctx); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	_, span := b.tracer.Start(context.Background(), SpanCommit, trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(attrBatchSize.Int(len(live))))
	return span
}

// endCommit ends a batch's span with what became of its requests, and links each request's intake span to it.
// It runs before the requests are answered, so before their intake spans end.
func (b *batcher) endCommit(span trace.Span, live []*pendingAccept, results []acceptResult, err error) {
	link := trace.Link{SpanContext: span.SpanContext()}
	for _, p := range live {
		trace.SpanFromContext(p.ctx).AddLink(link)
	}
	if span.IsRecording() {
		stored := 0
		for _, r := range results {
			if r.req != nil {
				stored++
			}
		}
		span.SetAttributes(attrBatchStored.Int(stored))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}
