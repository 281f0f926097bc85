package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/api"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
)

// storeRequests posts n webhooks with the given body to a new server of a new tenant and returns the
// tenant and the server's ID.
func storeRequests(t *testing.T, env *relaytest.Env, n int, body []byte) (relaytest.Tenant, string) {
	t.Helper()
	tn := env.NewTenant("limits", relaytest.PlanLimits{Credits: 100})
	srv := env.NewServer(tn, "big", nil)
	for range n {
		resp := env.Post(srv.Key, "", body)
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
		_ = resp.Body.Close()
	}
	return tn, srv.ID
}

// TestBodyFieldsCostTheirSize: a body field is priced by the largest body it can return, so a query may read
// a few bodies but not a page of them; the small fields of the same page stay cheap.
func TestBodyFieldsCostTheirSize(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	tn, serverID := storeRequests(t, env, 4, []byte(`{"ok":true}`))
	page := func(n int, fields string) relaytest.Response {
		return env.GraphQL(tn.Owner, fmt.Sprintf(`query($s: ID!){ requests(serverId: $s, first: %d){ edges { node { %s } } } }`,
			n, fields), map[string]any{"s": serverID})
	}
	// With the default 1 MiB bodies a body costs 500 points of 2,000: three fit, four do not.
	resp := page(3, "id body")
	require.Empty(t, resp.Errors)
	require.Equal(t, 3, strings.Count(string(resp.Data), `"body":"{\"ok\":true}"`), "%s", resp.Data)
	resp = page(4, "id body")
	require.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", resp.Code(), "%+v", resp.Errors)
	resp = page(2, "id body bodyBase64")
	require.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", resp.Code(), "%+v", resp.Errors)
	resp = page(100, "id bodySize method path")
	require.Empty(t, resp.Errors, "a page of small fields is not priced as bodies")
	require.Equal(t, 4, strings.Count(string(resp.Data), `"bodySize":11`), "%s", resp.Data)
}

// TestResponseCap: a field that would take the response over the cap fails with RESPONSE_TOO_LARGE and its
// text is not sent; the same bytes in a form that fits are served.
func TestResponseCap(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, func(c *relay.Config) { c.MaxResponseBytes = 64 << 10 })
	// Control bytes grow sixfold as JSON (\u0001): 20 KiB of them is 120 KiB of response.
	tn, serverID := storeRequests(t, env, 1, bytes.Repeat([]byte{1}, 20<<10))
	q := `query($s: ID!){ requests(serverId: $s, first: 1){ edges { node { id %s } } } }`
	resp := env.GraphQL(tn.Owner, fmt.Sprintf(q, "body"), map[string]any{"s": serverID})
	require.Equal(t, api.CodeResponseTooLarge, resp.Code(), "%+v", resp.Errors)
	require.Contains(t, resp.Errors[0].Message, "more than 65536 bytes of text")
	require.Less(t, len(resp.Data), 1<<10, "%s", resp.Data)
	resp = env.GraphQL(tn.Owner, fmt.Sprintf(q, "bodyBase64"), map[string]any{"s": serverID})
	require.Empty(t, resp.Errors, "base64 of 20 KiB fits in 64 KiB")
}

// TestParserTokenLimit: a query document with more tokens than any client needs is refused before it is
// parsed whole.
func TestParserTokenLimit(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	admin := env.AdminToken()
	small := `{ viewer { role ` + strings.Repeat("__typename ", 100) + `} }`
	require.Empty(t, env.GraphQL(admin, small, nil).Errors)
	huge := `{ viewer { role ` + strings.Repeat("__typename ", 20_000) + `} }`
	resp := env.GraphQL(admin, huge, nil)
	require.Equal(t, "GRAPHQL_PARSE_FAILED", resp.Code(), "%+v", resp.Errors)
	require.Contains(t, resp.Errors[0].Message, "token limit")
}

// TestSubscriptionsPerConnection: one websocket holds at most 32 subscriptions; one more is refused with
// TOO_MANY_SUBSCRIPTIONS, and ending one frees its place for a new one, which then streams.
func TestSubscriptionsPerConnection(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartTenantServer(t, "subs", 100)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": "http://127.0.0.1:9/hook"})
	const q = `subscription($s: ID!){ deliveryUpdated(serverId: $s){ id } }`
	vars := map[string]any{"s": srv.ID}
	s := subscribe(t, env, tn.Owner, q, vars) // id "1"
	open := func(id string) {
		s.send(map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{"query": q, "variables": vars}})
	}
	for i := 2; i <= 33; i++ {
		open(fmt.Sprint(i))
	}
	// The 33 start concurrently, so which one is refused is not known in advance; exactly one is.
	m := s.next(10 * time.Second)
	require.NotEmpty(t, m.Errors, "%+v", m)
	require.Equal(t, api.CodeTooManySubscriptions, m.Errors[0].Code(), "%+v", m.Errors)
	ended := "1"
	if m.ID == ended {
		ended = "2"
	}
	s.send(map[string]any{"id": ended, "type": "complete"})
	// The freed place goes to a new subscription, which then streams like the others: each try opens one and
	// posts a webhook; a refused try gets its error at once, an accepted one the delivery.
	try := 0
	relaytest.Eventually(t, 10*time.Second, "a new subscription is accepted once one ended", func() bool {
		try++
		id := fmt.Sprintf("new-%d", try)
		open(id)
		resp := env.Post(srv.Key, "", []byte(`{}`))
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
		_ = resp.Body.Close()
		for {
			m := s.next(10 * time.Second)
			require.False(t, m.TimedOut, "no answer for subscription %s", id)
			if m.ID != id {
				continue
			}
			if len(m.Errors) > 0 {
				require.Equal(t, api.CodeTooManySubscriptions, m.Errors[0].Code(), "%+v", m.Errors)
				return false
			}
			require.Equal(t, "next", m.Type, "%+v", m)
			return true
		}
	})
}
