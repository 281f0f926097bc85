package scheduler

import (
	"fmt"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/retention"
)

// sqliteQueries are the engine's statements on SQLite.
var sqliteQueries = queries{
	claim:               claimSQLite,
	claimProbe:          claimProbeSQLite,
	claimOutbound:       claimOutboundSQLite,
	claimCLI:            claimCLISQLiteTmpl,
	claimCLISet:         claimCLISetSQLite,
	cliValue:            "(?%d, ?%d)",
	param:               "?",
	nextDue:             nextDueSQL.SQLite,
	nextDueWithOutbound: nextDueWithOutboundSQL.SQLite,
	dueCount:            dueCountSQL.SQLite,
	probeTurn:           probeTurnSQL.SQLite,
	releaseCLI:          releaseCLISQL.SQLite,
	laneMoves:           laneStatements("?1", "?2", ""),
}

// claimOutboundSQLite is claimOutboundPostgres without row locks.
const claimOutboundSQLite = `
UPDATE outbound_jobs SET
	status = 'IN_PROGRESS',
	attempt_count = attempt_count + 1,
	first_attempt_at = COALESCE(first_attempt_at, ?1),
	attempt_started_at = ?1,
	lease_expires_at = ?3,
	lease_owner = ?4
WHERE id IN (
	SELECT id FROM outbound_jobs
	WHERE status = 'PENDING' AND next_attempt_at <= ?1
	ORDER BY next_attempt_at
	LIMIT ?2
)
RETURNING id, tenant_id, attempt_count, max_attempts, first_attempt_at, store_response_body,
	url, method, headers, body`

// claimCLISQLiteTmpl claims CLI deliveries (queries.claimCLI).
const claimCLISQLiteTmpl = `
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

// claimCLISetSQLite gives each claimed row a lease owner of its own, the hub's prefix plus random bytes.
var claimCLISetSQLite = delivery.ClaimSet("?1", "?3", `?4 || lower(hex(randomblob(16)))`)

// claimSQLiteTmpl is the claim on SQLite (see claimPostgresTmpl).
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
	liveSQLite       = retention.LiveSQL("q.expires_at", "?1")
	claimSQLite      = fmt.Sprintf(claimSQLiteTmpl, delivery.ClaimSet("?1", "?3", "?4"), `d.lane = 'DIRECT' AND r.state = 'ACTIVE' AND ?5 = 0`, liveSQLite)
	claimProbeSQLite = fmt.Sprintf(claimSQLiteTmpl, delivery.ClaimSet("?1", "?3", "?4"), `d.recipient_id = ?5`, liveSQLite)
)
