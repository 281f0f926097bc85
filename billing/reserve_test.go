package billing_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
)

// TestReserveSeveralTenants takes credits from several tenants at once: each gets what its balance allows, a
// prefix of what it wanted, and the ledger written for the reservations sums to the balances.
func TestReserveSeveralTenants(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	svc := billing.New(db.Dialect, time.Now)
	ctx, rich := newLedgerTenant(t, db, svc, 5)
	broke, poor := tenantWith(t, ctx, db, rich.PlanID, 0), tenantWith(t, ctx, db, rich.PlanID, 2)

	var got []billing.Reservation
	require.NoError(t, storage.InTx(ctx, db.Client, func(ctx context.Context, tx *ent.Client) error {
		var err error
		got, err = svc.Reserve(ctx, tx, []billing.Want{{TenantID: rich.ID, N: 3}, {TenantID: broke.ID, N: 1}, {TenantID: poor.ID, N: 5}})
		if err != nil {
			return err
		}
		refs := make([][]string, len(got))
		for i, r := range got {
			for j := range r.Granted {
				refs[i] = append(refs[i], fmt.Sprintf("request:%d-%d", i, j))
			}
		}
		return svc.Settle(ctx, tx, got, billing.ReasonRequestAccepted, refs)
	}))
	require.Equal(t, []billing.Reservation{
		{TenantID: rich.ID, Granted: 3, Before: 5, RetentionDays: 7},
		{TenantID: broke.ID, Granted: 0, Before: 0, RetentionDays: 7},
		{TenantID: poor.ID, Granted: 2, Before: 2, RetentionDays: 7},
	}, got)
	require.Equal(t, int64(2), balanceOf(t, ctx, db, rich.ID))
	require.Equal(t, int64(0), balanceOf(t, ctx, db, broke.ID))
	require.Equal(t, int64(0), balanceOf(t, ctx, db, poor.ID))
	checkLedger(t, ctx, db, rich.ID)
	for id, want := range map[int]int64{broke.ID: 0, poor.ID: -2} {
		var sum int64
		for _, e := range db.Client.LedgerEntry.Query().Where(ledgerentry.TenantID(id)).AllX(ctx) {
			sum += e.Amount
		}
		require.Equal(t, want, sum, "tenant %d: one entry of -1 per credit taken", id)
	}
}

// TestReserveUnknownTenantTakesNothing: a reservation naming a tenant that does not exist is NOT_FOUND, and
// the tenants it also named keep their credits.
func TestReserveUnknownTenantTakesNothing(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	svc := billing.New(db.Dialect, time.Now)
	ctx, tn := newLedgerTenant(t, db, svc, 5)
	err := storage.InTx(ctx, db.Client, func(ctx context.Context, tx *ent.Client) error {
		_, err := svc.Reserve(ctx, tx, []billing.Want{{TenantID: tn.ID, N: 2}, {TenantID: tn.ID + 1000, N: 1}})
		return err
	})
	require.Equal(t, fault.NotFound, fault.KindOf(err), "%v", err)
	require.Equal(t, int64(5), balanceOf(t, ctx, db, tn.ID))
}

// TestReserveTenantNamedTwice: a tenant named twice in one reservation gives the second what the first left,
// and settling loses exactly what both were granted, with an entry per credit.
func TestReserveTenantNamedTwice(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	svc := billing.New(db.Dialect, time.Now)
	ctx, tn := newLedgerTenant(t, db, svc, 4)
	var got []billing.Reservation
	require.NoError(t, storage.InTx(ctx, db.Client, func(ctx context.Context, tx *ent.Client) error {
		var err error
		got, err = svc.Reserve(ctx, tx, []billing.Want{{TenantID: tn.ID, N: 3}, {TenantID: tn.ID, N: 3}})
		if err != nil {
			return err
		}
		return svc.Settle(ctx, tx, got, billing.ReasonRequestAccepted, [][]string{{"a", "b", "c"}, {"d"}})
	}))
	require.Equal(t, []billing.Reservation{
		{TenantID: tn.ID, Granted: 3, Before: 4, RetentionDays: 7},
		{TenantID: tn.ID, Granted: 1, Before: 1, RetentionDays: 7},
	}, got)
	require.Equal(t, int64(0), balanceOf(t, ctx, db, tn.ID))
	checkLedger(t, ctx, db, tn.ID)
}

// TestReserveTakesNothingUntilSettled: the reservation only grants; a transaction that never settles debits
// nothing, and one that settles a grant of zero writes no entry.
func TestReserveTakesNothingUntilSettled(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	svc := billing.New(db.Dialect, time.Now)
	ctx, tn := newLedgerTenant(t, db, svc, 2)
	broke := tenantWith(t, ctx, db, tn.PlanID, 0)
	require.NoError(t, storage.InTx(ctx, db.Client, func(ctx context.Context, tx *ent.Client) error {
		got, err := svc.Reserve(ctx, tx, []billing.Want{{TenantID: tn.ID, N: 1}})
		if err != nil {
			return err
		}
		require.Equal(t, 1, got[0].Granted)
		return nil
	}))
	require.Equal(t, int64(2), balanceOf(t, ctx, db, tn.ID))
	require.NoError(t, storage.InTx(ctx, db.Client, func(ctx context.Context, tx *ent.Client) error {
		got, err := svc.Reserve(ctx, tx, []billing.Want{{TenantID: broke.ID, N: 3}})
		if err != nil {
			return err
		}
		return svc.Settle(ctx, tx, got, billing.ReasonRequestAccepted, [][]string{nil})
	}))
	require.Zero(t, db.Client.LedgerEntry.Query().Where(ledgerentry.TenantID(broke.ID)).CountX(ctx))
}

// tenantWith creates a tenant on the plan with the given balance (and no ledger: the test checks only what
// it reserves).
func tenantWith(t *testing.T, ctx context.Context, db *dbtest.DB, planID int, balance int64) *ent.Tenant {
	t.Helper()
	tn, err := db.Client.Tenant.Create().SetName("t").SetPlanID(planID).SetCreditBalance(balance).Save(ctx)
	require.NoError(t, err)
	return tn
}
