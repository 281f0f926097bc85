package delivery_test

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
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
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/ent/request"
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
		items := make([]delivery.Incoming, perRecipient)
		for i := range items {
			items[i] = delivery.Incoming{Server: srv, Recipients: recs, Key: hexID(),
				Request: delivery.NewRequest{Method: http.MethodPost, Header: http.Header{}, Body: []byte("{}")}}
		}
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
		items := make([]delivery.Incoming, perRound)
		for i := range items {
			items[i] = delivery.Incoming{Server: srv, Recipients: recs, Key: hexID(),
				Request: delivery.NewRequest{Method: http.MethodPost, Header: http.Header{}, Body: []byte("{}")}}
		}
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
	items := make([]delivery.Incoming, n)
	for i := range items {
		items[i] = delivery.Incoming{Server: srv, Recipients: []*ent.Recipient{r}, Key: hexID(),
			Request: delivery.NewRequest{Method: http.MethodPost, Header: http.Header{}, Body: []byte("{}")}}
	}
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
