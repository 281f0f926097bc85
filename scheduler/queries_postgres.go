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
	nextDue:             nextDuePostgres,
	nextDueWithOutbound: nextDueWithOutboundPostgres,
	dueCount:            dueCountSQL.Postgres,
	probeTurn:           probeTurnSQL.Postgres,
	releaseCLI:          releaseCLISQL.Postgres,
	laneMoves:           laneStatements("$1", "$2", " FOR UPDATE OF d SKIP LOCKED"),
}

// roomsCTE reads the claims' rooms parameter ($5, shares.rooms): a JSON array of [tenant, room, attempts in
// flight, probe] for the tenants busy in this process.
const roomsCTE = `rooms AS MATERIALIZED (
	SELECT (e->>0)::bigint AS tenant_id, (e->>1)::int AS room, (e->>2)::int AS flying, (e->>3)::int AS probe
	FROM json_array_elements($5::json) AS e
)`

// claimOutboundPostgres has the shape of the delivery claim: it visits the tenants with pending jobs one index
// probe each, takes from each at most its room ($5, $6: as the delivery claim), and of these the first $2 in
// the delivery claim's order become IN_PROGRESS under this process's lease, their attempt counted, in one statement that also
// returns what the attempt sends, so a batch costs one round trip.
const claimOutboundPostgres = `
WITH RECURSIVE tenants(id) AS (
	(SELECT tenant_id FROM outbound_jobs WHERE status = 'PENDING' ORDER BY tenant_id LIMIT 1)
	UNION ALL
	SELECT (SELECT j.tenant_id FROM outbound_jobs j WHERE j.status = 'PENDING' AND j.tenant_id > t.id
		ORDER BY j.tenant_id LIMIT 1)
	FROM tenants t WHERE t.id IS NOT NULL
), ` + roomsCTE + `, due AS (
	SELECT p.id FROM tenants t
	CROSS JOIN LATERAL (
		SELECT j.id, j.next_attempt_at FROM outbound_jobs j
		WHERE j.tenant_id = t.id AND j.status = 'PENDING' AND j.next_attempt_at <= $1
		ORDER BY j.tenant_id, j.next_attempt_at, j.id
		LIMIT LEAST(COALESCE((SELECT room FROM rooms WHERE rooms.tenant_id = t.id), $6::int), $7::int)
		FOR UPDATE OF j SKIP LOCKED
	) p
	LEFT JOIN rooms ON rooms.tenant_id = t.id
	WHERE t.id IS NOT NULL
	ORDER BY COALESCE(rooms.flying, 0) + row_number() OVER (PARTITION BY t.id ORDER BY p.next_attempt_at), p.next_attempt_at
	LIMIT $2
)
UPDATE outbound_jobs AS j SET
	status = 'IN_PROGRESS',
	attempt_count = j.attempt_count + 1,
	first_attempt_at = COALESCE(j.first_attempt_at, $1),
	attempt_started_at = $1,
	lease_expires_at = $3,
	lease_owner = $4
WHERE j.id = ANY(ARRAY(SELECT id FROM due))
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
RETURNING d.id, d.tenant_id, d.request_id, d.recipient_id, d.attempt_count, d.max_attempts, d.retry_schedule, d.first_attempt_at, d.expires_at, d.lease_owner`

// claimCLISetPostgres gives each claimed row a lease owner of its own, the hub's prefix plus random bytes.
var claimCLISetPostgres = delivery.ClaimSet("$1", "$3", `$4 || replace(gen_random_uuid()::text, '-', '')`)

// The probe claim takes the one due delivery of a DISABLED recipient whose probe turn came, whatever the lane
// of its deliveries (they are parked), marks it IN_PROGRESS under this process's lease and counts the attempt,
// in one statement that also returns what the attempt sends. SKIP LOCKED lets several processes claim side by
// side without ever taking the same row.
const claimProbePostgresTmpl = `
WITH due AS (
	SELECT d.id FROM deliveries d
	JOIN recipients r ON r.id = d.recipient_id
	JOIN requests q ON q.id = d.request_id AND %[2]s
	WHERE d.status = 'PENDING' AND d.next_attempt_at <= $1
	  AND r.method <> 'CLI' AND r.deleted_at IS NULL
	  AND d.recipient_id = $5::bigint
	ORDER BY d.next_attempt_at
	LIMIT $2
	FOR UPDATE OF d SKIP LOCKED
), claimed AS (
	UPDATE deliveries AS d SET
		%[1]s
	FROM due WHERE d.id = due.id
	RETURNING d.id, d.tenant_id, d.request_id, d.recipient_id, d.attempt_count, d.max_attempts, d.retry_schedule,
		d.first_attempt_at, d.expires_at
)
SELECT c.id, c.tenant_id, c.request_id, c.recipient_id, c.attempt_count, c.max_attempts, c.retry_schedule,
	c.first_attempt_at, c.expires_at, false,
	q.server_id, q.key, q.method, q.path, q.query, q.headers, q.body, q.verified, q.trace_parent,
	r.url, r.timeout_seconds, r.send_idempotency_key,
	r.signing_secret, r.previous_signing_secret, r.previous_secret_expires_at, r.signature_headers,
	r.send_traceparent, r.method, r.destination_url, r.destination, r.transform_version_id, r.auth, false
FROM claimed c
JOIN requests q ON q.id = c.request_id
JOIN recipients r ON r.id = c.recipient_id`

// claimPostgresTmpl is the claim of the direct and capped lanes, one statement (queries.claim). It never walks a
// backlog that cannot be taken: it visits the tenants with pending direct deliveries one index probe each
// (tenants, a loose scan of delivery_direct_due), and reads from each its room, the free workers of its share in
// this process ($5, $6: rooms), plus one row if the tenant is not waiting already (the probe); it visits the
// capped recipients with pending deliveries the same way (capped_ids), locks those with a free slot and due work
// (slots: the lock orders the claims of every process on the recipient's in_flight, re-read as it stands once
// locked), and reads from each its free slots, plus the probe's row when the tenant's room is the tighter bound.
// Of all these each tenant keeps at most its room, and the first $2 are claimed, the least loaded tenant's first
// (its attempts in flight here plus its rank among its own, so that a newcomer's delivery goes before a busy
// tenant's older backlog), then in due order: IN_PROGRESS under this process's lease, the attempt counted, and
// the capped recipients' in_flight raised by what was claimed from them. It returns what the attempts send, so a
// claim costs one round trip, and with each row whether the claim left due deliveries of its tenant (it read
// more than it claimed): the probe's row is how it knows of a tenant that got its whole room. A tenant it left
// due deliveries of and took none from gets a row of its own with delivery id 0. Rows read beyond what was
// claimed stay PENDING (their lock ends with the statement). The update finds the rows it claims by their ids as
// an array: joined with what was picked, the planner hashed the whole table. Each group is ordered by its
// index's columns, (tenant, due) or (recipient, due): ordered by due alone, the planner walked the due index of
// every tenant's deliveries, skipping the other tenants' rows.
const claimPostgresTmpl = `
WITH RECURSIVE tenants(id) AS (
	(SELECT tenant_id FROM deliveries WHERE status = 'PENDING' AND lane = 'DIRECT' ORDER BY tenant_id LIMIT 1)
	UNION ALL
	SELECT (SELECT d.tenant_id FROM deliveries d WHERE d.status = 'PENDING' AND d.lane = 'DIRECT' AND d.tenant_id > t.id
		ORDER BY d.tenant_id LIMIT 1)
	FROM tenants t WHERE t.id IS NOT NULL
), capped_ids(id) AS (
	(SELECT recipient_id FROM deliveries WHERE status = 'PENDING' AND lane = 'CAPPED' ORDER BY recipient_id LIMIT 1)
	UNION ALL
	SELECT (SELECT d.recipient_id FROM deliveries d WHERE d.status = 'PENDING' AND d.lane = 'CAPPED' AND d.recipient_id > c.id
		ORDER BY d.recipient_id LIMIT 1)
	FROM capped_ids c WHERE c.id IS NOT NULL
), ` + roomsCTE + `, direct AS (
	SELECT p.id, p.tenant_id, p.next_attempt_at
	FROM tenants t
	LEFT JOIN rooms ON rooms.tenant_id = t.id
	CROSS JOIN LATERAL (
		SELECT d.id, d.tenant_id, d.next_attempt_at FROM deliveries d
		JOIN recipients r ON r.id = d.recipient_id
		JOIN requests q ON q.id = d.request_id AND %[2]s
		WHERE d.tenant_id = t.id AND d.status = 'PENDING' AND d.lane = 'DIRECT' AND d.next_attempt_at <= $1
		  AND r.method <> 'CLI' AND r.deleted_at IS NULL AND r.state = 'ACTIVE' AND r.max_concurrency IS NULL
		ORDER BY d.tenant_id, d.next_attempt_at, d.id
		LIMIT LEAST(COALESCE(rooms.room, $6::int), $7::int) + COALESCE(rooms.probe, 1)
		FOR UPDATE OF d SKIP LOCKED
	) p
	WHERE t.id IS NOT NULL
), slots AS MATERIALIZED (
	SELECT s.id, LEAST(s.free, s.room) AS free, (s.room < s.free)::int * s.probe AS probe
	FROM (
		SELECT r.id, r.max_concurrency - r.in_flight AS free, COALESCE(rooms.room, $6::int) AS room,
			COALESCE(rooms.probe, 1) AS probe
		FROM recipients r
		LEFT JOIN rooms ON rooms.tenant_id = r.tenant_id
		WHERE r.id IN (SELECT id FROM capped_ids WHERE id IS NOT NULL)
		  AND r.method <> 'CLI' AND r.deleted_at IS NULL AND r.state = 'ACTIVE' AND r.in_flight < r.max_concurrency
		  AND (COALESCE(rooms.room, $6::int) > 0 OR COALESCE(rooms.probe, 1) = 1)
		  AND EXISTS (SELECT 1 FROM deliveries d WHERE d.recipient_id = r.id AND d.status = 'PENDING' AND d.lane = 'CAPPED'
			AND d.next_attempt_at <= $1)
		ORDER BY r.id
		FOR NO KEY UPDATE OF r SKIP LOCKED
	) s
), capped AS (
	SELECT p.id, p.tenant_id, p.next_attempt_at
	FROM slots s
	CROSS JOIN LATERAL (
		SELECT d.id, d.tenant_id, d.next_attempt_at FROM deliveries d
		JOIN requests q ON q.id = d.request_id AND %[2]s
		WHERE d.recipient_id = s.id AND d.status = 'PENDING' AND d.lane = 'CAPPED' AND d.next_attempt_at <= $1
		ORDER BY d.recipient_id, d.next_attempt_at, d.id
		LIMIT LEAST(s.free, $7::int) + s.probe
		FOR UPDATE OF d SKIP LOCKED
	) p
), found AS (
	SELECT * FROM direct UNION ALL SELECT * FROM capped
), seen AS (
	SELECT tenant_id, count(*) AS n FROM found GROUP BY tenant_id
), picked AS (
	SELECT p.id FROM (
		SELECT f.id, f.tenant_id, f.next_attempt_at,
			row_number() OVER (PARTITION BY f.tenant_id ORDER BY f.next_attempt_at) AS k
		FROM found f
	) p
	LEFT JOIN rooms ON rooms.tenant_id = p.tenant_id
	WHERE p.k <= COALESCE(rooms.room, $6::int)
	ORDER BY COALESCE(rooms.flying, 0) + p.k, p.next_attempt_at
	LIMIT $2
), claimed AS (
	UPDATE deliveries AS d SET
		%[1]s
	WHERE d.id = ANY(ARRAY(SELECT id FROM picked))
	RETURNING d.id, d.tenant_id, d.request_id, d.recipient_id, d.attempt_count, d.max_attempts, d.retry_schedule,
		d.first_attempt_at, d.expires_at, d.lane = 'CAPPED' AS capped
), counted AS (
	UPDATE recipients AS r SET in_flight = r.in_flight + x.n
	FROM (SELECT recipient_id, count(*) AS n FROM claimed WHERE capped GROUP BY recipient_id) x
	WHERE r.id = x.recipient_id
)
SELECT c.id, c.tenant_id, c.request_id, c.recipient_id, c.attempt_count, c.max_attempts, c.retry_schedule,
	c.first_attempt_at, c.expires_at, c.capped,
	q.server_id, q.key, q.method, q.path, q.query, q.headers, q.body, q.verified, q.trace_parent,
	r.url, r.timeout_seconds, r.send_idempotency_key,
	r.signing_secret, r.previous_signing_secret, r.previous_secret_expires_at, r.signature_headers,
	r.send_traceparent, r.method, r.destination_url, r.destination, r.transform_version_id, r.auth,
	s.n > count(*) OVER (PARTITION BY c.tenant_id)
FROM claimed c
JOIN seen s ON s.tenant_id = c.tenant_id
JOIN requests q ON q.id = c.request_id
JOIN recipients r ON r.id = c.recipient_id
UNION ALL
SELECT 0, s.tenant_id, 0, 0, 0, 0, '', NULL, NULL, false,
	0, '', '', '', '', NULL, NULL, NULL, '',
	'', 0, false, NULL, NULL, NULL, '',
	false, '', '', NULL, NULL, NULL, true
FROM seen s
WHERE s.tenant_id NOT IN (SELECT tenant_id FROM claimed)`

// The next-due queries run after most claims. Planned afresh each time, they cost more than they run (the
// planner reads the ends of the due index to estimate `next_attempt_at > $1`), so they are prepared.
var (
	nextDuePostgres             = storage.Prepared(nextDueSQL.Postgres)
	nextDueWithOutboundPostgres = storage.Prepared(nextDueWithOutboundSQL.Postgres)
)

var (
	livePostgres       = retention.LiveSQL("q.expires_at", "$1")
	claimPostgres      = storage.Prepared(fmt.Sprintf(claimPostgresTmpl, delivery.ClaimSet("$1", "$3", "$4"), livePostgres))
	claimProbePostgres = storage.Prepared(fmt.Sprintf(claimProbePostgresTmpl, delivery.ClaimSet("$1", "$3", "$4"), livePostgres))
)
