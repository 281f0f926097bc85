package scheduler_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

// lanes counts a recipient's pending deliveries by lane.
func lanes(t *testing.T, env *relaytest.Env, recipientID string) map[entdelivery.Lane]int {
	t.Helper()
	id, err := strconv.Atoi(recipientID)
	require.NoError(t, err)
	ds, err := env.DB.Client.Delivery.Query().
		Where(entdelivery.RecipientID(id), entdelivery.StatusEQ(entdelivery.StatusPENDING)).
		All(viewer.SystemContext(t.Context()))
	require.NoError(t, err)
	out := map[entdelivery.Lane]int{}
	for _, d := range ds {
		out[d.Lane]++
	}
	return out
}

func setState(t *testing.T, env *relaytest.Env, tn relaytest.Tenant, mutation, recipientID string) {
	t.Helper()
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ `+mutation+`(id: $id){ id } }`, map[string]any{"id": recipientID}, nil)
}

func setURL(t *testing.T, env *relaytest.Env, tn relaytest.Tenant, recipientID, url string) {
	t.Helper()
	env.MustGraphQL(tn.Owner, `mutation($id: ID!, $url: String!){ updateRecipient(id: $id, input: {url: $url}){ id } }`,
		map[string]any{"id": recipientID, "url": url}, nil)
}

// TestPausedBacklogIsParked: the deliveries of a paused recipient leave the direct lane — those that were
// waiting when it was paused as well as those created since — so the claim never walks them; on resume they
// come back to it and are delivered.
func TestPausedBacklogIsParked(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 100)
	rcv := newReceiver(t, 0)
	// A retry due in four minutes keeps the first request's delivery pending while the recipient is still active.
	rid := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL, "maxAttempts": 2})
	failing := newReceiver(t, 1)
	setURL(t, env, tn, rid, failing.URL)
	before := env.Send(srv.Key, "", `{}`)
	relaytest.Eventually(t, 20*time.Second, "first attempt failed, retry pending", func() bool {
		d := deliveriesOf(t, env, before)[0]
		return d.Status == entdelivery.StatusPENDING && d.AttemptCount == 1
	})
	require.Equal(t, map[entdelivery.Lane]int{entdelivery.LaneDIRECT: 1}, lanes(t, env, rid))

	setState(t, env, tn, "pauseRecipient", rid)
	relaytest.Eventually(t, 20*time.Second, "the waiting delivery parked", func() bool {
		return lanes(t, env, rid)[entdelivery.LanePARKED] == 1
	})
	const created = 5
	for range created {
		env.Send(srv.Key, "", `{}`)
	}
	require.Equal(t, map[entdelivery.Lane]int{entdelivery.LanePARKED: created + 1}, lanes(t, env, rid),
		"deliveries created while paused are parked from the start")

	setURL(t, env, tn, rid, rcv.URL)
	setState(t, env, tn, "resumeRecipient", rid)
	relaytest.Eventually(t, 20*time.Second, "the new deliveries delivered after resume", func() bool {
		return rcv.count() == created
	})
	require.Equal(t, map[entdelivery.Lane]int{entdelivery.LaneDIRECT: 1}, lanes(t, env, rid),
		"the retry, due in four minutes, waits in the direct lane")
}

// staleParked stores a delivery to a paused recipient, then makes the recipient active behind the service's
// back, as changed at changedAt: the state is ACTIVE, the delivery still parked, nobody woken.
func staleParked(t *testing.T, env *relaytest.Env, changedAt time.Time) (reqID string, rcv *target) {
	t.Helper()
	tn, srv := env.NewTenantServer(10)
	rcv = newReceiver(t, 0)
	rid := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL})
	setState(t, env, tn, "pauseRecipient", rid)
	reqID = env.Send(srv.Key, "", `{}`)
	require.Equal(t, map[entdelivery.Lane]int{entdelivery.LanePARKED: 1}, lanes(t, env, rid))
	id, _ := strconv.Atoi(rid)
	require.NoError(t, env.DB.Client.Recipient.UpdateOneID(id).SetState(recipient.StateACTIVE).
		SetStateChangedAt(changedAt).Exec(viewer.SystemContext(t.Context())))
	return reqID, rcv
}

// TestStaleParkedLaneIsRepaired: a delivery created from a recipient state that changed before the delivery's
// transaction committed (here: parked by hand while its recipient is active and was changed a moment ago) is
// moved back to the direct lane by the reconciler, and delivered.
func TestStaleParkedLaneIsRepaired(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	reqID, rcv := staleParked(t, env, time.Now())
	waitDelivered(t, env, reqID, 20*time.Second, "the parked delivery reconciled and delivered")
	require.Equal(t, 1, rcv.count())
}

// TestStartSweepsEveryLane: deliveries in the wrong lane for a recipient whose state last changed long ago —
// stored by a version without lanes, or left while no process ran — are beyond the reconciler's window, and a
// process starting looks at every recipient once: they are moved and delivered.
func TestStartSweepsEveryLane(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	reqID, rcv := staleParked(t, env, time.Now().Add(-time.Hour)) // outside the running process's window
	env.Peer(t)                                                   // a second process on the same database, as a restart would start
	waitDelivered(t, env, reqID, 20*time.Second, "the stale delivery swept and delivered")
	require.Equal(t, 1, rcv.count())
}
