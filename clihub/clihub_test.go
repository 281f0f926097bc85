package clihub_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/clihub"
	"github.com/adal-relay/adal/delivery"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

func TestReportRecordsOnlyTheCurrentLease(t *testing.T) {
	t.Parallel()
	b := relaytest.StartFixture(t, 100)
	ctx := viewer.SystemContext(t.Context())
	srv, rec := b.Env.NewCLIRecipient(b.Tenant, true)
	req := b.Env.Accept(srv.Key)
	hub, client := b.Env.Relay.CLIHub, b.Env.DB.Client
	l, err := hub.Attach(ctx, rec)
	require.NoError(t, err)
	defer l.Detach()
	next, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	j, ok := l.Next(next)
	require.True(t, ok, "the engine's CLI lane pushes the due delivery to the attached CLI")
	now := time.Now().UTC()
	c := j.Claim
	require.Equal(t, j.LeaseToken, c.Owner)
	require.Regexp(t, `^cli:[0-9a-f]+:[0-9a-f]{32}$`, c.Owner)
	tenantID := relaytest.RowID(t, b.Tenant.ID)
	member := viewer.NewContext(t.Context(), viewer.Viewer{Role: viewer.Member, TenantID: tenantID, Subject: "m"})
	start := time.Now()
	report := clihub.Report{DeliveryID: c.DeliveryID, Attempt: c.Attempt, LeaseToken: c.Owner,
		StartedAt: start, FinishedAt: start.Add(12 * time.Millisecond), HTTPStatus: 200}

	other := viewer.NewContext(t.Context(), viewer.Viewer{Role: viewer.Member, TenantID: tenantID + 1000, Subject: "x"})
	_, err = hub.Report(other, client, report)
	require.Error(t, err, "another tenant's delivery is not found")

	wrong := report
	wrong.LeaseToken = c.Owner + "0"
	ok, err = hub.Report(member, client, wrong)
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
	b := relaytest.StartFixture(t, 100)
	hub := b.Env.Relay.CLIHub
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
		"a negative Retry-After":      func(r *clihub.Report) { r.HTTPStatus = 503; r.RetryAfterSeconds = -1 },
	}
	for name, mutate := range cases {
		r := base
		mutate(&r)
		_, err := hub.Report(ctx, b.Env.DB.Client, r)
		require.Error(t, err, name)
		require.Contains(t, err.Error(), "reportCliAttempt", name)
	}
}
