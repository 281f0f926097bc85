package delivery

import (
	"context"
	"fmt"
	"slices"
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

// requestStatusSQL is DeriveRequestStatus as an aggregate over the rows of deliveries (their status column) of
// one request, for the statements that derive many requests' status at once. It is plain SQL that both
// databases run, so TestRequestStatusConformance holds it to DeriveRequestStatus on either.
const requestStatusSQL = `CASE
		WHEN count(*) FILTER (WHERE status IN ('PENDING', 'IN_PROGRESS')) > 0 THEN 'PENDING'
		WHEN count(*) FILTER (WHERE status = 'SUCCEEDED') = 0 THEN 'FAILED'
		WHEN count(*) FILTER (WHERE status = 'SUCCEEDED') = count(*) THEN 'DELIVERED'
		ELSE 'PARTIAL' END`

// RefreshRequestStatus recomputes the stored status of each request from its deliveries. Call it in the
// transaction that changed a delivery, so lists filtered by status never disagree with the deliveries.
func RefreshRequestStatus(ctx context.Context, client *ent.Client, requestIDs ...int) error {
	ids := slices.Clone(requestIDs)
	slices.Sort(ids) // one lock order for every transaction, so refreshing several requests cannot deadlock
	for _, id := range slices.Compact(ids) {
		// Lock the request row before reading its deliveries. Without it, two deliveries of one request that
		// finish at the same moment in two transactions (two workers, two processes) each read the other as
		// still in flight — PostgreSQL's READ COMMITTED shows neither uncommitted change — and both store
		// PENDING: the request would stay PENDING forever. With it the second waits for the first to commit,
		// then reads both outcomes. (SQLite transactions already hold the database's write lock; the
		// statement changes nothing there.) id is an int, so formatting it into the statement is safe.
		lock := fmt.Sprintf("UPDATE %s SET %s = %s WHERE %s = %d",
			request.Table, request.FieldStatus, request.FieldStatus, request.FieldID, id)
		if _, err := client.ExecContext(ctx, lock); err != nil {
			return fmt.Errorf("lock request %d: %w", id, err)
		}
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
