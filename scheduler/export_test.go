package scheduler

import (
	"context"
	"time"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/outbound"
)

// RecordOutbound records an outcome for the claim of attempt of an outbound job leased to owner, as a late
// report of a process would, and reports whether it was recorded.
func RecordOutbound(ctx context.Context, client *ent.Client, unit time.Duration, jobID, tenantID, attempt int, started time.Time, owner string, o delivery.Outcome) (bool, error) {
	c := outboundClaim{JobID: jobID, TenantID: tenantID, Attempt: attempt, MaxAttempts: outbound.MaxAttempts,
		FirstAttemptAt: started, StartedAt: started, Owner: owner}
	ok, _, err := recordOutboundTx(ctx, client, unit, []completion{{Completion: delivery.Completion{Outcome: o}, outbound: &c}})
	return ok[0], err
}
