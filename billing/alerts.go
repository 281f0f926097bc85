package billing

import (
	"context"

	"github.com/adal-relay/adal/alert"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/privacy"
	"github.com/adal-relay/adal/ent/tenant"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// SetLowCreditThreshold sets the balance under which the tenant's debits raise a credits.low alert (nil: no
// such alert). The tenant's owner or an operator sets it. A threshold set above the balance is a crossing of
// its own, unless the balance was already under the threshold it replaces: the alert is raised at once.
func (s *Service) SetLowCreditThreshold(ctx context.Context, client *ent.Client, tenantID int, threshold *int64) (*ent.Tenant, error) {
	const op = "billing.SetLowCreditThreshold"
	v, _ := viewer.FromContext(ctx)
	if !v.Global() && !(v.Role == viewer.Owner && v.TenantID == tenantID) {
		return nil, fault.E(op, fault.Forbidden, "only an operator or the tenant's owner can set its low-credit threshold")
	}
	if threshold != nil && *threshold < 1 {
		return nil, fault.E(op, fault.InvalidInput, "the threshold must be 1 or more; null removes it")
	}
	// Tenants cannot write their own tenant row (the privacy policy); the check above is the authorisation,
	// and the decision context is limited to this one update. The update locks the row, so the balance read
	// after it is the one debits will start from.
	allow := privacy.DecisionContext(ctx, privacy.Allow)
	old, err := client.Tenant.Get(ctx, tenantID)
	if err != nil {
		return nil, storage.Err(op, "tenant", err)
	}
	u := client.Tenant.UpdateOneID(tenantID)
	if threshold == nil {
		u.ClearLowCreditThreshold()
	} else {
		u.SetLowCreditThreshold(*threshold)
	}
	t, err := u.Save(allow)
	if err != nil {
		return nil, storage.Err(op, "tenant", err)
	}
	wasUnder := old.LowCreditThreshold != nil && t.CreditBalance < *old.LowCreditThreshold
	if threshold != nil && t.CreditBalance < *threshold && !wasUnder {
		if err := s.alertLow(ctx, client, tenantID, t.CreditBalance, threshold); err != nil {
			return nil, fault.Wrap(op, fault.Internal, err)
		}
	}
	return t, nil
}

// MarkExhausted records that intake refused a request of the tenant for want of credit, and reports whether
// this began a stretch of exhausted credits, which raises the credits.exhausted alert: once per stretch, as
// the mark is set by one conditional update and cleared by the next credit (add). client must be bound to a
// transaction, and ctx the system's.
func (s *Service) MarkExhausted(ctx context.Context, client *ent.Client, tenantID int) (bool, error) {
	const op = "billing.MarkExhausted"
	n, err := client.Tenant.Update().
		Where(tenant.ID(tenantID), tenant.CreditsExhaustedAtIsNil(), tenant.CreditBalanceLT(1)).
		SetCreditsExhaustedAt(s.now()).
		Save(ctx)
	if err != nil {
		return false, storage.Err(op, "tenant", err)
	}
	if n == 0 {
		return false, nil
	}
	if err := alert.Record(ctx, client, alert.Event{TenantID: tenantID, Type: alert.CreditsExhausted, At: s.now(),
		Data: alert.Credits{Balance: 0}}); err != nil {
		return false, fault.Wrap(op, fault.Internal, err)
	}
	return true, nil
}
