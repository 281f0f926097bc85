package retention

import "encoding/json"

const sqliteIn = `IN (SELECT value FROM json_each(?))`

// sqliteQueries are the purge's statements on SQLite. The transaction holds the database's single write lock
// from BEGIN (_txlock=immediate), so there is nothing to lock row by row, and only a capped recipient's attempt
// in flight is busy.
var sqliteQueries = queries{
	selectExpired: `SELECT id FROM requests WHERE ` + ExpiredSQL("expires_at", "?") + ` ORDER BY expires_at LIMIT ?`,
	// An attempt in flight to a capped recipient holds one of its slots until it is recorded (see postgresQueries).
	lockDeliveries:   `SELECT id, request_id, NOT (status = 'IN_PROGRESS' AND lane = 'CAPPED') FROM deliveries WHERE request_id ` + sqliteIn,
	deleteAttempts:   `DELETE FROM attempts WHERE delivery_id ` + sqliteIn,
	deleteDeliveries: `DELETE FROM deliveries WHERE id ` + sqliteIn,
	unlinkReplays:    `UPDATE requests SET replay_of_id = NULL WHERE replay_of_id ` + sqliteIn,
	deleteRequests:   `DELETE FROM requests WHERE id ` + sqliteIn,
	list: func(ids []int64) any {
		b, _ := json.Marshal(ids) // []int64 always marshals
		return string(b)
	},
}
