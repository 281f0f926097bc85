package scheduler

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/startstop"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// RescuerConfig configures a Rescuer.
type RescuerConfig struct {
	DB       *storage.DB
	Delivery *delivery.Service
	// Outbound, when set, has expired outbound leases settled the same way (scheduler/outbound.go).
	Outbound Outbound
	// Interval between sweeps. Default 10s, so an expired lease is settled well within a minute.
	Interval time.Duration
	// BatchSize bounds one sweep. Default 500.
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
}

// NewRescuer returns a rescuer; it does nothing until Start.
func NewRescuer(cfg RescuerConfig) (*Rescuer, error) {
	cfg.Interval = cmp.Or(cfg.Interval, 10*time.Second)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 500)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return time.Now().UTC() }
	}
	if cfg.DB == nil || cfg.Delivery == nil {
		return nil, errors.New("rescuer: DB and Delivery are required")
	}
	return &Rescuer{cfg: cfg}, nil
}

// Start sweeps every Interval until Stop or ctx ends.
func (r *Rescuer) Start(ctx context.Context) error {
	ctx, ok, stopped := r.StartInit(viewer.SystemContext(ctx))
	if !ok {
		return nil
	}
	go func() {
		defer stopped()
		ticker := time.NewTicker(r.cfg.Interval)
		defer ticker.Stop()
		for {
			if _, err := r.RescueOnce(ctx); err != nil && ctx.Err() == nil {
				r.cfg.Logger.Warn("rescue interrupted attempts", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return nil
}

// RescueOnce settles every delivery and outbound job whose lease has expired, and returns how many.
func (r *Rescuer) RescueOnce(ctx context.Context) (int, error) {
	ctx = viewer.SystemContext(ctx)
	total, err := r.rescueOutbound(ctx)
	if err != nil {
		return total, err
	}
	for {
		now := r.cfg.Now()
		stale, err := r.cfg.DB.Client.Delivery.Query().
			Where(entdelivery.StatusEQ(entdelivery.StatusIN_PROGRESS), entdelivery.LeaseExpiresAtLT(now)).
			WithRequest(func(q *ent.RequestQuery) { q.Select(request.FieldID, request.FieldServerID) }).
			Limit(r.cfg.BatchSize).
			All(ctx)
		if err != nil {
			return total, err
		}
		for _, d := range stale {
			c := delivery.Claim{
				DeliveryID: d.ID, TenantID: d.TenantID, RequestID: d.RequestID, RecipientID: d.RecipientID,
				Attempt: d.AttemptCount, MaxAttempts: d.MaxAttempts, Schedule: delivery.Schedule(d.RetrySchedule),
				Owner: d.LeaseOwner,
			}
			if d.Edges.Request != nil {
				c.ServerID = d.Edges.Request.ServerID
			}
			c.FirstAttemptAt = now
			if d.FirstAttemptAt != nil {
				c.FirstAttemptAt = *d.FirstAttemptAt
			}
			started := now
			if d.AttemptStartedAt != nil {
				started = *d.AttemptStartedAt
			}
			o := delivery.Outcome{
				StartedAt: started, FinishedAt: now, ErrorKind: delivery.ErrInterrupted,
				ErrorMessage: "the process running this attempt stopped before recording its outcome",
			}
			ok, err := r.cfg.Delivery.Record(ctx, r.cfg.DB.Client, c, o)
			if err != nil {
				return total, err
			}
			if ok {
				total++
				r.cfg.Logger.Info("rescued interrupted attempt", "delivery", d.ID, "attempt", d.AttemptCount)
			}
		}
		if len(stale) < r.cfg.BatchSize {
			return total, nil
		}
	}
}
