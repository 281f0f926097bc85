package scheduler_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/attempt"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/ent/server"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/scheduler"
	"github.com/adal-relay/adal/viewer"
)

// blockingReceiver answers 200 to each call once the test lets it go, and tells the test of every call.
func blockingReceiver(t *testing.T) (srv *httptest.Server, arrived <-chan struct{}, release chan<- struct{}) {
	in := make(chan struct{}, 16)
	out := make(chan struct{}, 16)
	done := make(chan struct{})
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in <- struct{}{}
		select {
		case <-out:
		case <-done: // the test ended (or failed) with calls still held
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // before srv.Close, which waits for the calls in progress
	return srv, in, out
}

// A delivery handed over by intake is claimed by the transaction that stores it: its first attempt starts at
// the very time the delivery was created. One that went through the table gets its first attempt at the
// claim's time, after the commit.
func handedOver(d *ent.Delivery) bool {
	return d.FirstAttemptAt != nil && d.FirstAttemptAt.Equal(d.CreatedAt)
}

func TestIntakeHandsNewDeliveriesToFreeWorkers(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 10, func(c *relay.Config) { c.Workers = 1 })
	rcv, arrived, release := blockingReceiver(t)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL})

	first := env.Send(srv.Key, "", `{"n":1}`)
	<-arrived // the only worker is now busy with the first request
	d := deliveriesOf(t, env, first)[0]
	require.Equal(t, entdelivery.StatusIN_PROGRESS, d.Status)
	require.True(t, handedOver(d), "stored claimed: first attempt at %v, created at %v", d.FirstAttemptAt, d.CreatedAt)
	require.Equal(t, env.Relay.Scheduler.Owner(), d.LeaseOwner)
	require.Equal(t, 1, d.AttemptCount)

	// No worker is free: the second request's delivery waits in the table for the claim.
	second := env.Send(srv.Key, "", `{"n":2}`)
	d = deliveriesOf(t, env, second)[0]
	require.Equal(t, entdelivery.StatusPENDING, d.Status)
	require.Empty(t, d.LeaseOwner)
	require.Zero(t, d.AttemptCount)

	release <- struct{}{}
	<-arrived
	release <- struct{}{}
	for _, id := range []string{first, second} {
		d := waitDelivered(t, env, id, 10*time.Second, "delivery of request "+id)
		require.Equal(t, 1, d.AttemptCount)
		require.Len(t, d.Edges.Attempts, 1)
		require.Equal(t, attempt.StatusSUCCEEDED, d.Edges.Attempts[0].Status)
		require.Empty(t, d.LeaseOwner)
		require.Nil(t, d.LeaseExpiresAt)
	}
	require.False(t, handedOver(deliveriesOf(t, env, second)[0]), "the second delivery went through the claim")

	// The worker is free again, and the claim loop has seen that nothing more is due: a third request is
	// handed over again.
	relaytest.Eventually(t, 5*time.Second, "the worker free for a handover", func() bool {
		h := env.Relay.Scheduler.Reserve(map[int]int{atoiOr(tn.ID): 1})
		env.Relay.Scheduler.Run(h, nil)
		return h.Slots == 1
	})
	third := env.Send(srv.Key, "", `{"n":3}`)
	<-arrived
	require.True(t, handedOver(deliveriesOf(t, env, third)[0]))
	release <- struct{}{}
	waitDelivered(t, env, third, 10*time.Second, "delivery of the third request")
}

// A delivery stored claimed whose process died before running it is not lost: its lease lapses, the rescuer
// records the attempt as interrupted, and the next attempt delivers it.
func TestHandedOverDeliveryOfADeadProcessIsRescued(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, compressed(5*time.Millisecond), func(c *relay.Config) {
		c.RescueInterval = 20 * time.Millisecond
	})
	stored, rcv := storeOne(t, env, func(int) delivery.Handoff {
		return delivery.Handoff{Owner: "a-process-that-died", Lease: time.Millisecond, Slots: 1}
	})
	rescuedThenDelivered(t, env, stored.Request.ID, rcv)
}

// A claim whose lease budget is spent by the time its attempt could start (its batch's commit took that
// long) is not sent: the rescuer may take a lapsed lease at any moment, and a send then would go out twice.
// The lease lapses unused, the rescuer records the attempt as interrupted, and the next attempt delivers.
func TestClaimWithSpentLeaseIsLeftToTheRescuer(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	env := relaytest.Start(t, compressed(5*time.Millisecond), func(c *relay.Config) {
		c.Lease = lease
		c.RescueInterval = 20 * time.Millisecond
	})
	var h delivery.Handoff
	stored, rcv := storeOne(t, env, func(tenant int) delivery.Handoff {
		h = env.Relay.Scheduler.Reserve(map[int]int{tenant: 1})
		require.Equal(t, 1, h.Slots)
		return h
	})
	claimed := stored.Claimed
	claimed[0].Claim.StartedAt = claimed[0].Claim.StartedAt.Add(-scheduler.AttemptBudget(lease)) // as after a long commit
	env.Relay.Scheduler.Run(h, claimed)
	rescuedThenDelivered(t, env, stored.Request.ID, rcv)

	// Its slot came back: the tenant's whole share (half the workers) is free again once the retry's attempt has
	// let go of its own.
	tenant := claimed[0].Claim.TenantID
	relaytest.Eventually(t, 5*time.Second, "every worker slot free", func() bool {
		h := env.Relay.Scheduler.Reserve(map[int]int{tenant: scheduler.DefaultWorkers})
		env.Relay.Scheduler.Run(h, nil)
		return h.Slots == scheduler.DefaultWorkers/2
	})
}

// storeOne stores one request for the env's only server (with one receiver as its direct recipient) as intake
// would, under the handoff made for its tenant, and returns what was stored and the receiver.
func storeOne(t *testing.T, env *relaytest.Env, handoff func(tenant int) delivery.Handoff) (delivery.Stored, *target) {
	t.Helper()
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 10})
	fixture := env.NewServer(tn, "s", nil)
	rcv := newReceiver(t, 0)
	env.NewRecipient(tn, fixture.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL})
	ctx := viewer.SystemContext(t.Context())
	srv, err := env.DB.Client.Server.Query().Where(server.InboundKey(fixture.Key)).Only(ctx)
	require.NoError(t, err)
	recs, err := env.DB.Client.Recipient.Query().Where(recipient.ServerID(srv.ID)).All(ctx)
	require.NoError(t, err)
	h := handoff(srv.TenantID)
	stored, err := env.Relay.Delivery.StoreBatch(ctx, env.DB.Client, []delivery.Incoming{{
		Server: srv, Recipients: recs, Key: fmt.Sprintf("k-%d", time.Now().UnixNano()),
		Request: delivery.NewRequest{Method: http.MethodPost, Header: http.Header{}, Body: []byte(`{}`)},
	}}, billing.ReasonRequestAccepted, h)
	require.NoError(t, err)
	require.NoError(t, stored[0].Err)
	require.Len(t, stored[0].Claimed, min(h.Slots, 1))
	return stored[0], rcv
}

// rescuedThenDelivered waits for the request's delivery to succeed and checks its history: an interrupted
// first attempt, never sent, then a successful one.
func rescuedThenDelivered(t *testing.T, env *relaytest.Env, requestID int, rcv *target) {
	t.Helper()
	ctx := viewer.SystemContext(t.Context())
	relaytest.Eventually(t, 10*time.Second, "the rescued delivery to succeed", func() bool {
		d, err := env.DB.Client.Delivery.Query().Where(entdelivery.RequestID(requestID)).Only(ctx)
		return err == nil && d.Status == entdelivery.StatusSUCCEEDED
	})
	d, err := env.DB.Client.Delivery.Query().Where(entdelivery.RequestID(requestID)).
		WithAttempts(func(q *ent.AttemptQuery) { q.Order(ent.Asc(attempt.FieldNumber)) }).Only(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, d.AttemptCount)
	require.Len(t, d.Edges.Attempts, 2)
	require.Equal(t, attempt.ErrorKindINTERRUPTED, *d.Edges.Attempts[0].ErrorKind)
	require.Equal(t, attempt.StatusSUCCEEDED, d.Edges.Attempts[1].Status)
	require.Equal(t, 1, rcv.count(), "sent once: the interrupted attempt never reached the receiver")
}
