package retention

import "github.com/lib/pq"

// postgresQueries are the purge's statements on PostgreSQL.
var postgresQueries = queries{
	// A batch's commit does not wait for its WAL to reach the disk: a batch lost to a crash is deleted
	// again by the next run, and the wait would only hold the worker (and its locks) meanwhile.
	asyncCommit:   `SET LOCAL synchronous_commit = off`,
	selectExpired: `SELECT id FROM requests WHERE ` + ExpiredSQL("expires_at", "$1") + ` ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
	// One round trip locks what it can and lists what it could not. An attempt in flight to a capped
	// recipient holds one of its slots until it is recorded: its delivery counts as busy, so the slot is
	// never lost with the row (the lock re-reads the row as it stands).
	lockDeliveries: `WITH locked AS (
					SELECT id FROM deliveries WHERE request_id = ANY($1) AND NOT (status = 'IN_PROGRESS' AND lane = 'CAPPED')
					ORDER BY id FOR UPDATE SKIP LOCKED)
				SELECT d.id, d.request_id, l.id IS NOT NULL
				FROM deliveries d LEFT JOIN locked l ON l.id = d.id
				WHERE d.request_id = ANY($1)`,
	// IN (SELECT unnest(…)) rather than = ANY(…): the planner then drives the delete from the id list
	// through the index instead of filtering a sequential scan against a long array.
	deleteAttempts:   `DELETE FROM attempts WHERE delivery_id IN (SELECT unnest($1::bigint[]))`,
	deleteDeliveries: `DELETE FROM deliveries WHERE id IN (SELECT unnest($1::bigint[]))`,
	// Replays that are themselves in this batch go with it; a replay another transaction holds (another
	// worker's batch, an attempt being recorded) is skipped rather than waited for, which could deadlock
	// two workers. Its link then names a purged request, which reads as none.
	unlinkReplays: `UPDATE requests SET replay_of_id = NULL WHERE id IN (
				SELECT id FROM requests WHERE replay_of_id IN (SELECT unnest($1::bigint[]))
					AND NOT id = ANY($1) FOR NO KEY UPDATE SKIP LOCKED)`,
	deleteRequests: `DELETE FROM requests WHERE id IN (SELECT unnest($1::bigint[]))`,
	list:           func(ids []int64) any { return pq.Array(ids) },
}
