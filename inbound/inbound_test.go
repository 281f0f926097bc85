package inbound_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

func TestAcceptStoresRequestAndDebits(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 5})
	srv := env.NewServer(tn, "stripe", nil)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": "http://127.0.0.1:1/hook"})

	resp := env.Post(srv.Key, "/events/x?y=1", []byte(`{"id":"evt_1"}`))
	defer resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var body struct{ RequestID string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.NotEmpty(t, body.RequestID)

	ctx := viewer.SystemContext(t.Context())
	reqs, err := env.DB.Client.Request.Query().WithDeliveries().All(ctx)
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	require.Equal(t, "/events/x", reqs[0].Path)
	require.Equal(t, request.StatusPENDING, reqs[0].Status)
	require.Len(t, reqs[0].Edges.Deliveries, 1)
	_, _ = io.Copy(io.Discard, resp.Body)
}
