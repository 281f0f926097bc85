package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/adal-relay/adal/storage"
)

// A delivery's lane (DIRECT, CAPPED, CLI, PARKED) follows its recipient's state, method and concurrency cap; see
// the deliveries schema. It is set when the delivery is created, from the recipient as that transaction read
// it. The lane reconciler puts right what a change leaves behind: the pending deliveries of a recipient paused,
// disabled or frozen move to PARKED, those of a recipient active again move back to DIRECT, CAPPED or CLI, those
// of a recipient whose cap was set or removed move between DIRECT and CAPPED, and a delivery created with a
// state that changed before its transaction committed is caught too. It looks only at recipients whose state
// or cap changed within laneWindow, each lane change an index range, so a large parked backlog costs nothing
// once parked. Once per process, at its first run, it looks at every recipient instead: deliveries stored by a
// version without lanes, or left behind while no process ran, are put right too.
const (
	// laneWindow is how long after a state change the reconciler keeps looking at the recipient: far longer
	// than any transaction that may have read the old state, or any attempt in flight when it changed.
	laneWindow = 2 * time.Minute
	// laneBatch bounds the rows one statement moves; laneBudget the time one reconcile spends moving more.
	laneBatch  = 5000
	laneBudget = 200 * time.Millisecond
)

// laneStatements are the reconciler's statements (queries.laneMoves): each moves pending deliveries of
// recipients changed since $1 into the lane their state and method call for. On PostgreSQL SKIP LOCKED leaves
// rows being claimed or recorded to the next run, so the reconciler never waits on, or deadlocks with, the claim
// and the completer; SQLite has one writer and nothing to skip. A recipient whose state and cap never changed
// has neither time; the sweep of every recipient passes a zero $1, which matches it too.
func laneStatements(since, limit, lock string) []string {
	moves := []struct{ to, recipients, from string }{
		{`'PARKED'`, `r.state <> 'ACTIVE'`, `('DIRECT', 'CAPPED', 'CLI')`},
		{`'DIRECT'`, `r.state = 'ACTIVE' AND r.method <> 'CLI' AND r.max_concurrency IS NULL`, `('PARKED', 'CAPPED', 'CLI')`},
		{`'CAPPED'`, `r.state = 'ACTIVE' AND r.method <> 'CLI' AND r.max_concurrency IS NOT NULL`, `('PARKED', 'DIRECT', 'CLI')`},
		{`'CLI'`, `r.state = 'ACTIVE' AND r.method = 'CLI'`, `('PARKED', 'DIRECT', 'CAPPED')`},
	}
	out := make([]string, len(moves))
	for i, m := range moves {
		out[i] = fmt.Sprintf(`UPDATE deliveries SET lane = %s WHERE id IN (
	SELECT d.id FROM recipients r JOIN deliveries d ON d.recipient_id = r.id
	WHERE (r.state_changed_at >= %[2]s OR r.cap_changed_at >= %[2]s OR %[2]s IS NULL) AND %[3]s
	  AND d.status = 'PENDING' AND d.lane IN %[4]s
	LIMIT %[5]s%[6]s)`, m.to, since, m.recipients, m.from, limit, lock)
	}
	return out
}

// reconcileLanes moves the deliveries whose lane no longer matches their recipient — of the recipients changed
// within laneWindow, or of every recipient when all is set — batch after batch, until none is left or its time
// budget is spent (the next run goes on). It returns how many it moved and whether it got through all of them.
func reconcileLanes(ctx context.Context, db *storage.DB, now time.Time, all bool) (moved int64, done bool, err error) {
	start := time.Now()
	var since any = now.Add(-laneWindow)
	if all {
		since = nil
	}
	for _, query := range statements.For(db).laneMoves {
		for {
			if time.Since(start) > laneBudget {
				return moved, false, nil
			}
			res, err := db.SQL.ExecContext(ctx, query, since, laneBatch)
			if err != nil {
				return moved, false, fmt.Errorf("reconcile lanes: %w", err)
			}
			n, _ := res.RowsAffected()
			moved += n
			if n < laneBatch {
				break
			}
		}
	}
	return moved, true, nil
}
