package delivery

import (
	"context"
	"fmt"
	"time"

	"github.com/adal-relay/adal/ent"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/request"
)

// DeriveRequestStatus is the request status for the statuses of its current deliveries (superseded ones left
// out): PENDING while any is pending or in progress, else DELIVERED when all succeeded, FAILED when none did
// (including a request that had no recipient to go to), PARTIAL otherwise.
func DeriveRequestStatus(statuses []entdelivery.Status) request.Status {
	succeeded := 0
	for _, s := range statuses {
		switch s {
		case entdelivery.StatusPENDING, entdelivery.StatusIN_PROGRESS:
			return request.StatusPENDING
		case entdelivery.StatusSUCCEEDED:
			succeeded++
		}
	}
	switch {
	case succeeded == 0:
		return request.StatusFAILED
	case succeeded == len(statuses):
		return request.StatusDELIVERED
	}
	return request.StatusPARTIAL
}

// RefreshRequestStatus recomputes the stored status of each request from its deliveries. Call it in the
// transaction that changed a delivery, so lists filtered by status never disagree with the deliveries.
func RefreshRequestStatus(ctx context.Context, client *ent.Client, requestIDs ...int) error {
	for _, id := range requestIDs {
		raw, err := client.Delivery.Query().
			Where(entdelivery.RequestID(id), entdelivery.Superseded(false)).
			Select(entdelivery.FieldStatus).
			Strings(ctx)
		if err != nil {
			return fmt.Errorf("request %d deliveries: %w", id, err)
		}
		statuses := make([]entdelivery.Status, len(raw))
		for i, s := range raw {
			statuses[i] = entdelivery.Status(s)
		}
		err = client.Request.Update().
			Where(request.ID(id)).
			SetStatus(DeriveRequestStatus(statuses)).
			Exec(ctx)
		if err != nil {
			return fmt.Errorf("request %d status: %w", id, err)
		}
	}
	return nil
}

// CancelPendingOfRecipients cancels every PENDING delivery to the given recipients (their recipient or server
// was deleted) and refreshes the affected requests. Attempts already in flight are not recalled.
func CancelPendingOfRecipients(ctx context.Context, client *ent.Client, now time.Time, recipientIDs ...int) error {
	if len(recipientIDs) == 0 {
		return nil
	}
	requestIDs, err := client.Delivery.Query().
		Where(entdelivery.RecipientIDIn(recipientIDs...), entdelivery.StatusEQ(entdelivery.StatusPENDING)).
		Unique(true).
		Select(entdelivery.FieldRequestID).
		Ints(ctx)
	if err != nil {
		return fmt.Errorf("pending deliveries: %w", err)
	}
	err = client.Delivery.Update().
		Where(entdelivery.RecipientIDIn(recipientIDs...), entdelivery.StatusEQ(entdelivery.StatusPENDING)).
		SetStatus(entdelivery.StatusCANCELED).
		SetFinishedAt(now).
		ClearNextAttemptAt().
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("cancel deliveries: %w", err)
	}
	return RefreshRequestStatus(ctx, client, requestIDs...)
}
