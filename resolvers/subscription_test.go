package resolvers_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/webhook"
)

const watchRequest = `subscription($r: ID!) { deliveryUpdated(requestId: $r) { id status attemptCount request { id } } }`
const watchServer = `subscription($s: ID!) { deliveryUpdated(serverId: $s) { id status attemptCount request { id } } }`

type deliveryEvent struct {
	DeliveryUpdated struct {
		ID           string
		Status       string
		AttemptCount int
		Request      struct{ ID string }
	}
}

func decode(t *testing.T, r relaytest.Response) deliveryEvent {
	t.Helper()
	require.Empty(t, r.Errors)
	var ev deliveryEvent
	require.NoError(t, json.Unmarshal(r.Data, &ev))
	return ev
}

// flaky fails the first attempt of every request with 502 and accepts the next. Per request, not per call:
// NextAfter may post more than one request before the subscription listens, and the one the test follows
// must still need two attempts.
func flaky(t *testing.T) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(webhook.HeaderAttempt) == "1" {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(s.Close)
	return s
}

func postID(t *testing.T, env *relaytest.Env, key string) string {
	t.Helper()
	resp := env.Post(key, "", []byte(`{}`))
	defer resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var out struct{ RequestID string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out.RequestID
}

func TestDeliveryUpdatedFollowsADeliveryLive(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 1000, func(c *relay.Config) { c.RetryUnit = 5 * time.Millisecond })
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": flaky(t).URL})

	// Subscribe to the request: wait until the subscription is live by watching the server for a first,
	// undeliverable request (no recipients yet would fail it; here the CLI-less server simply has one).
	warm := env.Subscribe(tn.Member, watchServer, map[string]any{"s": srv.ID})
	var reqID string
	first := decode(t, warm.NextAfter(20*time.Second, func() { reqID = postID(t, env, srv.Key) }))
	reqID = first.DeliveryUpdated.Request.ID

	// Created, claimed, failed and rescheduled, claimed, succeeded: the subscriber sees the delivery through to
	// SUCCEEDED with both attempts counted. Events may be coalesced, never reordered past the final state.
	last := first
	for last.DeliveryUpdated.Request.ID != reqID || last.DeliveryUpdated.Status != "SUCCEEDED" {
		last = decode(t, warm.Next(20*time.Second))
	}
	require.Equal(t, 2, last.DeliveryUpdated.AttemptCount)
}

// A request's subscriber starts with the request's deliveries as they stand: a delivery that finished before
// the subscription (after the client last read the request) still reaches it.
func TestDeliveryUpdatedStartsWithTheRequestsDeliveries(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 1000)
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(ok.Close)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": ok.URL})
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "CLI"}) // stays pending: no CLI attached

	reqID := postID(t, env, srv.Key)
	relaytest.Eventually(t, 20*time.Second, "the direct delivery succeeds", func() bool {
		r := env.GraphQL(tn.Owner, `query($r: ID!) { request(id: $r) { deliveries { status } } }`, map[string]any{"r": reqID})
		return strings.Contains(string(r.Data), "SUCCEEDED")
	})

	sub := env.Subscribe(tn.Owner, watchRequest, map[string]any{"r": reqID})
	got := map[string]string{}
	for len(got) < 2 {
		ev := decode(t, sub.Next(10*time.Second))
		require.Equal(t, reqID, ev.DeliveryUpdated.Request.ID)
		got[ev.DeliveryUpdated.ID] = ev.DeliveryUpdated.Status
	}
	statuses := []string{}
	for _, st := range got {
		statuses = append(statuses, st)
	}
	require.ElementsMatch(t, []string{"SUCCEEDED", "PENDING"}, statuses)
}

func TestDeliveryUpdatedIsTenantScoped(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	a := env.NewTenant("a", relaytest.PlanLimits{Credits: 1000})
	b := env.NewTenant("b", relaytest.PlanLimits{Credits: 1000})
	srvA := env.NewServer(a, "a", nil)
	srvB := env.NewServer(b, "b", nil)
	env.NewRecipient(a, srvA.ID, map[string]any{"method": "CLI"})
	env.NewRecipient(b, srvB.ID, map[string]any{"method": "CLI"})
	reqA := postID(t, env, srvA.Key)

	// B cannot watch A's server or request.
	for _, tc := range []struct {
		query string
		vars  map[string]any
	}{
		{watchServer, map[string]any{"s": srvA.ID}},
		{watchRequest, map[string]any{"r": reqA}},
	} {
		sub := env.Subscribe(b.Owner, tc.query, tc.vars)
		r := sub.Next(10 * time.Second)
		require.NotEmpty(t, r.Errors)
		require.Equal(t, "NOT_FOUND", r.Code())
	}

	// B watching its own server sees only its own requests, however many of A's happen meanwhile.
	sub := env.Subscribe(b.Owner, watchServer, map[string]any{"s": srvB.ID})
	mine := map[string]bool{}
	ev := decode(t, sub.NextAfter(10*time.Second, func() {
		postID(t, env, srvA.Key)
		mine[postID(t, env, srvB.Key)] = true
	}))
	require.True(t, mine[ev.DeliveryUpdated.Request.ID], "B received a delivery of request %s", ev.DeliveryUpdated.Request.ID)

	// Without a token: UNAUTHENTICATED.
	anon := env.Subscribe("", watchServer, map[string]any{"s": srvB.ID})
	require.Equal(t, "UNAUTHENTICATED", anon.Next(10*time.Second).Code())
}

// Not parallel: it counts the process's goroutines, which other tests would disturb.
func TestDeliveryUpdatedCleansUpWhenTheClientLeaves(t *testing.T) {
	env, tn, srv := relaytest.StartWithServer(t, 1000)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "CLI"})
	postID(t, env, srv.Key) // warm up the paths a subscription uses
	settle := func() int {
		runtime.GC()
		return runtime.NumGoroutine()
	}
	before := settle()
	for range 20 {
		sub := env.Subscribe(tn.Owner, watchServer, map[string]any{"s": srv.ID})
		decode(t, sub.NextAfter(10*time.Second, func() { postID(t, env, srv.Key) }))
		sub.Close()
	}
	relaytest.Eventually(t, 10*time.Second, "subscription goroutines to end", func() bool {
		return settle() <= before+2
	})
}

func TestDeliveryUpdatedCrossesProcesses(t *testing.T) {
	t.Parallel()
	a := relaytest.Start(t)
	b := a.Peer(t) // skips on SQLite: only Postgres is shared between processes
	tn := a.NewTenant("acme", relaytest.PlanLimits{Credits: 1000})
	srv := a.NewServer(tn, "s", nil)
	a.NewRecipient(tn, srv.ID, map[string]any{"method": "CLI"})

	sub := b.Subscribe(tn.Owner, watchServer, map[string]any{"s": srv.ID})
	accepted := map[string]bool{}
	ev := decode(t, sub.NextAfter(10*time.Second, func() { accepted[postID(t, a, srv.Key)] = true })) // accepted by A
	require.True(t, accepted[ev.DeliveryUpdated.Request.ID])
	require.Equal(t, "PENDING", ev.DeliveryUpdated.Status)
}

// Mutations may come over the websocket too (graphql-transport-ws allows any operation); they commit once and
// the stream ends cleanly.
func TestMutationOverWebsocket(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 10})
	sub := env.Subscribe(tn.Owner, `mutation { createServer(input: {name: "over-ws"}) { id name } }`, nil)
	r := sub.Next(10 * time.Second)
	require.Empty(t, r.Errors)
	require.Contains(t, string(r.Data), `"over-ws"`)
	var out struct {
		Servers struct {
			Edges []struct{ Node struct{ Name string } }
		}
	}
	env.MustGraphQL(tn.Owner, `{ servers { edges { node { name } } } }`, nil, &out)
	require.Len(t, out.Servers.Edges, 1)
}
