package relay_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/inbound"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/tracing"
	"github.com/adal-relay/adal/viewer"
)

const (
	senderTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	senderParent = "00-" + senderTrace + "-00f067aa0ba902b7-01"
)

// receiver records the traceparent of each call and answers status.
type receiver struct {
	*httptest.Server
	mu           sync.Mutex
	traceparents []string // "" for a call that had none
}

func newReceiver(t *testing.T, status func(n int) int) *receiver {
	t.Helper()
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		r.mu.Lock()
		r.traceparents = append(r.traceparents, req.Header.Get("Traceparent"))
		n := len(r.traceparents)
		r.mu.Unlock()
		w.WriteHeader(status(n))
	}))
	t.Cleanup(r.Close)
	return r
}

func ok(int) int { return http.StatusOK }

func (r *receiver) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.traceparents...)
}

// storedRequest reads a request as the system.
func storedRequest(t *testing.T, env *relaytest.Env, id string) *ent.Request {
	t.Helper()
	r, err := env.DB.Client.Request.Get(viewer.SystemContext(t.Context()), relaytest.RowID(t, id))
	require.NoError(t, err)
	return r
}

// waitSettled waits until every delivery of the request has SUCCEEDED.
func waitSettled(t *testing.T, env *relaytest.Env, id string) {
	t.Helper()
	relaytest.Eventually(t, 20*time.Second, "request "+id+" delivered", func() bool {
		ds := env.Deliveries(entdelivery.RequestID(relaytest.RowID(t, id)))
		for _, d := range ds {
			if d.Status != entdelivery.StatusSUCCEEDED {
				return false
			}
		}
		return len(ds) > 0
	})
}

// One trace from the sender's span to the receiver's: intake continues the sender's traceparent, the batch
// commit is linked both ways with the request's span, the claim and the attempt are the request's children,
// and a recipient with sendTraceparent gets the attempt's own span as its parent — one without gets none.
func TestOneTraceFromSenderToReceiver(t *testing.T) {
	t.Parallel()
	spans, traced := relaytest.Traces()
	env, tn, srv := relaytest.StartWithServer(t, 10, traced)
	asks, silent := newReceiver(t, ok), newReceiver(t, ok)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": asks.URL, "sendTraceparent": true})
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": silent.URL})

	id := env.SendWith(srv.Key, "", `{}`, http.Header{"Content-Type": {"application/json"}, "Traceparent": {senderParent}})
	waitSettled(t, env, id)

	intake := spans.Wait(t, inbound.SpanIntake, 1)[0]
	require.Equal(t, senderTrace, intake.SpanContext.TraceID().String())
	require.Equal(t, int64(relaytest.RowID(t, id)), relaytest.Attr(intake, delivery.AttrRequest).AsInt64())
	require.Equal(t, int64(http.StatusAccepted), relaytest.Attr(intake, delivery.AttrHTTPStatus).AsInt64())
	require.Equal(t, tracing.TraceParent(intake.SpanContext), storedRequest(t, env, id).TraceParent)

	commit := spans.Wait(t, inbound.SpanCommit, 1)[0]
	require.NotEqual(t, intake.SpanContext.TraceID(), commit.SpanContext.TraceID(), "a commit is a trace of its own")
	require.Len(t, commit.Links, 1)
	require.Equal(t, intake.SpanContext.SpanID(), commit.Links[0].SpanContext.SpanID())
	require.Len(t, intake.Links, 1, "the request's span leads to its commit")
	require.Equal(t, commit.SpanContext.SpanID(), intake.Links[0].SpanContext.SpanID())

	attempts := spans.Wait(t, delivery.SpanAttempt, 2)
	require.Len(t, spans.Wait(t, delivery.SpanClaim, 2), 2)
	for _, s := range append(spans.Named(delivery.SpanClaim), attempts...) {
		require.Equal(t, senderTrace, s.SpanContext.TraceID().String(), s.Name)
		require.Equal(t, intake.SpanContext.SpanID(), s.Parent.SpanID(), s.Name)
	}

	// Without sendTraceparent, the sender's traceparent is forwarded as sent, like every header, and Adal adds
	// none of its own; with it, the attempt's span replaces it.
	require.Equal(t, []string{senderParent}, silent.got())
	require.Len(t, asks.got(), 1)
	named := func(traceparent string) string {
		for _, a := range spans.Named(delivery.SpanAttempt) {
			if tracing.TraceParent(a.SpanContext) == traceparent {
				return a.Name
			}
		}
		return ""
	}
	require.Equal(t, delivery.SpanAttempt, named(asks.got()[0]), "the traceparent %q names an attempt span", asks.got()[0])

	id = env.Send(srv.Key, "", `{}`) // a sender that traces nothing
	waitSettled(t, env, id)
	spans.Wait(t, delivery.SpanAttempt, 4)
	require.Equal(t, []string{senderParent, ""}, silent.got(), "no traceparent without sendTraceparent")
	require.Len(t, asks.got(), 2)
	require.Equal(t, delivery.SpanAttempt, named(asks.got()[1]))
	sc, valid := tracing.ParseTraceParent(asks.got()[1])
	require.True(t, valid)
	require.Equal(t, storedRequest(t, env, id).TraceParent[3:35], sc.TraceID().String(), "in the new request's own trace")
}

// Off, nothing is traced: no span, no traceparent sent even to a recipient that asks, nothing stored. A
// sender's own traceparent reaches the receiver as any other header does.
func TestTracingOffTracesNothing(t *testing.T) {
	t.Parallel()
	exporter := tracetest.NewInMemoryExporter()
	env, tn, srv := relaytest.StartWithServer(t, 10, func(c *relay.Config) {
		c.Tracing = tracing.Config{Exporter: exporter} // not Enabled
	})
	require.False(t, env.Relay.Tracing.Tracer().On())
	rcv := newReceiver(t, ok)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL, "sendTraceparent": true})

	id := env.Send(srv.Key, "", `{}`)
	waitSettled(t, env, id)
	require.Equal(t, []string{""}, rcv.got())
	require.Empty(t, storedRequest(t, env, id).TraceParent)

	id = env.SendWith(srv.Key, "", `{}`, http.Header{"Traceparent": {senderParent}})
	waitSettled(t, env, id)
	require.Equal(t, []string{"", senderParent}, rcv.got(), "forwarded as sent")
	require.Empty(t, storedRequest(t, env, id).TraceParent)
	require.Empty(t, exporter.GetSpans(), "no provider, no span")
}

// A replay is a new request, so a new trace, linked to the original's; its deliveries are in the new one.
func TestReplayIsANewTraceLinkedToTheOriginal(t *testing.T) {
	t.Parallel()
	spans, traced := relaytest.Traces()
	env, tn, srv := relaytest.StartWithServer(t, 10, traced)
	rcv := newReceiver(t, ok)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL, "sendTraceparent": true})
	orig := env.SendWith(srv.Key, "", `{}`, http.Header{"Traceparent": {senderParent}})
	waitSettled(t, env, orig)

	var out struct{ ReplayRequest struct{ ID string } }
	env.MustGraphQL(tn.Member, `mutation($id: ID!){ replayRequest(id: $id){ id } }`, map[string]any{"id": orig}, &out)
	replay := out.ReplayRequest.ID
	waitSettled(t, env, replay)

	span := spans.Wait(t, delivery.SpanReplay, 1)[0]
	require.NotEqual(t, senderTrace, span.SpanContext.TraceID().String(), "a new trace")
	require.False(t, span.Parent.IsValid(), "a root")
	require.Len(t, span.Links, 1)
	require.Equal(t, storedRequest(t, env, orig).TraceParent, tracing.TraceParent(span.Links[0].SpanContext))
	require.Equal(t, int64(relaytest.RowID(t, orig)), relaytest.Attr(span, delivery.AttrReplayOf).AsInt64())
	require.Equal(t, int64(relaytest.RowID(t, replay)), relaytest.Attr(span, delivery.AttrRequest).AsInt64())
	stored := storedRequest(t, env, replay)
	require.Equal(t, tracing.TraceParent(span.SpanContext), stored.TraceParent)
	require.Equal(t, request.StatusDELIVERED, stored.Status)

	attempts := spans.Wait(t, delivery.SpanAttempt, 2)
	var inReplay int
	for _, a := range attempts {
		if a.SpanContext.TraceID() == span.SpanContext.TraceID() {
			inReplay++
			require.Equal(t, span.SpanContext.SpanID(), a.Parent.SpanID())
		}
	}
	require.Equal(t, 1, inReplay, "the replay's attempt is in the replay's trace")
	got := rcv.got()
	require.Len(t, got, 2)
	sc, valid := tracing.ParseTraceParent(got[1])
	require.True(t, valid)
	require.Equal(t, span.SpanContext.TraceID(), sc.TraceID())
}

// A retry made by another process, after the one that took the request in has stopped, joins the request's
// trace: the trace context travels with the request, in the database.
func TestRetryOnAnotherProcessJoinsTheTrace(t *testing.T) {
	t.Parallel()
	dbtest.SkipUnlessPostgres(t) // only PostgreSQL is shared between processes
	first, traced := relaytest.Traces()
	env, tn, srv := relaytest.StartWithServer(t, 10, traced, func(c *relay.Config) { c.RetryUnit = 500 * time.Millisecond })
	rcv := newReceiver(t, func(n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL, "sendTraceparent": true})
	id := env.SendWith(srv.Key, "", `{}`, http.Header{"Traceparent": {senderParent}})
	relaytest.Eventually(t, 10*time.Second, "the first attempt recorded", func() bool {
		d := env.Deliveries(entdelivery.RequestID(relaytest.RowID(t, id)))
		return len(d) == 1 && len(d[0].Edges.Attempts) == 1
	})
	env.Relay.Stop() // the retry is due in 4 units: no longer this process's
	intake := first.Wait(t, inbound.SpanIntake, 1)[0]

	second, tracedToo := relaytest.Traces()
	peer := env.Peer(t, tracedToo, func(c *relay.Config) { c.RetryUnit = 500 * time.Millisecond })
	waitSettled(t, peer, id)
	retry := second.Wait(t, delivery.SpanAttempt, 1)[0]
	require.Equal(t, int64(2), relaytest.Attr(retry, delivery.AttrAttempt).AsInt64())
	require.Equal(t, senderTrace, retry.SpanContext.TraceID().String())
	require.Equal(t, intake.SpanContext.SpanID(), retry.Parent.SpanID())
	require.Equal(t, tracing.TraceParent(retry.SpanContext), rcv.got()[1])
}
