package stats

import (
	"context"
	"fmt"
	"time"

	"github.com/adal-relay/adal/storage"
)

// PurgeBatch bounds one delete of old aggregates. A run deletes about an hour of rows (it runs every few
// minutes, and rows age out by the hour), a row per active recipient and server: batches keep a run that
// follows a long stop as short as the others for whatever shares the tables meanwhile.
const PurgeBatch = 5000

// purgeSQL deletes, oldest first, up to $2 rows of one table whose period started before $1.
var purgeSQL = func() map[string]storage.PerDialect[string] {
	out := map[string]storage.PerDialect[string]{}
	for table, col := range map[string]string{"recipient_hour_stats": "hour", "server_hour_stats": "hour", "tenant_day_stats": "day"} {
		out[table] = storage.Numbered(fmt.Sprintf(
			`DELETE FROM %[1]s WHERE id IN (SELECT id FROM %[1]s WHERE %[2]s < $1 ORDER BY %[2]s LIMIT $2)`, table, col))
	}
	return out
}()

// Purge deletes the aggregates whose hour or day started more than Retention before now, in batches of
// PurgeBatch rows, one statement each, and returns how many rows it deleted.
func Purge(ctx context.Context, db *storage.DB, now time.Time) (int64, error) {
	// UTC: SQLite compares the stored times as text.
	cutoff := now.UTC().Add(-Retention).Truncate(time.Hour)
	var total int64
	for _, table := range []string{"recipient_hour_stats", "server_hour_stats", "tenant_day_stats"} {
		query := purgeSQL[table].For(db)
		for {
			res, err := db.SQL.ExecContext(ctx, query, cutoff, PurgeBatch)
			if err != nil {
				return total, fmt.Errorf("stats: purge %s: %w", table, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return total, fmt.Errorf("stats: purge %s: %w", table, err)
			}
			total += n
			if n < PurgeBatch {
				break
			}
		}
	}
	return total, nil
}
