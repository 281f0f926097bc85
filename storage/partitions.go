package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lib/pq"
)

// The history's partitions on PostgreSQL: one per UTC day of expiry and table, named <table>_pYYYYMMDD, and a
// default partition (<table>_default) for rows whose day has none: expiries beyond the horizon created ahead,
// and rows stored before their day's partition was. Creating a day moves its rows out of the default
// partition; dropping a day deletes its rows at the cost of unlinking a file.

const partitionDay = "20060102"

// MaxPartitionHorizonDays bounds how far ahead day partitions are created: requests kept longer than that wait
// in the default partition until their day comes within reach, and are purged from it row by row if they
// expire there. A table with too many partitions slows the planning of every statement that cannot prune them.
const MaxPartitionHorizonDays = 400

// partitionLockTimeout bounds how long creating or dropping a partition waits for its locks. Dropping a day
// locks its table whole for an instant, and while it waits every statement on the table queues behind it:
// better to give up and try again at the next run than to stall intake.
const partitionLockTimeout = "100ms"

// PartitionHorizon is the last day for which EnsurePartitions should create partitions at now: as far ahead
// as the longest retention of a plan (a request accepted now expires then), at most MaxPartitionHorizonDays,
// and a week beyond it.
func PartitionHorizon(ctx context.Context, db *DB, now time.Time) (time.Time, error) {
	var days int
	if err := db.SQL.QueryRowContext(ctx, `SELECT COALESCE(max(retention_days), 0) FROM plans`).Scan(&days); err != nil {
		return time.Time{}, fmt.Errorf("read the longest retention: %w", err)
	}
	return dayOf(now).AddDate(0, 0, min(days, MaxPartitionHorizonDays)+7), nil
}

// EnsurePartitions creates the missing day partitions of the history, on PostgreSQL, for every UTC day from
// the day of from through the day of through, and returns how many days it created. Each day is one
// transaction: the partition of each table is created, takes its day's rows from the default partition and
// is attached. A day whose locks are not had at once, or that another process creates meanwhile, is left to
// the next call (or to that process): its rows wait in the default partition. On SQLite it does nothing.
func EnsurePartitions(ctx context.Context, db *DB, from, through time.Time) (int, error) {
	if !db.Postgres() {
		return 0, nil
	}
	have, err := partitionDays(ctx, db)
	if err != nil {
		return 0, err
	}
	created := 0
	for day := dayOf(from); !day.After(through); day = day.AddDate(0, 0, 1) {
		if have[day] {
			continue
		}
		if err := createDay(ctx, db, day); err != nil {
			if isLockTimeout(err) || isDuplicateTable(err) {
				continue
			}
			return created, fmt.Errorf("create the partitions of %s: %w", day.Format(time.DateOnly), err)
		}
		created++
	}
	return created, nil
}

// partitionTx runs f in a transaction whose statements wait at most partitionLockTimeout for a lock, and
// commits it when f succeeds.
func partitionTx(ctx context.Context, db *DB, f func(tx *sql.Tx) error) error {
	tx, err := db.SQL.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SET LOCAL lock_timeout = '`+partitionLockTimeout+`'`); err != nil {
		return err
	}
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}

func createDay(ctx context.Context, db *DB, day time.Time) error {
	return partitionTx(ctx, db, func(tx *sql.Tx) error { return createDayIn(ctx, tx, day) })
}

func createDayIn(ctx context.Context, tx *sql.Tx, day time.Time) error {
	lo, hi := pq.QuoteLiteral(day.Format(time.RFC3339)), pq.QuoteLiteral(day.AddDate(0, 0, 1).Format(time.RFC3339))
	for _, table := range PartitionedTables {
		part := pq.QuoteIdentifier(partitionName(table, day))
		parent, def := pq.QuoteIdentifier(table), pq.QuoteIdentifier(table+"_default")
		options := ""
		if table == "requests" {
			options = fmt.Sprintf(" WITH (fillfactor = %d)", RequestsFillFactor)
		}
		// The check lets the attach skip its scan of the new partition; the rows come from the default
		// partition, which the attach then scans (short: it holds only what has no day yet) under a lock that
		// holds off the statements reading it meanwhile.
		stmts := []string{
			`CREATE TABLE ` + part + ` (LIKE ` + parent + `)` + options,
			`WITH moved AS (DELETE FROM ` + def + ` WHERE ` + PartitionKey + ` >= ` + lo + ` AND ` + PartitionKey + ` < ` + hi +
				` RETURNING *) INSERT INTO ` + part + ` SELECT * FROM moved`,
			`ALTER TABLE ` + part + ` ADD CONSTRAINT bound CHECK (` + PartitionKey + ` >= ` + lo + ` AND ` + PartitionKey + ` < ` + hi + `)`,
			`ALTER TABLE ` + parent + ` ATTACH PARTITION ` + part + ` FOR VALUES FROM (` + lo + `) TO (` + hi + `)`,
			`ALTER TABLE ` + part + ` DROP CONSTRAINT bound`,
		}
		for _, stmt := range stmts {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("%s: %w", table, err)
			}
		}
	}
	return nil
}

// DropExpiredPartitions drops, on PostgreSQL, the day partitions of the history whose whole day has passed
// by before, children first, and returns the days it dropped. A day whose lock is not had at once, or with a
// delivery in flight, is left for the next call. On SQLite it does nothing.
func DropExpiredPartitions(ctx context.Context, db *DB, before time.Time) ([]time.Time, error) {
	if !db.Postgres() {
		return nil, nil
	}
	have, err := partitionDays(ctx, db)
	if err != nil {
		return nil, err
	}
	var days []time.Time
	for day := range have {
		if !day.AddDate(0, 0, 1).After(before) {
			days = append(days, day)
		}
	}
	slices.SortFunc(days, func(a, b time.Time) int { return a.Compare(b) })
	var dropped []time.Time
	for _, day := range days {
		if err := dropDay(ctx, db, day); err != nil {
			if isLockTimeout(err) || errors.Is(err, errDayBusy) {
				continue
			}
			return dropped, fmt.Errorf("drop the partitions of %s: %w", day.Format(time.DateOnly), err)
		}
		dropped = append(dropped, day)
	}
	return dropped, nil
}

func dropDay(ctx context.Context, db *DB, day time.Time) error {
	return partitionTx(ctx, db, func(tx *sql.Tx) error { return dropDayIn(ctx, tx, day) })
}

func dropDayIn(ctx context.Context, tx *sql.Tx, day time.Time) error {
	// A delivery of the day still in flight (an attempt that began before its request expired) keeps the day
	// until its outcome is recorded: a capped recipient's slot is given back by that record.
	var busy bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM `+pq.QuoteIdentifier(partitionName("deliveries", day))+
		` WHERE status = 'IN_PROGRESS')`).Scan(&busy); err != nil {
		return err
	}
	if busy {
		return errDayBusy
	}
	// Dropping a partition locks the partition, then its table (and the default partition) whole. Taken in
	// that order it waits on every statement that reads the table, which holds the table and waits for the
	// partition: the tables are locked first, so that statements queue behind the drop for its instant.
	tables := make([]string, len(PartitionedTables))
	for i, table := range PartitionedTables {
		tables[i] = pq.QuoteIdentifier(table)
	}
	if _, err := tx.ExecContext(ctx, `LOCK TABLE `+strings.Join(tables, ", ")+` IN ACCESS EXCLUSIVE MODE`); err != nil {
		return err
	}
	for _, table := range slices.Backward(PartitionedTables) {
		if _, err := tx.ExecContext(ctx, `DROP TABLE IF EXISTS `+pq.QuoteIdentifier(partitionName(table, day))); err != nil {
			return fmt.Errorf("%s: %w", table, err)
		}
	}
	return nil
}

// PartitionDays returns the days that have partitions, on PostgreSQL, in order.
func PartitionDays(ctx context.Context, db *DB) ([]time.Time, error) {
	if !db.Postgres() {
		return nil, nil
	}
	have, err := partitionDays(ctx, db)
	if err != nil {
		return nil, err
	}
	days := make([]time.Time, 0, len(have))
	for day := range have {
		days = append(days, day)
	}
	slices.SortFunc(days, func(a, b time.Time) int { return a.Compare(b) })
	return days, nil
}

// partitionDays reads the days of the first partitioned table's day partitions in the current schema. The
// tables' partitions are created and dropped together, one transaction a day.
func partitionDays(ctx context.Context, db *DB) (map[time.Time]bool, error) {
	rows, err := db.SQL.QueryContext(ctx, `
		SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = to_regclass(quote_ident(current_schema()) || '.' || quote_ident($1))`, PartitionedTables[0])
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	names, err := ScanColumn[string](rows)
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	prefix := PartitionedTables[0] + "_p"
	have := make(map[time.Time]bool, len(names))
	for _, name := range names {
		if day, err := time.Parse(partitionDay, strings.TrimPrefix(name, prefix)); err == nil && strings.HasPrefix(name, prefix) {
			have[day] = true
		}
	}
	return have, nil
}

var errDayBusy = errors.New("a delivery of the day is in flight")

func partitionName(table string, day time.Time) string {
	return table + "_p" + day.Format(partitionDay)
}

func dayOf(t time.Time) time.Time { return t.UTC().Truncate(24 * time.Hour) }

func isLockTimeout(err error) bool { return pqCode(err) == "55P03" } // lock_not_available

func isDuplicateTable(err error) bool { return pqCode(err) == "42P07" } // duplicate_table

func pqCode(err error) pq.ErrorCode {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		return pqErr.Code
	}
	return ""
}
