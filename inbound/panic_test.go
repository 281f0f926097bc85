package inbound_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/inbound"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

// A panic while intake commits a batch does not end the process: the batch's requests, stored nothing, are
// answered 503 with Retry-After and charged nothing; the committer goes on, and the next request is accepted
// and delivered. A panic after a batch was stored and answered leaves its 202s standing.
func TestIntakeSurvivesAPanickingCommit(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 10)
	received := make(chan string, 10)
	rcv := newCountingReceiver(t, received)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv})
	ctx := viewer.SystemContext(t.Context())

	inbound.PanicOnNextCommit(env.Relay.Inbound, false)
	resp := env.Post(srv.Key, "", []byte(`{"first":true}`))
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s", body)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	n, err := env.DB.Client.Request.Query().Count(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing of the panicked batch was stored")
	tenant, err := env.DB.Client.Tenant.Query().Only(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 10, tenant.CreditBalance, "nothing was charged")

	id := env.Send(srv.Key, "", `{"second":true}`)
	requireReceived(t, received, id)

	inbound.PanicOnNextCommit(env.Relay.Inbound, true)
	id = env.Send(srv.Key, "", `{"third":true}`) // answered 202 before the panic: stored, and delivered
	requireReceived(t, received, id)
	relaytest.Eventually(t, 20*time.Second, "both accepted requests to be delivered", func() bool {
		n, err := env.DB.Client.Request.Query().Where(request.StatusEQ(request.StatusDELIVERED)).Count(ctx)
		require.NoError(t, err)
		return n == 2
	})
	n, err = env.DB.Client.Request.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n, "only the accepted requests are stored")
}

// newCountingReceiver starts a recipient that answers 200 and passes on the request ID of every call.
func newCountingReceiver(t *testing.T, received chan<- string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received <- r.Header.Get("X-Adal-Request-Id")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func requireReceived(t *testing.T, received <-chan string, id string) {
	t.Helper()
	select {
	case got := <-received:
		require.Equal(t, id, got)
	case <-time.After(20 * time.Second):
		t.Fatalf("request %s was not delivered", id)
	}
}
