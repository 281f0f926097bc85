package bulk

import "github.com/adal-relay/adal/storage"

// claimSQL takes running jobs whose lease lapsed, or that never had one, for this runner: $1 now, $2 limit,
// $3 owner, $4 lease end. On PostgreSQL it has the engine's claim shape, so runners of several processes claim
// side by side and never take the same job; SQLite's one writer makes a plain UPDATE exclusive.
var claimSQL = storage.PerDialect[string]{
	Postgres: `
WITH free AS (
	SELECT id FROM bulk_jobs
	WHERE status = 'RUNNING' AND (lease_expires_at IS NULL OR lease_expires_at < $1)
	ORDER BY id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
)
UPDATE bulk_jobs AS j SET lease_owner = $3, lease_expires_at = $4
FROM free WHERE j.id = free.id
RETURNING j.id`,
	SQLite: `
UPDATE bulk_jobs SET lease_owner = ?3, lease_expires_at = ?4
WHERE id IN (
	SELECT id FROM bulk_jobs
	WHERE status = 'RUNNING' AND (lease_expires_at IS NULL OR lease_expires_at < ?1)
	ORDER BY id
	LIMIT ?2
)
RETURNING id`,
}

// outstandingCondition holds for a retry that still takes one of the recipient's places: its first attempt is
// in flight, or due to go out on the direct lane or, for a recipient with maxConcurrency, waiting for one of its
// slots (the capped lane), so a job never queues more than its window behind a capped recipient. A retry that waits for a later attempt, for a CLI to attach
// or for its recipient to be resumed or enabled takes none: the job would otherwise wait on it for hours.
const outstandingCondition = `(d.status = 'IN_PROGRESS' OR (d.status = 'PENDING' AND d.attempt_count = 0 AND d.lane IN ('DIRECT', 'CAPPED')))`

// resumedSQL finds, for a job taken over from another process, the retries it made that are still
// outstanding: $1 job, $2 done_through. A manual retry of an item's request to its recipient is the job's (or
// newer than the job's, which paces the same).
var resumedSQL = storage.Numbered(`
SELECT d.id, d.recipient_id FROM bulk_job_items i
JOIN deliveries d ON d.request_id = i.request_id AND d.recipient_id = i.recipient_id
WHERE i.job_id = $1 AND i.delivery_id <= $2 AND d.trigger = 'MANUAL_RETRY' AND ` + outstandingCondition)
