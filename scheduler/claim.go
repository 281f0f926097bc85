package scheduler

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/destination"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/storage"
)

// shares is what one claim may take of each tenant: fairShare.rooms.
type shares struct {
	rooms  string // a JSON array of [tenant, room, attempts in flight, probe], the tenants busy in this process
	other  int    // the room of any other tenant
	most   int    // the largest room of all
	given  map[int]int
	waited map[int]bool // the tenants waiting when the rooms were given: the claim reads no row past their room
}

// claim takes up to limit due deliveries of the direct and capped lanes for owner, at most each tenant's room
// (sh) and each capped recipient's free slots, with what their attempts send. Where the statement can tell,
// left says, for each tenant it read due deliveries of, whether it left some of them in the table; it is nil
// otherwise. On PostgreSQL the claim is one statement that also raises the capped recipients' in_flight and
// returns the requests and recipients with the claimed rows, one round trip in all; SQLite's UPDATE …
// RETURNING can feed neither a join nor another update, and there the claim and the raise share a
// transaction, and a further query (in process, cheap) loads the requests and recipients.
func claim(ctx context.Context, db *storage.DB, now time.Time, limit int, lease time.Duration, owner string, sh shares) (jobs []job, left map[int]bool, err error) {
	q := statements.For(db)
	args := []any{now, limit, now.Add(lease), owner, sh.rooms, sh.other, max(1, min(limit, sh.most))}
	if q.claimCounted == "" {
		rows, err := db.SQL.QueryContext(ctx, q.claim, args...)
		if err != nil {
			return nil, nil, fmt.Errorf("claim: %w", err)
		}
		return readClaims(ctx, db, rows, now, owner)
	}
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("claim: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // after Commit, a no-op
	rows, err := tx.QueryContext(ctx, q.claim, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("claim: %w", err)
	}
	jobs, _, err = scanClaims(rows, now, owner, false)
	if err != nil {
		return nil, nil, err
	}
	taken := map[int]int{}
	for _, j := range jobs {
		if j.claim.Capped {
			taken[j.claim.RecipientID]++
		}
	}
	for rid, n := range taken {
		if _, err := tx.ExecContext(ctx, q.claimCounted, n, rid); err != nil {
			return nil, nil, fmt.Errorf("claim: count the slots of recipient %d: %w", rid, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, fmt.Errorf("claim: commit: %w", err)
	}
	jobs, err = loadClaims(ctx, db, jobs)
	return jobs, nil, err
}

// claimProbe takes the due delivery of the DISABLED recipient whose probe turn came, with what its attempt
// sends, whatever its lane (it is parked).
func claimProbe(ctx context.Context, db *storage.DB, now time.Time, lease time.Duration, owner string, recipient int) ([]job, error) {
	rows, err := db.SQL.QueryContext(ctx, statements.For(db).claimProbe, now, 1, now.Add(lease), owner, recipient)
	if err != nil {
		return nil, fmt.Errorf("claim probe: %w", err)
	}
	jobs, _, err := readClaims(ctx, db, rows, now, owner)
	return jobs, err
}

// readClaims reads the rows of a claim statement and, unless the statement joined them in, loads their
// requests and recipients.
func readClaims(ctx context.Context, db *storage.DB, rows *sql.Rows, now time.Time, owner string) ([]job, map[int]bool, error) {
	jobs, left, err := scanClaims(rows, now, owner, statements.For(db).claimJoined)
	if err != nil {
		return nil, nil, err
	}
	jobs, err = loadClaims(ctx, db, jobs)
	return jobs, left, err
}

// loadClaims completes jobs read without their requests and recipients; jobs read with them are returned as
// they are.
func loadClaims(ctx context.Context, db *storage.DB, jobs []job) ([]job, error) {
	if statements.For(db).claimJoined || len(jobs) == 0 {
		return jobs, nil
	}
	claims := make([]delivery.Claim, len(jobs))
	for i, j := range jobs {
		claims[i] = j.claim
	}
	return load(ctx, db.Client, claims)
}

// scanClaims reads and closes the rows of a claim statement: the claim columns, then, when joined, the
// request's and recipient's and whether the claim left due deliveries of the row's tenant, which left returns
// by tenant. A joined row with no delivery (id 0) only says that of its tenant.
func scanClaims(rows *sql.Rows, now time.Time, owner string, joined bool) ([]job, map[int]bool, error) {
	defer rows.Close()
	var jobs []job
	var left map[int]bool
	if joined {
		left = map[int]bool{}
	}
	for rows.Next() {
		c := delivery.Claim{StartedAt: now, Owner: owner}
		var schedule string
		var first, expires storage.NullTime
		dest := []any{&c.DeliveryID, &c.TenantID, &c.RequestID, &c.RecipientID, &c.Attempt, &c.MaxAttempts, &schedule, &first,
			&expires, &c.Capped}
		j := job{request: &ent.Request{}, recipient: &ent.Recipient{}}
		var headers []byte
		var previousUntil storage.NullTime
		var verified sql.NullBool
		var leftDue bool
		var destJSON []byte
		var transformID sql.NullInt64
		if joined {
			dest = append(dest, &j.request.ServerID, &j.request.Key, &j.request.Method, &j.request.Path,
				&j.request.Query, &headers, &j.request.Body, &verified, &j.request.TraceParent,
				&j.recipient.URL, &j.recipient.TimeoutSeconds, &j.recipient.SendIdempotencyKey,
				&j.recipient.SigningSecret, &j.recipient.PreviousSigningSecret, &previousUntil, &j.recipient.SignatureHeaders,
				&j.recipient.SendTraceparent, &j.recipient.Method, &j.recipient.DestinationURL, &destJSON,
				&transformID, &j.recipient.Auth, &leftDue)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, nil, fmt.Errorf("scan claim: %w", err)
		}
		if joined {
			left[c.TenantID] = leftDue
			if c.DeliveryID == 0 {
				continue
			}
		}
		c.Schedule = delivery.Schedule(schedule)
		c.FirstAttemptAt = now
		if first.Valid {
			c.FirstAttemptAt = first.Time
		}
		c.ExpiresAt = expires.Time
		if joined {
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
			if transformID.Valid {
				id := int(transformID.Int64)
				j.recipient.TransformVersionID = &id
			}
			if len(destJSON) > 0 {
				// As intake's read: a row that does not read back leaves the settings empty, and the broker
				// refuses the attempt.
				var d destination.Settings
				if json.Unmarshal(destJSON, &d) == nil {
					j.recipient.Destination = &d
				}
			}
		}
		j.claim = c
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("claim: %w", err)
	}
	return jobs, left, nil
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
	return storage.ScanColumn[int](rows)
}
