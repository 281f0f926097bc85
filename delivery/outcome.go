package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/attempt"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/storage"
)

// Claim is a delivery taken for one attempt: it is IN_PROGRESS, its attempt_count already counts this
// attempt, and its lease belongs to Owner until the lease expires.
type Claim struct {
	DeliveryID     int
	TenantID       int
	RequestID      int
	ServerID       int
	RecipientID    int
	Attempt        int // the number of this attempt, from 1
	MaxAttempts    int
	Schedule       Schedule
	FirstAttemptAt time.Time
	StartedAt      time.Time
	Owner          string
}

// Record stores the outcome of a claimed attempt in one transaction: the Attempt row, the delivery's new
// state (SUCCEEDED, FAILED when attempts are used up, else PENDING with its next due time) and, when the
// delivery became final, its request's status. It reports false, changing nothing, when the claim is no
// longer the delivery's current one (the rescuer already recorded it as interrupted).
func (s *Service) Record(ctx context.Context, client *ent.Client, c Claim, o Outcome) (bool, error) {
	var recorded bool
	err := storage.InTx(ctx, client, func(ctx context.Context, tx *ent.Client) error {
		var err error
		recorded, err = s.record(ctx, tx, c, o)
		return err
	})
	return recorded, err
}

func (s *Service) record(ctx context.Context, tx *ent.Client, c Claim, o Outcome) (bool, error) {
	upd := tx.Delivery.Update().
		Where(entdelivery.ID(c.DeliveryID), entdelivery.StatusEQ(entdelivery.StatusIN_PROGRESS),
			entdelivery.AttemptCount(c.Attempt), entdelivery.LeaseOwner(c.Owner)).
		ClearLeaseExpiresAt().
		ClearAttemptStartedAt().
		SetLeaseOwner("")
	status, due := s.next(c, o)
	upd.SetStatus(status)
	if due != nil {
		upd.SetNextAttemptAt(*due)
	} else {
		upd.ClearNextAttemptAt().SetFinishedAt(o.FinishedAt)
	}
	n, err := upd.Save(ctx)
	if err != nil {
		return false, fmt.Errorf("update delivery %d: %w", c.DeliveryID, err)
	}
	if n == 0 {
		return false, nil
	}
	create := tx.Attempt.Create().
		SetTenantID(c.TenantID).
		SetDeliveryID(c.DeliveryID).
		SetNumber(c.Attempt).
		SetStartedAt(o.StartedAt).
		SetFinishedAt(o.FinishedAt).
		SetDurationMs(o.FinishedAt.Sub(o.StartedAt).Milliseconds()).
		SetErrorMessage(o.ErrorMessage)
	if o.Succeeded() {
		create.SetStatus(attempt.StatusSUCCEEDED)
	} else {
		create.SetStatus(attempt.StatusFAILED).SetErrorKind(attempt.ErrorKind(o.ErrorKind))
	}
	if o.HTTPStatus != 0 {
		create.SetHTTPStatus(o.HTTPStatus)
	}
	if err := create.Exec(ctx); err != nil {
		return false, fmt.Errorf("insert attempt %d of delivery %d: %w", c.Attempt, c.DeliveryID, err)
	}
	if err := s.updateHealth(ctx, tx, c.RecipientID, o); err != nil {
		return false, err
	}
	if due == nil {
		if err := RefreshRequestStatus(ctx, tx, c.RequestID); err != nil {
			return false, err
		}
	}
	s.notify(ctx, Change{TenantID: c.TenantID, ServerID: c.ServerID, RequestID: c.RequestID,
		DeliveryID: c.DeliveryID, Status: status, Kind: KindAttempt, Due: due})
	return true, nil
}

// next decides what follows an attempt: success ends the delivery, a failure with attempts left schedules
// the next one per the delivery's schedule, counted from the end of this attempt (EXPONENTIAL: from the
// first), and a failure of the last attempt fails it.
func (s *Service) next(c Claim, o Outcome) (entdelivery.Status, *time.Time) {
	if o.Succeeded() {
		return entdelivery.StatusSUCCEEDED, nil
	}
	if c.Attempt >= c.MaxAttempts {
		return entdelivery.StatusFAILED, nil
	}
	due := c.Schedule.NextDue(c.Attempt+1, c.FirstAttemptAt, o.FinishedAt, s.cfg.Unit)
	return entdelivery.StatusPENDING, &due
}
