package scheduler_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/delivery"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

// switchable answers 500 until told to answer 200.
type switchable struct {
	*httptest.Server
	ok    atomic.Bool
	calls atomic.Int64
}

func newSwitchable(t *testing.T) *switchable {
	s := &switchable{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		if s.ok.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(s.Close)
	return s
}

func smallHealth(unit time.Duration, rules delivery.HealthRules) func(*relay.Config) {
	return func(c *relay.Config) {
		c.RetryUnit = unit
		c.Health = rules
	}
}

func recipientState(t *testing.T, env *relaytest.Env, id string) recipient.State {
	t.Helper()
	rid := relaytest.RowID(t, id)
	r, err := env.DB.Client.Recipient.Get(viewer.SystemContext(t.Context()), rid)
	require.NoError(t, err)
	return r.State
}

// healthFixture is a tenant whose server has one recipient with ten attempts on the stepped schedule, at a
// receiver the test switches between failing and answering.
type healthFixture struct {
	tn  relaytest.Tenant
	srv relaytest.Server
	rcv *switchable
	rid string
}

func newHealthFixture(t *testing.T, env *relaytest.Env) healthFixture {
	t.Helper()
	f := healthFixture{tn: env.NewTenant("acme", relaytest.PlanLimits{Credits: 20}), rcv: newSwitchable(t)}
	f.srv = env.NewServer(f.tn, "s", nil)
	f.rid = env.NewRecipient(f.tn, f.srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": f.rcv.URL, "maxAttempts": 10, "retrySchedule": "STEPPED"})
	return f
}

func TestConsecutiveFailuresDisableThenProbeReenables(t *testing.T) {
	t.Parallel()
	const unit = 20 * time.Millisecond
	rules := delivery.DefaultHealthRules
	rules.DisableConsecutive = 3
	rules.ProbeUnits = 10 // one probe per 200ms
	env := relaytest.Start(t, smallHealth(unit, rules))
	f := newHealthFixture(t, env)
	tn, srv, rcv, rid := f.tn, f.srv, f.rcv, f.rid

	first := env.Send(srv.Key, "", `{}`)
	relaytest.Eventually(t, 20*time.Second, "recipient disabled", func() bool {
		return recipientState(t, env, rid) == recipient.StateDISABLED
	})
	var out struct {
		Node struct {
			State       string
			StateReason string
		}
	}
	env.MustGraphQL(tn.Owner, `query($id: ID!){ node(id: $id) { ... on Recipient { state stateReason } } }`, map[string]any{"id": rid}, &out)
	require.Equal(t, "DISABLED", out.Node.State)
	require.Contains(t, out.Node.StateReason, "3 consecutive failures")

	// While disabled, attempts come only as probes: consecutive probe attempts are at least the probe
	// interval apart. Their recorded start times are read, not their arrivals, which carry the network's
	// jitter on a loaded machine.
	second := env.Send(srv.Key, "", `{}`)
	ctx := viewer.SystemContext(t.Context())
	r, err := env.DB.Client.Recipient.Get(ctx, relaytest.RowID(t, rid))
	require.NoError(t, err)
	var probes []time.Time
	relaytest.Eventually(t, 20*time.Second, "two probes", func() bool {
		probes = probes[:0]
		for _, id := range []string{first, second} {
			for _, a := range deliveriesOf(t, env, id)[0].Edges.Attempts {
				if a.StartedAt.After(*r.StateChangedAt) {
					probes = append(probes, a.StartedAt)
				}
			}
		}
		return len(probes) >= 2
	})
	slices.SortFunc(probes, time.Time.Compare)
	// The turns are exactly 10 units apart (the claim sets the next one), but an attempt starts a moment
	// after its claim; half an interval still tells a rate-limited probe from an unlimited stream of attempts
	// (which would start a unit or less apart).
	for i := 1; i < len(probes); i++ {
		require.GreaterOrEqual(t, probes[i].Sub(probes[i-1]), 5*unit, "probes closer than the probe interval")
	}

	// A successful probe re-enables, and waiting deliveries flow.
	rcv.ok.Store(true)
	relaytest.Eventually(t, 20*time.Second, "both requests delivered", func() bool {
		a, b := deliveriesOf(t, env, first), deliveriesOf(t, env, second)
		return a[0].Status == entdelivery.StatusSUCCEEDED && b[0].Status == entdelivery.StatusSUCCEEDED
	})
	require.Equal(t, recipient.StateACTIVE, recipientState(t, env, rid))
}

func TestFailureRatioDisables(t *testing.T) {
	t.Parallel()
	rules := delivery.DefaultHealthRules
	rules.DisableMinAttempts = 4
	rules.DisableRatio = 0.7
	rules.DisableConsecutive = 1000
	// No probe may come while the test counts the attempts that led to DISABLED: the first is 1,000 s after.
	rules.ProbeUnits = 1_000_000
	env := relaytest.Start(t, smallHealth(time.Millisecond, rules))
	f := newHealthFixture(t, env)
	srv, rcv, rid := f.srv, f.rcv, f.rid
	env.Send(srv.Key, "", `{}`)
	relaytest.Eventually(t, 20*time.Second, "recipient disabled by ratio", func() bool {
		return recipientState(t, env, rid) == recipient.StateDISABLED
	})
	// More than 4 attempts in the window, more than 70% failed: the fifth failure disables.
	require.EqualValues(t, 5, rcv.calls.Load())
}

func TestHardFreezeStopsAttemptsUntilEnabled(t *testing.T) {
	t.Parallel()
	rules := delivery.DefaultHealthRules
	rules.DisableConsecutive = 100
	rules.FreezeHard = 3
	env := relaytest.Start(t, smallHealth(time.Millisecond, rules))
	f := newHealthFixture(t, env)
	tn, srv, rcv, rid := f.tn, f.srv, f.rcv, f.rid
	reqID := env.Send(srv.Key, "", `{}`)
	relaytest.Eventually(t, 20*time.Second, "recipient frozen", func() bool {
		return recipientState(t, env, rid) == recipient.StateFROZEN
	})
	require.EqualValues(t, 3, rcv.calls.Load())
	d := deliveriesOf(t, env, reqID)[0]
	require.Equal(t, entdelivery.StatusPENDING, d.Status)
	require.Equal(t, 3, d.AttemptCount)

	// A member cannot enable; the owner can, and the delivery goes on.
	resp := env.GraphQL(tn.Member, `mutation($id: ID!){ enableRecipient(id: $id){ state } }`, map[string]any{"id": rid})
	require.Equal(t, "FORBIDDEN", resp.Code())
	rcv.ok.Store(true)
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ enableRecipient(id: $id){ state } }`, map[string]any{"id": rid}, nil)
	waitDelivered(t, env, reqID, 20*time.Second, "delivered after enable")
	require.EqualValues(t, 4, rcv.calls.Load())
}
