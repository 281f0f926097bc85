package scheduler

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/startstop"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/tracing"
	"github.com/adal-relay/adal/webhook"
)

// The CLI lane pushes deliveries to CLIs attached to this process. The engine claims them under lease and hands
// them to the lane's executor, the CLI hub (CLIPusher), which queues them for the CLIs' subscriptions; a CLI
// makes the attempt against its local service and reports the outcome, which the hub records. The lane's
// capacity is not the engine's workers but the room the attached CLIs have (CLIReady.Free).

// CLILeasePrefix starts every CLI lease token, so a report can never name a direct delivery's lease.
const CLILeasePrefix = "cli:"

// CLIReady is a CLI recipient attached to this process with room for more jobs.
type CLIReady struct {
	RecipientID int
	// Since is when the longest-attached CLI of the recipient in this process attached: a backlog delivery
	// created after it was not created while disconnected (the heartbeat that marks new deliveries is
	// eventually consistent across processes), so it is not held back.
	Since time.Time
	// Free is how many more jobs the recipient's CLIs here may hold.
	Free int
}

// CLIJob is one attempt handed to a CLI: the claim that leases it and what to send to the local service.
type CLIJob struct {
	Claim delivery.Claim
	// LeaseToken is the claim's lease owner; the CLI passes it back with its report.
	LeaseToken string
	// Request is the stored request to forward.
	Request *ent.Request
	// IdempotencyKey is the request key when the recipient sends it, else empty.
	IdempotencyKey string
	// Timeout bounds the local call, reading the response included.
	Timeout time.Duration
	// Signature holds the headers that sign the attempt (delivery.SignerOf), made here, timestamped when the
	// attempt was claimed: the CLI never holds the recipient's secret.
	Signature http.Header
}

// CLIPusher is the CLI lane's executor (clihub.Hub): it knows the CLIs attached to this process and pushes
// claimed jobs to them. Both methods must be cheap and safe for concurrent use.
type CLIPusher interface {
	// Ready lists the attached recipients that have room for more jobs.
	Ready(now time.Time) []CLIReady
	// Push hands j to one of its recipient's CLIs, which may hold it until leaseExpiry; false when none can
	// take it any more (the engine then gives the claim back: no attempt started).
	Push(j CLIJob, leaseExpiry time.Time) bool
}

// The claim is claim.go's statement restricted to CLI recipients attached to this process (the VALUES list a). Backlog — a delivery created while no CLI was attached and never attempted — is skipped
// unless its server delivers pending requests on connect. Each claimed row gets a lease owner of its own
// (the hub's prefix plus random bytes), which doubles as the job's lease token: a CLI can only report the
// attempt it was given.

// claimCLI takes up to limit due deliveries of the given recipients, leased until now+lease to owner-prefixed
// lease tokens.
func claimCLI(ctx context.Context, db *storage.DB, now time.Time, limit int, lease time.Duration, owner string, recipients []CLIReady) ([]delivery.Claim, error) {
	if len(recipients) == 0 || limit <= 0 {
		return nil, nil
	}
	q := statements.For(db)
	args := []any{now, limit, now.Add(lease), owner}
	values := make([]string, len(recipients))
	for i, a := range recipients {
		n := len(args)
		values[i] = fmt.Sprintf(q.cliValue, n+1, n+2)
		args = append(args, a.RecipientID, a.Since)
	}
	rows, err := db.SQL.QueryContext(ctx, fmt.Sprintf(q.claimCLI, q.claimCLISet, strings.Join(values, ", ")), args...)
	if err != nil {
		return nil, fmt.Errorf("claim CLI deliveries: %w", err)
	}
	defer rows.Close()
	var claims []delivery.Claim
	for rows.Next() {
		c := delivery.Claim{StartedAt: now}
		var schedule string
		var first, expires storage.NullTime
		if err := rows.Scan(&c.DeliveryID, &c.TenantID, &c.RequestID, &c.RecipientID, &c.Attempt, &c.MaxAttempts,
			&schedule, &first, &expires, &c.Owner); err != nil {
			return nil, fmt.Errorf("scan CLI claim: %w", err)
		}
		c.Schedule = delivery.Schedule(schedule)
		c.FirstAttemptAt = now
		if first.Valid {
			c.FirstAttemptAt = first.Time
		}
		c.ExpiresAt = expires.Time
		claims = append(claims, c)
	}
	return claims, rows.Err()
}

// ReleaseCLI gives a claimed attempt back, as if it had never been claimed, when it was never handed to a CLI
// (the CLI detached first): no attempt started, so none may be spent. It is a no-op once the lease moved on.
func ReleaseCLI(ctx context.Context, db *storage.DB, c delivery.Claim) error {
	if _, err := db.SQL.ExecContext(ctx, statements.For(db).releaseCLI, c.DeliveryID, c.Attempt, c.Owner); err != nil {
		return fmt.Errorf("release delivery %d: %w", c.DeliveryID, err)
	}
	return nil
}

// nextDueCLI returns the earliest future due time of a pending delivery of the given recipients, so the loop
// sleeps exactly until a retry is due instead of waiting for the next poll.
func nextDueCLI(ctx context.Context, db *storage.DB, now time.Time, recipientIDs []int) (time.Time, bool, error) {
	if len(recipientIDs) == 0 {
		return time.Time{}, false, nil
	}
	param := statements.For(db).param
	ph := func(i int) string { return param + strconv.Itoa(i) }
	args := []any{now}
	in := make([]string, len(recipientIDs))
	for i, id := range recipientIDs {
		args = append(args, id)
		in[i] = ph(i + 2)
	}
	query := `SELECT MIN(next_attempt_at) FROM deliveries WHERE status = 'PENDING' AND next_attempt_at > ` + ph(1) +
		` AND recipient_id IN (` + strings.Join(in, ", ") + `)`
	var t storage.NullTime
	if err := db.SQL.QueryRowContext(ctx, query, args...).Scan(&t); err != nil {
		return time.Time{}, false, fmt.Errorf("next due CLI delivery: %w", err)
	}
	return t.Time, t.Valid, nil
}

// CLIOwner is the lease token prefix of this engine's CLI claims.
func (s *Scheduler) CLIOwner() string { return CLILeasePrefix + s.cfg.Owner + ":" }

// WakeCLI makes the CLI lane look for due jobs now (a delivery was created or rescheduled, a CLI attached or
// has room again). It never blocks.
func (s *Scheduler) WakeCLI() {
	select {
	case s.wakeCLI <- struct{}{}:
	default:
	}
}

// runCLI is the CLI lane's claim loop, beside the worker lanes' (run): its claims are bounded by the attached
// CLIs' room, not by worker slots, and its wake-ups do not run the direct claim.
func (s *Scheduler) runCLI(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	gap := time.NewTimer(time.Hour)
	defer gap.Stop()
	for {
		wait := s.cfg.PollInterval
		var full bool
		var ids []int
		var err error
		if perr := startstop.Recover(s.cfg.Logger, "CLI claim", func() { full, ids, err = s.dispatchCLI(ctx) }); perr != nil {
			err = perr // what it claimed and did not push waits for its lease to lapse, as after a crash
		}
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("claim CLI deliveries", "err", err)
		}
		if full {
			wait = 0 // more may be due right now
		} else if due, ok, err := nextDueCLI(ctx, s.cfg.DB, s.cfg.Now(), ids); err == nil && ok {
			wait = min(wait, due.Sub(s.cfg.Now()))
		}
		// Every delivery change wakes the lane; a burst of wake-ups is served by one claim per gap.
		gap.Reset(s.cfg.MinPollGap)
		if !startstop.Wait(ctx, gap.C, nil) {
			return
		}
		if wait -= s.cfg.MinPollGap; wait <= 0 {
			continue
		}
		timer.Reset(wait)
		if !startstop.Wait(ctx, timer.C, s.wakeCLI) {
			return
		}
	}
}

// dispatchCLI claims due jobs for the attached recipients with room and pushes them to their CLIs. It reports
// whether every free slot was filled (more may be due) and the recipients it looked at.
func (s *Scheduler) dispatchCLI(ctx context.Context) (full bool, ids []int, err error) {
	now := s.cfg.Now()
	ready := s.cfg.CLI.Ready(now)
	free := 0
	for _, r := range ready {
		free += r.Free
		ids = append(ids, r.RecipientID)
	}
	if free == 0 {
		return false, nil, nil
	}
	sort.Ints(ids)
	began := s.traceBegin()
	claims, err := claimCLI(ctx, s.cfg.DB, now, free, s.cfg.CLILease, s.CLIOwner(), ready)
	if err != nil {
		return false, ids, err
	}
	if len(claims) == 0 {
		return false, ids, nil
	}
	jobs, err := loadCLI(ctx, s.cfg.DB.Client, claims, s.cfg.Tracer)
	if err != nil {
		// The claims stay leased; the rescuer records them as interrupted and they are retried.
		return true, ids, err
	}
	if s.cfg.Tracer.On() {
		end := time.Now()
		for _, j := range jobs {
			delivery.TraceClaim(s.cfg.Tracer, j.Request.TraceParent, j.Claim, delivery.ClaimCLI, len(jobs), began, end)
		}
	}
	for _, j := range jobs {
		if !s.cfg.CLI.Push(j, now.Add(s.cfg.CLILease)) {
			// The CLI left between the claim and now: the attempt never started.
			if err := ReleaseCLI(ctx, s.cfg.DB, j.Claim); err != nil {
				s.cfg.Logger.Warn("release CLI job", "delivery", j.Claim.DeliveryID, "err", err)
			}
		}
	}
	return len(claims) == free, ids, nil
}

// loadCLI reads the requests and recipients of a batch of claims (delivery.LoadClaimed) and makes them jobs.
// While tracing is on, a job to a recipient with sendTraceparent carries, with its signature, the traceparent
// of its attempt's span: the CLI sets it as it sets the signature, and the span is recorded by whichever process
// the CLI's report reaches, under the span ID both derive from the lease token (tracing.SpanIDOf).
func loadCLI(ctx context.Context, client *ent.Client, claims []delivery.Claim, tracer *tracing.Tracer) ([]CLIJob, error) {
	loaded, err := delivery.LoadClaimed(ctx, client, claims)
	if err != nil {
		return nil, err
	}
	jobs := make([]CLIJob, 0, len(loaded))
	for _, l := range loaded {
		c, req, rec := l.Claim, l.Request, l.Recipient
		j := CLIJob{
			Claim:      c,
			LeaseToken: c.Owner,
			Request:    req,
			Timeout:    min(time.Duration(rec.TimeoutSeconds)*time.Second, delivery.DefaultTimeout),
		}
		if j.Timeout <= 0 {
			j.Timeout = delivery.DefaultTimeout
		}
		if rec.SendIdempotencyKey {
			j.IdempotencyKey = req.Key
		}
		j.Signature = http.Header{}
		delivery.SignerOf(rec, req.Key, c.StartedAt).Sign(j.Signature, c.StartedAt, req.Body)
		if tracer.On() && rec.SendTraceparent {
			if tp := tracing.ChildTraceParent(req.TraceParent, tracing.SpanIDOf(c.Owner)); tp != "" {
				j.Signature.Set(webhook.HeaderTraceparent, tp)
			}
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}
