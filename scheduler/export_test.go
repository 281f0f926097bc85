package scheduler

import (
	"context"
	"slices"
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

// HandOff is what intake's hand-off grants of want, slots free, in a process of workers with share for a tenant
// alone, where flying attempts are in flight and the waiting tenants have due work left for want of room.
func HandOff(workers int, share float64, flying map[int]int, waiting []int, want map[int]int, slots int) map[int]int {
	f := newFairShare(workers, share, 1)
	for t, n := range flying {
		f.add(t, n)
	}
	for _, t := range waiting {
		f.waiting[t] = true
	}
	granted, _ := f.reserve(want, slots)
	return granted
}

// ClaimThenHandOff runs one claim's bookkeeping in a process of workers with share for a tenant alone, where
// flying attempts are in flight and the waiting tenants had due work left: the claim, given the process's
// rooms, took took and reported left (nil: it could not tell). It returns the tenants waiting afterwards, and
// what intake's hand-off then grants of want.
func ClaimThenHandOff(workers int, share float64, flying map[int]int, waiting []int, took map[int]int, left map[int]bool, want map[int]int) ([]int, map[int]int) {
	f := newFairShare(workers, share, 1)
	for t, n := range flying {
		f.add(t, n)
	}
	for _, t := range waiting {
		f.waiting[t] = true
	}
	f.claimed(f.rooms(), took, left, false)
	for t, n := range took {
		f.add(t, n)
	}
	var after []int
	for t := range f.waiting {
		after = append(after, t)
	}
	slices.Sort(after)
	granted, _ := f.reserve(want, workers)
	return after, granted
}

// ClaimForTest runs the direct lanes' claim at now for up to limit deliveries, given the rooms of a process of
// workers (a tenant alone may take them all) where flying attempts are in flight and the waiting tenants had due
// work left. It returns what the claim took by tenant, and what it left (nil where it cannot tell).
func ClaimForTest(ctx context.Context, db *storage.DB, now time.Time, limit, workers int, flying map[int]int, waiting []int) (map[int]int, map[int]bool, error) {
	f := newFairShare(workers, 1, 1)
	for t, n := range flying {
		f.add(t, n)
	}
	for _, t := range waiting {
		f.waiting[t] = true
	}
	jobs, left, err := claim(ctx, db, now, limit, time.Minute, "test", f.rooms())
	return tookBy(jobs), left, err
}
