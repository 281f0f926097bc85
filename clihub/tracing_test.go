package clihub_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"

	"github.com/adal-relay/adal/clihub"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/tracing"
	"github.com/adal-relay/adal/viewer"
)

// A CLI attempt is in the request's trace too: the job carries, with its signature, a traceparent naming the
// attempt's span, which the process the CLI reports to records under that very span ID, with the outcome.
func TestCLIAttemptIsInTheRequestsTrace(t *testing.T) {
	t.Parallel()
	spans, traced := relaytest.Traces()
	b := relaytest.StartFixture(t, 100, traced)
	ctx := viewer.SystemContext(t.Context())
	srv := b.Env.NewServer(b.Tenant, "s", map[string]any{"deliverPendingOnConnect": true})
	rec := relaytest.RowID(t, b.Env.NewRecipient(b.Tenant, srv.ID, map[string]any{"method": "CLI", "sendTraceparent": true}))
	const senderTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	b.Env.SendWith(srv.Key, "", `{}`, http.Header{"Traceparent": {"00-" + senderTrace + "-00f067aa0ba902b7-01"}})

	l, err := b.Env.Relay.CLIHub.Attach(ctx, rec)
	require.NoError(t, err)
	defer l.Detach()
	next, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	j, ok := l.Next(next)
	require.True(t, ok)
	sent := j.Signature.Get("Traceparent")
	require.Equal(t, tracing.ChildTraceParent(j.Request.TraceParent, tracing.SpanIDOf(j.LeaseToken)), sent)
	intake := spans.Wait(t, "adal.intake", 1)[0]
	require.Equal(t, tracing.TraceParent(intake.SpanContext), j.Request.TraceParent)

	claim := spans.Wait(t, delivery.SpanClaim, 1)[0]
	require.Equal(t, delivery.ClaimCLI, relaytest.Attr(claim, delivery.AttrLane).AsString())
	require.Equal(t, intake.SpanContext.SpanID(), claim.Parent.SpanID())

	tenantID := relaytest.RowID(t, b.Tenant.ID)
	member := viewer.NewContext(t.Context(), viewer.Viewer{Role: viewer.Member, TenantID: tenantID, Subject: "m"})
	now := time.Now()
	recorded, err := b.Env.Relay.CLIHub.Report(member, b.Env.DB.Client, clihub.Report{
		DeliveryID: j.Claim.DeliveryID, Attempt: j.Claim.Attempt, LeaseToken: j.LeaseToken,
		StartedAt: now, FinishedAt: now, HTTPStatus: http.StatusBadGateway,
	})
	require.NoError(t, err)
	require.True(t, recorded)

	attempt := spans.Wait(t, delivery.SpanAttempt, 1)[0]
	require.Equal(t, sent, tracing.TraceParent(attempt.SpanContext), "the span the CLI's traceparent named")
	require.Equal(t, senderTrace, attempt.SpanContext.TraceID().String())
	require.Equal(t, intake.SpanContext.SpanID(), attempt.Parent.SpanID())
	require.Equal(t, int64(http.StatusBadGateway), relaytest.Attr(attempt, delivery.AttrHTTPStatus).AsInt64())
	require.Equal(t, "HTTP_STATUS", relaytest.Attr(attempt, delivery.AttrErrorKind).AsString())
	require.Equal(t, codes.Error, attempt.Status.Code)
	require.Equal(t, strconv.Itoa(j.Claim.DeliveryID), strconv.FormatInt(relaytest.Attr(attempt, delivery.AttrDelivery).AsInt64(), 10))
}
