package clihub

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/storage"
)

// attached is one recipient with CLIs attached to this process, as the claim sees it.
type attached struct {
	recipientID int
	// since is when the longest-attached CLI of the recipient in this process attached: a backlog delivery
	// created after it was not created while disconnected (the heartbeat that marks new deliveries is
	// eventually consistent across processes), so it is not held back.
	since time.Time
}

// The claim is scheduler/claim.go's statement restricted to CLI recipients attached to this process (the
// VALUES list a). Backlog — a delivery created while no CLI was attached and never attempted — is skipped
// unless its server delivers pending requests on connect. Each claimed row gets a lease owner of its own
// (the hub's prefix plus random bytes), which doubles as the job's lease token: a CLI can only report the
// attempt it was given.
const claimPostgresTmpl = `
WITH a(rid, since) AS (VALUES %[2]s),
due AS (
	SELECT d.id FROM deliveries d
	JOIN a ON a.rid = d.recipient_id
	JOIN recipients r ON r.id = d.recipient_id
	JOIN servers s ON s.id = r.server_id
	WHERE d.status = 'PENDING' AND d.next_attempt_at <= $1
	  AND r.state = 'ACTIVE' AND r.method = 'CLI' AND r.deleted_at IS NULL
	  AND (NOT d.backlog OR d.attempt_count > 0 OR s.deliver_pending_on_connect OR d.created_at >= a.since)
	ORDER BY d.next_attempt_at
	LIMIT $2
	FOR UPDATE OF d SKIP LOCKED
)
UPDATE deliveries AS d SET
	%[1]s
FROM due WHERE d.id = due.id
RETURNING d.id, d.tenant_id, d.request_id, d.recipient_id, d.attempt_count, d.max_attempts, d.retry_schedule, d.first_attempt_at, d.lease_owner`

// The claims' SET lists: each claimed row gets a lease owner of its own, the hub's prefix plus random bytes.
var (
	claimSetPostgres = delivery.ClaimSet("$1", "$3", `$4 || replace(gen_random_uuid()::text, '-', '')`)
	claimSetSQLite   = delivery.ClaimSet("?1", "?3", `?4 || lower(hex(randomblob(16)))`)
)

const claimSQLiteTmpl = `
WITH a(rid, since) AS (VALUES %[2]s)
UPDATE deliveries SET
	%[1]s
WHERE id IN (
	SELECT d.id FROM deliveries d
	JOIN a ON a.rid = d.recipient_id
	JOIN recipients r ON r.id = d.recipient_id
	JOIN servers s ON s.id = r.server_id
	WHERE d.status = 'PENDING' AND d.next_attempt_at <= ?1
	  AND r.state = 'ACTIVE' AND r.method = 'CLI' AND r.deleted_at IS NULL
	  AND (NOT d.backlog OR d.attempt_count > 0 OR s.deliver_pending_on_connect OR d.created_at >= a.since)
	ORDER BY d.next_attempt_at
	LIMIT ?2
)
RETURNING id, tenant_id, request_id, recipient_id, attempt_count, max_attempts, retry_schedule, first_attempt_at, lease_owner`

// claim takes up to limit due deliveries of the given recipients, leased until now+lease to owner-prefixed
// lease tokens.
func claim(ctx context.Context, db *storage.DB, now time.Time, limit int, lease time.Duration, owner string, recipients []attached) ([]delivery.Claim, error) {
	if len(recipients) == 0 || limit <= 0 {
		return nil, nil
	}
	args := []any{now, limit, now.Add(lease), owner}
	values := make([]string, len(recipients))
	for i, a := range recipients {
		n := len(args)
		if db.Postgres() {
			values[i] = fmt.Sprintf("($%d::bigint, $%d::timestamptz)", n+1, n+2)
		} else {
			values[i] = fmt.Sprintf("(?%d, ?%d)", n+1, n+2)
		}
		args = append(args, a.recipientID, a.since)
	}
	tmpl, set := claimSQLiteTmpl, claimSetSQLite
	if db.Postgres() {
		tmpl, set = claimPostgresTmpl, claimSetPostgres
	}
	rows, err := db.SQL.QueryContext(ctx, fmt.Sprintf(tmpl, set, strings.Join(values, ", ")), args...)
	if err != nil {
		return nil, fmt.Errorf("claim CLI deliveries: %w", err)
	}
	defer rows.Close()
	var claims []delivery.Claim
	for rows.Next() {
		c := delivery.Claim{StartedAt: now}
		var schedule string
		var first storage.NullTime
		if err := rows.Scan(&c.DeliveryID, &c.TenantID, &c.RequestID, &c.RecipientID, &c.Attempt, &c.MaxAttempts,
			&schedule, &first, &c.Owner); err != nil {
			return nil, fmt.Errorf("scan CLI claim: %w", err)
		}
		c.Schedule = delivery.Schedule(schedule)
		c.FirstAttemptAt = now
		if first.Valid {
			c.FirstAttemptAt = first.Time
		}
		claims = append(claims, c)
	}
	return claims, rows.Err()
}

// release gives a claimed attempt back, as if it had never been claimed, when it was never handed to a CLI
// (the CLI detached first): no attempt started, so none may be spent. It is a no-op once the lease moved on.
func release(ctx context.Context, db *storage.DB, c delivery.Claim) error {
	query := `UPDATE deliveries SET status = 'PENDING', attempt_count = attempt_count - 1,
	first_attempt_at = CASE WHEN attempt_count = 1 THEN NULL ELSE first_attempt_at END,
	attempt_started_at = NULL, lease_expires_at = NULL, lease_owner = ''
WHERE id = ?1 AND status = 'IN_PROGRESS' AND attempt_count = ?2 AND lease_owner = ?3`
	if db.Postgres() {
		query = strings.NewReplacer("?1", "$1", "?2", "$2", "?3", "$3").Replace(query)
	}
	if _, err := db.SQL.ExecContext(ctx, query, c.DeliveryID, c.Attempt, c.Owner); err != nil {
		return fmt.Errorf("release delivery %d: %w", c.DeliveryID, err)
	}
	return nil
}

// nextDue returns the earliest future due time of a pending delivery of the given recipients, so the loop
// sleeps exactly until a retry is due instead of waiting for the next poll.
func nextDue(ctx context.Context, db *storage.DB, now time.Time, recipientIDs []int) (time.Time, bool, error) {
	if len(recipientIDs) == 0 {
		return time.Time{}, false, nil
	}
	ph := func(i int) string {
		if db.Postgres() {
			return "$" + strconv.Itoa(i)
		}
		return "?" + strconv.Itoa(i)
	}
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
