package billing

import (
	"context"
	"fmt"
	"time"

	entsql "entgo.io/ent/dialect/sql"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/fault"
)

// Usage is what a tenant did and received in one billing period, as its ledger tells it. The ledger is the
// source because every billable action already writes exactly one entry there, in the action's transaction:
// usage can never disagree with what was charged.
type Usage struct {
	Period           string // "2006-01"
	RequestsAccepted int64  // inbound requests accepted (REQUEST_ACCEPTED entries)
	ManualRetries    int64  // retryDelivery calls (MANUAL_RETRY entries)
	Replays          int64  // replayRequest calls (REPLAY entries)
	CreditsSpent     int64  // credits debited, all reasons (outbound jobs included)
	CreditsGranted   int64  // credits added: plan grants and operators' grants
}

// PeriodBounds returns the half-open UTC interval [start, end) of a billing period named like Period's result.
func PeriodBounds(period string) (start, end time.Time, err error) {
	start, err = time.Parse("2006-01", period)
	if err != nil {
		return time.Time{}, time.Time{}, fault.E("billing.PeriodBounds", fault.InvalidInput, "period must look like 2006-01, got %q", period)
	}
	return start, start.AddDate(0, 1, 0), nil
}

// UsageOf returns a tenant's usage in period, from the ledger entries created within it. Tenancy is the data
// layer's: a tenant-scoped viewer asking about another tenant sees zeros, so callers authorise first.
func UsageOf(ctx context.Context, client *ent.Client, tenantID int, period string) (Usage, error) {
	all, err := UsageOfTenants(ctx, client, []int{tenantID}, period)
	if err != nil {
		return Usage{}, err
	}
	return all[tenantID], nil
}

// UsageOfTenants is UsageOf for several tenants in one query (the operators' tenant list). Every requested
// tenant has an entry in the result, zero if it had no ledger entries in the period.
func UsageOfTenants(ctx context.Context, client *ent.Client, tenantIDs []int, period string) (map[int]Usage, error) {
	const op = "billing.Usage"
	start, end, err := PeriodBounds(period)
	if err != nil {
		return nil, err
	}
	out := make(map[int]Usage, len(tenantIDs))
	for _, id := range tenantIDs {
		out[id] = Usage{Period: period}
	}
	if len(tenantIDs) == 0 {
		return out, nil
	}
	var rows []struct {
		TenantID int                `json:"tenant_id"`
		Reason   ledgerentry.Reason `json:"reason"`
		Count    int64              `json:"count"`
		Spent    int64              `json:"spent"`
		Granted  int64              `json:"granted"`
	}
	// Spent and granted are summed by sign rather than by reason, so a reason that may both credit and debit
	// (a future refund, say) is counted right.
	err = client.LedgerEntry.Query().
		Where(
			ledgerentry.TenantIDIn(tenantIDs...),
			ledgerentry.CreatedAtGTE(start),
			ledgerentry.CreatedAtLT(end),
		).
		GroupBy(ledgerentry.FieldTenantID, ledgerentry.FieldReason).
		Aggregate(countAs("count"), sumOfSign("spent", "<", "-"), sumOfSign("granted", ">", "")).
		Scan(ctx, &rows)
	if err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	for _, r := range rows {
		u := out[r.TenantID]
		switch r.Reason {
		case ReasonRequestAccepted:
			u.RequestsAccepted += r.Count
		case ReasonManualRetry:
			u.ManualRetries += r.Count
		case ReasonReplay:
			u.Replays += r.Count
		}
		u.CreditsSpent += r.Spent
		u.CreditsGranted += r.Granted
		out[r.TenantID] = u
	}
	return out, nil
}

// countAs is ent.Count with a column name every dialect agrees on.
func countAs(as string) ent.AggregateFunc {
	return func(*entsql.Selector) string { return entsql.As(entsql.Count("*"), as) }
}

// sumOfSign aggregates the amounts of one sign, as a positive number.
func sumOfSign(as, cmp, neg string) ent.AggregateFunc {
	return func(s *entsql.Selector) string {
		c := s.C(ledgerentry.FieldAmount)
		return entsql.As(fmt.Sprintf("CAST(COALESCE(SUM(CASE WHEN %s %s 0 THEN %s%s ELSE 0 END), 0) AS BIGINT)", c, cmp, neg, c), as)
	}
}

// MaxUsageMonths bounds how many periods UsageHistory reads at once.
const MaxUsageMonths = 24

// UsageHistory returns a tenant's usage in the months periods that end with the one now falls in, oldest
// first: one grouped read per period, so its cost follows the months asked for, not the entries.
func UsageHistory(ctx context.Context, client *ent.Client, tenantID int, now time.Time, months int) ([]Usage, error) {
	if months < 1 || months > MaxUsageMonths {
		return nil, fault.E("billing.UsageHistory", fault.InvalidInput, "months must be between 1 and %d", MaxUsageMonths)
	}
	current, _, err := PeriodBounds(Period(now))
	if err != nil {
		return nil, err
	}
	out := make([]Usage, 0, months)
	for i := months - 1; i >= 0; i-- {
		u, err := UsageOf(ctx, client, tenantID, Period(current.AddDate(0, -i, 0)))
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}
