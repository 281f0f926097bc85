package scheduler

import (
	"context"
	"time"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/outbound"
	"github.com/adal-relay/adal/storage"
)

// RecordOutbound records an outcome for the claim of attempt of an outbound job leased to owner, as a late
// report of a process would, and reports whether it was recorded.
func RecordOutbound(ctx context.Context, client *ent.Client, unit time.Duration, jobID, tenantID, attempt int, started time.Time, owner string, o delivery.Outcome) (bool, error) {
	c := outboundClaim{JobID: jobID, TenantID: tenantID, Attempt: attempt, MaxAttempts: outbound.MaxAttempts,
		FirstAttemptAt: started, StartedAt: started, Owner: owner}
	ok, _, err := recordOutboundTx(ctx, client, unit, []completion{{Completion: delivery.Completion{Outcome: o}, outbound: &c}})
	return ok[0], err
}

// ClaimCLIForTest is the CLI lane's claim statement, with a one-minute lease.
func ClaimCLIForTest(ctx context.Context, db *storage.DB, now time.Time, limit int, owner string, recipients ...CLIReady) ([]delivery.Claim, error) {
	return claimCLI(ctx, db, now, limit, time.Minute, owner, recipients)
}
