package inbound_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/inbound"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/tracing"
)

// intakeOf is the intake span of the request with the given ID.
func intakeOf(t *testing.T, spans *relaytest.Spans, id string) tracetest.SpanStub {
	t.Helper()
	want := int64(relaytest.RowID(t, id))
	var found tracetest.SpanStub
	relaytest.Eventually(t, 10*time.Second, "the intake span of request "+id, func() bool {
		for _, s := range spans.Named(inbound.SpanIntake) {
			if relaytest.Attr(s, delivery.AttrRequest).AsInt64() == want {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

// Intake continues a sender's valid traceparent; a malformed one, or none, starts a trace of the request's
// own. Either way the request stores its intake span's context, for its deliveries to join.
func TestIntakeContinuesAValidTraceparentOnly(t *testing.T) {
	t.Parallel()
	spans, traced := relaytest.Traces()
	env, tn, srv := relaytest.StartWithServer(t, 10, traced)
	const senderTrace = "0af7651916cd43dd8448eb211c80319c"
	valid := "00-" + senderTrace + "-b7ad6b7169203331-01"

	continued := env.SendWith(srv.Key, "", `{}`, http.Header{"Traceparent": {valid}, "Tracestate": {"vendor=x"}})
	malformed := env.SendWith(srv.Key, "", `{}`, http.Header{"Traceparent": {"00-" + senderTrace + "-zz-01"}})
	none := env.Send(srv.Key, "", `{}`)

	s := intakeOf(t, spans, continued)
	require.Equal(t, senderTrace, s.SpanContext.TraceID().String())
	require.Equal(t, "b7ad6b7169203331", s.Parent.SpanID().String())
	require.True(t, s.Parent.IsRemote())
	require.Equal(t, "vendor=x", s.SpanContext.TraceState().String(), "the sender's tracestate goes on with its trace")
	require.Equal(t, trace.SpanKindServer, s.SpanKind)
	require.Equal(t, int64(http.StatusAccepted), relaytest.Attr(s, delivery.AttrHTTPStatus).AsInt64())
	require.Equal(t, "POST", relaytest.Attr(s, "http.request.method").AsString())
	require.Equal(t, int64(relaytest.RowID(t, tn.ID)), relaytest.Attr(s, delivery.AttrTenant).AsInt64())
	require.Equal(t, int64(relaytest.RowID(t, srv.ID)), relaytest.Attr(s, "adal.server.id").AsInt64())
	require.Equal(t, tracing.TraceParent(s.SpanContext), storedRequest(t, env, continued).TraceParent)

	traces := map[trace.TraceID]bool{s.SpanContext.TraceID(): true}
	for _, id := range []string{malformed, none} {
		s := intakeOf(t, spans, id)
		require.False(t, s.Parent.IsValid(), "request %s starts its own trace", id)
		require.False(t, traces[s.SpanContext.TraceID()])
		traces[s.SpanContext.TraceID()] = true
		require.Equal(t, tracing.TraceParent(s.SpanContext), storedRequest(t, env, id).TraceParent)
	}
}

// A request refused before it is stored is traced too, with its answer; only a server error is an error.
func TestIntakeSpanOfARefusal(t *testing.T) {
	t.Parallel()
	spans, traced := relaytest.Traces()
	env := relaytest.Start(t, traced)
	code, _ := send(t, env, http.MethodPost, "no-such-key", "", []byte(`{}`), http.Header{"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})
	require.Equal(t, http.StatusNotFound, code)
	s := spans.Wait(t, inbound.SpanIntake, 1)[0]
	require.Equal(t, int64(http.StatusNotFound), relaytest.Attr(s, delivery.AttrHTTPStatus).AsInt64())
	require.NotEqual(t, codes.Error, s.Status.Code)
	require.Empty(t, s.Links, "nothing was committed")
}

// Requests that arrive together share a commit: each request's span links to the commit that stored it, and
// the commit links back to each of them.
func TestCommitAndIntakeSpansLinkEachOther(t *testing.T) {
	t.Parallel()
	spans, traced := relaytest.Traces()
	env, _, srv := relaytest.StartWithServer(t, 100, traced)
	const n = 20
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { ids[i] = env.Send(srv.Key, "", `{}`) })
	}
	wg.Wait()
	commits := map[trace.SpanID]tracetest.SpanStub{}
	linked := 0
	relaytest.Eventually(t, 10*time.Second, "every request's commit exported", func() bool {
		linked = 0
		for _, c := range spans.Named(inbound.SpanCommit) {
			commits[c.SpanContext.SpanID()] = c
			linked += len(c.Links)
		}
		return linked == n
	})
	for _, id := range ids {
		s := intakeOf(t, spans, id)
		require.Len(t, s.Links, 1, "request %s", id)
		c, ok := commits[s.Links[0].SpanContext.SpanID()]
		require.True(t, ok, "request %s links to a commit", id)
		var back bool
		for _, l := range c.Links {
			back = back || l.SpanContext.SpanID() == s.SpanContext.SpanID()
		}
		require.True(t, back, "the commit of request %s links back to it", id)
		require.Equal(t, int64(len(c.Links)), relaytest.Attr(c, "adal.batch.stored").AsInt64())
	}
}
