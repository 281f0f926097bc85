package scheduler_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/tracing"
	"github.com/adal-relay/adal/viewer"
)

// senderTrace is the trace a sender's traceparent names, and its span.
const (
	senderTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	senderSpan   = "00f067aa0ba902b7"
	senderParent = "00-" + senderTrace + "-" + senderSpan + "-01"
)

// byAttempt files spans by their attempt number.
func byAttempt(spans tracetest.SpanStubs) map[int64]tracetest.SpanStub {
	out := map[int64]tracetest.SpanStub{}
	for _, s := range spans {
		out[relaytest.Attr(s, delivery.AttrAttempt).AsInt64()] = s
	}
	return out
}

// A failed attempt and its retry, minutes of the schedule later, are spans of the request's trace, which
// continues the sender's: each under the intake span the request stored, each after a claim of its own. The
// failed one says why it failed.
func TestFailedAttemptAndItsRetryAreInTheRequestsTrace(t *testing.T) {
	t.Parallel()
	spans, traced := relaytest.Traces()
	env, tn, srv := relaytest.StartWithServer(t, 10, traced, compressed(10*time.Millisecond))
	rcv := newReceiver(t, 1)
	rec := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL, "sendTraceparent": true})

	reqID := env.SendWith(srv.Key, "", `{}`, http.Header{"Content-Type": {"application/json"}, "Traceparent": {senderParent}})
	d := waitDelivered(t, env, reqID, 20*time.Second, "the retry to succeed")
	require.Equal(t, 2, d.AttemptCount)

	intake := spans.Wait(t, "adal.intake", 1)[0]
	require.Equal(t, senderTrace, intake.SpanContext.TraceID().String(), "the sender's trace continues")
	require.Equal(t, senderSpan, intake.Parent.SpanID().String())
	req, err := env.DB.Client.Request.Get(viewer.SystemContext(t.Context()), relaytest.RowID(t, reqID))
	require.NoError(t, err)
	require.Equal(t, tracing.TraceParent(intake.SpanContext), req.TraceParent, "the request stores its intake span")

	attempts := byAttempt(spans.Wait(t, delivery.SpanAttempt, 2))
	claims := byAttempt(spans.Wait(t, delivery.SpanClaim, 2))
	for n := int64(1); n <= 2; n++ {
		for _, s := range []tracetest.SpanStub{attempts[n], claims[n]} {
			require.Equal(t, senderTrace, s.SpanContext.TraceID().String(), "%s %d", s.Name, n)
			require.Equal(t, intake.SpanContext.SpanID(), s.Parent.SpanID(), "%s %d", s.Name, n)
			require.Equal(t, int64(d.ID), relaytest.Attr(s, delivery.AttrDelivery).AsInt64())
			require.Equal(t, int64(relaytest.RowID(t, rec)), relaytest.Attr(s, delivery.AttrRecipient).AsInt64())
		}
		require.False(t, attempts[n].StartTime.Before(claims[n].EndTime), "attempt %d after its claim", n)
	}
	require.Contains(t, []string{delivery.ClaimHandoff, delivery.ClaimDirect}, relaytest.Attr(claims[1], delivery.AttrLane).AsString())
	require.Equal(t, delivery.ClaimDirect, relaytest.Attr(claims[2], delivery.AttrLane).AsString(), "the retry waited in the table")

	failed, retried := attempts[1], attempts[2]
	require.Equal(t, codes.Error, failed.Status.Code)
	require.Equal(t, "HTTP_STATUS", relaytest.Attr(failed, delivery.AttrErrorKind).AsString())
	require.Equal(t, int64(500), relaytest.Attr(failed, delivery.AttrHTTPStatus).AsInt64())
	require.NotEqual(t, codes.Error, retried.Status.Code)
	require.Equal(t, int64(200), relaytest.Attr(retried, delivery.AttrHTTPStatus).AsInt64())
	require.False(t, relaytest.Attr(retried, delivery.AttrErrorKind).Type() == attribute.STRING, "a success has no error kind")

	// Each attempt named its own span to the receiver.
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	require.Len(t, rcv.calls, 2)
	for i, c := range rcv.calls {
		require.Equal(t, tracing.TraceParent(attempts[int64(i+1)].SpanContext), c.header.Get("Traceparent"))
	}
}

// The attempt a dead process left is recorded by the rescuer as INTERRUPTED, and its span too: the span of
// the process that died never reached the collector.
func TestRescuedAttemptIsInTheRequestsTrace(t *testing.T) {
	t.Parallel()
	spans, traced := relaytest.Traces()
	env := relaytest.Start(t, traced, compressed(5*time.Millisecond), func(c *relay.Config) {
		c.RescueInterval = 20 * time.Millisecond
	})
	stored, rcv := storeOneTraced(t, env, senderParent, func(int) delivery.Handoff {
		return delivery.Handoff{Owner: "a-process-that-died", Lease: time.Millisecond, Slots: 1}
	})
	rescuedThenDelivered(t, env, stored.Request.ID, rcv)

	attempts := byAttempt(spans.Wait(t, delivery.SpanAttempt, 2))
	interrupted := attempts[1]
	require.Equal(t, senderTrace, interrupted.SpanContext.TraceID().String())
	require.Equal(t, senderSpan, interrupted.Parent.SpanID().String())
	require.Equal(t, "INTERRUPTED", relaytest.Attr(interrupted, delivery.AttrErrorKind).AsString())
	require.Equal(t, codes.Error, interrupted.Status.Code)
	require.Equal(t, senderTrace, attempts[2].SpanContext.TraceID().String())
}

// storeOneTraced is storeOne for a request that stores the trace context parent.
func storeOneTraced(t *testing.T, env *relaytest.Env, parent string, handoff func(tenant int) delivery.Handoff) (delivery.Stored, *target) {
	t.Helper()
	return storeOneWith(t, env, delivery.NewRequest{Method: http.MethodPost, Header: http.Header{}, Body: []byte(`{}`),
		TraceParent: parent}, handoff)
}

// A request stored while tracing was off has no trace: its attempts make no span, even once tracing is on.
func TestRequestWithoutTraceMakesNoSpans(t *testing.T) {
	t.Parallel()
	spans, traced := relaytest.Traces()
	env := relaytest.Start(t, traced, compressed(5*time.Millisecond))
	stored, rcv := storeOneTraced(t, env, "", func(int) delivery.Handoff { return delivery.Handoff{} })
	id := strconv.Itoa(stored.Request.ID)
	waitDelivered(t, env, id, 10*time.Second, "the delivery")
	require.Equal(t, 1, rcv.count())
	spans.Sync(t, env)
	require.Empty(t, spans.Named(delivery.SpanAttempt))
	require.Empty(t, spans.Named(delivery.SpanClaim))
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	require.Empty(t, rcv.calls[0].header.Get("Traceparent"))
}
