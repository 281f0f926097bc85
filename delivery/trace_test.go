package delivery_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/egress"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/tracing"
)

const storedParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// A request's trace context is stored with it by either way a batch is stored — ent's bulk insert (SQLite) or
// the one statement of JSON rows (PostgreSQL) — and "" when it has none.
func TestStoreBatchStoresTheTraceParent(t *testing.T) {
	t.Parallel()
	db, ctx, _, svc := setupRecord(t, delivery.HealthRules{})
	plan := newPlan(t, ctx, db, 10, 1, 1)
	tn := newTenant(t, ctx, db, plan.ID, 10)
	srv := newServer(t, ctx, db, tn.ID)
	r, err := db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetName("r").
		SetMethod(recipient.MethodDIRECT_HTTP).SetURL("http://127.0.0.1:1/").Save(ctx)
	require.NoError(t, err)
	items := emptyRequests(srv, []*ent.Recipient{r}, 2)
	items[0].Request.TraceParent = storedParent
	stored, err := svc.StoreBatch(ctx, db.Client, items, billing.ReasonRequestAccepted, delivery.Handoff{})
	require.NoError(t, err)
	for i, want := range []string{storedParent, ""} {
		require.NoError(t, stored[i].Err)
		require.Equal(t, want, stored[i].Request.TraceParent)
		req, err := db.Client.Request.Get(ctx, stored[i].Request.ID)
		require.NoError(t, err)
		require.Equal(t, want, req.TraceParent, "request %d as the database has it", i)
	}
}

// The sender sends the attempt's traceparent when it is given one, in place of the one the request came with;
// otherwise the request's headers go as they came.
func TestSenderSendsTheAttemptsTraceparent(t *testing.T) {
	t.Parallel()
	got := make(chan string, 2)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Traceparent")
	}))
	t.Cleanup(rcv.Close)
	s := delivery.NewHTTPSender(egress.Policy{AllowPrivate: true}, 0, nil)
	t.Cleanup(s.CloseIdleConnections)
	out := delivery.Outgoing{URL: rcv.URL, Method: http.MethodPost, RequestID: "1", Attempt: 1,
		Header: http.Header{"Traceparent": {storedParent}}}
	require.True(t, s.Send(t.Context(), out).Succeeded())
	require.Equal(t, storedParent, <-got, "forwarded as it came")

	mine := tracing.ChildTraceParent(storedParent, tracing.SpanIDOf("attempt"))
	out.Traceparent = mine
	require.True(t, s.Send(t.Context(), out).Succeeded())
	require.Equal(t, mine, <-got)
}

// The engine's spans cost nothing while tracing is off, nor for a request that has no trace.
func TestEngineSpansCostNothingWithoutATrace(t *testing.T) {
	svc := tracing.New(tracing.Config{Enabled: true, Exporter: tracetest.NewInMemoryExporter()})
	c := delivery.Claim{DeliveryID: 1, RequestID: 2, RecipientID: 3, Attempt: 1}
	now := time.Now()
	for name, tc := range map[string]struct {
		tracer *tracing.Tracer
		parent string
	}{"off": {nil, storedParent}, "no trace": {svc.Tracer(), ""}} {
		allocs := testing.AllocsPerRun(100, func() {
			delivery.TraceClaim(tc.tracer, tc.parent, c, delivery.ClaimDirect, 1, now, now)
			if span := delivery.StartAttempt(tc.tracer, tc.parent, c, time.Time{}, trace.SpanID{}); span != nil {
				t.Fatal("an attempt span without a trace")
			}
		})
		require.Zero(t, allocs, name)
	}
}
