package billing_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
)

func int64Ptr(v int64) *int64 { return &v }
func valuePtr[T any](v T) *T  { return &v }

// newTenant creates a plan granting credits and a tenant on it, directly through the service.
func newLedgerTenant(t *testing.T, db *dbtest.DB, svc *billing.Service, credits int64) (context.Context, *ent.Tenant) {
	t.Helper()
	ctx := viewer.SystemContext(t.Context())
	p, err := svc.CreatePlan(ctx, db.Client, billing.PlanInput{
		Name: valuePtr("p"), MonthlyCredits: int64Ptr(credits), RetentionDays: valuePtr(7), MaxServers: valuePtr(1), MaxRecipientsPerServer: valuePtr(1),
	})
	require.NoError(t, err)
	var tn *ent.Tenant
	require.NoError(t, storage.InTx(ctx, db.Client, func(ctx context.Context, tx *ent.Client) error {
		tn, err = svc.CreateTenant(ctx, tx, "t", p.ID)
		return err
	}))
	require.Equal(t, credits, tn.CreditBalance)
	return ctx, tn
}

// openLedger opens a database with a billing service on the clock now (nil: the wall clock) and a tenant
// of credits.
func openLedger(t *testing.T, now func() time.Time, credits int64) (*dbtest.DB, *billing.Service, context.Context, *ent.Tenant) {
	t.Helper()
	db := dbtest.Open(t)
	svc := billing.New(db.Dialect, now)
	ctx, tn := newLedgerTenant(t, db, svc, credits)
	return db, svc, ctx, tn
}

func balanceOf(t *testing.T, ctx context.Context, db *dbtest.DB, id int) int64 {
	t.Helper()
	tn, err := db.Client.Tenant.Get(ctx, id)
	require.NoError(t, err)
	return tn.CreditBalance
}

// checkLedger asserts the ledger is a consistent history: each balance_after is the running sum, never
// negative, and the last equals the balance.
func checkLedger(t *testing.T, ctx context.Context, db *dbtest.DB, id int) []*ent.LedgerEntry {
	t.Helper()
	es, err := db.Client.LedgerEntry.Query().Where(ledgerentry.TenantID(id)).Order(ledgerentry.ByID()).All(ctx)
	require.NoError(t, err)
	var sum int64
	for _, e := range es {
		sum += e.Amount
		require.Equal(t, sum, e.BalanceAfter, "entry %d (%s)", e.ID, e.Reason)
		require.GreaterOrEqual(t, e.BalanceAfter, int64(0))
	}
	require.Equal(t, balanceOf(t, ctx, db, id), sum, "the ledger sums to the balance")
	return es
}

func TestDebitNeverBelowZero(t *testing.T) {
	t.Parallel()
	db, svc, ctx, tn := openLedger(t, nil, 3)

	debit := func(amount int64) error {
		return storage.InTx(ctx, db.Client, func(ctx context.Context, tx *ent.Client) error {
			_, err := svc.Debit(ctx, tx, tn.ID, amount, billing.ReasonRequestAccepted, "test")
			return err
		})
	}

	require.Equal(t, fault.InsufficientCredits, fault.KindOf(debit(4)), "more than the balance")
	require.EqualValues(t, 3, balanceOf(t, ctx, db, tn.ID), "a refused debit changes nothing")
	require.Len(t, checkLedger(t, ctx, db, tn.ID), 1, "and writes no entry")

	require.NoError(t, debit(2))
	require.EqualValues(t, 1, balanceOf(t, ctx, db, tn.ID))
	require.NoError(t, debit(1))
	require.EqualValues(t, 0, balanceOf(t, ctx, db, tn.ID))
	require.Equal(t, fault.InsufficientCredits, fault.KindOf(debit(1)), "nothing left")
	require.EqualValues(t, 0, balanceOf(t, ctx, db, tn.ID))

	require.Equal(t, fault.InvalidInput, fault.KindOf(debit(0)))
	require.Equal(t, fault.InvalidInput, fault.KindOf(debit(-5)), "a negative debit is not a credit")
	require.EqualValues(t, 0, balanceOf(t, ctx, db, tn.ID))

	es := checkLedger(t, ctx, db, tn.ID)
	require.Len(t, es, 3)
	require.Equal(t, ledgerentry.ReasonPLAN_GRANT, es[0].Reason)
	require.EqualValues(t, -2, es[1].Amount)
	require.EqualValues(t, 1, es[1].BalanceAfter)
	require.EqualValues(t, -1, es[2].Amount)
	require.EqualValues(t, 0, es[2].BalanceAfter)
	require.Equal(t, "test", es[2].Reference)
}

// TestDebitRollsBackWithItsTransaction: the debit lives in the caller's transaction, so when what it pays
// for fails, the credit is back and no entry remains.
func TestDebitRollsBackWithItsTransaction(t *testing.T) {
	t.Parallel()
	db, svc, ctx, tn := openLedger(t, nil, 5)
	boom := errors.New("what the credit paid for failed")
	err := storage.InTx(ctx, db.Client, func(ctx context.Context, tx *ent.Client) error {
		if _, err := svc.Debit(ctx, tx, tn.ID, 2, billing.ReasonRequestAccepted, "x"); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.EqualValues(t, 5, balanceOf(t, ctx, db, tn.ID))
	require.Len(t, checkLedger(t, ctx, db, tn.ID), 1)
}

func TestConcurrentDebits(t *testing.T) {
	t.Parallel()
	const credits, workers = 10, 40
	db, svc, ctx, tn := openLedger(t, nil, credits)

	var mu sync.Mutex
	kinds := map[fault.Kind]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := storage.InTx(ctx, db.Client, func(ctx context.Context, tx *ent.Client) error {
				_, err := svc.Debit(ctx, tx, tn.ID, 1, billing.ReasonRequestAccepted, "c")
				return err
			})
			k := fault.Kind("OK")
			if err != nil {
				k = fault.KindOf(err)
			}
			mu.Lock()
			kinds[k]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.Equal(t, map[fault.Kind]int{"OK": credits, fault.InsufficientCredits: workers - credits}, kinds)
	require.EqualValues(t, 0, balanceOf(t, ctx, db, tn.ID))
	require.Len(t, checkLedger(t, ctx, db, tn.ID), 1+credits)
}

func TestCreditAndPlanGrantOncePerPeriod(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)
	db, svc, ctx, tn := openLedger(t, func() time.Time { return now }, 100)

	es := checkLedger(t, ctx, db, tn.ID)
	require.Len(t, es, 1)
	require.Equal(t, ledgerentry.ReasonPLAN_GRANT, es[0].Reason)
	require.EqualValues(t, 100, es[0].Amount)
	require.NotNil(t, es[0].Period)
	require.Equal(t, "2026-11", *es[0].Period)
	require.Equal(t, "2026-11", billing.Period(now))

	// A second grant for the same period cannot happen, and leaves the balance alone.
	period := billing.Period(now)
	err := storage.InTx(ctx, db.Client, func(ctx context.Context, tx *ent.Client) error {
		_, err := svc.Credit(ctx, tx, tn.ID, 100, billing.ReasonPlanGrant, "again", &period)
		return err
	})
	require.Error(t, err)
	require.EqualValues(t, 100, balanceOf(t, ctx, db, tn.ID))

	next := billing.Period(now.AddDate(0, 1, 0))
	require.NoError(t, storage.InTx(ctx, db.Client, func(ctx context.Context, tx *ent.Client) error {
		_, err := svc.Credit(ctx, tx, tn.ID, 100, billing.ReasonPlanGrant, "next", &next)
		return err
	}))
	require.EqualValues(t, 200, balanceOf(t, ctx, db, tn.ID))

	_, err = svc.Credit(ctx, db.Client, tn.ID, -1, billing.ReasonCreditGrant, "neg", nil)
	require.Equal(t, fault.InvalidInput, fault.KindOf(err))
	_, err = svc.GrantCredits(ctx, db.Client, tn.ID+1000, 5, "nobody")
	require.Equal(t, fault.NotFound, fault.KindOf(err))
	checkLedger(t, ctx, db, tn.ID)
}

// TestPlanChangeEntryUnderConcurrentDebits: a PLAN_CHANGE entry records the balance as it is when the switch
// commits, even while requests are being paid for, so the ledger stays a consistent running sum.
func TestPlanChangeEntryUnderConcurrentDebits(t *testing.T) {
	t.Parallel()
	db, svc, ctx, tn := openLedger(t, nil, 200)
	other, err := svc.CreatePlan(ctx, db.Client, billing.PlanInput{
		Name: valuePtr("other"), MonthlyCredits: int64Ptr(1), RetentionDays: valuePtr(1), MaxServers: valuePtr(1), MaxRecipientsPerServer: valuePtr(1),
	})
	require.NoError(t, err)
	plans := []int{other.ID, tn.PlanID}

	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				_ = storage.InTx(ctx, db.Client, func(ctx context.Context, tx *ent.Client) error {
					_, err := svc.Debit(ctx, tx, tn.ID, 1, billing.ReasonRequestAccepted, "d")
					return err
				})
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 30 {
			err := storage.InTx(ctx, db.Client, func(ctx context.Context, tx *ent.Client) error {
				_, err := svc.ChangePlan(ctx, tx, tn.ID, plans[i%2])
				return err
			})
			if err != nil && fault.KindOf(err) != fault.NotFound {
				t.Errorf("change plan: %v", err)
			}
		}
	}()
	wg.Wait()
	require.EqualValues(t, 100, balanceOf(t, ctx, db, tn.ID))
	checkLedger(t, ctx, db, tn.ID)
}

// TestReserveSeveralTenants takes credits from several tenants at once: each gets what its balance allows, a
// prefix of what it wanted, and the ledger written for the reservations sums to the balances.
func TestReserveSeveralTenants(t *testing.T) {
	t.Parallel()
	db, svc, ctx, rich := openLedger(t, time.Now, 5)
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
	db, svc, ctx, tn := openLedger(t, time.Now, 5)
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
	db, svc, ctx, tn := openLedger(t, time.Now, 4)
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
	db, svc, ctx, tn := openLedger(t, time.Now, 2)
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

// An installation is empty until it has a plan (and so, a tenant can follow).
func TestEmpty(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	empty, err := billing.Empty(t.Context(), db.Client)
	require.NoError(t, err)
	require.True(t, empty, "a fresh database")

	newLedgerTenant(t, db, billing.New(db.Dialect, nil), 5)
	empty, err = billing.Empty(t.Context(), db.Client)
	require.NoError(t, err)
	require.False(t, empty, "with a plan and a tenant")
}
