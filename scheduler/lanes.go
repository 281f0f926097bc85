package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/adal-relay/adal/storage"
)

// A delivery's lane (DIRECT, CLI, PARKED) follows its recipient's state and method; see the deliveries schema.
// It is set when the delivery is created, from the recipient as that transaction read it. The lane reconciler
// puts right what a state change leaves behind: the pending deliveries of a recipient paused, disabled or
// frozen move to PARKED, those of a recipient active again move back to DIRECT or CLI, and a delivery created
// with a state that changed before its transaction committed is caught too. It looks only at recipients whose
// state changed within laneWindow, each lane change an index range, so a large parked backlog costs nothing
// once parked.
const (
	// laneWindow is how long after a state change the reconciler keeps looking at the recipient: far longer
	// than any transaction that may have read the old state, or any attempt in flight when it changed.
	laneWindow = 2 * time.Minute
	// laneBatch bounds the rows one statement moves; laneBudget the time one reconcile spends moving more.
	laneBatch  = 5000
	laneBudget = 200 * time.Millisecond
)

// laneMoves are the reconciler's statements, per dialect (true: PostgreSQL): each moves pending deliveries of
// recently changed recipients into the lane their state and method call for. On PostgreSQL SKIP LOCKED leaves
// rows being claimed or recorded to the next run, so the reconciler never waits on, or deadlocks with, the claim
// and the completer; SQLite has one writer and nothing to skip.
var laneMoves = map[bool][]string{true: laneStatements("$1", "$2", " FOR UPDATE OF d SKIP LOCKED"), false: laneStatements("?1", "?2", "")}

func laneStatements(since, limit, lock string) []string {
	moves := []struct{ to, recipients, from string }{
		{`'PARKED'`, `r.state <> 'ACTIVE'`, `('DIRECT', 'CLI')`},
		{`'DIRECT'`, `r.state = 'ACTIVE' AND r.method = 'DIRECT_HTTP'`, `('PARKED', 'CLI')`},
		{`'CLI'`, `r.state = 'ACTIVE' AND r.method = 'CLI'`, `('PARKED', 'DIRECT')`},
	}
	out := make([]string, len(moves))
	for i, m := range moves {
		out[i] = fmt.Sprintf(`UPDATE deliveries SET lane = %s WHERE id IN (
	SELECT d.id FROM recipients r JOIN deliveries d ON d.recipient_id = r.id
	WHERE r.state_changed_at >= %s AND %s AND d.status = 'PENDING' AND d.lane IN %s
	LIMIT %s%s)`, m.to, since, m.recipients, m.from, limit, lock)
	}
	return out
}

// reconcileLanes moves the deliveries whose lane no longer matches their recipient, batch after batch, until
// none is left or its time budget is spent (the next run goes on). It returns how many it moved.
func reconcileLanes(ctx context.Context, db *storage.DB, now time.Time) (int64, error) {
	start := time.Now()
	var moved int64
	for _, query := range laneMoves[db.Postgres()] {
		for {
			res, err := db.SQL.ExecContext(ctx, query, now.Add(-laneWindow), laneBatch)
			if err != nil {
				return moved, fmt.Errorf("reconcile lanes: %w", err)
			}
			n, _ := res.RowsAffected()
			moved += n
			if n < laneBatch || time.Since(start) > laneBudget {
				break
			}
		}
	}
	return moved, nil
}
