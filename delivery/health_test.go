package delivery_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
)

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
	db := dbtest.Open(t)
	ctx := viewer.SystemContext(t.Context())
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return base }
	rules := delivery.HealthRules{DisableRatio: 0.7, DisableMinAttempts: 3, DisableConsecutive: 4,
		FreezeConsecutive: 5, FreezeSilence: time.Hour, FreezeHard: 8, ProbeUnits: 10, Window: 3}
	svc := delivery.New(delivery.Config{Billing: billing.New(db.Dialect, clock), Postgres: db.Postgres(),
		Unit: time.Second, Now: clock, Health: rules})
	plan, err := db.Client.Plan.Create().SetName("p-" + hexID()).SetMonthlyCredits(0).SetRetentionDays(7).
		SetMaxServers(1).SetMaxRecipientsPerServer(1).Save(ctx)
	require.NoError(t, err)

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
	tn, err := db.Client.Tenant.Create().SetName("t").SetPlanID(planID).SetCreditBalance(int64(n)).Save(ctx)
	require.NoError(t, err)
	srv, err := db.Client.Server.Create().SetTenantID(tn.ID).SetName("s").SetInboundKey(hexID()).Save(ctx)
	require.NoError(t, err)
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
