package scheduler

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/startstop"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/tracing"
	"github.com/adal-relay/adal/viewer"
)

// RescuerConfig configures a Rescuer.
type RescuerConfig struct {
	DB       *storage.DB
	Delivery *delivery.Service
	// Outbound, when set, has expired outbound leases settled the same way (scheduler/outbound.go).
	Outbound Outbound
	// Wake, when set, is called when a rescued outbound job is due again (Scheduler.WakeOutbound).
	Wake func()
	// WakeCapped, when set, is called when rescued attempts freed slots of capped recipients (Scheduler.Wake).
	WakeCapped func()
	// Tracer makes each interrupted attempt recorded a span of its request's trace (nil: off).
	Tracer *tracing.Tracer
	// Interval between sweeps. Default DefaultRescueInterval.
	Interval time.Duration
	// BatchSize bounds one statement of a sweep. Default DefaultRescueBatch.
	BatchSize int
	Logger    *slog.Logger
	Now       func() time.Time
}

// Rescuer settles attempts whose process died: a delivery still IN_PROGRESS after its lease expired gets a
// recorded INTERRUPTED attempt (it counts) and is rescheduled or failed by its schedule, so nothing is lost
// and attempts never exceed maxAttempts.
type Rescuer struct {
	startstop.BaseStartStop
	cfg RescuerConfig
	rec *recorder // used by one sweep at a time
}

// NewRescuer returns a rescuer; it does nothing until Start.
func NewRescuer(cfg RescuerConfig) (*Rescuer, error) {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultRescueInterval)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, DefaultRescueBatch)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Now == nil {
		cfg.Now = storage.Now
	}
	if cfg.DB == nil || cfg.Delivery == nil {
		return nil, errors.New("rescuer: DB and Delivery are required")
	}
	return &Rescuer{cfg: cfg, rec: newRecorder(cfg.DB, cfg.Delivery, cfg.Logger, cfg.Wake, cfg.WakeCapped)}, nil
}

// Start sweeps every Interval until Stop or ctx ends.
func (r *Rescuer) Start(ctx context.Context) error {
	sweep := func(ctx context.Context) {
		if _, err := r.RescueOnce(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("rescue interrupted attempts", "err", err)
		}
	}
	return r.Run(viewer.SystemContext(ctx), nil, func(ctx context.Context) {
		_ = startstop.Recover(r.cfg.Logger, "rescue sweep", func() { sweep(ctx) })
		startstop.Every(ctx, r.cfg.Logger, "rescue sweep", r.cfg.Interval, sweep)
	})
}

// RescueOnce settles every delivery and outbound job whose lease has expired, and returns how many. Each
// lane's lapsed claims become INTERRUPTED outcomes recorded by the engine's recorder, as the completer records
// finished attempts.
func (r *Rescuer) RescueOnce(ctx context.Context) (int, error) {
	ctx = viewer.SystemContext(ctx)
	lanes := []func(ctx context.Context, now time.Time, limit int) ([]completion, error){lapsedDeliveries(r.cfg.DB)}
	if r.cfg.Outbound != nil {
		lanes = append(lanes, lapsedOutbound(r.cfg.DB))
	}
	total := 0
	for _, lapsed := range lanes {
		for {
			batch, err := lapsed(ctx, r.cfg.Now(), r.cfg.BatchSize)
			if err != nil {
				return total, err
			}
			n := 0
			for i, ok := range r.rec.record(ctx, batch) {
				if ok {
					n++
					r.cfg.Logger.Info("rescued interrupted attempt", batch[i].logArgs()...)
					r.trace(batch[i])
				}
			}
			total += n
			// A short batch was the last; a full one of which nothing could be recorded would come back as it is.
			if len(batch) < r.cfg.BatchSize || n == 0 {
				break
			}
		}
	}
	return total, nil
}

// trace records the interrupted attempt c as a span of its request's trace: the process that ran it ended no
// span for it. A CLI attempt's span gets the ID its traceparent named (loadCLI), derived from its lease token.
func (r *Rescuer) trace(c completion) {
	if !r.cfg.Tracer.On() || c.traceParent == "" {
		return
	}
	var id trace.SpanID
	if strings.HasPrefix(c.Claim.Owner, CLILeasePrefix) {
		id = tracing.SpanIDOf(c.Claim.Owner)
	}
	if span := delivery.StartAttempt(r.cfg.Tracer, c.traceParent, c.Claim, c.Outcome.StartedAt, id); span != nil {
		delivery.EndAttempt(span, c.Outcome, c.Outcome.FinishedAt)
	}
}

// interrupted is the outcome recorded for an attempt whose lease lapsed.
func interrupted(started, now time.Time) delivery.Outcome {
	return delivery.Outcome{
		StartedAt: started, FinishedAt: now, ErrorKind: delivery.ErrInterrupted,
		ErrorMessage: "the process running this attempt stopped before recording its outcome",
	}
}

// lapsedDeliveries returns the direct and CLI lanes' lapsed claims, at most limit.
func lapsedDeliveries(db *storage.DB) func(ctx context.Context, now time.Time, limit int) ([]completion, error) {
	return func(ctx context.Context, now time.Time, limit int) ([]completion, error) {
		stale, err := db.Client.Delivery.Query().
			Where(entdelivery.StatusEQ(entdelivery.StatusIN_PROGRESS), entdelivery.LeaseExpiresAtLT(now)).
			WithRequest(func(q *ent.RequestQuery) {
				q.Select(request.FieldID, request.FieldServerID, request.FieldTraceParent)
			}).
			Limit(limit).
			All(ctx)
		return interruptedEach(stale, err, func(d *ent.Delivery) completion {
			c := delivery.Claim{
				DeliveryID: d.ID, TenantID: d.TenantID, RequestID: d.RequestID, RecipientID: d.RecipientID,
				Attempt: d.AttemptCount, MaxAttempts: d.MaxAttempts, Schedule: delivery.Schedule(d.RetrySchedule),
				Owner: d.LeaseOwner, Capped: d.Lane == entdelivery.LaneCAPPED, ExpiresAt: d.ExpiresAt,
			}
			var traceParent string
			if d.Edges.Request != nil {
				c.ServerID, traceParent = d.Edges.Request.ServerID, d.Edges.Request.TraceParent
			}
			c.FirstAttemptAt = now
			if d.FirstAttemptAt != nil {
				c.FirstAttemptAt = *d.FirstAttemptAt
			}
			started := now
			if d.AttemptStartedAt != nil {
				started = *d.AttemptStartedAt
			}
			return completion{Completion: delivery.Completion{Claim: c, Outcome: interrupted(started, now)}, traceParent: traceParent}
		})
	}
}

// interruptedEach is the completions of the lapsed rows stale (read with err), one per row by complete.
func interruptedEach[T any](stale []T, err error, complete func(T) completion) ([]completion, error) {
	if err != nil {
		return nil, err
	}
	batch := make([]completion, len(stale))
	for i, row := range stale {
		batch[i] = complete(row)
	}
	return batch, nil
}
