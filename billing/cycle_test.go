package billing_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/leader"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type testBundle struct {
	db      *dbtest.DB
	ctx     context.Context // system viewer
	clock   *relaytest.Clock
	billing *billing.Service
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	db := dbtest.Open(t)
	c := relaytest.NewClock(time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC))
	return &testBundle{
		db:      db,
		ctx:     viewer.SystemContext(context.Background()),
		clock:   c,
		billing: billing.New(db.Dialect, c.Now),
	}
}

// tenants creates n tenants on a plan granting credits a month; CreateTenant grants the current period.
func (b *testBundle) tenants(t *testing.T, n int, credits int64) []*ent.Tenant {
	t.Helper()
	name := "plan-" + randomHex(4)
	plan, err := b.billing.CreatePlan(b.ctx, b.db.Client, billing.PlanInput{
		Name: &name, MonthlyCredits: &credits, RetentionDays: ptr(7), MaxServers: ptr(1), MaxRecipientsPerServer: ptr(1),
	})
	require.NoError(t, err)
	var out []*ent.Tenant
	for range n {
		tn, err := b.billing.CreateTenant(b.ctx, b.db.Client, "tenant-"+randomHex(3), plan.ID)
		require.NoError(t, err)
		out = append(out, tn)
	}
	return out
}

func (b *testBundle) cycle(t *testing.T, client *ent.Client, configure ...func(*billing.CycleConfig)) *billing.Cycle {
	t.Helper()
	cfg := billing.CycleConfig{Client: client, Billing: b.billing, Leader: leader.Always{}, Logger: quiet}
	for _, f := range configure {
		f(&cfg)
	}
	c, err := billing.NewCycle(cfg)
	require.NoError(t, err)
	return c
}

// requireOneGrantPerPeriod checks the ledger: per tenant, exactly one plan grant in each of periods and none
// other, and a balance equal to the sum of its entries.
func (b *testBundle) requireOneGrantPerPeriod(t *testing.T, tenants []*ent.Tenant, credits int64, periods ...string) {
	t.Helper()
	for _, tn := range tenants {
		grants, err := b.db.Client.LedgerEntry.Query().
			Where(ledgerentry.TenantID(tn.ID), ledgerentry.ReasonEQ(billing.ReasonPlanGrant)).
			Order(ledgerentry.ByID()).All(b.ctx)
		require.NoError(t, err)
		got := make([]string, len(grants))
		for i, g := range grants {
			got[i] = *g.Period
			require.Equal(t, credits, g.Amount)
		}
		require.Equal(t, periods, got, "tenant %d", tn.ID)
		cur, err := b.db.Client.Tenant.Get(b.ctx, tn.ID)
		require.NoError(t, err)
		require.Equal(t, credits*int64(len(periods)), cur.CreditBalance, "balance of tenant %d", tn.ID)
	}
}

// setClock moves the clock to t.
func (b *testBundle) setClock(t time.Time) { b.clock.Advance(t.Sub(b.clock.Now())) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func ptr[T any](v T) *T { return &v }

func TestCycleConfigValidated(t *testing.T) {
	t.Parallel()
	_, err := billing.NewCycle(billing.CycleConfig{})
	require.ErrorContains(t, err, "Client is required")
	b := setup(t)
	_, err = billing.NewCycle(billing.CycleConfig{Client: b.db.Client, Billing: b.billing})
	require.ErrorContains(t, err, "Leader is required")
	_, err = billing.NewCycle(billing.CycleConfig{Client: b.db.Client, Billing: b.billing, Leader: leader.Always{}, Spec: "hourly-ish"})
	require.ErrorContains(t, err, "cron spec")
}

func TestCycleGrantsOncePerPeriod(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tenants := b.tenants(t, 3, 100)
	free := b.tenants(t, 1, 0) // a zero grant still marks the period as granted
	c := b.cycle(t, b.db.Client)

	// Created this period: CreateTenant made the grant; runs, however many, add nothing.
	for range 2 {
		st, err := c.GrantPeriod(context.Background())
		require.NoError(t, err)
		require.Equal(t, billing.CycleStats{Period: "2026-03", Tenants: 4, AlreadyGranted: 4}, st)
	}
	b.requireOneGrantPerPeriod(t, tenants, 100, "2026-03")

	// The month turns: one more grant each, once.
	b.setClock(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	st, err := c.GrantPeriod(context.Background())
	require.NoError(t, err)
	require.Equal(t, billing.CycleStats{Period: "2026-04", Tenants: 4, Granted: 4}, st)
	st, err = c.GrantPeriod(context.Background())
	require.NoError(t, err)
	require.Equal(t, 0, st.Granted)
	b.requireOneGrantPerPeriod(t, tenants, 100, "2026-03", "2026-04")
	b.requireOneGrantPerPeriod(t, free, 0, "2026-03", "2026-04")

	// Grants are dated in their period, so usage attributes them to it.
	u, err := billing.UsageOf(b.ctx, b.db.Client, tenants[0].ID, "2026-04")
	require.NoError(t, err)
	require.Equal(t, int64(100), u.CreditsGranted)
}

// Three processes run the cycle at the same moment: the unique (tenant, period) index lets exactly one grant
// through per tenant; the losers roll back, balance included.
func TestCycleConcurrentRunsGrantExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tenants := b.tenants(t, 20, 50)
	b.setClock(time.Date(2026, 4, 2, 3, 4, 5, 0, time.UTC))

	cycles := make([]*billing.Cycle, 3)
	for i := range cycles {
		client := b.db.Client
		if b.db.URL != "" {
			db, err := storage.Open(t.Context(), b.db.URL, "")
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			client = db.Client
		}
		cycles[i] = b.cycle(t, client)
	}
	var wg sync.WaitGroup
	stats := make([]billing.CycleStats, len(cycles))
	errs := make([]error, len(cycles))
	start := make(chan struct{})
	for i, c := range cycles {
		wg.Go(func() {
			<-start
			stats[i], errs[i] = c.GrantPeriod(context.Background())
		})
	}
	close(start)
	wg.Wait()

	granted := 0
	for i := range cycles {
		require.NoError(t, errs[i])
		require.Equal(t, len(tenants), stats[i].Tenants)
		require.Equal(t, len(tenants), stats[i].Granted+stats[i].AlreadyGranted)
		granted += stats[i].Granted
	}
	t.Logf("grants per process: %d, %d, %d", stats[0].Granted, stats[1].Granted, stats[2].Granted)
	require.Equal(t, len(tenants), granted, "one grant per tenant across the three runs")
	b.requireOneGrantPerPeriod(t, tenants, 50, "2026-03", "2026-04")
}

func TestScheduledCycleRunsOnTheLeader(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tenants := b.tenants(t, 1, 10)
	b.setClock(time.Date(2026, 5, 1, 0, 5, 0, 0, time.UTC))
	c := b.cycle(t, b.db.Client, func(cfg *billing.CycleConfig) { cfg.Spec = "@every 1s" })
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(c.Stop)

	require.Eventually(t, func() bool {
		ok, err := b.db.Client.LedgerEntry.Query().
			Where(ledgerentry.TenantID(tenants[0].ID), ledgerentry.Period("2026-05")).Exist(b.ctx)
		return err == nil && ok
	}, 10*time.Second, 20*time.Millisecond)
	c.Stop()
	b.requireOneGrantPerPeriod(t, tenants, 10, "2026-03", "2026-05")
}
