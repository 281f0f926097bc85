package billing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/ent/tenant"
	"github.com/adal-relay/adal/leader"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// Defaults of CycleConfig.
const (
	// DefaultCycleSpec checks hourly: a tenant gets its new period's credits within an hour of the month turning.
	DefaultCycleSpec = "@every 1h"
	// cyclePage is how many tenants one step of a run loads, so a run's memory does not grow with the tenants.
	cyclePage = 500
)

// CycleConfig configures a Cycle.
type CycleConfig struct {
	// Client is the database. Required.
	Client *ent.Client
	// Billing makes the grants; its clock decides the current period (and stamps the ledger entries, so a
	// grant's created_at always falls in its period). Required.
	Billing *Service
	// Leader gates the scheduled runs. Required (leader.Always{} for a lone process). Correctness does not
	// depend on it — the database refuses a second grant — it only spares the followers the work.
	Leader leader.Status
	// Spec is the robfig/cron schedule; default DefaultCycleSpec.
	Spec string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *CycleConfig) validate() error {
	switch {
	case c.Client == nil:
		return errors.New("billing: CycleConfig.Client is required")
	case c.Billing == nil:
		return errors.New("billing: CycleConfig.Billing is required")
	case c.Leader == nil:
		return errors.New("billing: CycleConfig.Leader is required")
	}
	return nil
}

// CycleStats describes one run of the billing cycle.
type CycleStats struct {
	Period         string // the period granted
	Tenants        int    // tenants looked at
	Granted        int    // grants made by this run
	AlreadyGranted int    // tenants that had the period's grant (from CreateTenant, an earlier run, or another process)
}

// Cycle grants every tenant its plan's monthly credits once per billing period. Exactly once is the database's
// doing: a plan grant carries its period, and the unique (tenant_id, period) index of the ledger refuses a
// second one, whichever process or run attempts it.
type Cycle struct {
	cfg CycleConfig
	job *leader.Cron
}

// NewCycle validates cfg and returns a stopped Cycle.
func NewCycle(cfg CycleConfig) (*Cycle, error) {
	cfg.Spec = cmp.Or(cfg.Spec, DefaultCycleSpec)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Cycle{cfg: cfg}
	job, err := leader.NewCron(leader.CronConfig{
		Name:   "billing-cycle",
		Spec:   cfg.Spec,
		Leader: cfg.Leader,
		Run:    c.run,
		Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	c.job = job
	return c, nil
}

// Start schedules the grants until ctx ends or Stop is called.
func (c *Cycle) Start(ctx context.Context) error { return c.job.Start(ctx) }

// Stop unschedules the grants and waits for a run in progress.
func (c *Cycle) Stop() { c.job.Stop() }

func (c *Cycle) run(ctx context.Context) error {
	st, err := c.GrantPeriod(ctx)
	level := slog.LevelDebug
	if st.Granted > 0 || err != nil {
		level = slog.LevelInfo
	}
	c.cfg.Logger.Log(ctx, level, "plan grants", "period", st.Period, "tenants", st.Tenants,
		"granted", st.Granted, "already_granted", st.AlreadyGranted)
	return err
}

// GrantPeriod grants the current period's plan credits to every tenant that has not had them, one transaction
// per tenant. It is safe to run any number of times, from any number of processes at once. A tenant whose grant
// fails does not hold the others back: the run goes on and returns the failures together.
func (c *Cycle) GrantPeriod(ctx context.Context) (CycleStats, error) {
	ctx = viewer.SystemContext(ctx)
	st := CycleStats{Period: Period(c.cfg.Billing.now())}
	var failed []error
	for after := 0; ; {
		page, err := c.cfg.Client.Tenant.Query().
			Where(tenant.IDGT(after)).
			Order(tenant.ByID()).
			Limit(cyclePage).
			WithPlan().
			All(ctx)
		if err != nil {
			return st, errors.Join(append(failed, fmt.Errorf("billing cycle: list tenants: %w", err))...)
		}
		if len(page) == 0 {
			return st, errors.Join(failed...)
		}
		after = page[len(page)-1].ID
		ids := make([]int, len(page))
		for i, t := range page {
			ids[i] = t.ID
		}
		// Most runs find every tenant granted: one indexed query instead of a failing transaction each.
		done, err := c.cfg.Client.LedgerEntry.Query().
			Where(ledgerentry.Period(st.Period), ledgerentry.TenantIDIn(ids...)).
			Select(ledgerentry.FieldTenantID).
			Ints(ctx)
		if err != nil {
			return st, errors.Join(append(failed, fmt.Errorf("billing cycle: find grants: %w", err))...)
		}
		granted := make(map[int]bool, len(done))
		for _, id := range done {
			granted[id] = true
		}
		for _, t := range page {
			st.Tenants++
			if granted[t.ID] {
				st.AlreadyGranted++
				continue
			}
			ok, err := c.grant(ctx, t, st.Period)
			if err != nil {
				if ctx.Err() != nil {
					return st, ctx.Err()
				}
				failed = append(failed, err)
				continue
			}
			if ok {
				st.Granted++
			} else {
				st.AlreadyGranted++
			}
		}
	}
}

// grant credits one tenant for period in its own transaction and reports whether this call made the grant. A
// unique violation rolls the transaction (balance included) back: someone else granted first.
func (c *Cycle) grant(ctx context.Context, t *ent.Tenant, period string) (bool, error) {
	plan := t.Edges.Plan
	err := storage.InTx(ctx, c.cfg.Client, func(ctx context.Context, tx *ent.Client) error {
		_, err := c.cfg.Billing.Credit(ctx, tx, t.ID, plan.MonthlyCredits, ReasonPlanGrant, PlanReference(plan.ID), &period)
		return err
	})
	if err == nil {
		return true, nil
	}
	if ent.IsConstraintError(err) {
		// Make sure the constraint was the period's and not something else before calling it done.
		exists, qerr := c.cfg.Client.LedgerEntry.Query().
			Where(ledgerentry.TenantID(t.ID), ledgerentry.Period(period)).
			Exist(ctx)
		if qerr == nil && exists {
			return false, nil
		}
	}
	return false, fmt.Errorf("billing cycle: grant %s to tenant %d: %w", period, t.ID, err)
}
