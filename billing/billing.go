// Package billing owns credits: plans, tenants' balances and the ledger. It is the only code that changes a
// balance, and every change is a conditional update plus a ledger entry in the caller's transaction, so a
// balance never goes below zero and always equals the sum of its ledger.
package billing

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/lib/pq"

	"github.com/adal-relay/adal/alert"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/ent/plan"
	"github.com/adal-relay/adal/ent/privacy"
	"github.com/adal-relay/adal/ent/tenant"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// Ledger reasons, named for what the credits paid for or came from.
const (
	ReasonPlanGrant       = ledgerentry.ReasonPLAN_GRANT
	ReasonCreditGrant     = ledgerentry.ReasonCREDIT_GRANT
	ReasonRequestAccepted = ledgerentry.ReasonREQUEST_ACCEPTED
	ReasonManualRetry     = ledgerentry.ReasonMANUAL_RETRY
	ReasonReplay          = ledgerentry.ReasonREPLAY
	ReasonPlanChange      = ledgerentry.ReasonPLAN_CHANGE
)

// MaxRetentionDays bounds the retention of plans and servers: ten years.
const MaxRetentionDays = 3650

// CreditsPerAction is what each billable action costs: an accepted request, a manual retry, a replay, an
// outbound job.
const CreditsPerAction = 1

// Service performs balance changes; it knows the SQL dialect for the one statement ent cannot express (a
// conditional update that returns the new balance).
type Service struct {
	dialect string
	now     func() time.Time
}

// New returns a billing service for a database of the given dialect.
func New(dialect string, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{dialect: dialect, now: now}
}

// Period names the billing period t falls in: calendar months, UTC.
func Period(t time.Time) string { return t.UTC().Format("2006-01") }

// Debit takes amount credits from the tenant, or fails with INSUFFICIENT_CREDITS and changes nothing. client
// must be bound to the caller's transaction: the debit commits or rolls back with what it pays for.
func (s *Service) Debit(ctx context.Context, client *ent.Client, tenantID int, amount int64, reason ledgerentry.Reason, reference string) (*ent.LedgerEntry, error) {
	const op = "billing.Debit"
	if amount <= 0 {
		return nil, fault.E(op, fault.InvalidInput, "debit amount must be positive")
	}
	balance, threshold, ok, err := s.add(ctx, client, tenantID, -amount)
	if err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	if !ok {
		return nil, fault.E(op, fault.InsufficientCredits, "not enough credits: %d needed", amount)
	}
	if CrossedLow(balance+amount, balance, threshold) {
		if err := s.alertLow(ctx, client, tenantID, balance, threshold); err != nil {
			return nil, fault.Wrap(op, fault.Internal, err)
		}
	}
	return s.record(ctx, client, tenantID, -amount, balance, reason, reference, nil)
}

// alertLow records a credits.low event for the tenant, whose balance crossed its threshold.
func (s *Service) alertLow(ctx context.Context, client *ent.Client, tenantID int, balance int64, threshold *int64) error {
	return alert.Record(ctx, client, alert.Event{TenantID: tenantID, Type: alert.CreditsLow, At: s.now(),
		Data: alert.Credits{Balance: balance, Threshold: threshold}})
}

// Credit adds amount credits to the tenant with a ledger entry; period is set for plan grants only.
func (s *Service) Credit(ctx context.Context, client *ent.Client, tenantID int, amount int64, reason ledgerentry.Reason, reference string, period *string) (*ent.LedgerEntry, error) {
	const op = "billing.Credit"
	if amount < 0 {
		return nil, fault.E(op, fault.InvalidInput, "credit amount must not be negative")
	}
	balance, _, ok, err := s.add(ctx, client, tenantID, amount)
	if err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	if !ok {
		return nil, fault.E(op, fault.NotFound, "tenant %d not found", tenantID)
	}
	return s.record(ctx, client, tenantID, amount, balance, reason, reference, period)
}

// add changes the balance by delta unless that would take it below zero, and returns the new balance and the
// tenant's low-credit threshold. One statement, so concurrent debits serialise on the row and never overdraw
// it. A credit ends a stretch of exhausted credits (MarkExhausted).
func (s *Service) add(ctx context.Context, client *ent.Client, tenantID int, delta int64) (int64, *int64, bool, error) {
	b := entsql.Dialect(s.dialect).Update(tenant.Table).
		Add(tenant.FieldCreditBalance, delta).
		Where(entsql.EQ(tenant.FieldID, tenantID))
	if delta < 0 {
		b.Where(entsql.GTE(tenant.FieldCreditBalance, -delta))
	}
	if delta > 0 {
		b.SetNull(tenant.FieldCreditsExhaustedAt)
	}
	query, args := b.Returning(tenant.FieldCreditBalance, tenant.FieldLowCreditThreshold).Query()
	rows, err := client.QueryContext(ctx, query, args...)
	if err != nil {
		return 0, nil, false, fmt.Errorf("update balance: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return 0, nil, false, rows.Err()
	}
	var balance int64
	var threshold *int64
	if err := rows.Scan(&balance, &threshold); err != nil {
		return 0, nil, false, fmt.Errorf("scan balance: %w", err)
	}
	return balance, threshold, true, rows.Close()
}

func (s *Service) record(ctx context.Context, client *ent.Client, tenantID int, amount, balance int64, reason ledgerentry.Reason, reference string, period *string) (*ent.LedgerEntry, error) {
	e, err := client.LedgerEntry.Create().
		SetTenantID(tenantID).
		SetReason(reason).
		SetAmount(amount).
		SetBalanceAfter(balance).
		SetReference(reference).
		SetNillablePeriod(period).
		SetCreatedAt(s.now()).
		Save(ctx)
	if err != nil {
		return nil, fault.Wrap("billing.record", fault.Internal, err)
	}
	return e, nil
}

// PlanInput is what defines a plan; nil fields of an update keep their value.
type PlanInput struct {
	Name                   *string
	MonthlyCredits         *int64
	RetentionDays          *int
	MaxServers             *int
	MaxRecipientsPerServer *int
	// MaxRequestsPerSecond caps each tenant's intake; ClearMaxRequestsPerSecond removes the cap.
	MaxRequestsPerSecond      *int
	ClearMaxRequestsPerSecond bool
	// Selectable lets tenant owners switch to the plan themselves (default false).
	Selectable *bool
}

func (in PlanInput) validate(op string, create bool) error {
	if create && (in.Name == nil || in.MonthlyCredits == nil || in.RetentionDays == nil || in.MaxServers == nil || in.MaxRecipientsPerServer == nil) {
		return fault.E(op, fault.InvalidInput, "name, monthlyCredits, retentionDays, maxServers and maxRecipientsPerServer are required")
	}
	switch {
	case in.Name != nil && strings.TrimSpace(*in.Name) == "":
		return fault.E(op, fault.InvalidInput, "name must not be empty")
	case in.MonthlyCredits != nil && *in.MonthlyCredits < 0:
		return fault.E(op, fault.InvalidInput, "monthlyCredits must be 0 or more")
	case in.RetentionDays != nil && (*in.RetentionDays < 1 || *in.RetentionDays > MaxRetentionDays):
		return fault.E(op, fault.InvalidInput, "retentionDays must be between 1 and %d", MaxRetentionDays)
	case in.MaxServers != nil && *in.MaxServers < 1:
		return fault.E(op, fault.InvalidInput, "maxServers must be 1 or more")
	case in.MaxRecipientsPerServer != nil && *in.MaxRecipientsPerServer < 1:
		return fault.E(op, fault.InvalidInput, "maxRecipientsPerServer must be 1 or more")
	case in.MaxRequestsPerSecond != nil && *in.MaxRequestsPerSecond < 1:
		return fault.E(op, fault.InvalidInput, "maxRequestsPerSecond must be 1 or more")
	}
	return nil
}

// CreatePlan defines a new plan.
func (s *Service) CreatePlan(ctx context.Context, client *ent.Client, in PlanInput) (*ent.Plan, error) {
	const op = "billing.CreatePlan"
	if err := in.validate(op, true); err != nil {
		return nil, err
	}
	p, err := client.Plan.Create().
		SetName(strings.TrimSpace(*in.Name)).
		SetMonthlyCredits(*in.MonthlyCredits).
		SetRetentionDays(*in.RetentionDays).
		SetMaxServers(*in.MaxServers).
		SetMaxRecipientsPerServer(*in.MaxRecipientsPerServer).
		SetNillableMaxRequestsPerSecond(in.MaxRequestsPerSecond).
		SetNillableSelectable(in.Selectable).
		Save(ctx)
	return p, storage.Err(op, "plan", err)
}

// UpdatePlan changes a plan. Limits apply to every tenant on it at once; a new monthly amount from the next
// period's grant.
func (s *Service) UpdatePlan(ctx context.Context, client *ent.Client, id int, in PlanInput) (*ent.Plan, error) {
	const op = "billing.UpdatePlan"
	if err := in.validate(op, false); err != nil {
		return nil, err
	}
	u := client.Plan.UpdateOneID(id)
	if in.Name != nil {
		u.SetName(strings.TrimSpace(*in.Name))
	}
	if in.MonthlyCredits != nil {
		u.SetMonthlyCredits(*in.MonthlyCredits)
	}
	if in.RetentionDays != nil {
		u.SetRetentionDays(*in.RetentionDays)
	}
	if in.MaxServers != nil {
		u.SetMaxServers(*in.MaxServers)
	}
	if in.MaxRecipientsPerServer != nil {
		u.SetMaxRecipientsPerServer(*in.MaxRecipientsPerServer)
	}
	if in.ClearMaxRequestsPerSecond {
		u.ClearMaxRequestsPerSecond()
	} else if in.MaxRequestsPerSecond != nil {
		u.SetMaxRequestsPerSecond(*in.MaxRequestsPerSecond)
	}
	if in.Selectable != nil {
		u.SetSelectable(*in.Selectable)
	}
	p, err := u.Save(ctx)
	return p, storage.Err(op, "plan", err)
}

// CreateTenant creates a tenant on a plan and grants the plan's credits for the current period, so a new
// tenant can accept requests at once.
func (s *Service) CreateTenant(ctx context.Context, client *ent.Client, name string, planID int) (*ent.Tenant, error) {
	const op = "billing.CreateTenant"
	name = strings.TrimSpace(name)
	if name == "" {
		return nil, fault.E(op, fault.InvalidInput, "name must not be empty")
	}
	p, err := client.Plan.Get(ctx, planID)
	if err != nil {
		return nil, storage.Err(op, "plan", err)
	}
	t, err := client.Tenant.Create().SetName(name).SetPlanID(p.ID).Save(ctx)
	if err != nil {
		return nil, storage.Err(op, "tenant", err)
	}
	period := Period(s.now())
	if _, err := s.Credit(ctx, client, t.ID, p.MonthlyCredits, ReasonPlanGrant, PlanReference(p.ID), &period); err != nil {
		return nil, err
	}
	return client.Tenant.Get(ctx, t.ID)
}

// GrantCredits adds credits by an operator's decision.
func (s *Service) GrantCredits(ctx context.Context, client *ent.Client, tenantID int, amount int64, reference string) (*ent.LedgerEntry, error) {
	const op = "billing.GrantCredits"
	if amount <= 0 {
		return nil, fault.E(op, fault.InvalidInput, "amount must be positive")
	}
	if _, err := client.Tenant.Get(ctx, tenantID); err != nil {
		return nil, storage.Err(op, "tenant", err)
	}
	return s.Credit(ctx, client, tenantID, amount, ReasonCreditGrant, reference, nil)
}

// ChangePlan moves a tenant to another plan. The rule: the new plan's limits and retention apply from now
// (to requests accepted from now on); credits already granted stay, and the new plan's monthly credits come
// with the next period's grant. A zero-amount PLAN_CHANGE ledger entry records the switch. An owner may pick
// only a selectable plan; operators assign any.
func (s *Service) ChangePlan(ctx context.Context, client *ent.Client, tenantID, planID int) (*ent.Tenant, error) {
	const op = "billing.ChangePlan"
	v, _ := viewer.FromContext(ctx)
	if !v.Global() && !(v.Role == viewer.Owner && v.TenantID == tenantID) {
		return nil, fault.E(op, fault.Forbidden, "only an operator or the tenant's owner can change its plan")
	}
	t, err := client.Tenant.Get(ctx, tenantID)
	if err != nil {
		return nil, storage.Err(op, "tenant", err)
	}
	// Read past the catalog's privacy filter, which hides the plans an owner may not pick: asking for one is
	// FORBIDDEN, not NOT_FOUND (a plan holds no tenant data, so its existence is no secret worth keeping).
	p, err := client.Plan.Get(privacy.DecisionContext(ctx, privacy.Allow), planID)
	if err != nil {
		return nil, storage.Err(op, "plan", err)
	}
	if t.PlanID == p.ID {
		return t, nil
	}
	if !mayPick(v, p) {
		return nil, fault.E(op, fault.Forbidden, "plan %q is not open to owners; an operator can assign it", p.Name)
	}
	// Tenants cannot write their own tenant row (the privacy policy); the check above is the authorisation,
	// and the decision context is limited to this one update.
	allow := privacy.DecisionContext(ctx, privacy.Allow)
	if err := client.Tenant.UpdateOneID(t.ID).Where(tenant.PlanID(t.PlanID)).SetPlanID(p.ID).Exec(allow); err != nil {
		return nil, storage.Err(op, "tenant", err)
	}
	// Read the balance again: debits may have committed since t was read, and the update above now holds the
	// row, so this is the balance the entry must record.
	changed, err := client.Tenant.Get(ctx, t.ID)
	if err != nil {
		return nil, storage.Err(op, "tenant", err)
	}
	if _, err := s.record(ctx, client, t.ID, 0, changed.CreditBalance, ReasonPlanChange, PlanChangeReference(t.PlanID, p.ID), nil); err != nil {
		return nil, err
	}
	return changed, nil
}

// mayPick reports whether the viewer may move a tenant to plan p: operators (and the system) any plan, owners
// only the selectable ones.
func mayPick(v viewer.Viewer, p *ent.Plan) bool { return v.Global() || p.Selectable }

// PlanOf returns the tenant's current plan.
func PlanOf(ctx context.Context, client *ent.Client, tenantID int) (*ent.Plan, error) {
	p, err := client.Tenant.Query().Where(tenant.ID(tenantID)).QueryPlan().Only(ctx)
	return p, storage.Err("billing.PlanOf", "plan", err)
}

// PlansOf returns the plans of tenants, by tenant ID: two reads however many tenants.
func PlansOf(ctx context.Context, client *ent.Client, tenantIDs []int) (map[int]*ent.Plan, error) {
	ts, err := client.Tenant.Query().Where(tenant.IDIn(tenantIDs...)).
		Select(tenant.FieldID, tenant.FieldPlanID).WithPlan().All(ctx)
	if err != nil {
		return nil, storage.Err("billing.PlansOf", "plan", err)
	}
	plans := make(map[int]*ent.Plan, len(ts))
	for _, t := range ts {
		plans[t.ID] = t.Edges.Plan
	}
	return plans, nil
}

// Want is a batch's need of credits from one tenant.
type Want struct {
	TenantID int
	N        int
}

// Reservation is credits granted to one tenant's batch of items under the tenant's lock, before the items
// have IDs to name in the ledger. Settle debits them and writes their ledger entries in the same transaction.
type Reservation struct {
	TenantID int
	// Granted is how many of the requested credits the balance allows (a prefix of the batch).
	Granted int
	// Before is the balance before the reservation.
	Before int64
	// RetentionDays is the retention of the tenant's plan as it stood under the lock: what the batch's
	// requests are kept for, at most.
	RetentionDays int
	// LowThreshold is the tenant's low-credit threshold under the lock (nil: none), for Settle's alert.
	LowThreshold *int64
}

// Reserve grants each tenant up to the credits it wants — as many as its balance allows — and reports how
// many, in the order of wants. One statement whatever the number of tenants: it locks the tenants' rows in id
// order (so two batches sharing tenants never deadlock) and reads their balances and plans. The rows stay
// locked until the transaction ends, so concurrent batches of one tenant serialise and never overdraw.
// Nothing is debited yet: Settle must follow in the same transaction, once the items exist. client must be
// bound to a transaction. A tenant that does not exist is NOT_FOUND. (Intake on PostgreSQL does not come
// here: its one statement locks, grants and debits with this package's SQL of the same rules, credits_sql.go.)
func (s *Service) Reserve(ctx context.Context, client *ent.Client, wants []Want) ([]Reservation, error) {
	const op = "billing.Reserve"
	if len(wants) == 0 {
		return nil, nil
	}
	ids := make([]int, len(wants))
	for i, w := range wants {
		ids[i] = w.TenantID
	}
	locked, err := s.lockTenants(ctx, client, ids)
	if err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	return grant(wants, locked)
}

// lockedTenant is what Reserve reads of a tenant under its lock.
type lockedTenant struct {
	Balance       int64
	RetentionDays int // of the tenant's plan
	LowThreshold  *int64
}

// grant is Reserve's arithmetic over the tenants it locked and read (locked, by tenant id). A tenant not in
// locked is NOT_FOUND.
func grant(wants []Want, locked map[int]lockedTenant) ([]Reservation, error) {
	out := make([]Reservation, len(wants))
	taken := make(map[int]int64, len(wants))
	for i, w := range wants {
		b, ok := locked[w.TenantID]
		if !ok {
			return nil, fault.E("billing.Reserve", fault.NotFound, "tenant %d not found", w.TenantID)
		}
		before := b.Balance - taken[w.TenantID] // a tenant named twice draws on what is left
		granted := 0
		for granted < w.N && Granted(granted+1, before) {
			granted++
		}
		out[i] = Reservation{TenantID: w.TenantID, Granted: granted, Before: before, RetentionDays: b.RetentionDays,
			LowThreshold: b.LowThreshold}
		taken[w.TenantID] += int64(out[i].Granted)
	}
	return out, nil
}

// lockTenants locks the tenants' rows in id order and reads their balances and plans' retention. On
// PostgreSQL the lock is NO KEY UPDATE, not UPDATE: it still serialises reservations of one tenant, but leaves
// alone the KEY SHARE locks that an insert referencing the tenant through a checked foreign key takes (a new
// server, recipient or outbound job) — with FOR UPDATE such inserts and a batch reserving several tenants could
// deadlock.
// SQLite transactions here take the write lock at BEGIN, which serialises them already.
func (s *Service) lockTenants(ctx context.Context, client *ent.Client, ids []int) (map[int]lockedTenant, error) {
	query, args := lockTenantsQuery.Of(s.dialect)(ids)
	rows, err := client.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("lock tenants: %w", err)
	}
	defer rows.Close()
	out := make(map[int]lockedTenant, len(ids))
	for rows.Next() {
		var id int
		var lt lockedTenant
		if err := rows.Scan(&id, &lt.Balance, &lt.RetentionDays, &lt.LowThreshold); err != nil {
			return nil, fmt.Errorf("scan tenant: %w", err)
		}
		out[id] = lt
	}
	return out, rows.Close()
}

// lockTenantsQuery is lockTenants' statement in each dialect.
var lockTenantsQuery = storage.PerDialect[func(ids []int) (string, []any)]{
	Postgres: func(ids []int) (string, []any) { return lockTenantsSQL, []any{pq.Array(ids)} },
	SQLite: func(ids []int) (string, []any) {
		t, p := entsql.Table(tenant.Table).As("t"), entsql.Table(plan.Table).As("p")
		return entsql.Dialect(dialect.SQLite).
			Select(t.C(tenant.FieldID), t.C(tenant.FieldCreditBalance), p.C(plan.FieldRetentionDays),
				t.C(tenant.FieldLowCreditThreshold)).
			From(t).Join(p).On(t.C(tenant.PlanColumn), p.C(plan.FieldID)).
			Where(entsql.InInts(t.C(tenant.FieldID), ids...)).
			OrderBy(t.C(tenant.FieldID)).
			Query()
	},
}

// settleSetWise is whether Settle is one statement: on PostgreSQL; on SQLite, whose single writer makes round
// trips cheap, two that ent writes.
var settleSetWise = storage.PerDialect[bool]{Postgres: true}

// Settle debits what the reservations granted and writes one ledger entry of one credit per reference
// (refs[i] for reservation i, len(refs[i]) == Granted). The tenants must still be locked by the Reserve of
// the same transaction, so the balances it read are the balances the entries record. On PostgreSQL the debit
// and the entries are one statement; on SQLite, whose single writer makes round trips cheap, two.
func (s *Service) Settle(ctx context.Context, client *ent.Client, rs []Reservation, reason ledgerentry.Reason, refs [][]string) error {
	return s.settle(ctx, client, rs, reason, refs, settleSetWise.Of(s.dialect))
}

// settle is Settle, in one statement (setWise, PostgreSQL only) or in two that ent writes.
func (s *Service) settle(ctx context.Context, client *ent.Client, rs []Reservation, reason ledgerentry.Reason, refs [][]string, setWise bool) error {
	const op = "billing.Settle"
	amounts := make(map[int]int64, len(rs))
	entries := 0
	for i, r := range rs {
		if len(refs[i]) != r.Granted {
			return fault.E(op, fault.Internal, "%d references for %d credits", len(refs[i]), r.Granted)
		}
		amounts[r.TenantID] += int64(r.Granted)
		entries += r.Granted
	}
	if entries == 0 {
		return nil
	}
	ids := make([]int, 0, len(amounts))
	for id, n := range amounts {
		if n > 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var err error
	if setWise {
		err = s.settlePostgres(ctx, client, rs, reason, refs, ids, entries)
	} else {
		err = s.settleSeparately(ctx, client, rs, reason, refs, ids, amounts)
	}
	if err != nil {
		return fault.Wrap(op, fault.Internal, err)
	}
	return nil
}

// settleSQL is Settle on PostgreSQL, of fixed text (prepared): the entries travel as three arrays, in the order
// Settle writes them, and DebitItems writes them and takes their credits in one statement.
var settleSQL = storage.Prepared(`
WITH v AS (
	SELECT * FROM unnest($3::bigint[], $4::bigint[], $5::text[]) WITH ORDINALITY AS v(tenant_id, balance_after, reference, n)
), ` + DebitItems{Entries: "entries", Debits: "take", Alerts: "low", From: "v", Tenant: "v.tenant_id", BalanceAfter: "v.balance_after",
	Reference: "v.reference", Order: "v.n", Reason: "$2", CreatedAt: "$1", Granted: "v"}.SQL() + `
SELECT (SELECT count(*) FROM take), (SELECT count(*) FROM entries)`)

// lockTenantsSQL is lockTenants on PostgreSQL, of fixed text (prepared) whatever the number of tenants.
var lockTenantsSQL = storage.Prepared(LockTenantsSQL("$1"))

// ledgerDebit is one credit taken from a tenant for one item: one ledger entry, and the balance it leaves.
type ledgerDebit struct {
	TenantID     int
	BalanceAfter int64
}

// ledgerDebits lists the entries that settling rs writes, in the order Settle writes them: each reservation's
// granted items in turn, each leaving one credit less than the one before.
func ledgerDebits(rs []Reservation) []ledgerDebit {
	n := 0
	for _, r := range rs {
		n += r.Granted
	}
	out := make([]ledgerDebit, 0, n)
	for _, r := range rs {
		for j := range r.Granted {
			out = append(out, ledgerDebit{TenantID: r.TenantID, BalanceAfter: BalanceAfter(r.Before, j+1)})
		}
	}
	return out
}

func (s *Service) settlePostgres(ctx context.Context, client *ent.Client, rs []Reservation, reason ledgerentry.Reason, refs [][]string, ids []int, entries int) error {
	tenants := make([]int64, 0, entries)
	after := make([]int64, 0, entries)
	for _, d := range ledgerDebits(rs) {
		tenants = append(tenants, int64(d.TenantID))
		after = append(after, d.BalanceAfter)
	}
	references := slices.Concat(refs...)
	rows, err := client.QueryContext(ctx, settleSQL, s.now(), string(reason), pq.Array(tenants), pq.Array(after),
		pq.Array(references))
	if err != nil {
		return fmt.Errorf("settle credits: %w", err)
	}
	defer rows.Close()
	var took, wrote int
	if !rows.Next() {
		return fmt.Errorf("settle credits: no result: %v", rows.Err())
	}
	if err := rows.Scan(&took, &wrote); err != nil {
		return fmt.Errorf("settle credits: %w", err)
	}
	if took != len(ids) || wrote != entries {
		return fmt.Errorf("settle credits: debited %d tenants of %d, wrote %d entries of %d", took, len(ids), wrote, entries)
	}
	return rows.Close()
}

// settleSeparately debits the tenants in one statement and inserts the entries in another.
func (s *Service) settleSeparately(ctx context.Context, client *ent.Client, rs []Reservation, reason ledgerentry.Reason, refs [][]string, ids []int, amounts map[int]int64) error {
	query, args := entsql.Dialect(s.dialect).Update(tenant.Table).
		Set(tenant.FieldCreditBalance, entsql.ExprFunc(func(b *entsql.Builder) {
			b.Ident(tenant.FieldCreditBalance).WriteString(" - CASE ").Ident(tenant.FieldID)
			for _, id := range ids {
				b.WriteString(" WHEN ").Arg(id).WriteString(" THEN CAST(").Arg(amounts[id]).WriteString(" AS BIGINT)")
			}
			b.WriteString(" END")
		})).
		Where(entsql.InInts(tenant.FieldID, ids...)).
		Query()
	res, err := client.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("take credits: %w", err)
	}
	if n, err := res.RowsAffected(); err == nil && n != int64(len(ids)) {
		return fmt.Errorf("took credits from %d tenants of %d", n, len(ids))
	}
	now := s.now()
	var builders []*ent.LedgerEntryCreate
	for i, r := range rs {
		for j, ref := range refs[i] {
			builders = append(builders, client.LedgerEntry.Create().
				SetTenantID(r.TenantID).
				SetReason(reason).
				SetAmount(-1).
				SetBalanceAfter(BalanceAfter(r.Before, j+1)).
				SetReference(ref).
				SetCreatedAt(now))
		}
	}
	if err := client.LedgerEntry.CreateBulk(builders...).Exec(ctx); err != nil {
		return err
	}
	// The reservations read each tenant's balance under its lock: the first of a tenant's is its balance before
	// this debit.
	before, taken := map[int]int64{}, map[int]int64{}
	thresholds := map[int]*int64{}
	for _, r := range rs {
		if _, ok := before[r.TenantID]; !ok {
			before[r.TenantID], thresholds[r.TenantID] = r.Before, r.LowThreshold
		}
		taken[r.TenantID] += int64(r.Granted)
	}
	for _, id := range ids {
		if after := before[id] - taken[id]; CrossedLow(before[id], after, thresholds[id]) {
			if err := s.alertLow(ctx, client, id, after, thresholds[id]); err != nil {
				return err
			}
		}
	}
	return nil
}
