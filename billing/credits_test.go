package billing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/lib/pq"
	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
)

// creditCases are tenants' balances and a batch of items, each naming the index of the tenant it is for, in
// arrival order.
var creditCases = []struct {
	name     string
	balances []int64
	items    []int
}{
	{"all granted", []int64{3}, []int{0, 0}},
	{"as far as the balance goes", []int64{2}, []int{0, 0, 0, 0}},
	{"exactly the balance", []int64{3}, []int{0, 0, 0}},
	{"no credit", []int64{0}, []int{0, 0}},
	{"tenants interleaved", []int64{1, 5, 0}, []int{0, 1, 2, 0, 1, 1, 2, 0}},
	{"one tenant of several", []int64{4, 4}, []int{1, 1, 1}},
}

// creditState is what a way of granting and debiting left, per tenant index: its balance and its ledger
// entries in the order they were written.
type creditState struct {
	Balances []int64
	Entries  [][]string // reason, amount, balance after, reference
}

// TestCreditsConformance holds the set-wise SQL of grants and debits (LockTenantsSQL, GrantedSQL,
// BalanceAfterSQL, DebitItems), as intake on PostgreSQL and Settle there assemble it, to Reserve and Settle
// as ent runs them: the same cases leave the same balances and ledger entries. SQLite cannot run
// data-modifying CTEs, so there the Go path runs alone, and the grant arithmetic is held to Granted and
// BalanceAfter on either database.
func TestCreditsConformance(t *testing.T) {
	t.Parallel()
	db, ctx := dbtest.OpenAsSystem(t)
	clock := func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) }
	svc := billing.New(db.Dialect, clock)
	plan, err := db.Client.Plan.Create().SetName("p").SetMonthlyCredits(0).SetRetentionDays(7).
		SetMaxServers(1).SetMaxRecipientsPerServer(1).Save(ctx)
	require.NoError(t, err)

	t.Run("arithmetic", func(t *testing.T) {
		for _, balance := range []int64{0, 1, 5} {
			for rank := 1; rank <= 7; rank++ {
				query := fmt.Sprintf("SELECT CASE WHEN %s THEN 1 ELSE 0 END, %s", billing.GrantedSQL(fmt.Sprint(rank),
					fmt.Sprint(balance)), billing.BalanceAfterSQL(fmt.Sprint(balance), fmt.Sprint(rank)))
				var granted int
				var after int64
				require.NoError(t, db.SQL.QueryRowContext(ctx, query).Scan(&granted, &after))
				require.Equal(t, billing.Granted(rank, balance), granted == 1, "rank %d of balance %d", rank, balance)
				require.Equal(t, billing.BalanceAfter(balance, rank), after, "rank %d of balance %d", rank, balance)
			}
		}
	})

	paths := map[string]func(t *testing.T, tenants []*ent.Tenant, items []int){
		"settle": func(t *testing.T, tenants []*ent.Tenant, items []int) {
			reserveAndSettle(t, ctx, db, svc, tenants, items, svc.Settle)
		},
		"intake": func(t *testing.T, tenants []*ent.Tenant, items []int) {
			debitAsIntake(t, ctx, db, tenants, items, clock())
		},
	}
	for _, c := range creditCases {
		t.Run(c.name, func(t *testing.T) {
			want := creditRun(t, ctx, db, plan.ID, c.balances, func(tenants []*ent.Tenant) {
				reserveAndSettle(t, ctx, db, svc, tenants, c.items, svc.SettleWithEnt)
			})
			if !db.Postgres() {
				return
			}
			for name, run := range paths {
				got := creditRun(t, ctx, db, plan.ID, c.balances, func(tenants []*ent.Tenant) { run(t, tenants, c.items) })
				require.Equal(t, want, got, "%s path", name)
			}
		})
	}
}

// creditRun creates fresh tenants with the balances, lets run grant and debit, and reads what it left.
func creditRun(t *testing.T, ctx context.Context, db *dbtest.DB, planID int, balances []int64, run func([]*ent.Tenant)) creditState {
	t.Helper()
	tenants := make([]*ent.Tenant, len(balances))
	for i, b := range balances {
		tenants[i] = tenantWith(t, ctx, db, planID, b)
	}
	run(tenants)
	var s creditState
	for _, tn := range tenants {
		s.Balances = append(s.Balances, balanceOf(t, ctx, db, tn.ID))
		var entries []string
		for _, e := range db.Client.LedgerEntry.Query().Where(ledgerentry.TenantID(tn.ID)).Order(ent.Asc(ledgerentry.FieldID)).AllX(ctx) {
			entries = append(entries, fmt.Sprintf("%s %d %d %s", e.Reason, e.Amount, e.BalanceAfter, e.Reference))
		}
		s.Entries = append(s.Entries, entries)
	}
	return s
}

// reserveAndSettle grants and debits the items as intake on SQLite does: one want per tenant, in tenant id
// order, then settle with a reference per item granted.
func reserveAndSettle(t *testing.T, ctx context.Context, db *dbtest.DB, svc *billing.Service, tenants []*ent.Tenant, items []int,
	settle func(context.Context, *ent.Client, []billing.Reservation, ledgerentry.Reason, [][]string) error) {
	t.Helper()
	byTenant := map[int][]int{} // tenant id → item numbers, in arrival order
	for n, i := range items {
		byTenant[tenants[i].ID] = append(byTenant[tenants[i].ID], n)
	}
	var wants []billing.Want
	for _, tn := range tenants {
		if len(byTenant[tn.ID]) > 0 {
			wants = append(wants, billing.Want{TenantID: tn.ID, N: len(byTenant[tn.ID])})
		}
	}
	slices.SortFunc(wants, func(a, b billing.Want) int { return a.TenantID - b.TenantID })
	require.NoError(t, storage.InTx(ctx, db.Client, func(ctx context.Context, tx *ent.Client) error {
		rs, err := svc.Reserve(ctx, tx, wants)
		if err != nil {
			return err
		}
		refs := make([][]string, len(rs))
		for k, r := range rs {
			for _, n := range byTenant[r.TenantID][:r.Granted] {
				refs[k] = append(refs[k], billing.RequestReference(n))
			}
		}
		return settle(ctx, tx, rs, billing.ReasonRequestAccepted, refs)
	}))
}

// debitAsIntake grants and debits the items in one statement assembled from billing's SQL as intake's
// statement assembles it: items ranked per tenant in arrival order, tenants locked, items granted, debited.
func debitAsIntake(t *testing.T, ctx context.Context, db *dbtest.DB, tenants []*ent.Tenant, items []int, now time.Time) {
	t.Helper()
	type row struct {
		N        int `json:"n"`
		TenantID int `json:"tenant_id"`
	}
	rows := make([]row, len(items))
	ids := make([]int64, len(tenants))
	for n, i := range items {
		rows[n] = row{N: n, TenantID: tenants[i].ID}
	}
	for i, tn := range tenants {
		ids[i] = int64(tn.ID)
	}
	payload, err := json.Marshal(rows)
	require.NoError(t, err)
	query := `
WITH q AS (
	SELECT * FROM json_to_recordset($1::json) AS q(n int, tenant_id bigint)
), t AS MATERIALIZED (` + billing.LockTenantsSQL("$2") + `
), g AS MATERIALIZED (
	SELECT q.*, ` + billing.BalanceAfterSQL("t.credit_balance", "q.rank") + ` AS balance_after
	FROM (SELECT q.*, row_number() OVER (PARTITION BY q.tenant_id ORDER BY q.n) AS rank FROM q) AS q
	JOIN t ON t.id = q.tenant_id
	WHERE ` + billing.GrantedSQL("q.rank", "t.credit_balance") + `
), ` + billing.DebitItems{Entries: "e", Debits: "u", Alerts: "lo", From: "g", Tenant: "g.tenant_id", BalanceAfter: "g.balance_after",
		Reference: billing.RequestReferenceSQL("g.n"), Order: "g.n", Reason: "$3::text", CreatedAt: "$4::timestamptz",
		Granted: "g"}.SQL() + `
SELECT (SELECT count(*) FROM e), (SELECT count(*) FROM u)`
	var entries, debited int
	require.NoError(t, db.SQL.QueryRowContext(ctx, query, payload, pq.Array(ids), string(billing.ReasonRequestAccepted), now).
		Scan(&entries, &debited))
}

// TestRequestReferenceConformance holds the SQL rendering of a request's ledger reference, which intake on
// PostgreSQL writes, to RequestReference, on the database under test.
func TestRequestReferenceConformance(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	for _, id := range []int{1, 42, 1 << 40} {
		var got string
		query := "SELECT " + billing.RequestReferenceSQL(strconv.Itoa(id))
		require.NoError(t, db.SQL.QueryRowContext(t.Context(), query).Scan(&got))
		require.Equal(t, billing.RequestReference(id), got)
	}
}
