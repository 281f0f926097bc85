package scheduler

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/storage"
)

// claim takes up to limit due deliveries of ACTIVE recipients for owner, with what their attempts send; probe,
// when not zero, also admits the deliveries of that (DISABLED) recipient. On PostgreSQL the claim returns the
// requests and recipients with the claimed rows, one round trip in all; SQLite's UPDATE … RETURNING cannot
// feed a join, and there a second and third query (in process, cheap) load them.
func claim(ctx context.Context, db *storage.DB, now time.Time, limit int, lease time.Duration, owner string, probe int) ([]job, error) {
	q := statements.For(db)
	query := q.claim
	if probe != 0 {
		query = q.claimProbe
	}
	rows, err := db.SQL.QueryContext(ctx, query, now, limit, now.Add(lease), owner, probe)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	defer rows.Close()
	var jobs []job
	for rows.Next() {
		c := delivery.Claim{StartedAt: now, Owner: owner}
		var schedule string
		var first storage.NullTime
		dest := []any{&c.DeliveryID, &c.TenantID, &c.RequestID, &c.RecipientID, &c.Attempt, &c.MaxAttempts, &schedule, &first}
		j := job{request: &ent.Request{}, recipient: &ent.Recipient{}}
		var headers []byte
		var previousUntil storage.NullTime
		var verified sql.NullBool
		if q.claimJoined {
			dest = append(dest, &j.request.ServerID, &j.request.Key, &j.request.Method, &j.request.Path,
				&j.request.Query, &headers, &j.request.Body, &verified,
				&j.recipient.URL, &j.recipient.TimeoutSeconds, &j.recipient.SendIdempotencyKey,
				&j.recipient.SigningSecret, &j.recipient.PreviousSigningSecret, &previousUntil, &j.recipient.SignatureHeaders)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("scan claim: %w", err)
		}
		c.Schedule = delivery.Schedule(schedule)
		c.FirstAttemptAt = now
		if first.Valid {
			c.FirstAttemptAt = first.Time
		}
		if q.claimJoined {
			j.request.ID, j.recipient.ID = c.RequestID, c.RecipientID
			if previousUntil.Valid {
				j.recipient.PreviousSecretExpiresAt = &previousUntil.Time
			}
			if err := json.Unmarshal(headers, &j.request.Headers); err != nil {
				// Stored by intake from an http.Header: corruption. The attempt still runs, without them,
				// rather than leaving the delivery leased.
				j.request.Headers = nil
			}
			c.ServerID = j.request.ServerID
			if verified.Valid {
				j.request.Verified = &verified.Bool
			}
		}
		j.claim = c
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if q.claimJoined || len(jobs) == 0 {
		return jobs, nil
	}
	claims := make([]delivery.Claim, len(jobs))
	for i, j := range jobs {
		claims[i] = j.claim
	}
	return load(ctx, db.Client, claims)
}

// nextDue returns the earliest future due time of a pending delivery, so the loop can sleep exactly until
// then instead of waiting for the next poll.
func nextDue(ctx context.Context, db *storage.DB, now time.Time) (time.Time, bool, error) {
	var t storage.NullTime
	if err := db.SQL.QueryRowContext(ctx, statements.For(db).nextDue, now).Scan(&t); err != nil {
		return time.Time{}, false, fmt.Errorf("next due: %w", err)
	}
	return t.Time, t.Valid, nil
}

// DueCount counts pending deliveries whose due time has passed, for the backlog gauge.
func DueCount(ctx context.Context, db *storage.DB, now time.Time) (int, error) {
	var n int
	err := db.SQL.QueryRowContext(ctx, statements.For(db).dueCount, now).Scan(&n)
	return n, err
}

// probeTurn hands out the probe turns of DISABLED recipients that have a due delivery: each such recipient
// whose probe time has come gets its next probe time set and is returned, once, to exactly one caller (the
// update takes the row), so a disabled recipient gets one probe per interval across all processes.
func probeTurn(ctx context.Context, db *storage.DB, now time.Time, every time.Duration) ([]int, error) {
	rows, err := db.SQL.QueryContext(ctx, statements.For(db).probeTurn, now.Add(every), now)
	if err != nil {
		return nil, fmt.Errorf("probe turns: %w", err)
	}
	defer rows.Close()
	var ids []int
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
