package billing_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/viewer"
)

func TestUsageCountsThePeriodsLedger(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, client := b.ctx, b.db.Client
	tenants := b.tenants(t, 2, 100) // March grant of 100 each
	acme, other := tenants[0].ID, tenants[1].ID

	debit := func(tenantID int, reason ledgerentry.Reason, n int) {
		t.Helper()
		for range n {
			_, err := b.billing.Debit(ctx, client, tenantID, 1, reason, "test")
			require.NoError(t, err)
		}
	}
	debit(acme, billing.ReasonRequestAccepted, 3)
	debit(acme, billing.ReasonManualRetry, 2)
	debit(acme, billing.ReasonReplay, 1)
	_, err := b.billing.GrantCredits(ctx, client, acme, 50, "goodwill")
	require.NoError(t, err)
	debit(other, billing.ReasonRequestAccepted, 7) // someone else's usage is not acme's
	// The last instant of March is March; the first of April is April.
	b.setClock(time.Date(2026, 3, 31, 23, 59, 59, 999_000_000, time.UTC))
	debit(acme, billing.ReasonRequestAccepted, 1)
	b.setClock(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	debit(acme, billing.ReasonRequestAccepted, 1)
	debit(acme, billing.ReasonReplay, 1)

	march, err := billing.UsageOf(ctx, client, acme, "2026-03")
	require.NoError(t, err)
	require.Equal(t, billing.Usage{
		Period: "2026-03", RequestsAccepted: 4, ManualRetries: 2, Replays: 1, CreditsSpent: 7, CreditsGranted: 150,
	}, march)

	april, err := billing.UsageOf(ctx, client, acme, "2026-04")
	require.NoError(t, err)
	require.Equal(t, billing.Usage{Period: "2026-04", RequestsAccepted: 1, Replays: 1, CreditsSpent: 2}, april)

	empty, err := billing.UsageOf(ctx, client, acme, "2025-12")
	require.NoError(t, err)
	require.Equal(t, billing.Usage{Period: "2025-12"}, empty)

	all, err := billing.UsageOfTenants(ctx, client, []int{acme, other, 999999}, "2026-03")
	require.NoError(t, err)
	require.Equal(t, march, all[acme])
	require.Equal(t, billing.Usage{Period: "2026-03", RequestsAccepted: 7, CreditsSpent: 7, CreditsGranted: 100}, all[other])
	require.Equal(t, billing.Usage{Period: "2026-03"}, all[999999])

	// An owner reads their own usage; the data layer hides another tenant's.
	owner := viewer.NewContext(t.Context(), viewer.Viewer{Role: viewer.Owner, TenantID: acme})
	own, err := billing.UsageOf(owner, client, acme, "2026-03")
	require.NoError(t, err)
	require.Equal(t, march, own)
	hidden, err := billing.UsageOf(owner, client, other, "2026-03")
	require.NoError(t, err)
	require.Equal(t, billing.Usage{Period: "2026-03"}, hidden)
}

func TestUsageRejectsMalformedPeriod(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, p := range []string{"", "2026-13", "2026-3", "March", "2026-03-01"} {
		_, err := billing.UsageOf(b.ctx, b.db.Client, 1, p)
		require.Equal(t, fault.InvalidInput, fault.KindOf(err), "period %q", p)
	}
}
