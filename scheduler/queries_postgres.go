package scheduler

import (
	"fmt"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/retention"
	"github.com/adal-relay/adal/storage"
)

// postgresQueries are the engine's statements on PostgreSQL.
var postgresQueries = queries{
	claim:               claimPostgres,
	claimProbe:          claimProbePostgres,
	claimJoined:         true,
	claimOutbound:       claimOutboundPostgres,
	claimCLI:            claimCLIPostgresTmpl,
	claimCLISet:         claimCLISetPostgres,
	cliValue:            "($%d::bigint, $%d::timestamptz)",
	param:               "$",
	nextDue:             nextDueSQL.Postgres,
	nextDueWithOutbound: nextDueWithOutboundSQL.Postgres,
	dueCount:            dueCountSQL.Postgres,
	probeTurn:           probeTurnSQL.Postgres,
	releaseCLI:          releaseCLISQL.Postgres,
	laneMoves:           laneStatements("$1", "$2", " FOR UPDATE OF d SKIP LOCKED"),
}

// claimOutboundPostgres has the shape of the delivery claim: due PENDING jobs become IN_PROGRESS under this
// process's lease, their attempt counted, in one statement that also returns what the attempt sends, so a
// batch costs one round trip.
const claimOutboundPostgres = `
WITH due AS (
	SELECT id FROM outbound_jobs
	WHERE status = 'PENDING' AND next_attempt_at <= $1
	ORDER BY next_attempt_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED
)
UPDATE outbound_jobs AS j SET
	status = 'IN_PROGRESS',
	attempt_count = j.attempt_count + 1,
	first_attempt_at = COALESCE(j.first_attempt_at, $1),
	attempt_started_at = $1,
	lease_expires_at = $3,
	lease_owner = $4
FROM due WHERE j.id = due.id
RETURNING j.id, j.tenant_id, j.attempt_count, j.max_attempts, j.first_attempt_at, j.store_response_body,
	j.url, j.method, j.headers, j.body`

// claimCLIPostgresTmpl claims CLI deliveries (queries.claimCLI).
const claimCLIPostgresTmpl = `
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

// claimCLISetPostgres gives each claimed row a lease owner of its own, the hub's prefix plus random bytes.
var claimCLISetPostgres = delivery.ClaimSet("$1", "$3", `$4 || replace(gen_random_uuid()::text, '-', '')`)

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
	q.server_id, q.key, q.method, q.path, q.query, q.headers, q.body, q.verified,
	r.url, r.timeout_seconds, r.send_idempotency_key,
	r.signing_secret, r.previous_signing_secret, r.previous_secret_expires_at, r.signature_headers
FROM claimed c
JOIN requests q ON q.id = c.request_id
JOIN recipients r ON r.id = c.recipient_id`

// The claim's recipient filter: the direct lane (its partial index holds nothing parked or CLI, so a parked
// backlog is never walked), or the one DISABLED recipient whose probe turn came, whatever the lane of its
// deliveries (they are parked).
var (
	livePostgres       = retention.LiveSQL("q.expires_at", "$1")
	claimPostgres      = storage.Prepared(fmt.Sprintf(claimPostgresTmpl, delivery.ClaimSet("$1", "$3", "$4"), `d.lane = 'DIRECT' AND r.state = 'ACTIVE' AND $5::bigint = 0`, livePostgres))
	claimProbePostgres = storage.Prepared(fmt.Sprintf(claimPostgresTmpl, delivery.ClaimSet("$1", "$3", "$4"), `d.recipient_id = $5::bigint`, livePostgres))
)
