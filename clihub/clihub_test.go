package clihub_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/clihub"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

type testBundle struct {
	env    *relaytest.Env
	tenant relaytest.Tenant
}

func setup(t *testing.T) testBundle {
	t.Helper()
	env := relaytest.Start(t)
	return testBundle{env: env, tenant: env.NewTenant("acme", relaytest.PlanLimits{Credits: 100})}
}

// cliRecipient creates a server with the given deliverPendingOnConnect and a CLI recipient on it.
func (b testBundle) cliRecipient(t *testing.T, pendingOnConnect bool) (relaytest.Server, int) {
	t.Helper()
	srv := b.env.NewServer(b.tenant, "s", map[string]any{"deliverPendingOnConnect": pendingOnConnect})
	id, err := strconv.Atoi(b.env.NewRecipient(b.tenant, srv.ID, map[string]any{"method": "CLI"}))
	require.NoError(t, err)
	return srv, id
}

func (b testBundle) post(t *testing.T, key string) int {
	t.Helper()
	resp := b.env.Post(key, "", []byte(`{}`))
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(raw))
	var out struct{ RequestID string }
	require.NoError(t, json.Unmarshal(raw, &out))
	id, err := strconv.Atoi(out.RequestID)
	require.NoError(t, err)
	return id
}

func (b testBundle) delivery(t *testing.T, requestID int) *ent.Delivery {
	t.Helper()
	d, err := b.env.DB.Client.Delivery.Query().Where(entdelivery.RequestID(requestID)).Only(viewer.SystemContext(t.Context()))
	require.NoError(t, err)
	return d
}

func TestClaimHoldsBacklogBackUnlessPendingOnConnect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := viewer.SystemContext(t.Context())
	off, recOff := b.cliRecipient(t, false)
	on, recOn := b.cliRecipient(t, true)
	reqOff, reqOn := b.post(t, off.Key), b.post(t, on.Key)
	require.True(t, b.delivery(t, reqOff).Backlog)
	require.True(t, b.delivery(t, reqOn).Backlog)

	later := time.Now().UTC().Add(time.Minute)
	claims, err := clihub.ClaimForTest(ctx, b.env.DB.DB, later, 10, "cli:test:", clihub.NewAttached(recOff, later), clihub.NewAttached(recOn, later))
	require.NoError(t, err)
	require.Len(t, claims, 1, "only the server that delivers pending requests on connect gives up its backlog")
	require.Equal(t, b.delivery(t, reqOn).ID, claims[0].DeliveryID)
	require.Equal(t, 1, claims[0].Attempt)
	require.Regexp(t, `^cli:test:[0-9a-f]{32}$`, claims[0].Owner)

	// A delivery created after the CLI attached is not backlog for it, whatever its flag says (the heartbeat
	// that sets the flag is eventually consistent).
	long := time.Now().UTC().Add(-time.Hour)
	claims, err = clihub.ClaimForTest(ctx, b.env.DB.DB, later, 10, "cli:test:", clihub.NewAttached(recOff, long))
	require.NoError(t, err)
	require.Len(t, claims, 1)
	require.Equal(t, b.delivery(t, reqOff).ID, claims[0].DeliveryID)
	d := b.delivery(t, reqOff)
	require.Equal(t, entdelivery.StatusIN_PROGRESS, d.Status)
	require.False(t, d.Backlog)
}

func TestClaimTakesOnlyAttachedActiveCLIRecipients(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := viewer.SystemContext(t.Context())
	srv, rec := b.cliRecipient(t, true)
	_, other := b.cliRecipient(t, true)
	req := b.post(t, srv.Key)
	later := time.Now().UTC().Add(time.Minute)

	claims, err := clihub.ClaimForTest(ctx, b.env.DB.DB, later, 10, "cli:test:", clihub.NewAttached(other, later))
	require.NoError(t, err)
	require.Empty(t, claims, "not attached")

	var out struct{ PauseRecipient struct{ State string } }
	b.env.MustGraphQL(b.tenant.Owner, `mutation($id: ID!){ pauseRecipient(id: $id){ state } }`, map[string]any{"id": strconv.Itoa(rec)}, &out)
	claims, err = clihub.ClaimForTest(ctx, b.env.DB.DB, later, 10, "cli:test:", clihub.NewAttached(rec, later))
	require.NoError(t, err)
	require.Empty(t, claims, "paused")
	require.Equal(t, entdelivery.StatusPENDING, b.delivery(t, req).Status)
	require.Zero(t, b.delivery(t, req).AttemptCount)
}

func TestReleaseUndoesAClaim(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := viewer.SystemContext(t.Context())
	srv, rec := b.cliRecipient(t, true)
	req := b.post(t, srv.Key)
	later := time.Now().UTC().Add(time.Minute)
	claims, err := clihub.ClaimForTest(ctx, b.env.DB.DB, later, 10, "cli:test:", clihub.NewAttached(rec, later))
	require.NoError(t, err)
	require.Len(t, claims, 1)

	stale := claims[0]
	stale.Owner = "cli:test:someone-else"
	require.NoError(t, clihub.ReleaseForTest(ctx, b.env.DB.DB, stale))
	require.Equal(t, entdelivery.StatusIN_PROGRESS, b.delivery(t, req).Status, "another lease is not released")

	require.NoError(t, clihub.ReleaseForTest(ctx, b.env.DB.DB, claims[0]))
	d := b.delivery(t, req)
	require.Equal(t, entdelivery.StatusPENDING, d.Status)
	require.Zero(t, d.AttemptCount)
	require.Nil(t, d.FirstAttemptAt)
	require.Empty(t, d.LeaseOwner)
}

func TestReportRecordsOnlyTheCurrentLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := viewer.SystemContext(t.Context())
	srv, rec := b.cliRecipient(t, true)
	req := b.post(t, srv.Key)
	now := time.Now().UTC()
	claims, err := clihub.ClaimForTest(ctx, b.env.DB.DB, now, 10, b.env.Relay.CLIHub.Owner(), clihub.NewAttached(rec, now))
	require.NoError(t, err)
	require.Len(t, claims, 1)
	c := claims[0]
	hub, client := b.env.Relay.CLIHub, b.env.DB.Client
	tenantID, _ := strconv.Atoi(b.tenant.ID)
	member := viewer.NewContext(t.Context(), viewer.Viewer{Role: viewer.Member, TenantID: tenantID, Subject: "m"})
	start := time.Now()
	report := clihub.Report{DeliveryID: c.DeliveryID, Attempt: c.Attempt, LeaseToken: c.Owner,
		StartedAt: start, FinishedAt: start.Add(12 * time.Millisecond), HTTPStatus: 200}

	other := viewer.NewContext(t.Context(), viewer.Viewer{Role: viewer.Member, TenantID: tenantID + 1000, Subject: "x"})
	_, err = hub.Report(other, client, report)
	require.Error(t, err, "another tenant's delivery is not found")

	wrong := report
	wrong.LeaseToken = c.Owner + "0"
	ok, err := hub.Report(member, client, wrong)
	require.NoError(t, err)
	require.False(t, ok, "not the lease")

	// A report is never dated after the server's now: let the CLI's 12 ms pass since the claim first.
	relaytest.Eventually(t, time.Second, "12ms since the claim", func() bool { return time.Since(now) > 15*time.Millisecond })
	ok, err = hub.Report(member, client, report)
	require.NoError(t, err)
	require.True(t, ok)
	d, err := client.Delivery.Query().Where(entdelivery.RequestID(req)).WithAttempts().Only(ctx)
	require.NoError(t, err)
	require.Equal(t, entdelivery.StatusSUCCEEDED, d.Status)
	require.Len(t, d.Edges.Attempts, 1)
	require.Equal(t, int64(12), d.Edges.Attempts[0].DurationMs, "the CLI's duration on the server's clock")

	ok, err = hub.Report(member, client, report)
	require.NoError(t, err)
	require.False(t, ok, "already recorded")
}

func TestReportValidatesTheOutcome(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hub := b.env.Relay.CLIHub
	ctx := viewer.SystemContext(t.Context())
	now := time.Now()
	base := clihub.Report{DeliveryID: 1, Attempt: 1, LeaseToken: "cli:x", StartedAt: now, FinishedAt: now}
	cases := map[string]func(r *clihub.Report){
		"no status and no error kind": func(r *clihub.Report) {},
		"a server-side error kind":    func(r *clihub.Report) { r.ErrorKind = delivery.ErrInterrupted },
		"HTTP_STATUS without status":  func(r *clihub.Report) { r.ErrorKind = delivery.ErrHTTPStatus },
		"finished before started":     func(r *clihub.Report) { r.HTTPStatus = 200; r.FinishedAt = now.Add(-time.Second) },
		"not a CLI lease":             func(r *clihub.Report) { r.HTTPStatus = 200; r.LeaseToken = "abc" },
		"a bogus status":              func(r *clihub.Report) { r.HTTPStatus = 42 },
	}
	for name, mutate := range cases {
		r := base
		mutate(&r)
		_, err := hub.Report(ctx, b.env.DB.Client, r)
		require.Error(t, err, name)
		require.Contains(t, err.Error(), "reportCliAttempt", name)
	}
}
