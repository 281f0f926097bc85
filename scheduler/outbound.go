package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/outboundattempt"
	"github.com/adal-relay/adal/ent/outboundjob"
	"github.com/adal-relay/adal/outbound"
	"github.com/adal-relay/adal/storage"
)

// Outbound is what the engine needs of the outbound service (outbound.Service implements it). Outbound jobs
// are a lane of the engine: claimed with the slots the deliveries leave, executed by the same HTTP sender on
// the same workers, their outcomes recorded by the completer and their lapsed leases settled by the rescuer.
type Outbound interface {
	// Timeout bounds one attempt, reading the response included.
	Timeout() time.Duration
}

// outboundClaim is an outbound job taken for one attempt: it is IN_PROGRESS, its attempt_count already counts
// this attempt, and its lease belongs to Owner until the lease expires.
type outboundClaim struct {
	JobID             int
	TenantID          int
	Attempt           int // the number of this attempt, from 1
	MaxAttempts       int
	FirstAttemptAt    time.Time
	StartedAt         time.Time
	Owner             string
	StoreResponseBody bool
}

// outboundJob is a claimed outbound attempt with what it sends.
type outboundJob struct {
	claim  outboundClaim
	url    string
	method string
	header http.Header
	body   []byte
}

// claimOutbound takes up to limit due outbound jobs for owner, at most each tenant's room (sh).
func claimOutbound(ctx context.Context, db *storage.DB, now time.Time, limit int, lease time.Duration, owner string, sh shares) ([]job, error) {
	rows, err := db.SQL.QueryContext(ctx, statements.For(db).claimOutbound, now, limit, now.Add(lease), owner,
		sh.rooms, sh.other, max(1, min(limit, sh.most)))
	if err != nil {
		return nil, fmt.Errorf("claim outbound: %w", err)
	}
	defer rows.Close()
	var jobs []job
	for rows.Next() {
		j := &outboundJob{claim: outboundClaim{StartedAt: now, Owner: owner}}
		var first storage.NullTime
		var header []byte
		if err := rows.Scan(&j.claim.JobID, &j.claim.TenantID, &j.claim.Attempt, &j.claim.MaxAttempts, &first,
			&j.claim.StoreResponseBody, &j.url, &j.method, &header, &j.body); err != nil {
			return nil, fmt.Errorf("scan outbound claim: %w", err)
		}
		j.claim.FirstAttemptAt = now
		if first.Valid {
			j.claim.FirstAttemptAt = first.Time
		}
		if len(header) > 0 {
			if err := json.Unmarshal(header, &j.header); err != nil {
				// Stored by the service from an http.Header, so this is corruption; the attempt still runs,
				// without the headers, rather than leaving the job leased.
				j.header = nil
			}
		}
		jobs = append(jobs, job{outbound: j})
	}
	return jobs, rows.Err()
}

// dispatchOutbound claims up to free due outbound jobs and starts an attempt for each on a worker. It returns
// how many it started.
func (s *Scheduler) dispatchOutbound(ctx context.Context, free int) (int, error) {
	if s.cfg.Outbound == nil || free <= 0 {
		return 0, nil
	}
	sh := s.fair.rooms()
	jobs, err := claimOutbound(ctx, s.cfg.DB, s.cfg.Now(), free, s.cfg.Lease, s.cfg.Owner, sh)
	if err != nil {
		return 0, err
	}
	// As if full: a tenant with no job due may still have deliveries waiting, which only their claim can tell.
	s.fair.claimed(sh, tookBy(jobs), nil, true)
	if s.cfg.Observer != nil && len(jobs) > 0 {
		s.cfg.Observer.Claimed(len(jobs))
	}
	s.start(jobs)
	return len(jobs), nil
}

// attemptOutbound is the outbound lane's executor: it sends one attempt and queues its outcome for the
// completer. The sender reads the whole response within the timeout even when the body is not kept: an answer
// is only complete once fully read.
func (s *Scheduler) attemptOutbound(j *outboundJob) {
	out := delivery.Outgoing{
		URL:          j.url,
		Method:       j.method,
		Header:       j.header,
		Body:         j.body,
		RequestID:    strconv.Itoa(j.claim.JobID),
		Attempt:      j.claim.Attempt,
		Timeout:      min(s.cfg.Outbound.Timeout(), AttemptBudget(s.cfg.Lease)),
		KeepResponse: j.claim.StoreResponseBody,
	}
	o := s.send(s.attemptCtx, out, "outbound attempt")
	if s.cfg.Observer != nil {
		s.cfg.Observer.Attempted(o)
	}
	s.finish(completion{Completion: delivery.Completion{Outcome: o}, outbound: &j.claim})
}

// recordOutboundAttempt stores the outcome of a claimed outbound attempt: the attempt row (with the response
// body when the job stores them, capped at outbound.MaxStoredResponse) and the job's new state by the engine's
// record rule (next). It reports false, changing nothing, when the claim is no longer the job's current one
// (the rescuer already recorded it as interrupted, or the job was purged); due says the job was rescheduled.
func recordOutboundAttempt(ctx context.Context, tx *ent.Client, unit time.Duration, c outboundClaim, o delivery.Outcome) (recorded, due bool, err error) {
	upd := delivery.EndLease(tx.OutboundJob.Update().
		Where(outboundjob.ID(c.JobID), outboundjob.StatusEQ(outboundjob.StatusIN_PROGRESS),
			outboundjob.AttemptCount(c.Attempt), outboundjob.LeaseOwner(c.Owner)))
	succeeded, nextAt := delivery.NextAttempt(c.Attempt, c.MaxAttempts, outbound.Schedule, c.FirstAttemptAt, o, unit)
	switch {
	case nextAt != nil:
		upd.SetStatus(outboundjob.StatusPENDING).SetNextAttemptAt(*nextAt)
	case succeeded:
		upd.SetStatus(outboundjob.StatusSUCCEEDED).ClearNextAttemptAt().SetFinishedAt(o.FinishedAt)
	default:
		upd.SetStatus(outboundjob.StatusFAILED).ClearNextAttemptAt().SetFinishedAt(o.FinishedAt)
	}
	n, err := upd.Save(ctx)
	if err != nil {
		return false, false, fmt.Errorf("update outbound job %d: %w", c.JobID, err)
	}
	if n == 0 {
		return false, false, nil
	}
	create := delivery.FillAttempt(tx.OutboundAttempt.Create().SetTenantID(c.TenantID).SetJobID(c.JobID), c.Attempt, o)
	if o.Succeeded() {
		create.SetStatus(outboundattempt.StatusSUCCEEDED)
	} else {
		create.SetStatus(outboundattempt.StatusFAILED).SetErrorKind(outboundattempt.ErrorKind(o.ErrorKind))
	}
	if o.HTTPStatus != 0 {
		if c.StoreResponseBody {
			body, truncated := o.ResponseBody, o.ResponseTruncated
			if len(body) > outbound.MaxStoredResponse {
				body, truncated = body[:outbound.MaxStoredResponse], true
			}
			if body == nil {
				body = []byte{} // an empty answer is stored as empty, not as "not stored"
			}
			create.SetResponseBody(body).SetResponseTruncated(truncated)
		}
	}
	if err := create.Exec(ctx); err != nil {
		return false, false, fmt.Errorf("insert attempt %d of outbound job %d: %w", c.Attempt, c.JobID, err)
	}
	return true, nextAt != nil, nil
}

// earliestDue is the earliest future due time of pending deliveries and, when the scheduler runs them,
// outbound jobs, in one round trip, so the loop sleeps exactly until the next retry of either.
func (s *Scheduler) earliestDue(ctx context.Context, now time.Time) (time.Time, bool, error) {
	if s.cfg.Outbound == nil {
		return nextDue(ctx, s.cfg.DB, now)
	}
	var t storage.NullTime
	if err := s.cfg.DB.SQL.QueryRowContext(ctx, statements.For(s.cfg.DB).nextDueWithOutbound, now).Scan(&t); err != nil {
		return time.Time{}, false, fmt.Errorf("next due: %w", err)
	}
	return t.Time, t.Valid, nil
}

// lapsedOutbound returns the outbound lane's lapsed claims, at most limit.
func lapsedOutbound(db *storage.DB) func(ctx context.Context, now time.Time, limit int) ([]completion, error) {
	return func(ctx context.Context, now time.Time, limit int) ([]completion, error) {
		stale, err := db.Client.OutboundJob.Query().
			Where(outboundjob.StatusEQ(outboundjob.StatusIN_PROGRESS), outboundjob.LeaseExpiresAtLT(now)).
			Select(outboundjob.FieldTenantID, outboundjob.FieldAttemptCount, outboundjob.FieldMaxAttempts,
				outboundjob.FieldFirstAttemptAt, outboundjob.FieldAttemptStartedAt, outboundjob.FieldLeaseOwner,
				outboundjob.FieldStoreResponseBody).
			Limit(limit).
			All(ctx)
		return interruptedEach(stale, err, func(j *ent.OutboundJob) completion {
			c := &outboundClaim{
				JobID: j.ID, TenantID: j.TenantID, Attempt: j.AttemptCount, MaxAttempts: j.MaxAttempts,
				FirstAttemptAt: now, StartedAt: now, Owner: j.LeaseOwner, StoreResponseBody: j.StoreResponseBody,
			}
			if j.FirstAttemptAt != nil {
				c.FirstAttemptAt = *j.FirstAttemptAt
			}
			if j.AttemptStartedAt != nil {
				c.StartedAt = *j.AttemptStartedAt
			}
			return completion{Completion: delivery.Completion{Outcome: interrupted(c.StartedAt, now)}, outbound: c}
		})
	}
}
