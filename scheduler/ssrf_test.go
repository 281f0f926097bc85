package scheduler_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent/attempt"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
)

// With the egress guard on (the production default), a recipient on loopback is refused at dial time: the
// attempt fails as CONNECTION with a message that says how to allow it, and nothing reaches the target.
func TestPrivateTargetRefused(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 10, compressed(5*time.Millisecond), func(c *relay.Config) { c.AllowPrivateTargets = false })
	rcv := newReceiver(t, 0)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL + "/hook", "maxAttempts": 2, "retrySchedule": "STEPPED"})

	reqID := env.Send(srv.Key, "", `{}`)
	d := waitFailed(t, env, reqID, 20*time.Second, "delivery to fail")
	require.Len(t, d.Edges.Attempts, 2)
	for _, a := range d.Edges.Attempts {
		require.Equal(t, attempt.StatusFAILED, a.Status)
		require.NotNil(t, a.ErrorKind)
		require.Equal(t, attempt.ErrorKindCONNECTION, *a.ErrorKind)
		require.Nil(t, a.HTTPStatus)
		require.Contains(t, a.ErrorMessage, "ADAL_ALLOW_PRIVATE_TARGETS")
		require.Contains(t, a.ErrorMessage, "127.0.0.1")
	}
	require.Zero(t, rcv.count(), "the receiver must never be called")
}
