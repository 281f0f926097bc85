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
	"github.com/adal-relay/adal/ent/outboundjob"
	"github.com/adal-relay/adal/outbound"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// Outbound records the attempts of outbound jobs (S2); outbound.Service implements it. The scheduler runs
// those jobs on the same worker slots and sender as deliveries, with the slots the deliveries leave.
type Outbound interface {
	Record(ctx context.Context, client *ent.Client, c outbound.Claim, o delivery.Outcome) (bool, error)
	// Timeout bounds one attempt, reading the response included.
	Timeout() time.Duration
}

// The outbound claim has the shape of the delivery claim (claim.go): due PENDING jobs become IN_PROGRESS
// under this process's lease, their attempt counted, in one statement that also returns what the attempt
// sends, so a batch costs one round trip.
const claimOutboundPostgres = `
WITH due AS (
	SELECT id FROM outbound_jobs
	WHERE status = 'PENDING' AND next_attempt_at <= $1
	ORDER BY next_attempt_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED
)
UPDATE outbound_jobs AS j SET
	status = 'IN_PROGRESS',
	attempt_count = j.attempt_count + 1,
	first_attempt_at = COALESCE(j.first_attempt_at, $1),
	attempt_started_at = $1,
	lease_expires_at = $3,
	lease_owner = $4
FROM due WHERE j.id = due.id
RETURNING j.id, j.tenant_id, j.attempt_count, j.max_attempts, j.first_attempt_at, j.store_response_body,
	j.url, j.method, j.headers, j.body`

const claimOutboundSQLite = `
UPDATE outbound_jobs SET
	status = 'IN_PROGRESS',
	attempt_count = attempt_count + 1,
	first_attempt_at = COALESCE(first_attempt_at, ?1),
	attempt_started_at = ?1,
	lease_expires_at = ?3,
	lease_owner = ?4
WHERE id IN (
	SELECT id FROM outbound_jobs
	WHERE status = 'PENDING' AND next_attempt_at <= ?1
	ORDER BY next_attempt_at
	LIMIT ?2
)
RETURNING id, tenant_id, attempt_count, max_attempts, first_attempt_at, store_response_body,
	url, method, headers, body`

// outboundJob is a claimed outbound attempt with what it sends.
type outboundJob struct {
	claim  outbound.Claim
	url    string
	method string
	header http.Header
	body   []byte
}

// claimOutbound takes up to limit due outbound jobs for owner.
func claimOutbound(ctx context.Context, db *storage.DB, now time.Time, limit int, lease time.Duration, owner string) ([]outboundJob, error) {
	query := claimOutboundSQLite
	if db.Postgres() {
		query = claimOutboundPostgres
	}
	rows, err := db.SQL.QueryContext(ctx, query, now, limit, now.Add(lease), owner)
	if err != nil {
		return nil, fmt.Errorf("claim outbound: %w", err)
	}
	defer rows.Close()
	var jobs []outboundJob
	for rows.Next() {
		j := outboundJob{claim: outbound.Claim{StartedAt: now, Owner: owner}}
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
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}

// dispatchOutbound claims up to free due outbound jobs and starts an attempt for each on a worker slot. It
// returns how many it started.
func (s *Scheduler) dispatchOutbound(ctx context.Context, free int) (int, error) {
	if s.cfg.Outbound == nil || free <= 0 {
		return 0, nil
	}
	jobs, err := claimOutbound(ctx, s.cfg.DB, s.cfg.Now(), free, s.cfg.Lease, s.cfg.Owner)
	if err != nil {
		return 0, err
	}
	if s.cfg.Observer != nil && len(jobs) > 0 {
		s.cfg.Observer.Claimed(len(jobs))
	}
	for _, j := range jobs {
		s.slots <- struct{}{}
		s.flights.Add(1)
		go func() {
			defer func() { <-s.slots; s.flights.Done(); s.Wake() }()
			s.attemptOutbound(j)
		}()
	}
	return len(jobs), nil
}

// attemptOutbound sends one outbound attempt and records its outcome. Like a delivery attempt it runs on a
// context of its own, so a shutdown lets it finish and be recorded. The sender reads the whole response
// within the timeout even when the body is not kept: an answer is only complete once fully read (S2).
func (s *Scheduler) attemptOutbound(j outboundJob) {
	ctx := viewer.SystemContext(context.Background())
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
	o := s.cfg.Sender.Send(ctx, out)
	if s.cfg.Observer != nil {
		s.cfg.Observer.Attempted(o)
	}
	if _, err := s.cfg.Outbound.Record(ctx, s.cfg.DB.Client, j.claim, o); err != nil {
		s.cfg.Logger.Error("record outbound attempt", "job", j.claim.JobID, "attempt", j.claim.Attempt, "err", err)
	}
}

// earliestDue is the earliest future due time of pending deliveries and, when the scheduler runs them,
// outbound jobs, in one round trip, so the loop sleeps exactly until the next retry of either.
func (s *Scheduler) earliestDue(ctx context.Context, now time.Time) (time.Time, bool, error) {
	if s.cfg.Outbound == nil {
		return nextDue(ctx, s.cfg.DB, now)
	}
	query := `SELECT MIN(t) FROM (
		SELECT MIN(next_attempt_at) AS t FROM deliveries WHERE status = 'PENDING' AND next_attempt_at > ?1
		UNION ALL
		SELECT MIN(next_attempt_at) AS t FROM outbound_jobs WHERE status = 'PENDING' AND next_attempt_at > ?1
	) due`
	if s.cfg.DB.Postgres() {
		query = `SELECT MIN(t) FROM (
		SELECT MIN(next_attempt_at) AS t FROM deliveries WHERE status = 'PENDING' AND next_attempt_at > $1
		UNION ALL
		SELECT MIN(next_attempt_at) AS t FROM outbound_jobs WHERE status = 'PENDING' AND next_attempt_at > $1
	) due`
	}
	var t storage.NullTime
	if err := s.cfg.DB.SQL.QueryRowContext(ctx, query, now).Scan(&t); err != nil {
		return time.Time{}, false, fmt.Errorf("next due: %w", err)
	}
	return t.Time, t.Valid, nil
}

// rescueOutbound settles outbound jobs whose lease expired: each gets a recorded INTERRUPTED attempt (it
// counts) and is rescheduled or failed like any failed attempt. It returns how many it settled.
func (r *Rescuer) rescueOutbound(ctx context.Context) (int, error) {
	if r.cfg.Outbound == nil {
		return 0, nil
	}
	total := 0
	for {
		now := r.cfg.Now()
		stale, err := r.cfg.DB.Client.OutboundJob.Query().
			Where(outboundjob.StatusEQ(outboundjob.StatusIN_PROGRESS), outboundjob.LeaseExpiresAtLT(now)).
			Select(outboundjob.FieldTenantID, outboundjob.FieldAttemptCount, outboundjob.FieldMaxAttempts,
				outboundjob.FieldFirstAttemptAt, outboundjob.FieldAttemptStartedAt, outboundjob.FieldLeaseOwner,
				outboundjob.FieldStoreResponseBody).
			Limit(r.cfg.BatchSize).
			All(ctx)
		if err != nil {
			return total, err
		}
		for _, j := range stale {
			c := outbound.Claim{
				JobID: j.ID, TenantID: j.TenantID, Attempt: j.AttemptCount, MaxAttempts: j.MaxAttempts,
				FirstAttemptAt: now, StartedAt: now, Owner: j.LeaseOwner, StoreResponseBody: j.StoreResponseBody,
			}
			if j.FirstAttemptAt != nil {
				c.FirstAttemptAt = *j.FirstAttemptAt
			}
			if j.AttemptStartedAt != nil {
				c.StartedAt = *j.AttemptStartedAt
			}
			o := delivery.Outcome{
				StartedAt: c.StartedAt, FinishedAt: now, ErrorKind: delivery.ErrInterrupted,
				ErrorMessage: "the process running this attempt stopped before recording its outcome",
			}
			ok, err := r.cfg.Outbound.Record(ctx, r.cfg.DB.Client, c, o)
			if err != nil {
				return total, err
			}
			if ok {
				total++
				r.cfg.Logger.Info("rescued interrupted outbound attempt", "job", j.ID, "attempt", j.AttemptCount)
			}
		}
		if len(stale) < r.cfg.BatchSize {
			return total, nil
		}
	}
}
