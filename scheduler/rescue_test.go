package scheduler_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/egress"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/attempt"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/outboundattempt"
	"github.com/adal-relay/adal/ent/outboundjob"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/ent/server"
	"github.com/adal-relay/adal/internal/testproc"
	"github.com/adal-relay/adal/outbound"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/scheduler"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
)

func TestMain(m *testing.M) { os.Exit(testproc.Run(m)) }

// holdingReceiver holds every call open until released, and records each (path, request, attempt).
type holdingReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	calls   []heldCall
	release chan struct{}
}

type heldCall struct {
	path    string
	request string
	attempt int
}

func newHoldingReceiver(t *testing.T) *holdingReceiver {
	h := &holdingReceiver{release: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice when the caller hangs up (r.Context() ends).
		_, _ = io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.calls = append(h.calls, heldCall{r.URL.Path, r.Header.Get("X-Adal-Request-Id"), atoiOr(r.Header.Get("X-Adal-Attempt"))})
		release := h.release
		h.mu.Unlock()
		select {
		case <-release:
			w.WriteHeader(http.StatusOK)
		case <-r.Context().Done(): // the caller went away (was killed)
		}
	}))
	t.Cleanup(func() { h.open(); h.Close() })
	return h
}

// open releases held calls and lets later ones through at once.
func (h *holdingReceiver) open() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

func (h *holdingReceiver) received() []heldCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]heldCall(nil), h.calls...)
}

type rescuedAttempt struct {
	Number     int
	Status     string
	ErrorKind  *string
	StartedAt  time.Time
	FinishedAt time.Time
}

type rescuedDelivery struct {
	ID           string
	Status       string
	AttemptCount int
	MaxAttempts  int
	Recipient    struct{ ID, URL string }
	Attempts     []rescuedAttempt
}

// A server process killed with SIGKILL while attempts are in flight loses nothing: once restarted, its
// rescuer records each of them as an INTERRUPTED attempt (which counts) when the lease expires, and the
// deliveries go on per their schedule — retried where attempts remain, FAILED where they do not.
func TestKilledServerLosesNoDelivery(t *testing.T) {
	t.Parallel()
	const (
		requests = 5
		lease    = 3 * time.Second
	)
	env := []string{
		"ADAL_RETRY_UNIT=20ms",
		"ADAL_LEASE=" + lease.String(),
		"ADAL_RESCUE_INTERVAL=250ms",
		"ADAL_LOG_LEVEL=info",
	}
	if dbtest.Postgres() {
		env = append(env, "ADAL_DATABASE_URL="+dbtest.NewSchema(t), "ADAL_DATA_DIR=")
	} else {
		env = append(env, "ADAL_DATA_DIR="+dbtest.DataDir(t), "ADAL_DATABASE_URL=")
	}
	proc := testproc.NewServer(t, env...)
	proc.Start()
	fx := proc.Setup(100)
	rcv := newHoldingReceiver(t)
	retrying := fx.Recipient(proc, rcv.URL+"/retrying", 3) // an interrupted attempt leaves two
	lastTry := fx.Recipient(proc, rcv.URL+"/last-try", 1)  // the interrupted attempt was its only one

	for i := range requests {
		resp, err := http.Post(proc.URL+"/in/"+fx.Key, "application/json", strings.NewReader(strconv.Itoa(i)))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
	}
	relaytest.Eventually(t, 20*time.Second, "every delivery's first attempt to be held by the receiver", func() bool {
		return len(rcv.received()) == 2*requests
	})
	killedAt := time.Now()
	proc.Kill()
	rcv.open()
	proc.Start()

	// Every delivery reaches a terminal state.
	var deliveries []rescuedDelivery
	relaytest.Eventually(t, 40*time.Second, "every delivery to settle", func() bool {
		var out struct {
			Requests struct {
				Edges []struct {
					Node struct{ Deliveries []rescuedDelivery }
				}
			}
		}
		proc.GraphQL(fx.Owner, `query($s: ID!){ requests(serverId: $s, first: 100){ edges { node { deliveries {
			id status attemptCount maxAttempts recipient { id url } attempts { number status errorKind startedAt finishedAt } } } } } }`,
			map[string]any{"s": fx.ServerID}, &out)
		deliveries = deliveries[:0]
		settled := len(out.Requests.Edges) == requests
		for _, e := range out.Requests.Edges {
			for _, d := range e.Node.Deliveries {
				deliveries = append(deliveries, d)
				settled = settled && (d.Status == "SUCCEEDED" || d.Status == "FAILED")
			}
		}
		return settled
	})
	t.Logf("all settled %v after the kill", time.Since(killedAt).Round(time.Millisecond))

	require.Len(t, deliveries, 2*requests, "no delivery lost")
	for _, d := range deliveries {
		require.LessOrEqual(t, d.AttemptCount, d.MaxAttempts, "delivery %s", d.ID)
		require.Len(t, d.Attempts, d.AttemptCount, "delivery %s", d.ID)
		first := d.Attempts[0]
		require.Equal(t, 1, first.Number)
		require.Equal(t, "FAILED", first.Status)
		require.NotNil(t, first.ErrorKind)
		require.Equal(t, "INTERRUPTED", *first.ErrorKind, "the attempt in flight at the kill is recorded as interrupted")
		// Rescued only once its lease had expired, and well within a minute after.
		held := first.FinishedAt.Sub(first.StartedAt)
		require.GreaterOrEqual(t, held, lease, "delivery %s rescued before its lease expired", d.ID)
		require.Less(t, held, lease+60*time.Second)
		switch d.Recipient.ID {
		case retrying:
			require.Equal(t, "SUCCEEDED", d.Status)
			require.Equal(t, 2, d.AttemptCount, "the rescue scheduled the next attempt")
			require.Equal(t, "SUCCEEDED", d.Attempts[1].Status)
			require.False(t, d.Attempts[1].StartedAt.Before(first.FinishedAt), "the retry started before the rescue")
		case lastTry:
			require.Equal(t, "FAILED", d.Status, "no attempt left after the interrupted one")
			require.Equal(t, 1, d.AttemptCount)
		default:
			t.Fatalf("delivery %s to unknown recipient %s", d.ID, d.Recipient.ID)
		}
	}

	// The receiver saw each attempt once: the five held ones per recipient, and the rescued retries.
	seen := map[heldCall]int{}
	for _, c := range rcv.received() {
		seen[c]++
	}
	for c, n := range seen {
		require.Equal(t, 1, n, "%+v received %d times", c, n)
	}
	require.Len(t, seen, 3*requests)
	for i := range seen {
		if i.path == "/last-try" {
			require.Equal(t, 1, i.attempt)
		}
	}
}

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
	return storeOneWith(t, env, delivery.NewRequest{Method: http.MethodPost, Header: http.Header{}, Body: []byte(`{}`)}, handoff)
}

// storeOneWith is storeOne for the request in.
func storeOneWith(t *testing.T, env *relaytest.Env, in delivery.NewRequest, handoff func(tenant int) delivery.Handoff) (delivery.Stored, *target) {
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
		Server: srv, Recipients: recs, Key: fmt.Sprintf("k-%d", time.Now().UnixNano()), Request: in,
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

// An attempt never outlives its lease in a live process: with a lease shorter than the recipient's timeout,
// the attempt is cut at the lease's budget and recorded as a TIMEOUT by the process itself — the rescuer,
// sweeping all along, never takes it for interrupted (which would send it again while it still runs).
func TestAttemptEndsWithinItsLease(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	env := relaytest.Start(t, compressed(5*time.Millisecond), func(c *relay.Config) {
		c.Lease = lease
		c.RescueInterval = 50 * time.Millisecond
	})
	tn, srv := env.NewTenantServer(10)
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // once the body is read, the server notices the caller hanging up
		<-r.Context().Done()
	}))
	t.Cleanup(stuck.Close)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": stuck.URL, "maxAttempts": 1, "timeoutSeconds": 30})

	reqID := env.Send(srv.Key, "", `{}`)
	d := waitFailed(t, env, reqID, 20*time.Second, "the attempt to end")
	require.Len(t, d.Edges.Attempts, 1)
	a := d.Edges.Attempts[0]
	require.Equal(t, attempt.ErrorKindTIMEOUT, *a.ErrorKind, a.ErrorMessage)
	// Cut at what was left of the lease's budget when the attempt started: the budget less the moments
	// between the claim and the send.
	m := regexp.MustCompile(`no response within (\S+):`).FindStringSubmatch(a.ErrorMessage)
	require.NotNil(t, m, a.ErrorMessage)
	cut, err := time.ParseDuration(m[1])
	require.NoError(t, err)
	require.LessOrEqual(t, cut, scheduler.AttemptBudget(lease))
	require.Greater(t, cut, scheduler.AttemptBudget(lease)-time.Second/2)
	require.Less(t, a.FinishedAt.Sub(a.StartedAt), lease)
}

// panickingSender panics on the first attempt of every delivery or job it is given, and sends the others
// through the HTTP sender.
type panickingSender struct {
	http     *delivery.HTTPSender
	panicked atomic.Int32
}

func (s *panickingSender) Send(ctx context.Context, out delivery.Outgoing) delivery.Outcome {
	if out.Attempt == 1 {
		s.panicked.Add(1)
		panic("sender bug on " + out.URL)
	}
	return s.http.Send(ctx, out)
}

// An attempt whose sender panics does not end the process: the attempt is recorded INTERRUPTED at once (the
// rescuer's outcome for a crash), its worker and its capped recipient's slot come back, the retry delivers
// it, and the process goes on serving intake, outbound jobs and the API.
func TestPanickingAttemptIsRecordedAndRetried(t *testing.T) {
	t.Parallel()
	sender := &panickingSender{http: delivery.NewHTTPSender(egress.Policy{AllowPrivate: true}, 4, nil)}
	env := relaytest.Start(t, compressed(5*time.Millisecond), func(c *relay.Config) {
		c.Workers = 4
		c.Sender = sender
	})
	tn, srv := env.NewTenantServer(100)
	rcv := newReceiver(t, 0)
	rid := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL,
		"retrySchedule": "STEPPED", "maxConcurrency": 1})

	var ids []string
	for i := range 3 {
		ids = append(ids, env.Send(srv.Key, "", `{"n":`+strconv.Itoa(i)+`}`))
	}
	for _, id := range ids {
		d := waitDelivered(t, env, id, 20*time.Second, "the retry of request "+id)
		require.Len(t, d.Edges.Attempts, 2)
		first := d.Edges.Attempts[0]
		require.Equal(t, attempt.ErrorKindINTERRUPTED, *first.ErrorKind)
		require.Contains(t, first.ErrorMessage, "panicked")
		require.Equal(t, attempt.StatusSUCCEEDED, d.Edges.Attempts[1].Status)
	}
	require.EqualValues(t, 3, sender.panicked.Load())
	require.Equal(t, 3, rcv.count(), "each request reached the recipient once, by its retry")
	ctx := viewer.SystemContext(t.Context())
	n := relaytest.RowID(t, rid)
	r, err := env.DB.Client.Recipient.Get(ctx, n)
	require.NoError(t, err)
	require.Zero(t, r.InFlight, "the panicked attempts gave their slots back")

	// The outbound lane survives the same way, and the process still takes requests and delivers them.
	job := send(t, env, tn, map[string]any{"url": rcv.URL + "/job"})
	if j := waitFinished(t, env, job); j.Status != outboundjob.StatusSUCCEEDED || j.AttemptCount != 2 {
		t.Fatalf("outbound job %d is %s after %d attempts, want SUCCEEDED after 2", job, j.Status, j.AttemptCount)
	}
	last := env.Send(srv.Key, "", `{"after":true}`)
	waitDelivered(t, env, last, 20*time.Second, "a request accepted after the panics")
}

// TestOutboundRescuerRecordsInterruptedAttempts drives the rescuer by hand on a job whose process "died"
// mid-attempt: the lease lapsed with the job IN_PROGRESS.
func TestOutboundRescuerRecordsInterruptedAttempts(t *testing.T) {
	t.Parallel()
	db, ctx := dbtest.OpenAsSystem(t)
	clock := relaytest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	const unit = time.Minute
	bill := billing.New(db.Dialect, clock.Now)
	svc := outbound.New(outbound.Config{Billing: bill, Dialect: db.Dialect, Now: clock.Now})
	rescuer, err := scheduler.NewRescuer(scheduler.RescuerConfig{DB: db.DB, Delivery: delivery.New(delivery.Config{Unit: unit}), Outbound: svc, Now: clock.Now})
	require.NoError(t, err)

	credits, days, one := int64(5), 7, 1
	name := "p"
	plan, err := bill.CreatePlan(ctx, db.Client, billing.PlanInput{Name: &name, MonthlyCredits: &credits, RetentionDays: &days, MaxServers: &one, MaxRecipientsPerServer: &one})
	require.NoError(t, err)
	tenant, err := bill.CreateTenant(ctx, db.Client, "acme", plan.ID)
	require.NoError(t, err)
	job, err := svc.Send(ctx, db.Client, outbound.SendInput{TenantID: tenant.ID, URL: "http://example.invalid/"})
	require.NoError(t, err)

	started := clock.Now()
	lapsed := started.Add(time.Second)
	require.NoError(t, db.Client.OutboundJob.UpdateOneID(job.ID).
		SetStatus(outboundjob.StatusIN_PROGRESS).SetAttemptCount(1).SetFirstAttemptAt(started).
		SetAttemptStartedAt(started).SetLeaseOwner("dead").SetLeaseExpiresAt(lapsed).Exec(ctx))

	n, err := rescuer.RescueOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "the lease has not lapsed yet")

	clock.Advance(2 * time.Second)
	n, err = rescuer.RescueOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	j, err := db.Client.OutboundJob.Query().Where(outboundjob.ID(job.ID)).WithAttempts().Only(ctx)
	require.NoError(t, err)
	require.Equal(t, outboundjob.StatusPENDING, j.Status)
	require.Equal(t, "", j.LeaseOwner)
	require.Equal(t, clock.Now().Add(unit), *j.NextAttemptAt, "STEPPED: 1 unit after the interrupted attempt ended")
	require.Len(t, j.Edges.Attempts, 1)
	a := j.Edges.Attempts[0]
	require.Equal(t, outboundattempt.ErrorKindINTERRUPTED, *a.ErrorKind)
	require.True(t, a.StartedAt.Equal(started))

	// The dead process's late report no longer holds the claim and changes nothing.
	ok, err := scheduler.RecordOutbound(ctx, db.Client, unit, job.ID, tenant.ID, 1, started, "dead",
		delivery.Outcome{StartedAt: started, FinishedAt: clock.Now(), HTTPStatus: 200})
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, 1, db.Client.OutboundAttempt.Query().CountX(ctx))
}
