package scheduler_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/scheduler"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
)

// A tenant whose 20 recipients hang until their timeout holds at most its share of the workers — half of them
// while it is alone, through intake's hand-off and the claim alike — so another tenant's deliveries start at
// once, while every hanging attempt is still in flight, without waiting for any of them to time out. The
// deliveries waiting for the noisy tenant's share stay PENDING with no attempt spent.
func TestNoisyTenantLeavesWorkersToOthers(t *testing.T) {
	t.Parallel()
	const workers = 8
	const share = workers / 2
	const noisyRecipients, noisyRequests = 20, 3
	env := relaytest.Start(t, func(c *relay.Config) { c.Workers = workers })

	hang := newHolding(t, noisyRecipients*noisyRequests) // every call held until the test ends
	noisy := env.NewTenant("noisy", relaytest.PlanLimits{Credits: 100, MaxRecipientsPerServer: noisyRecipients})
	noisySrv := env.NewServer(noisy, "s", nil)
	for range noisyRecipients {
		env.NewRecipient(noisy, noisySrv.ID, map[string]any{"method": "DIRECT_HTTP", "url": hang.URL})
	}
	var noisyIDs []string
	for range noisyRequests {
		noisyIDs = append(noisyIDs, env.Send(noisySrv.Key, "", `{"noisy":true}`))
	}
	relaytest.Eventually(t, 10*time.Second, "the noisy tenant to fill its share", func() bool {
		return hang.inFlight.Load() == share
	})

	quiet := env.NewTenant("quiet", relaytest.PlanLimits{Credits: 100})
	quietSrv := env.NewServer(quiet, "s", nil)
	rcv := newReceiver(t, 0)
	env.NewRecipient(quiet, quietSrv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL})
	for i := range 10 {
		id := env.Send(quietSrv.Key, "", `{"quiet":`+strconv.Itoa(i)+`}`)
		// Far below the hanging recipients' 30 s timeout: none of their workers came free meanwhile.
		waitDelivered(t, env, id, 10*time.Second, "the quiet tenant's delivery "+strconv.Itoa(i))
	}
	require.EqualValues(t, share, hang.inFlight.Load(), "the hanging attempts are all still in flight")
	require.EqualValues(t, share, hang.peak.Load(), "the noisy tenant never held more than its share")
	require.Equal(t, 10, rcv.count())

	// What waits for the noisy tenant's share has spent nothing.
	var started, waiting int
	for _, id := range noisyIDs {
		for _, d := range deliveriesOf(t, env, id) {
			switch d.Status {
			case entdelivery.StatusIN_PROGRESS:
				started++
				require.Equal(t, 1, d.AttemptCount)
			case entdelivery.StatusPENDING:
				waiting++
				require.Zero(t, d.AttemptCount, "a delivery waiting for a worker spent an attempt")
				require.Empty(t, d.Edges.Attempts)
			default:
				t.Fatalf("noisy delivery %d is %s", d.ID, d.Status)
			}
		}
	}
	require.Equal(t, share, started)
	require.Equal(t, noisyRecipients*noisyRequests-share, waiting)
}

// The hand-off tests' process: 6 workers for a tenant alone, 4 each for three busy tenants.
const handOffWorkers, handOffAlone = 12, 0.5

// Intake hands a tenant's burst straight to workers, up to the share of a tenant alone, while no other tenant
// waits for room; once another does, it hands no more than the equal share of the busy tenants, and none to a
// tenant that waits itself (its due deliveries, in the table, go first).
func TestHandOffHeldToTheShareOnlyWhileAnotherWaits(t *testing.T) {
	t.Parallel()
	busy := map[int]int{1: 1, 2: 1, 3: 1}
	for _, c := range []struct {
		name    string
		waiting []int
		want    map[int]int
		granted map[int]int
	}{
		{"no one waits", nil, map[int]int{1: 9}, map[int]int{1: 5}},
		{"a new tenant, no one waits", nil, map[int]int{4: 9}, map[int]int{4: 6}},
		{"another waits", []int{2}, map[int]int{1: 9}, map[int]int{1: 3}},
		{"a new tenant while another waits", []int{2}, map[int]int{4: 9}, map[int]int{4: 3}},
		{"it waits itself", []int{1}, map[int]int{1: 9}, map[int]int{}},
	} {
		require.Equal(t, c.granted, scheduler.HandOff(handOffWorkers, handOffAlone, busy, c.waiting, c.want, handOffWorkers), c.name)
	}
}

// Two tenants that both hang hold an equal share of the workers each, and leave none of their own to take.
func TestBusyTenantsShareTheWorkersEqually(t *testing.T) {
	t.Parallel()
	const workers = 6
	env := relaytest.Start(t, func(c *relay.Config) {
		c.Workers = workers
		c.TenantShare = 1 // alone, a tenant may take every worker: the equal share is what bounds it here
	})
	hangA, hangB := newHolding(t, 20), newHolding(t, 20)
	a, srvA := env.NewTenantServer(100)
	env.NewRecipient(a, srvA.ID, map[string]any{"method": "DIRECT_HTTP", "url": hangA.URL})
	b := env.NewTenant("b", relaytest.PlanLimits{Credits: 100})
	srvB := env.NewServer(b, "s", nil)
	env.NewRecipient(b, srvB.ID, map[string]any{"method": "DIRECT_HTTP", "url": hangB.URL})

	for range 10 {
		env.Send(srvA.Key, "", `{}`)
	}
	relaytest.Eventually(t, 10*time.Second, "tenant a alone to take every worker", func() bool {
		return hangA.inFlight.Load() == workers
	})
	// Every worker is busy: b waits for a's attempts to end, and from then on each tenant holds half.
	for range 10 {
		env.Send(srvB.Key, "", `{}`)
	}
	for range workers / 2 {
		hangA.release <- struct{}{}
	}
	relaytest.Eventually(t, 10*time.Second, "b to get the workers a let go of", func() bool {
		return hangB.inFlight.Load() == workers/2
	})
	require.EqualValues(t, workers/2, hangA.inFlight.Load())
	// One more of a's attempts ending gives its worker back to a, under its share again; b, at its share, gets
	// nothing more.
	hangA.release <- struct{}{}
	relaytest.Eventually(t, 10*time.Second, "a's freed worker to go back to a", func() bool {
		return hangA.arrived.Load() == workers+1
	})
	require.EqualValues(t, workers/2, hangA.inFlight.Load())
	require.EqualValues(t, workers/2, hangB.inFlight.Load())
	require.EqualValues(t, workers/2, hangB.peak.Load(), "b never held more than an equal share")
}

// A recipient with maxConcurrency 1 gets one attempt at a time — across two processes on PostgreSQL — and the
// deliveries waiting for its slot stay PENDING with no attempt spent. The poll interval is an hour: only the
// record of an attempt, freeing the slot, wakes the claim for the next.
func TestCappedRecipientGetsOneAttemptAtATime(t *testing.T) {
	t.Parallel()
	const n = 12
	small := func(c *relay.Config) {
		c.Workers = 8
		c.PollInterval = time.Hour
	}
	a := relaytest.Start(t, small)
	envs := []*relaytest.Env{a}
	if dbtest.Postgres() {
		envs = append(envs, a.Peer(t, small))
	}
	tn, srv := a.NewTenantServer(100)
	rcv := newHolding(t, n)
	rid := a.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL, "maxConcurrency": 1})

	var ids []string
	for i := range n {
		ids = append(ids, envs[i%len(envs)].Send(srv.Key, "", `{}`))
	}
	relaytest.Eventually(t, 10*time.Second, "the first attempt", func() bool { return rcv.arrived.Load() == 1 })
	ctx := viewer.SystemContext(t.Context())
	id := relaytest.RowID(t, rid)
	r, err := a.DB.Client.Recipient.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, 1, r.InFlight)
	pending := a.Deliveries(entdelivery.StatusEQ(entdelivery.StatusPENDING))
	require.Len(t, pending, n-1)
	for _, d := range pending {
		require.Equal(t, entdelivery.LaneCAPPED, d.Lane)
		require.Zero(t, d.AttemptCount, "waiting for the slot spent an attempt")
	}

	if peak := rcv.letThrough(t, n, 1); peak != 1 {
		t.Fatalf("%d attempts to the capped recipient were in flight at once", peak)
	}
	for _, id := range ids {
		d := waitDelivered(t, a, id, 10*time.Second, "delivery of request "+id)
		require.Len(t, d.Edges.Attempts, 1, "each delivery was attempted once")
	}
	r, err = a.DB.Client.Recipient.Get(ctx, id)
	require.NoError(t, err)
	require.Zero(t, r.InFlight, "every slot came back")
}

// Setting a cap moves the recipient's waiting deliveries to the capped lane, where the cap holds; removing it
// moves them back. The cap is validated, and only for direct recipients.
func TestMaxConcurrencyCanBeSetAndRemoved(t *testing.T) {
	t.Parallel()
	const workers = 8
	env, tn, srv := relaytest.StartWithServer(t, 100, func(c *relay.Config) { c.Workers = workers })
	rcv := newHolding(t, 10)
	rid := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL})
	const update = `mutation($id: ID!, $in: UpdateRecipientInput!){ updateRecipient(id: $id, input: $in){ id maxConcurrency } }`

	for in, field := range map[string]map[string]any{
		"zero":     {"maxConcurrency": 0},
		"negative": {"maxConcurrency": -3},
	} {
		res := env.GraphQL(tn.Owner, update, map[string]any{"id": rid, "in": field})
		require.Equal(t, "INVALID_INPUT", res.Code(), in)
	}
	cliSrv := env.NewServer(tn, "cli", nil)
	res := env.GraphQL(tn.Owner, `mutation($in: CreateRecipientInput!){ createRecipient(input: $in){ id } }`,
		map[string]any{"in": map[string]any{"serverId": cliSrv.ID, "name": "cli", "method": "CLI", "maxConcurrency": 2}})
	require.Equal(t, "INVALID_INPUT", res.Code())

	var out struct{ UpdateRecipient struct{ MaxConcurrency *int } }
	env.MustGraphQL(tn.Owner, update, map[string]any{"id": rid, "in": map[string]any{"maxConcurrency": 2}}, &out)
	require.Equal(t, 2, *out.UpdateRecipient.MaxConcurrency)
	for range 6 {
		env.Send(srv.Key, "", `{}`)
	}
	relaytest.Eventually(t, 10*time.Second, "two attempts", func() bool { return rcv.inFlight.Load() == 2 })
	relaytest.Eventually(t, 10*time.Second, "the rest waiting in the capped lane", func() bool {
		return len(env.Deliveries(entdelivery.StatusEQ(entdelivery.StatusPENDING), entdelivery.LaneEQ(entdelivery.LaneCAPPED))) == 4
	})
	require.EqualValues(t, 2, rcv.inFlight.Load())

	env.MustGraphQL(tn.Owner, update, map[string]any{"id": rid, "in": map[string]any{"clearMaxConcurrency": true}}, &out)
	require.Nil(t, out.UpdateRecipient.MaxConcurrency)
	// Uncapped, the waiting deliveries go back to the direct lane and start, up to the tenant's share.
	relaytest.Eventually(t, 10*time.Second, "the waiting deliveries to start", func() bool {
		return rcv.inFlight.Load() == workers/2
	})
	ctx := viewer.SystemContext(t.Context())
	n, err := env.DB.Client.Recipient.Query().Where(recipient.InFlightGT(0)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the two capped attempts still hold their slots until recorded")
	for range 6 {
		rcv.release <- struct{}{}
	}
	relaytest.Eventually(t, 10*time.Second, "every slot back", func() bool {
		n, err := env.DB.Client.Recipient.Query().Where(recipient.InFlightGT(0)).Count(ctx)
		require.NoError(t, err)
		return n == 0
	})
}

// lanes counts a recipient's pending deliveries by lane.
func lanes(t *testing.T, env *relaytest.Env, recipientID string) map[entdelivery.Lane]int {
	t.Helper()
	id := relaytest.RowID(t, recipientID)
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
	id := relaytest.RowID(t, rid)
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

// A claim that can tell what it left (PostgreSQL's reads one row past the room of each tenant not waiting)
// marks waiting only the tenants it left due work of, so a tenant at its share with nothing more due keeps
// intake's hand-off; a claim that cannot tell (SQLite's) counts a tenant that got its whole room, or had none,
// as waiting.
func TestClaimMarksWaitingOnlyWhatItLeft(t *testing.T) {
	t.Parallel()
	atShare := map[int]int{1: 4, 2: 4, 3: 4}
	for _, c := range []struct {
		name           string
		flying         map[int]int
		waiting        []int
		took           map[int]int
		left           map[int]bool
		waitingAfter   []int
		handOffTenant1 int
	}{
		{"at its share, nothing due", atShare, nil, nil, map[int]bool{}, nil, 2},
		{"at its share, the claim cannot tell", atShare, nil, nil, nil, []int{1, 2, 3}, 0},
		{"at its share, due work left", atShare, nil, nil, map[int]bool{1: true}, []int{1}, 0},
		{"whole room taken, more left", nil, nil, map[int]int{1: 6}, map[int]bool{1: true}, []int{1}, 0},
		{"whole room taken, nothing left", map[int]int{1: 2}, nil, map[int]int{1: 4}, map[int]bool{1: false}, nil, 0},
		{"waiting at its share: not looked at", atShare, []int{1}, nil, map[int]bool{}, []int{1}, 0},
		{"waiting, got less than its room", map[int]int{1: 1}, []int{1}, map[int]int{1: 1}, map[int]bool{1: false}, nil, 4},
	} {
		waiting, granted := scheduler.ClaimThenHandOff(handOffWorkers, handOffAlone, c.flying, c.waiting, c.took, c.left, map[int]int{1: 9})
		require.Equal(t, c.waitingAfter, waiting, c.name)
		require.Equal(t, c.handOffTenant1, granted[1], c.name)
	}
}

// The claim reads one row past the room of each tenant not waiting, and says which tenants it left due work
// of, including one it took nothing from; it reads nothing of a waiting tenant without room. SQLite's claim
// cannot tell, and says so.
func TestClaimReportsWhatItLeft(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	env.Relay.Scheduler.Stop() // deliveries stay in the table for the claim under test
	rcv := newHolding(t, 0)
	tenantOf := func(credits int, requests int) int {
		tn := env.NewTenant("t"+strconv.Itoa(requests), relaytest.PlanLimits{Credits: credits})
		srv := env.NewServer(tn, "s", nil)
		env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL})
		var id int
		for range requests {
			req := env.Accept(srv.Key)
			d, err := env.DB.Client.Delivery.Query().Where(entdelivery.RequestID(req)).Only(viewer.SystemContext(t.Context()))
			require.NoError(t, err)
			id = d.TenantID
		}
		return id
	}
	a, b := tenantOf(100, 3), tenantOf(100, 2)
	ctx, db, now := viewer.SystemContext(t.Context()), env.DB.DB, time.Now().Add(time.Second)
	// Four workers, b holding all of them: a, not busy here, may take two (an equal share among two).
	const workers, limit = 4, 10
	flying := map[int]int{b: workers}

	took, left, err := scheduler.ClaimForTest(ctx, db, now, limit, workers, flying, []int{b})
	require.NoError(t, err)
	require.Equal(t, map[int]int{a: 2}, took)
	if db.Postgres() {
		require.Equal(t, map[int]bool{a: true}, left, "a's third delivery is left; waiting b is not looked at")
	} else {
		require.Nil(t, left)
	}

	took, left, err = scheduler.ClaimForTest(ctx, db, now, limit, workers, flying, nil)
	require.NoError(t, err)
	require.Equal(t, map[int]int{a: 1}, took)
	if db.Postgres() {
		require.Equal(t, map[int]bool{a: false, b: true}, left, "a has nothing left; b, probed, has two")
	} else {
		require.Nil(t, left)
	}
}
