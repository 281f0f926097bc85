package alerting_test

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/delivery"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/pendingalert"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

// received is one alert as its URL got it.
type received struct {
	Type   string // the Adal-Alert-Type header
	Format string // the Adal-Alert-Format header
	Body   map[string]any
}

// alertReceiver is a subscribed URL: it records the alerts it accepts, and refuses the first failFirst calls.
type alertReceiver struct {
	*httptest.Server
	failFirst atomic.Int64
	calls     atomic.Int64
	mu        sync.Mutex
	got       []received
}

func newAlertReceiver(t *testing.T) *alertReceiver {
	a := &alertReceiver{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := a.calls.Add(1)
		raw, _ := io.ReadAll(r.Body)
		if n <= a.failFirst.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		a.got = append(a.got, received{Type: r.Header.Get("Adal-Alert-Type"), Format: r.Header.Get("Adal-Alert-Format"), Body: body})
		a.mu.Unlock()
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *alertReceiver) alerts() []received {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]received(nil), a.got...)
}

// types are the types of the alerts received, in order.
func (a *alertReceiver) types() []string {
	var out []string
	for _, r := range a.alerts() {
		out = append(out, r.Type)
	}
	return out
}

// waitFor waits until the receiver holds n alerts and returns them.
func (a *alertReceiver) waitFor(t *testing.T, n int, what string) []received {
	t.Helper()
	relaytest.Eventually(t, 30*time.Second, what, func() bool { return len(a.alerts()) >= n })
	return a.alerts()
}

// failing answers 503 until told otherwise: a recipient to make unhealthy.
type failing struct {
	*httptest.Server
	ok atomic.Bool
}

func newFailing(t *testing.T) *failing {
	f := &failing{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if !f.ok.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func subscribe(t *testing.T, env *relaytest.Env, token, url string, events []string, extra map[string]any) string {
	t.Helper()
	in := map[string]any{"url": url, "events": events}
	for k, v := range extra {
		in[k] = v
	}
	var out struct{ CreateAlertSubscription struct{ ID string } }
	env.MustGraphQL(token, `mutation($in: CreateAlertSubscriptionInput!){ createAlertSubscription(input: $in){ id } }`,
		map[string]any{"in": in}, &out)
	return out.CreateAlertSubscription.ID
}

// quick makes schedules and health rules small, and the dispatcher look often.
func quick(rules delivery.HealthRules) func(*relay.Config) {
	return func(c *relay.Config) {
		c.RetryUnit = 5 * time.Millisecond
		c.Health = rules
		c.AlertInterval = 20 * time.Millisecond
		c.PollInterval = 20 * time.Millisecond
	}
}

// disableAfter is the default health rules but for disabling a recipient after n failures in a row.
func disableAfter(n int64) delivery.HealthRules {
	rules := delivery.DefaultHealthRules
	rules.DisableConsecutive = n
	return rules
}

// startFailing starts a process (quick, with rules; then configure) with a tenant of 20 credits and a server,
// and a direct recipient with the fields in extra to a URL that fails until down.ok is set. It returns them
// and the recipient's id.
func startFailing(t *testing.T, rules delivery.HealthRules, extra map[string]any, configure ...func(*relay.Config)) (
	env *relaytest.Env, tn relaytest.Tenant, srv relaytest.Server, down *failing, rid string,
) {
	t.Helper()
	env = relaytest.Start(t, append([]func(*relay.Config){quick(rules)}, configure...)...)
	tn, srv = env.NewTenantServer(20)
	down = newFailing(t)
	in := map[string]any{"method": "DIRECT_HTTP", "url": down.URL}
	maps.Copy(in, extra)
	return env, tn, srv, down, env.NewRecipient(tn, srv.ID, in)
}

func data(r received) map[string]any { return r.Body["data"].(map[string]any) }

// A recipient disabled, frozen and brought back by its owner raises one alert each, in that order, as a JSON
// payload {type, timestamp, data} naming the recipient and why.
func TestRecipientStateAlerts(t *testing.T) {
	t.Parallel()
	rules := disableAfter(3)
	rules.FreezeHard = 5
	rules.ProbeUnits = 1
	env, tn, srv, down, rid := startFailing(t, rules, map[string]any{"name": "orders", "maxAttempts": 10,
		"retrySchedule": "STEPPED"})
	rcv := newAlertReceiver(t)
	subscribe(t, env, tn.Owner, rcv.URL, []string{"RECIPIENT_DISABLED", "RECIPIENT_FROZEN", "RECIPIENT_RECOVERED"}, nil)

	env.Send(srv.Key, "", `{}`)
	got := rcv.waitFor(t, 2, "disabled and frozen alerts")
	require.Equal(t, []string{"recipient.disabled", "recipient.frozen"}, rcv.types()[:2])
	require.Equal(t, "recipient.disabled", got[0].Body["type"])
	require.NotEmpty(t, got[0].Body["timestamp"])
	d := data(got[0])
	require.Equal(t, "DISABLED", d["state"])
	require.Equal(t, "3 consecutive failures", d["reason"])
	require.Equal(t, map[string]any{"id": rid, "name": "orders", "method": "DIRECT_HTTP", "url": down.URL,
		"serverId": srv.ID, "serverName": "s"}, d["recipient"])
	require.Equal(t, map[string]any{"id": tn.ID, "name": "acme"}, d["tenant"])
	require.Equal(t, "FROZEN", data(got[1])["state"])
	require.Equal(t, "json", got[0].Format)

	down.ok.Store(true)
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ enableRecipient(id: $id){ state } }`, map[string]any{"id": rid}, nil)
	got = rcv.waitFor(t, 3, "recovered alert")
	require.Equal(t, []string{"recipient.disabled", "recipient.frozen", "recipient.recovered"}, rcv.types())
	require.Equal(t, "ACTIVE", data(got[2])["state"])
	require.Equal(t, "enabled by acme-owner", data(got[2])["reason"])
}

// A disabled recipient whose probe succeeds raises recipient.recovered; a subscription to other events hears
// nothing of it.
func TestRecoveredByProbe(t *testing.T) {
	t.Parallel()
	rules := disableAfter(2)
	rules.ProbeUnits = 2
	env, tn, srv, down, rid := startFailing(t, rules, map[string]any{"retrySchedule": "STEPPED"})
	rcv := newAlertReceiver(t)
	subscribe(t, env, tn.Owner, rcv.URL, []string{"RECIPIENT_DISABLED", "RECIPIENT_RECOVERED"}, nil)
	credits := newAlertReceiver(t)
	subscribe(t, env, tn.Owner, credits.URL, []string{"CREDITS_LOW"}, nil)

	env.Send(srv.Key, "", `{}`)
	rcv.waitFor(t, 1, "disabled alert")
	down.ok.Store(true)
	got := rcv.waitFor(t, 2, "recovered alert")
	require.Equal(t, []string{"recipient.disabled", "recipient.recovered"}, rcv.types())
	require.Equal(t, "probe succeeded", data(got[1])["reason"])
	require.Equal(t, rid, data(got[1])["recipient"].(map[string]any)["id"])
	require.Empty(t, credits.alerts(), "a subscription hears only its events")
}

// Deliveries that fail for good raise at most one delivery.failed alert per recipient per hour: the first at
// once, the next, counting every failure since, once the hour is over. Time is the test's clock.
func TestDeliveryFailedAtMostHourlyWithCount(t *testing.T) {
	t.Parallel()
	clock := relaytest.NewClock(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	env, tn, srv, _, rid := startFailing(t, delivery.DefaultHealthRules, map[string]any{"name": "orders", "maxAttempts": 1},
		clock.Use)
	rcv := newAlertReceiver(t)
	subscribe(t, env, tn.Owner, rcv.URL, []string{"DELIVERY_FAILED"}, nil)
	ctx := viewer.SystemContext(t.Context())

	first := env.Send(srv.Key, "", `{}`)
	got := rcv.waitFor(t, 1, "first failure alert")
	d := data(got[0])
	require.Equal(t, "delivery.failed", got[0].Type)
	require.EqualValues(t, 1, d["count"])
	last := d["lastFailure"].(map[string]any)
	require.Equal(t, first, last["requestId"])
	require.Equal(t, "HTTP_STATUS", last["errorKind"])
	require.EqualValues(t, 503, last["httpStatus"])
	require.Equal(t, rid, d["recipient"].(map[string]any)["id"])

	// Two more failures within the hour wait, held until the hour is over.
	env.Send(srv.Key, "", `{}`)
	env.Send(srv.Key, "", `{}`)
	held := clock.Now().Add(time.Hour)
	relaytest.Eventually(t, 30*time.Second, "two failures held for the hour", func() bool {
		n, err := env.DB.Client.PendingAlert.Query().Where(pendingalert.DueAt(held)).Count(ctx)
		require.NoError(t, err)
		return n == 2
	})
	require.Len(t, rcv.alerts(), 1, "no second alert within the hour")

	clock.Advance(time.Hour)
	got = rcv.waitFor(t, 2, "second failure alert")
	require.EqualValues(t, 2, data(got[1])["count"])
	require.Equal(t, "2026-06-01T12:00:00Z", data(got[1])["since"])
	left, err := env.DB.Client.PendingAlert.Query().Count(ctx)
	require.NoError(t, err)
	require.Zero(t, left, "every failure told once")
}

// credits.low fires when a debit takes the balance under the tenant's threshold, once per crossing;
// credits.exhausted when intake starts answering 402, once however many refusals, and again after credits
// came back and ran out. Alerts cost nothing: the balance and the ledger count the webhooks only.
func TestCreditAlerts(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 5, quick(delivery.DefaultHealthRules))
	rcv := newAlertReceiver(t)
	subscribe(t, env, tn.Owner, rcv.URL, []string{"CREDITS_LOW", "CREDITS_EXHAUSTED"}, nil)
	setThreshold := `mutation($t: ID!, $v: Int){ setLowCreditThreshold(tenantId: $t, threshold: $v){ lowCreditThreshold } }`
	require.Equal(t, "FORBIDDEN", env.GraphQL(tn.Member, setThreshold, map[string]any{"t": tn.ID, "v": 3}).Code())
	require.Equal(t, "INVALID_INPUT", env.GraphQL(tn.Owner, setThreshold, map[string]any{"t": tn.ID, "v": 0}).Code())
	env.MustGraphQL(tn.Owner, setThreshold, map[string]any{"t": tn.ID, "v": 3}, nil)

	status := func() int {
		resp := env.Post(srv.Key, "", []byte(`{}`))
		resp.Body.Close()
		return resp.StatusCode
	}
	for range 2 { // 5 → 3: not under 3
		require.Equal(t, http.StatusAccepted, status())
	}
	require.Equal(t, http.StatusAccepted, status()) // 3 → 2: crossed
	got := rcv.waitFor(t, 1, "credits.low")
	require.Equal(t, "credits.low", got[0].Type)
	require.EqualValues(t, 2, data(got[0])["balance"])
	require.EqualValues(t, 3, data(got[0])["threshold"])
	for range 2 { // 2 → 0: under already
		require.Equal(t, http.StatusAccepted, status())
	}
	for range 5 {
		require.Equal(t, http.StatusPaymentRequired, status())
	}
	got = rcv.waitFor(t, 2, "credits.exhausted")
	require.Equal(t, []string{"credits.low", "credits.exhausted"}, rcv.types())
	require.EqualValues(t, 0, data(got[1])["balance"])

	// Credits come back: the next crossing and the next exhaustion alert again.
	env.MustGraphQL(env.AdminToken(), `mutation($t: ID!){ grantCredits(tenantId: $t, amount: 4){ id } }`, map[string]any{"t": tn.ID}, nil)
	for range 4 {
		require.Equal(t, http.StatusAccepted, status())
	}
	// Each alert is a delivery of its own, so two raised together may arrive in either order: wait for the
	// crossing before running out.
	rcv.waitFor(t, 3, "second crossing")
	require.Equal(t, http.StatusPaymentRequired, status())
	rcv.waitFor(t, 4, "second exhaustion")
	require.Equal(t, []string{"credits.low", "credits.exhausted", "credits.low", "credits.exhausted"}, rcv.types())

	// Nine webhooks were accepted and nothing else was paid for.
	var v struct {
		Viewer struct{ Tenant struct{ CreditBalance int } }
		Ledger struct {
			Edges []struct{ Node struct{ Reason string } }
		}
	}
	env.MustGraphQL(tn.Owner, `{ viewer { tenant { creditBalance } } ledger(first: 100) { edges { node { reason } } } }`, nil, &v)
	require.Zero(t, v.Viewer.Tenant.CreditBalance)
	accepted := 0
	for _, e := range v.Ledger.Edges {
		switch e.Node.Reason {
		case "REQUEST_ACCEPTED":
			accepted++
		case "PLAN_GRANT", "CREDIT_GRANT":
		default:
			t.Fatalf("unexpected ledger entry %s", e.Node.Reason)
		}
	}
	require.Equal(t, 9, accepted)

	// A threshold set above the balance is a crossing of its own.
	env.MustGraphQL(env.AdminToken(), `mutation($t: ID!){ grantCredits(tenantId: $t, amount: 5){ id } }`, map[string]any{"t": tn.ID}, nil)
	env.MustGraphQL(tn.Owner, setThreshold, map[string]any{"t": tn.ID, "v": 10}, nil)
	got = rcv.waitFor(t, 5, "credits.low on a raised threshold")
	require.Equal(t, "credits.low", got[4].Type)
	require.EqualValues(t, 5, data(got[4])["balance"])
}

// Alerts are delivered by the engine: a URL that fails at first is retried, and the subscription shows its
// deliveries with their attempts.
func TestAlertsAreRetriedAndShownAsDeliveries(t *testing.T) {
	t.Parallel()
	env, tn, srv, _, _ := startFailing(t, disableAfter(1), nil)
	rcv := newAlertReceiver(t)
	rcv.failFirst.Store(2)
	sub := subscribe(t, env, tn.Owner, rcv.URL, []string{"RECIPIENT_DISABLED"}, nil)

	env.Send(srv.Key, "", `{}`)
	rcv.waitFor(t, 1, "alert after two refusals")
	require.EqualValues(t, 3, rcv.calls.Load())
	var out struct {
		AlertSubscriptions []struct {
			ID, URL, Format string
			Events          []string
			Recipient       struct{ State string }
			Deliveries      struct {
				Edges []struct {
					Node struct {
						ID           string
						Status       string
						AttemptCount int
						Attempts     []struct{ HTTPStatus *int }
					}
				}
			}
		}
	}
	q := `{ alertSubscriptions { id url format events recipient { state }
		deliveries { edges { node { id status attemptCount attempts { httpStatus } } } } } }`
	// The subscription's recipient follows the same health rules as any: its first refusal disabled it, and the
	// probe that got through brings it back.
	relaytest.Eventually(t, 10*time.Second, "delivery recorded, recipient back to ACTIVE", func() bool {
		env.MustGraphQL(tn.Member, q, nil, &out)
		return len(out.AlertSubscriptions) == 1 && len(out.AlertSubscriptions[0].Deliveries.Edges) == 1 &&
			out.AlertSubscriptions[0].Deliveries.Edges[0].Node.Status == "SUCCEEDED" &&
			out.AlertSubscriptions[0].Recipient.State == "ACTIVE"
	})
	s := out.AlertSubscriptions[0]
	require.Equal(t, sub, s.ID)
	require.Equal(t, rcv.URL, s.URL)
	require.Equal(t, "JSON", s.Format)
	require.Equal(t, []string{"RECIPIENT_DISABLED"}, s.Events)
	require.Equal(t, "ACTIVE", s.Recipient.State)
	n := s.Deliveries.Edges[0].Node
	require.Equal(t, 3, n.AttemptCount)
	require.Equal(t, 503, *n.Attempts[0].HTTPStatus)
	require.Equal(t, 200, *n.Attempts[2].HTTPStatus)

	// The alert is a request of its own, listed with the tenant's alerts and not among its servers.
	var alerts struct {
		Alerts struct {
			Edges []struct{ Node struct{ Body string } }
		}
		Servers struct {
			Edges []struct{ Node struct{ Name string } }
		}
	}
	env.MustGraphQL(tn.Member, `{ alerts { edges { node { body } } } servers { edges { node { name } } } }`, nil, &alerts)
	require.Len(t, alerts.Alerts.Edges, 1)
	require.Contains(t, alerts.Alerts.Edges[0].Node.Body, `"type":"recipient.disabled"`)
	require.Len(t, alerts.Servers.Edges, 1)
	require.Equal(t, "s", alerts.Servers.Edges[0].Node.Name)

	// Retrying an alert costs nothing either.
	var before, after struct {
		Viewer struct{ Tenant struct{ CreditBalance int } }
	}
	env.MustGraphQL(tn.Owner, `{ viewer { tenant { creditBalance } } }`, nil, &before)
	env.MustGraphQL(tn.Member, `mutation($id: ID!){ retryDelivery(id: $id){ id } }`, map[string]any{"id": n.ID}, nil)
	rcv.waitFor(t, 2, "the retried alert")
	env.MustGraphQL(tn.Owner, `{ viewer { tenant { creditBalance } } }`, nil, &after)
	require.Equal(t, before.Viewer.Tenant.CreditBalance, after.Viewer.Tenant.CreditBalance)
}

// An alert that cannot reach its URL fails for good like any delivery, and raises no alert about itself.
func TestFailingAlertsRaiseNoAlerts(t *testing.T) {
	t.Parallel()
	env, tn, srv, _, _ := startFailing(t, disableAfter(1), map[string]any{"maxAttempts": 1})
	deadURL := newFailing(t)
	subscribe(t, env, tn.Owner, deadURL.URL, []string{"RECIPIENT_DISABLED", "DELIVERY_FAILED"}, nil)
	rcv := newAlertReceiver(t)
	subscribe(t, env, tn.Owner, rcv.URL, []string{"DELIVERY_FAILED"}, nil)

	env.Send(srv.Key, "", `{}`)
	ctx := viewer.SystemContext(t.Context())
	// The disabled alert to the dead URL uses its ten attempts and fails.
	relaytest.Eventually(t, 30*time.Second, "the dead URL's alerts failed", func() bool {
		ds := env.Deliveries(entdelivery.StatusEQ(entdelivery.StatusFAILED))
		n := 0
		for _, d := range ds {
			if d.AttemptCount == 10 {
				n++
			}
		}
		return n == 2 // recipient.disabled and delivery.failed, both to the dead URL
	})
	relaytest.Eventually(t, 10*time.Second, "outbox drained", func() bool {
		n, err := env.DB.Client.PendingAlert.Query().Where(pendingalert.DueAtLTE(time.Now().UTC())).Count(ctx)
		require.NoError(t, err)
		return n == 0
	})
	require.Equal(t, []string{"delivery.failed"}, rcv.types(), "only the webhook's failure was told")
}

// A Slack subscription gets Slack's {"text"}: by default for a hooks.slack.com URL, or when asked for.
func TestSlackFormat(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 20, quick(disableAfter(1)))
	var created struct {
		CreateAlertSubscription struct{ ID, Format string }
	}
	env.MustGraphQL(tn.Owner, `mutation($in: CreateAlertSubscriptionInput!){ createAlertSubscription(input: $in){ id format } }`,
		map[string]any{"in": map[string]any{"url": "https://hooks.slack.com/services/T000/B000/XXXX", "events": []string{"CREDITS_LOW"}}}, &created)
	require.Equal(t, "SLACK", created.CreateAlertSubscription.Format)
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ deleteAlertSubscription(id: $id){ id } }`,
		map[string]any{"id": created.CreateAlertSubscription.ID}, nil)

	down := newFailing(t)
	env.NewRecipient(tn, srv.ID, map[string]any{"name": "orders", "method": "DIRECT_HTTP", "url": down.URL})
	slack := newAlertReceiver(t)
	subscribe(t, env, tn.Owner, slack.URL, []string{"RECIPIENT_DISABLED"}, map[string]any{"format": "SLACK"})
	plain := newAlertReceiver(t)
	subscribe(t, env, tn.Owner, plain.URL, []string{"RECIPIENT_DISABLED"}, nil)
	env.Send(srv.Key, "", `{}`)
	got := slack.waitFor(t, 1, "slack alert")
	require.Equal(t, "slack", got[0].Format)
	require.Equal(t, map[string]any{"text": `Adal: recipient "orders" of server "s" was disabled (1 consecutive failures). ` +
		`It gets one probe attempt at a time until one succeeds.`}, got[0].Body)
	p := plain.waitFor(t, 1, "json alert")
	require.Equal(t, "recipient.disabled", p[0].Body["type"])
	require.Len(t, slack.alerts(), 1)
}

// One tenant's events never reach another's subscriptions; subscriptions and alerts are each tenant's own;
// only owners and operators manage them.
func TestAlertTenantIsolation(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, quick(delivery.DefaultHealthRules))
	a, srvA := env.NewTenantServer(1)
	b := env.NewTenant("other", relaytest.PlanLimits{Credits: 5})
	rcvA, rcvB := newAlertReceiver(t), newAlertReceiver(t)
	subA := subscribe(t, env, a.Owner, rcvA.URL, []string{"CREDITS_EXHAUSTED"}, nil)
	subscribe(t, env, b.Owner, rcvB.URL, []string{"CREDITS_EXHAUSTED", "CREDITS_LOW"}, nil)
	require.Equal(t, "FORBIDDEN", env.GraphQL(a.Member, `mutation($in: CreateAlertSubscriptionInput!){ createAlertSubscription(input: $in){ id } }`,
		map[string]any{"in": map[string]any{"url": rcvA.URL, "events": []string{"CREDITS_LOW"}}}).Code())
	require.Equal(t, "NOT_FOUND", env.GraphQL(b.Owner, `mutation($in: CreateAlertSubscriptionInput!){ createAlertSubscription(input: $in){ id } }`,
		map[string]any{"in": map[string]any{"tenantId": a.ID, "url": rcvB.URL, "events": []string{"CREDITS_LOW"}}}).Code())

	env.Send(srvA.Key, "", `{}`)
	resp := env.Post(srvA.Key, "", []byte(`{}`))
	resp.Body.Close()
	require.Equal(t, http.StatusPaymentRequired, resp.StatusCode)
	rcvA.waitFor(t, 1, "tenant A's alert")
	require.Equal(t, a.ID, data(rcvA.alerts()[0])["tenant"].(map[string]any)["id"])

	var listB struct {
		AlertSubscriptions []struct{ ID string }
		Alerts             struct {
			Edges []struct{ Node struct{ ID string } }
		}
	}
	env.MustGraphQL(b.Member, `{ alertSubscriptions { id } alerts { edges { node { id } } } }`, nil, &listB)
	require.Len(t, listB.AlertSubscriptions, 1)
	require.NotEqual(t, subA, listB.AlertSubscriptions[0].ID)
	require.Empty(t, listB.Alerts.Edges)
	require.Equal(t, "NOT_FOUND", env.GraphQL(b.Owner, `mutation($id: ID!){ deleteAlertSubscription(id: $id){ id } }`,
		map[string]any{"id": subA}).Code())
	require.Empty(t, rcvB.alerts())

	// A subscription's recipient is changed only with the subscription.
	var subs struct {
		AlertSubscriptions []struct{ Recipient struct{ ID string } }
	}
	env.MustGraphQL(a.Owner, `{ alertSubscriptions { recipient { id } } }`, nil, &subs)
	res := env.GraphQL(a.Owner, `mutation($id: ID!){ updateRecipient(id: $id, input: {url: "http://127.0.0.1:1/x"}){ id } }`,
		map[string]any{"id": subs.AlertSubscriptions[0].Recipient.ID})
	require.Equal(t, "INVALID_INPUT", res.Code())
	id := relaytest.RowID(t, subA)
	env.MustGraphQL(a.Owner, `mutation($id: ID!){ deleteAlertSubscription(id: $id){ id } }`, map[string]any{"id": id}, nil)
	var none struct{ AlertSubscriptions []struct{ ID string } }
	env.MustGraphQL(a.Owner, `{ alertSubscriptions { id } }`, nil, &none)
	require.Empty(t, none.AlertSubscriptions)
}
