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
	claimCounted:        claimCountedSQLite,
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

// claimOutboundSQLite is claimOutboundPostgres without row locks, each tenant's room kept by number as the
// delivery claim keeps it (claimSQLiteTmpl).
const claimOutboundSQLite = `
WITH RECURSIVE tenants(id) AS (
	SELECT (SELECT min(tenant_id) FROM outbound_jobs WHERE status = 'PENDING')
	UNION ALL
	SELECT (SELECT min(j.tenant_id) FROM outbound_jobs j WHERE j.status = 'PENDING' AND j.tenant_id > t.id)
	FROM tenants t WHERE t.id IS NOT NULL
), rooms(tenant_id, room, flying) AS (
	SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]') FROM json_each(?5)
)
UPDATE outbound_jobs SET
	status = 'IN_PROGRESS',
	attempt_count = attempt_count + 1,
	first_attempt_at = COALESCE(first_attempt_at, ?1),
	attempt_started_at = ?1,
	lease_expires_at = ?3,
	lease_owner = ?4
WHERE id IN (
	SELECT j.id FROM tenants t
	JOIN outbound_jobs j ON j.id IN (
		SELECT x.id FROM (
			SELECT j2.id, row_number() OVER (ORDER BY j2.next_attempt_at, j2.id) AS k FROM outbound_jobs j2
			WHERE j2.tenant_id = t.id AND j2.status = 'PENDING' AND j2.next_attempt_at <= ?1
			ORDER BY j2.next_attempt_at, j2.id
			LIMIT ?7
		) x
		WHERE x.k <= COALESCE((SELECT room FROM rooms WHERE rooms.tenant_id = t.id), ?6)
	)
	LEFT JOIN rooms ON rooms.tenant_id = t.id
	WHERE t.id IS NOT NULL
	ORDER BY COALESCE(rooms.flying, 0) + row_number() OVER (PARTITION BY t.id ORDER BY j.next_attempt_at), j.next_attempt_at
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
RETURNING id, tenant_id, request_id, recipient_id, attempt_count, max_attempts, retry_schedule, first_attempt_at, expires_at, lease_owner`

// claimCLISetSQLite gives each claimed row a lease owner of its own, the hub's prefix plus random bytes.
var claimCLISetSQLite = delivery.ClaimSet("?1", "?3", `?4 || lower(hex(randomblob(16)))`)

// claimProbeSQLiteTmpl is the probe claim on SQLite (see claimProbePostgresTmpl); SQLite has one writer, so a
// plain UPDATE … WHERE id IN (…) is already exclusive.
const claimProbeSQLiteTmpl = `
UPDATE deliveries SET
	%[1]s
WHERE id IN (
	SELECT d.id FROM deliveries d
	JOIN recipients r ON r.id = d.recipient_id
	JOIN requests q ON q.id = d.request_id AND %[2]s
	WHERE d.status = 'PENDING' AND d.next_attempt_at <= ?1
	  AND r.method <> 'CLI' AND r.deleted_at IS NULL
	  AND d.recipient_id = ?5
	ORDER BY d.next_attempt_at
	LIMIT ?2
)
RETURNING id, tenant_id, request_id, recipient_id, attempt_count, max_attempts, retry_schedule, first_attempt_at, expires_at, false`

// claimSQLiteTmpl is the claim on SQLite (see claimPostgresTmpl), without row locks: SQLite has one writer. It
// cannot limit a correlated subquery by a value of its row, so each group reads at most ?7 rows (the largest
// room) and keeps its first room of them by number. The capped recipients' in_flight is raised by a second
// statement in the claim's transaction (claimCounted).
const claimSQLiteTmpl = `
WITH RECURSIVE tenants(id) AS (
	SELECT (SELECT min(tenant_id) FROM deliveries WHERE status = 'PENDING' AND lane = 'DIRECT')
	UNION ALL
	SELECT (SELECT min(d.tenant_id) FROM deliveries d WHERE d.status = 'PENDING' AND d.lane = 'DIRECT' AND d.tenant_id > t.id)
	FROM tenants t WHERE t.id IS NOT NULL
), capped_ids(id) AS (
	SELECT (SELECT min(recipient_id) FROM deliveries WHERE status = 'PENDING' AND lane = 'CAPPED')
	UNION ALL
	SELECT (SELECT min(d.recipient_id) FROM deliveries d WHERE d.status = 'PENDING' AND d.lane = 'CAPPED' AND d.recipient_id > c.id)
	FROM capped_ids c WHERE c.id IS NOT NULL
), rooms(tenant_id, room, flying) AS (
	SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]') FROM json_each(?5)
), slots AS (
	SELECT r.id, r.tenant_id, MIN(r.max_concurrency - r.in_flight, COALESCE((SELECT room FROM rooms WHERE rooms.tenant_id = r.tenant_id), ?6)) AS free
	FROM recipients r
	WHERE r.id IN (SELECT id FROM capped_ids WHERE id IS NOT NULL)
	  AND r.method <> 'CLI' AND r.deleted_at IS NULL AND r.state = 'ACTIVE' AND r.in_flight < r.max_concurrency
), groups AS (
	SELECT d.id, d.tenant_id, d.next_attempt_at FROM tenants t
	JOIN deliveries d ON d.id IN (
		SELECT x.id FROM (
			SELECT d2.id, row_number() OVER (ORDER BY d2.next_attempt_at, d2.id) AS k FROM deliveries d2
			JOIN recipients r ON r.id = d2.recipient_id
			JOIN requests q ON q.id = d2.request_id AND %[2]s
			WHERE d2.tenant_id = t.id AND d2.status = 'PENDING' AND d2.lane = 'DIRECT' AND d2.next_attempt_at <= ?1
			  AND r.method <> 'CLI' AND r.deleted_at IS NULL AND r.state = 'ACTIVE' AND r.max_concurrency IS NULL
			ORDER BY d2.next_attempt_at, d2.id
			LIMIT ?7
		) x
		WHERE x.k <= COALESCE((SELECT room FROM rooms WHERE rooms.tenant_id = t.id), ?6)
	)
	WHERE t.id IS NOT NULL
	UNION ALL
	SELECT d.id, d.tenant_id, d.next_attempt_at FROM slots s
	JOIN deliveries d ON d.id IN (
		SELECT x.id FROM (
			SELECT d2.id, row_number() OVER (ORDER BY d2.next_attempt_at, d2.id) AS k FROM deliveries d2
			JOIN requests q ON q.id = d2.request_id AND %[2]s
			WHERE d2.recipient_id = s.id AND d2.status = 'PENDING' AND d2.lane = 'CAPPED' AND d2.next_attempt_at <= ?1
			ORDER BY d2.next_attempt_at, d2.id
			LIMIT ?7
		) x
		WHERE x.k <= s.free
	)
), picked AS (
	SELECT p.id FROM (
		SELECT g.id, g.tenant_id, g.next_attempt_at,
			row_number() OVER (PARTITION BY g.tenant_id ORDER BY g.next_attempt_at) AS k
		FROM groups g
	) p
	LEFT JOIN rooms ON rooms.tenant_id = p.tenant_id
	WHERE p.k <= COALESCE(rooms.room, ?6)
	ORDER BY COALESCE(rooms.flying, 0) + p.k, p.next_attempt_at
	LIMIT ?2
)
UPDATE deliveries SET
	%[1]s
WHERE id IN (SELECT id FROM picked)
RETURNING id, tenant_id, request_id, recipient_id, attempt_count, max_attempts, retry_schedule, first_attempt_at, expires_at,
	lane = 'CAPPED'`

// claimCountedSQLite raises a capped recipient's in_flight by what the claim took from it: ?1 the number, ?2 the
// recipient.
const claimCountedSQLite = `UPDATE recipients SET in_flight = in_flight + ?1 WHERE id = ?2`

var (
	liveSQLite       = retention.LiveSQL("q.expires_at", "?1")
	claimSQLite      = fmt.Sprintf(claimSQLiteTmpl, delivery.ClaimSet("?1", "?3", "?4"), liveSQLite)
	claimProbeSQLite = fmt.Sprintf(claimProbeSQLiteTmpl, delivery.ClaimSet("?1", "?3", "?4"), liveSQLite)
)
