package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/retention"
	"github.com/adal-relay/adal/storage"
)

// The claim takes due, pending deliveries of recipients that may be attempted now (of requests not yet
// expired: an expired request awaits the purge and is never attempted), marks them IN_PROGRESS
// under this process's lease and counts the attempt, in one statement. On Postgres, SKIP LOCKED lets several
// processes claim side by side without ever taking the same row; SQLite has one writer, so a plain
// UPDATE … WHERE id IN (…) is already exclusive.
const claimPostgresTmpl = `
WITH due AS (
	SELECT d.id FROM deliveries d
	JOIN recipients r ON r.id = d.recipient_id
	JOIN requests q ON q.id = d.request_id AND %[3]s
	WHERE d.status = 'PENDING' AND d.next_attempt_at <= $1
	  AND r.method = 'DIRECT_HTTP' AND r.deleted_at IS NULL
	  AND %[2]s
	ORDER BY d.next_attempt_at
	LIMIT $2
	FOR UPDATE OF d SKIP LOCKED
), claimed AS (
	UPDATE deliveries AS d SET
		%[1]s
	FROM due WHERE d.id = due.id
	RETURNING d.id, d.tenant_id, d.request_id, d.recipient_id, d.attempt_count, d.max_attempts, d.retry_schedule,
		d.first_attempt_at
)
SELECT c.id, c.tenant_id, c.request_id, c.recipient_id, c.attempt_count, c.max_attempts, c.retry_schedule,
	c.first_attempt_at,
	q.server_id, q.key, q.method, q.path, q.query, q.headers, q.body,
	r.url, r.timeout_seconds, r.send_idempotency_key
FROM claimed c
JOIN requests q ON q.id = c.request_id
JOIN recipients r ON r.id = c.recipient_id`

const claimSQLiteTmpl = `
UPDATE deliveries SET
	%[1]s
WHERE id IN (
	SELECT d.id FROM deliveries d
	JOIN recipients r ON r.id = d.recipient_id
	JOIN requests q ON q.id = d.request_id AND %[3]s
	WHERE d.status = 'PENDING' AND d.next_attempt_at <= ?1
	  AND r.method = 'DIRECT_HTTP' AND r.deleted_at IS NULL
	  AND %[2]s
	ORDER BY d.next_attempt_at
	LIMIT ?2
)
RETURNING id, tenant_id, request_id, recipient_id, attempt_count, max_attempts, retry_schedule, first_attempt_at`

// The claim's recipient filter: the direct lane (its partial index holds nothing parked or CLI, so a parked
// backlog is never walked), or the one DISABLED recipient whose probe turn came, whatever the lane of its
// deliveries (they are parked).
var (
	livePostgres       = retention.LiveSQL("q.expires_at", "$1")
	liveSQLite         = retention.LiveSQL("q.expires_at", "?1")
	claimPostgres      = storage.Prepared(fmt.Sprintf(claimPostgresTmpl, delivery.ClaimSet("$1", "$3", "$4"), `d.lane = 'DIRECT' AND r.state = 'ACTIVE' AND $5::bigint = 0`, livePostgres))
	claimProbePostgres = storage.Prepared(fmt.Sprintf(claimPostgresTmpl, delivery.ClaimSet("$1", "$3", "$4"), `d.recipient_id = $5::bigint`, livePostgres))
	claimSQLite        = fmt.Sprintf(claimSQLiteTmpl, delivery.ClaimSet("?1", "?3", "?4"), `d.lane = 'DIRECT' AND r.state = 'ACTIVE' AND ?5 = 0`, liveSQLite)
	claimProbeSQLite   = fmt.Sprintf(claimSQLiteTmpl, delivery.ClaimSet("?1", "?3", "?4"), `d.recipient_id = ?5`, liveSQLite)
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
		if q.claimJoined {
			dest = append(dest, &j.request.ServerID, &j.request.Key, &j.request.Method, &j.request.Path,
				&j.request.Query, &headers, &j.request.Body,
				&j.recipient.URL, &j.recipient.TimeoutSeconds, &j.recipient.SendIdempotencyKey)
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
			if err := json.Unmarshal(headers, &j.request.Headers); err != nil {
				// Stored by intake from an http.Header: corruption. The attempt still runs, without them,
				// rather than leaving the delivery leased.
				j.request.Headers = nil
			}
			c.ServerID = j.request.ServerID
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
