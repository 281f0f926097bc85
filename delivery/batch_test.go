package delivery_test

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/attempt"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
)

// recordWorld is a server with two recipients and claimed deliveries, built identically twice so the same
// outcomes can be recorded one at a time (Record) in one and as a batch (RecordBatch) in the other.
type recordWorld struct {
	recipients []int
	requests   []int
	claims     []delivery.Claim
}

// TestRecordBatchRecordsAsRecordDoes pins RecordBatch to Record: the same outcomes, recorded one by one or as
// one shuffled batch, leave the same attempts, delivery states, request statuses and recipient health —
// including health state changes inside the batch and a stale claim that must not be recorded.
func TestRecordBatchRecordsAsRecordDoes(t *testing.T) {
	t.Parallel()
	// Small rules so a handful of outcomes disables a recipient, halves its window and re-enables it.
	db, ctx, base, svc := setupRecord(t, delivery.HealthRules{DisableRatio: 0.7, DisableMinAttempts: 3,
		DisableConsecutive: 4, FreezeConsecutive: 1000, FreezeSilence: time.Hour, FreezeHard: 1000, ProbeUnits: 10,
		Window: 3})

	const perRecipient = 8
	build := func() recordWorld {
		plan := newPlan(t, ctx, db, 100, 1, 2)
		tn := newTenant(t, ctx, db, plan.ID, 100)
		srv := newServer(t, ctx, db, tn.ID)
		var w recordWorld
		var recs []*ent.Recipient
		for i, maxAttempts := range []int{1, 3} { // recipient 0: every failure is final; 1: failures retry
			r, err := db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetName("r").
				SetMethod(recipient.MethodDIRECT_HTTP).SetURL("http://127.0.0.1:1/" + string(rune('a'+i))).
				SetMaxAttempts(maxAttempts).Save(ctx)
			require.NoError(t, err)
			recs = append(recs, r)
			w.recipients = append(w.recipients, r.ID)
		}
		srv.Edges.Recipients = recs
		items := emptyRequests(srv, recs, perRecipient)
		stored, err := svc.StoreBatch(ctx, db.Client, items, billing.ReasonRequestAccepted, delivery.Handoff{})
		require.NoError(t, err)
		for _, s := range stored {
			require.NoError(t, s.Err)
			w.requests = append(w.requests, s.Request.ID)
			for _, d := range s.Deliveries {
				owner := "owner"
				if len(w.claims) == 5 {
					owner = "someone-else" // the rescuer took this one meanwhile: its outcome must be dropped
				}
				c := claimFirst(t, ctx, db, d, srv.ID, base, owner)
				c.Owner = "owner" // the claim the scheduler holds, stale when the owner stored differs
				w.claims = append(w.claims, c)
			}
		}
		return w
	}
	one, batch := build(), build()

	// The same outcome for the k-th claim of both worlds: a mix of successes, HTTP failures and timeouts,
	// finishing in claim order, µs apart.
	outcome := func(k int) delivery.Outcome {
		o := delivery.Outcome{StartedAt: base, FinishedAt: base.Add(time.Duration(k+1) * 1500 * time.Microsecond)}
		switch {
		case k%5 == 4:
			o.HTTPStatus = http.StatusNoContent
		case k%7 == 3:
			// Characters the batch's JSON must escape, and some it must not touch.
			o.ErrorKind, o.ErrorMessage = delivery.ErrTimeout, "no answer \"within\" 30s: \\ \n\t\x01 ünï ✓"
		default:
			o.HTTPStatus, o.ErrorKind, o.ErrorMessage = http.StatusInternalServerError, delivery.ErrHTTPStatus, "HTTP 500"
		}
		return o
	}
	var wantRecorded []bool
	for k, c := range one.claims {
		ok, err := svc.Record(ctx, db.Client, c, outcome(k))
		require.NoError(t, err)
		wantRecorded = append(wantRecorded, ok)
	}
	cs := make([]delivery.Completion, len(batch.claims))
	for k, c := range batch.claims {
		cs[k] = delivery.Completion{Claim: c, Outcome: outcome(k)}
	}
	perm := rand.Perm(len(cs))
	shuffled := make([]delivery.Completion, len(cs))
	for i, p := range perm {
		shuffled[i] = cs[p]
	}
	got, err := svc.RecordBatch(ctx, db.DB, shuffled)
	require.NoError(t, err)
	gotRecorded := make([]bool, len(cs))
	for i, p := range perm {
		gotRecorded[p] = got[i]
	}
	require.Equal(t, wantRecorded, gotRecorded)
	require.False(t, gotRecorded[5], "the stale claim is not recorded")

	snapshot := func(w recordWorld) map[string]any {
		out := map[string]any{}
		var ds, reqs, rcps, atts []map[string]any
		for _, c := range w.claims {
			d, err := db.Client.Delivery.Get(ctx, c.DeliveryID)
			require.NoError(t, err)
			ds = append(ds, map[string]any{"status": d.Status, "next": unixMicro(d.NextAttemptAt),
				"finished": unixMicro(d.FinishedAt), "lease": d.LeaseOwner, "leaseExpires": unixMicro(d.LeaseExpiresAt),
				"started": unixMicro(d.AttemptStartedAt), "count": d.AttemptCount})
			as, err := db.Client.Attempt.Query().Where(attempt.DeliveryID(c.DeliveryID)).All(ctx)
			require.NoError(t, err)
			for _, a := range as {
				atts = append(atts, map[string]any{"number": a.Number, "status": a.Status, "kind": a.ErrorKind,
					"http": a.HTTPStatus, "ms": a.DurationMs, "msg": a.ErrorMessage, "start": a.StartedAt.UnixMicro(),
					"end": a.FinishedAt.UnixMicro()})
			}
		}
		for _, id := range w.requests {
			r, err := db.Client.Request.Get(ctx, id)
			require.NoError(t, err)
			reqs = append(reqs, map[string]any{"status": r.Status})
		}
		for _, id := range w.recipients {
			r, err := db.Client.Recipient.Get(ctx, id)
			require.NoError(t, err)
			rcps = append(rcps, map[string]any{"state": r.State, "reason": r.StateReason,
				"changed": unixMicro(r.StateChangedAt), "consecutive": r.ConsecutiveFailures,
				"window": r.WindowAttempts, "windowFailures": r.WindowFailures,
				"lastSuccess": unixMicro(r.LastSuccessAt), "probe": unixMicro(r.NextProbeAt)})
		}
		out["deliveries"], out["requests"], out["recipients"], out["attempts"] = ds, reqs, rcps, atts
		return out
	}
	want, have := snapshot(one), snapshot(batch)
	require.Equal(t, want, have)
	// The outcomes did move the recipients' state, so the comparison covers state changes.
	states := []recipient.State{}
	for _, id := range one.recipients {
		r, err := db.Client.Recipient.Get(ctx, id)
		require.NoError(t, err)
		states = append(states, r.State)
	}
	require.True(t, slices.Contains(states, recipient.StateDISABLED), "states %v: the fixture should disable a recipient", states)
}

// TestConcurrentBatchesSettleSiblingDeliveries records the two deliveries of each request in two batches that
// commit at the same time. Whichever commits last must see the other's delivery final and settle the request:
// a batch that derived the status from what it read before the other committed would leave it PENDING forever.
func TestConcurrentBatchesSettleSiblingDeliveries(t *testing.T) {
	t.Parallel()
	db, ctx := dbtest.OpenAsSystem(t)
	svc := delivery.New(delivery.Config{Billing: billing.New(db.Dialect, time.Now), Dialect: db.Dialect,
		Now: time.Now, Unit: time.Second, CLIConnected: func(*ent.Recipient, time.Time) bool { return false }})
	plan := newPlan(t, ctx, db, 0, 1, 2)
	tn := newTenant(t, ctx, db, plan.ID, 1<<20)
	srv := newServer(t, ctx, db, tn.ID)
	var recs []*ent.Recipient
	for i := range 2 {
		r, err := db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetName("r").
			SetMethod(recipient.MethodDIRECT_HTTP).SetURL("http://127.0.0.1:1/" + string(rune('a'+i))).Save(ctx)
		require.NoError(t, err)
		recs = append(recs, r)
	}
	const rounds, perRound = 20, 16
	for round := range rounds {
		items := emptyRequests(srv, recs, perRound)
		stored, err := svc.StoreBatch(ctx, db.Client, items, billing.ReasonRequestAccepted,
			delivery.Handoff{Owner: "owner", Lease: time.Minute, Slots: 2 * perRound})
		require.NoError(t, err)
		batches := make([][]delivery.Completion, len(recs))
		var requests []int
		now := time.Now()
		for _, st := range stored {
			require.NoError(t, st.Err)
			require.Len(t, st.Claimed, len(recs))
			requests = append(requests, st.Request.ID)
			for k, c := range st.Claimed {
				batches[k] = append(batches[k], delivery.Completion{Claim: c.Claim,
					Outcome: delivery.Outcome{StartedAt: now, FinishedAt: now, HTTPStatus: http.StatusOK}})
			}
		}
		start := make(chan struct{})
		errs := make(chan error, len(batches))
		for _, cs := range batches {
			go func() {
				<-start
				_, err := svc.RecordBatch(ctx, db.DB, cs)
				errs <- err
			}()
		}
		close(start)
		for range batches {
			require.NoError(t, <-errs)
		}
		n, err := db.Client.Request.Query().Where(request.IDIn(requests...), request.StatusEQ(request.StatusDELIVERED)).Count(ctx)
		require.NoError(t, err)
		require.Equal(t, perRound, n, "round %d: every request whose deliveries both succeeded is DELIVERED", round)
	}
}

// TestRecordBatchEmpty records nothing without touching the database.
func TestRecordBatchEmpty(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	svc := delivery.New(delivery.Config{Billing: billing.New(db.Dialect, time.Now)})
	got, err := svc.RecordBatch(context.Background(), db.DB, nil)
	require.NoError(t, err)
	require.Empty(t, got)
}

// setupRecord opens a database and a delivery service on it with the given health rules, whose clock stands
// still at base, the time the tests' attempts start.
func setupRecord(t *testing.T, rules delivery.HealthRules) (db *dbtest.DB, ctx context.Context, base time.Time, svc *delivery.Service) {
	t.Helper()
	db = dbtest.Open(t)
	base = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return base }
	svc = delivery.New(delivery.Config{Billing: billing.New(db.Dialect, clock), Dialect: db.Dialect,
		Unit: time.Second, Now: clock, Health: rules})
	return db, viewer.SystemContext(t.Context()), base, svc
}

// claimFirst claims the first attempt of d for owner at base, as the scheduler would have, and returns the claim.
func claimFirst(t *testing.T, ctx context.Context, db *dbtest.DB, d *ent.Delivery, serverID int, base time.Time, owner string) delivery.Claim {
	t.Helper()
	require.NoError(t, db.Client.Delivery.UpdateOneID(d.ID).SetStatus(entdelivery.StatusIN_PROGRESS).
		SetAttemptCount(1).SetFirstAttemptAt(base).SetAttemptStartedAt(base).SetLeaseOwner(owner).
		SetLeaseExpiresAt(base.Add(time.Minute)).Exec(ctx))
	return delivery.Claim{DeliveryID: d.ID, TenantID: d.TenantID, RequestID: d.RequestID, ServerID: serverID,
		RecipientID: d.RecipientID, Attempt: 1, MaxAttempts: d.MaxAttempts, Schedule: delivery.Schedule(d.RetrySchedule),
		FirstAttemptAt: base, StartedAt: base, Owner: owner}
}

func unixMicro(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

// newPlan creates a plan of the credits a month, with room for servers servers of recipients recipients each.
func newPlan(t testing.TB, ctx context.Context, db *dbtest.DB, credits int64, servers, recipients int) *ent.Plan {
	t.Helper()
	plan, err := db.Client.Plan.Create().SetName("p-" + hexID()).SetMonthlyCredits(credits).SetRetentionDays(7).
		SetMaxServers(servers).SetMaxRecipientsPerServer(recipients).Save(ctx)
	require.NoError(t, err)
	return plan
}

// newTenant creates a tenant "t" on the plan with balance credits.
func newTenant(t testing.TB, ctx context.Context, db *dbtest.DB, planID int, balance int64) *ent.Tenant {
	t.Helper()
	tn, err := db.Client.Tenant.Create().SetName("t").SetPlanID(planID).SetCreditBalance(balance).Save(ctx)
	require.NoError(t, err)
	return tn
}

// newServer creates a server "s" of the tenant.
func newServer(t testing.TB, ctx context.Context, db *dbtest.DB, tenantID int) *ent.Server {
	t.Helper()
	srv, err := db.Client.Server.Create().SetTenantID(tenantID).SetName("s").SetInboundKey(hexID()).Save(ctx)
	require.NoError(t, err)
	return srv
}

// emptyRequests gives n POSTs of "{}" to srv for its recipients recs, each under a key of its own.
func emptyRequests(srv *ent.Server, recs []*ent.Recipient, n int) []delivery.Incoming {
	items := make([]delivery.Incoming, n)
	for i := range items {
		items[i] = delivery.Incoming{Server: srv, Recipients: recs, Key: hexID(),
			Request: delivery.NewRequest{Method: http.MethodPost, Header: http.Header{}, Body: []byte("{}")}}
	}
	return items
}

func hexID() string {
	b := make([]byte, 8)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}

// healthCases are a recipient's state before a run of attempts, the attempts' outcomes ('S' a 2xx, 'F' a
// 500, 'I' interrupted by our own process) a gap apart, and the state the health rules leave it in.
var healthCases = []struct {
	name     string
	start    recipient.State
	outcomes string
	gap      time.Duration
	want     recipient.State
}{
	{"healthy", recipient.StateACTIVE, "SSFSS", time.Second, recipient.StateACTIVE},
	{"consecutive failures disable", recipient.StateACTIVE, "FFFFF", time.Second, recipient.StateDISABLED},
	{"a failure ratio disables", recipient.StateACTIVE, "FFSF", time.Second, recipient.StateDISABLED},
	{"a probe's success re-enables", recipient.StateDISABLED, "S", time.Second, recipient.StateACTIVE},
	{"a probe's failure keeps it disabled", recipient.StateDISABLED, "F", time.Second, recipient.StateDISABLED},
	{"disabled, then re-enabled", recipient.StateACTIVE, "FFFFFFS", time.Second, recipient.StateACTIVE},
	{"failures without end freeze", recipient.StateACTIVE, "FFFFFFFF", time.Second, recipient.StateFROZEN},
	{"failures after a long silence freeze", recipient.StateACTIVE, "FFFFFF", 10 * time.Minute, recipient.StateFROZEN},
	{"frozen stays frozen", recipient.StateFROZEN, "SS", time.Second, recipient.StateFROZEN},
	{"paused counts but stays paused", recipient.StatePAUSED, "FFFFF", time.Second, recipient.StatePAUSED},
	{"interrupted attempts do not count", recipient.StateACTIVE, "FIIFIFI", time.Second, recipient.StateACTIVE},
	{"the window halves", recipient.StateACTIVE, "SSSSSSF", time.Second, recipient.StateACTIVE},
}

// TestHealthConformance holds the two ways the database applies the health rules — Record, one attempt at a
// time, and RecordBatch, set-wise on PostgreSQL — to the rule in memory (applyHealth), case by case.
func TestHealthConformance(t *testing.T) {
	t.Parallel()
	db, ctx, base, svc := setupRecord(t, delivery.HealthRules{DisableRatio: 0.7, DisableMinAttempts: 3,
		DisableConsecutive: 4, FreezeConsecutive: 5, FreezeSilence: time.Hour, FreezeHard: 8, ProbeUnits: 10, Window: 3})
	plan := newPlan(t, ctx, db, 0, 1, 1)

	for _, c := range healthCases {
		t.Run(c.name, func(t *testing.T) {
			outcomes := make([]delivery.Outcome, len(c.outcomes))
			for k, kind := range c.outcomes {
				o := delivery.Outcome{StartedAt: base.Add(time.Duration(k) * c.gap)}
				o.FinishedAt = o.StartedAt.Add(time.Millisecond)
				switch kind {
				case 'S':
					o.HTTPStatus = http.StatusOK
				case 'F':
					o.HTTPStatus, o.ErrorKind, o.ErrorMessage = http.StatusInternalServerError, delivery.ErrHTTPStatus, "HTTP 500"
				case 'I':
					o.ErrorKind, o.ErrorMessage = delivery.ErrInterrupted, "interrupted"
				}
				outcomes[k] = o
			}

			spec, _ := healthWorld(t, ctx, db, svc, plan.ID, c.start, base, 0)
			for _, o := range outcomes {
				svc.ApplyHealth(spec, o)
			}
			require.Equal(t, c.want, spec.State, "the rule in memory")
			want := healthOf(spec)

			one, claims := healthWorld(t, ctx, db, svc, plan.ID, c.start, base, len(outcomes))
			for k, claim := range claims {
				ok, err := svc.Record(ctx, db.Client, claim, outcomes[k])
				require.NoError(t, err)
				require.True(t, ok)
			}
			require.Equal(t, want, healthOf(db.Client.Recipient.GetX(ctx, one.ID)), "Record")

			batch, claims := healthWorld(t, ctx, db, svc, plan.ID, c.start, base, len(outcomes))
			cs := make([]delivery.Completion, len(claims))
			for k, claim := range claims {
				cs[k] = delivery.Completion{Claim: claim, Outcome: outcomes[k]}
			}
			recorded, err := svc.RecordBatch(ctx, db.DB, cs)
			require.NoError(t, err)
			require.NotContains(t, recorded, false)
			require.Equal(t, want, healthOf(db.Client.Recipient.GetX(ctx, batch.ID)), "RecordBatch")
		})
	}
}

// healthWorld creates a tenant, a server and a direct recipient in state start, created half an hour before
// base, and n claimed deliveries to it, one per request.
func healthWorld(t *testing.T, ctx context.Context, db *dbtest.DB, svc *delivery.Service, planID int, start recipient.State, base time.Time, n int) (*ent.Recipient, []delivery.Claim) {
	t.Helper()
	tn := newTenant(t, ctx, db, planID, int64(n))
	srv := newServer(t, ctx, db, tn.ID)
	create := db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetName("r").
		SetMethod(recipient.MethodDIRECT_HTTP).SetURL("http://127.0.0.1:1/").SetMaxAttempts(1).
		SetCreatedAt(base.Add(-30 * time.Minute)).SetState(start).SetStateReason("as the case starts")
	switch start {
	case recipient.StateDISABLED:
		create.SetConsecutiveFailures(4).SetWindowAttempts(5).SetWindowFailures(5).SetNextProbeAt(base)
	case recipient.StateFROZEN:
		create.SetConsecutiveFailures(9).SetWindowAttempts(5).SetWindowFailures(5)
	}
	r, err := create.Save(ctx)
	require.NoError(t, err)
	items := emptyRequests(srv, []*ent.Recipient{r}, n)
	var claims []delivery.Claim
	if n > 0 {
		stored, err := svc.StoreBatch(ctx, db.Client, items, billing.ReasonRequestAccepted, delivery.Handoff{})
		require.NoError(t, err)
		for _, s := range stored {
			require.NoError(t, s.Err)
			claims = append(claims, claimFirst(t, ctx, db, s.Deliveries[0], srv.ID, base, "owner"))
		}
	}
	return db.Client.Recipient.GetX(ctx, r.ID), claims
}

// healthOf is r's health, times to the microsecond both databases keep.
func healthOf(r *ent.Recipient) map[string]any {
	return map[string]any{"state": r.State, "reason": r.StateReason, "changed": unixMicro(r.StateChangedAt),
		"consecutive": r.ConsecutiveFailures, "window": r.WindowAttempts, "windowFailures": r.WindowFailures,
		"lastSuccess": unixMicro(r.LastSuccessAt), "probe": unixMicro(r.NextProbeAt)}
}

// TestStoreBatchBeyondOneStatement stores a batch whose deliveries need more bind parameters than PostgreSQL
// takes in one statement (65,535): a full intake batch for a server with many recipients. It must be stored
// whole, not refused.
func TestStoreBatchBeyondOneStatement(t *testing.T) {
	t.Parallel()
	db, ctx := dbtest.OpenAsSystem(t)
	svc := delivery.New(delivery.Config{Billing: billing.New(db.Dialect, time.Now)})
	const requests, recipients = 256, 25 // 6,400 deliveries: ~90,000 parameters in one insert
	plan := newPlan(t, ctx, db, requests, 1, recipients)
	tn := newTenant(t, ctx, db, plan.ID, requests)
	srv := newServer(t, ctx, db, tn.ID)
	builders := make([]*ent.RecipientCreate, recipients)
	for i := range builders {
		builders[i] = db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetName("r").
			SetMethod(recipient.MethodDIRECT_HTTP).SetURL("http://127.0.0.1:1/")
	}
	recs, err := db.Client.Recipient.CreateBulk(builders...).Save(ctx)
	require.NoError(t, err)
	items := emptyRequests(srv, recs, requests)
	stored, err := svc.StoreBatch(ctx, db.Client, items, billing.ReasonRequestAccepted, delivery.Handoff{})
	require.NoError(t, err)
	for i, s := range stored {
		require.NoError(t, s.Err, "item %d", i)
		require.Len(t, s.Deliveries, recipients, "item %d", i)
	}
	n, err := db.Client.Delivery.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, requests*recipients, n)
}

// TestStoreBatchStoresWhatItReturns: the requests and deliveries StoreBatch returns are the rows as the
// database then holds them, field for field — pending and handed-off deliveries, a server without recipients
// (its request is FAILED at once), headers or none, an empty body, a replay's origin — on whichever statement
// the dialect uses.
func TestStoreBatchStoresWhatItReturns(t *testing.T) {
	t.Parallel()
	db, ctx := dbtest.OpenAsSystem(t)
	now := time.Now().UTC().Truncate(time.Microsecond) // what both databases keep of a time
	svc := delivery.New(delivery.Config{Billing: billing.New(db.Dialect, func() time.Time { return now }),
		Dialect: db.Dialect, Now: func() time.Time { return now },
		CLIConnected: func(*ent.Recipient, time.Time) bool { return false }})
	plan := newPlan(t, ctx, db, 0, 2, 2)
	tn := newTenant(t, ctx, db, plan.ID, 10)
	three := 3
	withRecipients, err := db.Client.Server.Create().SetTenantID(tn.ID).SetName("s").SetInboundKey(hexID()).
		SetRetentionDays(three).Save(ctx)
	require.NoError(t, err)
	empty, err := db.Client.Server.Create().SetTenantID(tn.ID).SetName("e").SetInboundKey(hexID()).Save(ctx)
	require.NoError(t, err)
	direct, err := db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(withRecipients.ID).SetName("d").
		SetMethod(recipient.MethodDIRECT_HTTP).SetURL("http://127.0.0.1:1/").SetMaxAttempts(4).
		SetRetrySchedule(recipient.RetryScheduleSTEPPED).Save(ctx)
	require.NoError(t, err)
	cli, err := db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(withRecipients.ID).SetName("c").
		SetMethod(recipient.MethodCLI).Save(ctx)
	require.NoError(t, err)
	recs := []*ent.Recipient{direct, cli}
	in := func(body string) delivery.NewRequest {
		return delivery.NewRequest{Method: http.MethodPut, Path: "/p", Query: "a=1",
			Header: http.Header{"X-Many": {"1", "2"}, "Content-Type": {"text/plain"}}, Body: []byte(body),
			SourceAddr: "127.0.0.1:5"}
	}
	first, err := svc.StoreBatch(ctx, db.Client, []delivery.Incoming{{Server: withRecipients, Recipients: recs,
		Key: hexID(), Request: in("first")}}, billing.ReasonRequestAccepted, delivery.Handoff{})
	require.NoError(t, err)
	replayOf := first[0].Request.ID
	replay := in("again")
	replay.ReplayOf = &replayOf
	items := []delivery.Incoming{
		{Server: withRecipients, Recipients: recs, Key: hexID(), Request: in("one")},
		{Server: empty, Key: hexID(), Request: delivery.NewRequest{Method: http.MethodGet}}, // no header, no body
		{Server: withRecipients, Recipients: recs, Key: hexID(), Request: replay},
	}
	stored, err := svc.StoreBatch(ctx, db.Client, items, billing.ReasonRequestAccepted,
		delivery.Handoff{Owner: "me", Lease: time.Minute, Slots: 1})
	require.NoError(t, err)
	require.Len(t, stored, 3)
	require.Len(t, stored[0].Claimed, 1, "the one slot goes to the first direct delivery")
	require.Empty(t, stored[2].Claimed)
	require.Empty(t, stored[1].Deliveries)
	require.Equal(t, "FAILED", string(stored[1].Request.Status))
	require.Equal(t, now.Add(3*24*time.Hour), stored[0].Request.ExpiresAt, "the server's shorter retention")
	require.Equal(t, now.Add(7*24*time.Hour), stored[1].Request.ExpiresAt, "the plan's retention")
	asJSON := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return string(b)
	}
	for i, s := range stored {
		require.NoError(t, s.Err, "item %d", i)
		got, err := db.Client.Request.Get(ctx, s.Request.ID)
		require.NoError(t, err)
		require.Equal(t, asJSON(got), asJSON(s.Request), "item %d: the request as stored", i)
		require.Len(t, s.Deliveries, len(items[i].Recipients))
		for _, d := range s.Deliveries {
			got, err := db.Client.Delivery.Get(ctx, d.ID)
			require.NoError(t, err)
			require.Equal(t, asJSON(got), asJSON(d), "item %d: delivery %d as stored", i, d.ID)
		}
	}
	claimed := stored[0].Deliveries[0]
	require.Equal(t, "IN_PROGRESS", string(claimed.Status))
	require.Equal(t, "me", claimed.LeaseOwner)
	require.Equal(t, 1, claimed.AttemptCount)
	require.True(t, stored[0].Deliveries[1].Backlog, "a CLI delivery with no CLI attached is backlog")
	require.Equal(t, &replayOf, stored[2].Request.ReplayOfID)
	require.Equal(t, int64(10-4), db.Client.Tenant.GetX(ctx, tn.ID).CreditBalance)

	// One entry per request, in the order of the batch, each with the balance it left: on PostgreSQL the
	// requests' statement writes them, on SQLite billing.Settle.
	entries, err := db.Client.LedgerEntry.Query().Where(ledgerentry.TenantID(tn.ID)).Order(ledgerentry.ByID()).All(ctx)
	require.NoError(t, err)
	paid := []*ent.Request{first[0].Request, stored[0].Request, stored[1].Request, stored[2].Request}
	require.Len(t, entries, len(paid))
	for i, e := range entries {
		require.Equal(t, fmt.Sprintf("request:%d", paid[i].ID), e.Reference, "entry %d", i)
		require.Equal(t, ledgerentry.ReasonREQUEST_ACCEPTED, e.Reason, "entry %d", i)
		require.Equal(t, int64(-1), e.Amount, "entry %d", i)
		require.Equal(t, int64(10-i-1), e.BalanceAfter, "entry %d", i)
		require.True(t, now.Equal(e.CreatedAt), "entry %d at %v", i, e.CreatedAt)
	}
}

// TestStoreBatchRefusesWhatItCannotStore: a batch spanning tenants stores, per tenant, a prefix of its items
// in arrival order as far as the balance goes, and nothing for a server deleted since the caller read it —
// each refusal with its own kind, leaving no request, delivery, ledger entry or debit behind. On PostgreSQL
// the batch is stored outside any transaction, as intake stores it: its one statement locks, grants and
// writes. A handoff slot that falls to a refused item is not handed out.
func TestStoreBatchRefusesWhatItCannotStore(t *testing.T) {
	t.Parallel()
	db, ctx := dbtest.OpenAsSystem(t)
	svc := delivery.New(delivery.Config{Billing: billing.New(db.Dialect, time.Now), Dialect: db.Dialect})
	plan := newPlan(t, ctx, db, 0, 2, 1)
	tenant := func(balance int64) (*ent.Server, []*ent.Recipient) {
		tn := newTenant(t, ctx, db, plan.ID, balance)
		srv := newServer(t, ctx, db, tn.ID)
		r, err := db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetName("r").
			SetMethod(recipient.MethodDIRECT_HTTP).SetURL("http://127.0.0.1:1/").Save(ctx)
		require.NoError(t, err)
		return srv, []*ent.Recipient{r}
	}
	poor, poorRecs := tenant(2)
	rich, richRecs := tenant(5)
	gone, err := db.Client.Server.Create().SetTenantID(rich.TenantID).SetName("gone").SetInboundKey(hexID()).Save(ctx)
	require.NoError(t, err)
	goneRecs := richRecs // read before the server was deleted
	require.NoError(t, db.Client.Server.UpdateOne(gone).SetDeletedAt(time.Now()).Exec(ctx))

	item := func(srv *ent.Server, recs []*ent.Recipient) delivery.Incoming {
		return emptyRequests(srv, recs, 1)[0]
	}
	items := []delivery.Incoming{
		item(gone, goneRecs), // 0: deleted meanwhile; its delivery takes the first slot
		item(poor, poorRecs), // 1: paid
		item(rich, richRecs), // 2: paid
		item(poor, poorRecs), // 3: paid, the poor tenant's last credit
		item(poor, poorRecs), // 4: beyond the balance
		item(rich, richRecs), // 5: paid
		item(poor, poorRecs), // 6: beyond the balance
	}
	stored, err := svc.StoreBatch(ctx, db.Client, items, billing.ReasonRequestAccepted,
		delivery.Handoff{Owner: "me", Lease: time.Minute, Slots: 2})
	require.NoError(t, err)
	require.Len(t, stored, len(items))
	want := []fault.Kind{fault.NotFound, "", "", "", fault.InsufficientCredits, "", fault.InsufficientCredits}
	claimed := 0
	for i, s := range stored {
		claimed += len(s.Claimed)
		if want[i] != "" {
			require.Equal(t, want[i], fault.KindOf(s.Err), "item %d", i)
			require.Nil(t, s.Request, "item %d", i)
			require.Empty(t, s.Deliveries, "item %d", i)
			require.Empty(t, s.Claimed, "item %d", i)
			continue
		}
		require.NoError(t, s.Err, "item %d", i)
		require.NotZero(t, s.Request.ID, "item %d", i)
		require.Len(t, s.Deliveries, 1, "item %d", i)
		require.Equal(t, s.Request.ID, s.Deliveries[0].RequestID, "item %d", i)
	}
	if db.Postgres() {
		// In arrival order: the deleted server's delivery took the first slot and is not handed out.
		require.Len(t, stored[1].Claimed, 1)
		require.Equal(t, 1, claimed)
	} else {
		require.Equal(t, 2, claimed)
	}
	requests, err := db.Client.Request.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, requests, "the paid requests only")
	deliveries, err := db.Client.Delivery.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, deliveries, "the paid requests' deliveries only")
	require.Equal(t, int64(0), db.Client.Tenant.GetX(ctx, poor.TenantID).CreditBalance)
	require.Equal(t, int64(3), db.Client.Tenant.GetX(ctx, rich.TenantID).CreditBalance)
	for _, tc := range []struct {
		tenant   int
		balances []int64
	}{{poor.TenantID, []int64{1, 0}}, {rich.TenantID, []int64{4, 3}}} {
		entries, err := db.Client.LedgerEntry.Query().Where(ledgerentry.TenantID(tc.tenant)).Order(ledgerentry.ByID()).All(ctx)
		require.NoError(t, err)
		require.Len(t, entries, len(tc.balances), "tenant %d", tc.tenant)
		for i, e := range entries {
			require.Equal(t, tc.balances[i], e.BalanceAfter, "tenant %d, entry %d", tc.tenant, i)
		}
	}
}

// intakeBatch is what the benchmarks of a delivery's life start from: 8 tenants with one server and one direct
// recipient each, and intake-sized batches of 32 requests of 1 KiB across them, stored in one transaction per
// batch with every delivery handed to the dispatcher claimed, as intake stores them. Its tables start with a
// history of delivered requests, analyzed, as a running server's are: plans made for empty tables (sequential
// scans) are not the ones production runs.
type intakeBatch struct {
	db      *dbtest.DB
	ctx     context.Context
	svc     *delivery.Service
	targets []*ent.Server
	rec     map[int][]*ent.Recipient
	items   []delivery.Incoming
}

const benchBatch = 32

func newIntakeBatch(b *testing.B) *intakeBatch {
	db, ctx := dbtest.OpenAsSystem(b)
	f := &intakeBatch{db: db, ctx: ctx, rec: map[int][]*ent.Recipient{}, items: make([]delivery.Incoming, benchBatch),
		svc: delivery.New(delivery.Config{Billing: billing.New(db.Dialect, time.Now), Dialect: db.Dialect,
			Now: time.Now, Unit: time.Second, CLIConnected: func(*ent.Recipient, time.Time) bool { return false }})}
	plan := newPlan(b, ctx, db, 0, 1, 1)
	for range 8 {
		tn := newTenant(b, ctx, db, plan.ID, 1<<40)
		srv := newServer(b, ctx, db, tn.ID)
		rec, err := db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetName("r").
			SetMethod(recipient.MethodDIRECT_HTTP).SetURL("http://127.0.0.1:1/").Save(ctx)
		require.NoError(b, err)
		f.targets = append(f.targets, srv)
		f.rec[srv.ID] = []*ent.Recipient{rec}
	}
	for range 200 {
		f.deliver(b, f.store(b))
	}
	if _, err := db.SQL.ExecContext(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
	return f
}

// store stores one batch and returns its deliveries' claims.
func (f *intakeBatch) store(b *testing.B) []delivery.Claimed {
	body := bytes.Repeat([]byte("x"), 1024)
	header := http.Header{"Content-Type": {"application/json"}, "User-Agent": {"bench"}}
	for i := range f.items {
		srv := f.targets[i%len(f.targets)]
		f.items[i] = delivery.Incoming{Server: srv, Recipients: f.rec[srv.ID], Key: hexID(), ServerLocked: true,
			Request: delivery.NewRequest{Method: http.MethodPost, Header: header, Body: body, SourceAddr: "127.0.0.1"}}
	}
	var claimed []delivery.Claimed
	err := storage.InTx(f.ctx, f.db.Client, func(ctx context.Context, tx *ent.Client) error {
		stored, err := f.svc.StoreBatch(ctx, tx, f.items, billing.ReasonRequestAccepted,
			delivery.Handoff{Owner: "bench", Lease: time.Minute, Slots: benchBatch})
		claimed = claimed[:0]
		for _, s := range stored {
			claimed = append(claimed, s.Claimed...)
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	if len(claimed) != benchBatch {
		b.Fatalf("%d of %d deliveries were handed off", len(claimed), benchBatch)
	}
	return claimed
}

// BenchmarkStoreBatch stores intake-sized batches, one transaction per batch, as intake does. ns/op is per batch.
func BenchmarkStoreBatch(b *testing.B) {
	f := newIntakeBatch(b)
	b.ReportAllocs()
	for b.Loop() {
		f.store(b)
	}
}

// deliver records every claim's attempt as answered 200, in one RecordBatch, as the dispatcher's completer does.
func (f *intakeBatch) deliver(b *testing.B, claimed []delivery.Claimed) {
	now := time.Now()
	cs := make([]delivery.Completion, len(claimed))
	for i, c := range claimed {
		cs[i] = delivery.Completion{Claim: c.Claim,
			Outcome: delivery.Outcome{StartedAt: now, FinishedAt: now.Add(time.Millisecond), HTTPStatus: http.StatusOK}}
	}
	recorded, err := f.svc.RecordBatch(f.ctx, f.db.DB, cs)
	if err != nil {
		b.Fatal(err)
	}
	for i, ok := range recorded {
		if !ok {
			b.Fatalf("outcome %d was not recorded", i)
		}
	}
}

// BenchmarkRecordBatch records the attempts of intake-sized batches as the dispatcher's completer does: 32
// deliveries handed off at intake, each answered 200, their outcomes recorded in one RecordBatch. ns/op is per
// batch of outcomes; storing the batch is outside the timer.
func BenchmarkRecordBatch(b *testing.B) {
	f := newIntakeBatch(b)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		claimed := f.store(b)
		b.StartTimer()
		f.deliver(b, claimed)
	}
}

// TestStoreBatchRefusesServersChangedSinceRead: on PostgreSQL an item whose ServerVersion is no longer its
// server's is refused with ErrServerChanged and leaves nothing behind, while the tenant's other items, one of
// them at the server's current version, are granted and ledgered as if it had not been in the batch.
func TestStoreBatchRefusesServersChangedSinceRead(t *testing.T) {
	dbtest.SkipUnlessPostgres(t)
	t.Parallel()
	db, ctx := dbtest.OpenAsSystem(t)
	svc := delivery.New(delivery.Config{Billing: billing.New(db.Dialect, time.Now), Dialect: db.Dialect})
	plan := newPlan(t, ctx, db, 0, 2, 1)
	tn := newTenant(t, ctx, db, plan.ID, 5)
	changed, current := newServer(t, ctx, db, tn.ID), newServer(t, ctx, db, tn.ID)
	var version string
	require.NoError(t, db.SQL.QueryRowContext(ctx, `SELECT `+delivery.ServerVersionSQL("servers")+` FROM servers WHERE id = $1`,
		current.ID).Scan(&version))
	item := func(srv *ent.Server, version string) delivery.Incoming {
		it := emptyRequests(srv, nil, 1)[0]
		it.ServerVersion = version
		return it
	}
	items := []delivery.Incoming{item(changed, "a version it no longer has"), item(current, version), item(current, "")}
	stored, err := svc.StoreBatch(ctx, db.Client, items, billing.ReasonRequestAccepted, delivery.Handoff{})
	require.NoError(t, err)
	require.ErrorIs(t, stored[0].Err, delivery.ErrServerChanged)
	require.Equal(t, fault.Unavailable, fault.KindOf(stored[0].Err))
	require.Nil(t, stored[0].Request)
	for _, s := range stored[1:] {
		require.NoError(t, s.Err)
		require.NotZero(t, s.Request.ID)
	}
	requests, err := db.Client.Request.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, requests)
	require.Equal(t, int64(3), db.Client.Tenant.GetX(ctx, tn.ID).CreditBalance)
	entries, err := db.Client.LedgerEntry.Query().Where(ledgerentry.TenantID(tn.ID), ledgerentry.AmountLT(0)).
		Order(ledgerentry.ByID()).All(ctx)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	require.Equal(t, []int64{4, 3}, []int64{entries[0].BalanceAfter, entries[1].BalanceAfter})
}
