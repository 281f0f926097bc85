package storage_test

import (
	"context"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
)

// Every table of a tenant's rows has tenant_id in its primary key, in each unique index and in each foreign
// key to another such table, which is what Citus' create_distributed_table(…, 'tenant_id') with co-location
// asks of a table. The rule is read off the catalog, so a migration that breaks it fails here.
func TestTenantTablesCanBeDistributedByTenant(t *testing.T) {
	t.Parallel()
	dbtest.SkipUnlessPostgres(t)
	db := dbtest.Open(t)
	ctx := context.Background()

	// The schema's tables (partitioned parents, not their partitions) and whether they have tenant_id.
	tables := map[string]bool{}
	for _, row := range pairs(t, db, `
		SELECT c.relname, EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id'
			AND NOT a.attisdropped)::text
		FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
			AND NOT c.relispartition`) {
		tables[row[0]] = row[1] == "true"
	}
	require.Greater(t, len(tables), 15)
	distributed := func(table string) bool {
		return table != "tenants" && !slices.Contains(storage.ReferenceTables, table)
	}
	var broken []string
	for table, hasTenant := range tables {
		if distributed(table) && !hasTenant {
			broken = append(broken, table+": no tenant_id")
		}
	}

	// Primary keys and unique indexes: each with its columns.
	for _, row := range pairs(t, db, `
		SELECT c.relname || ' ' || i.relname, array_to_string(ARRAY(
			SELECT a.attname FROM unnest(x.indkey) k JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k), ',')
		FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
		WHERE x.indisunique AND c.relnamespace = current_schema()::regnamespace AND NOT c.relispartition`) {
		table, index, _ := strings.Cut(row[0], " ")
		if distributed(table) && !slices.Contains(strings.Split(row[1], ","), "tenant_id") {
			broken = append(broken, table+": unique index "+index+" ("+row[1]+") lacks tenant_id")
		}
	}

	// Foreign keys between distributed tables: tenant_id on both sides, matched to each other. A key to
	// tenants is the tenant_id itself.
	for _, row := range pairs(t, db, `
		SELECT c.conrelid::regclass::text || ' ' || c.confrelid::regclass::text || ' ' || c.conname,
			array_to_string(ARRAY(SELECT a.attname || '=' || b.attname
				FROM unnest(c.conkey, c.confkey) AS k(f, r)
				JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.f
				JOIN pg_attribute b ON b.attrelid = c.confrelid AND b.attnum = k.r), ',')
		FROM pg_constraint c WHERE c.contype = 'f' AND c.connamespace = current_schema()::regnamespace`) {
		parts := strings.Fields(row[0])
		from, to, name := parts[0], parts[1], parts[2]
		pairs := strings.Split(row[1], ",")
		switch {
		case !distributed(from):
		case to == "tenants":
			if !slices.Equal(pairs, []string{"tenant_id=id"}) {
				broken = append(broken, from+": foreign key "+name+" to tenants is not tenant_id ("+row[1]+")")
			}
		case distributed(to):
			if !slices.Contains(pairs, "tenant_id=tenant_id") {
				broken = append(broken, from+": foreign key "+name+" to "+to+" lacks tenant_id ("+row[1]+")")
			}
		default:
			broken = append(broken, from+": foreign key "+name+" to the reference table "+to)
		}
	}
	require.Empty(t, broken, "tables a tenant-sharded cluster would refuse")

	// The rule holds of the tables the test knows to be a tenant's, so an empty catalog cannot pass it.
	for _, table := range []string{"servers", "recipients", "requests", "deliveries", "attempts", "ledger_entries"} {
		require.True(t, tables[table], table)
	}
	var pk string
	require.NoError(t, db.SQL.QueryRowContext(ctx, `SELECT pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conrelid = to_regclass(quote_ident(current_schema()) || '.deliveries') AND contype = 'p'`).Scan(&pk))
	require.Equal(t, "PRIMARY KEY (id, tenant_id, expires_at)", pk)
}

// On PostgreSQL the history is partitioned by range of expiry, with a default partition, and the migration
// leaves the days from today through the horizon created.
func TestHistoryIsPartitionedByExpiryDay(t *testing.T) {
	t.Parallel()
	dbtest.SkipUnlessPostgres(t)
	db := dbtest.Open(t)
	for _, table := range storage.PartitionedTables {
		keys := pairs(t, db, `SELECT c.relname, pg_get_partkeydef(c.oid) FROM pg_class c
			WHERE c.oid = to_regclass(quote_ident(current_schema()) || '.`+table+`')`)
		require.Equal(t, [][2]string{{table, "RANGE (expires_at)"}}, keys)
		defaults := pairs(t, db, `SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i
			JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = to_regclass(quote_ident(current_schema()) || '.`+table+`')
				AND c.relname = '`+table+`_default'`)
		require.Equal(t, [][2]string{{table + "_default", "DEFAULT"}}, defaults)
	}
	days, err := storage.PartitionDays(context.Background(), db.DB)
	require.NoError(t, err)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	require.Equal(t, today, days[0])
	require.Equal(t, today.AddDate(0, 0, 7), days[len(days)-1], "no plan yet: a week ahead")
	require.Len(t, days, 8)
}

// Creating a day moves its rows out of the default partition, ids and all; dropping it takes them with it,
// unless one of its deliveries is in flight, and spares every other day.
func TestPartitionsMoveRowsInAndDropWhole(t *testing.T) {
	t.Parallel()
	dbtest.SkipUnlessPostgres(t)
	db := dbtest.Open(t)
	ctx := context.Background()
	req := writeRows(t, db)
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 40)
	expires := day.Add(5 * time.Hour)
	// A request beyond the horizon, with a delivery and an attempt: all three in the default partitions.
	var far, delivery int64
	require.NoError(t, db.SQL.QueryRowContext(ctx, `INSERT INTO requests (tenant_id, server_id, key, method,
		headers, body, received_at, expires_at) SELECT tenant_id, server_id, 'far', 'POST', headers, body, now(), $1
		FROM requests WHERE id = $2 RETURNING id`, expires, req.ID).Scan(&far))
	require.NoError(t, db.SQL.QueryRowContext(ctx, `INSERT INTO deliveries (tenant_id, created_at, expires_at,
		request_id, recipient_id, max_attempts, retry_schedule, status) SELECT tenant_id, now(), $1, $2, recipient_id,
		3, 'QUADRATIC', 'IN_PROGRESS' FROM deliveries WHERE request_id = $3 RETURNING id`, expires, far, req.ID).Scan(&delivery))
	_, err := db.SQL.ExecContext(ctx, `INSERT INTO attempts (tenant_id, delivery_id, number, expires_at, started_at,
		finished_at, status, duration_ms) SELECT tenant_id, id, 1, expires_at, now(), now(), 'FAILED', 5
		FROM deliveries WHERE id = $1`, delivery)
	require.NoError(t, err)
	require.Equal(t, 1, count(t, db, "requests_default"))

	n, err := storage.EnsurePartitions(ctx, db.DB, day, day.AddDate(0, 0, 1))
	require.NoError(t, err)
	require.Equal(t, 2, n)
	suffix := "_p" + day.Format("20060102")
	for _, table := range storage.PartitionedTables {
		require.Equal(t, 1, count(t, db, table+suffix), table)
		require.Zero(t, count(t, db, table+"_default"), table)
	}
	var id int64
	require.NoError(t, db.SQL.QueryRowContext(ctx, `SELECT id FROM requests WHERE key = 'far'`).Scan(&id))
	require.Equal(t, far, id)
	n, err = storage.EnsurePartitions(ctx, db.DB, day, day)
	require.NoError(t, err)
	require.Zero(t, n, "a day is created once")

	// The day is past, but its delivery is in flight: kept until it is recorded.
	after := day.AddDate(0, 0, 1)
	dropped, err := storage.DropExpiredPartitions(ctx, db.DB, after)
	require.NoError(t, err)
	require.NotContains(t, dropped, day)
	require.Equal(t, 1, count(t, db, "requests"+suffix))
	_, err = db.SQL.ExecContext(ctx, `UPDATE deliveries SET status = 'FAILED' WHERE id = $1`, delivery)
	require.NoError(t, err)

	dropped, err = storage.DropExpiredPartitions(ctx, db.DB, after)
	require.NoError(t, err)
	require.Contains(t, dropped, day)
	for _, table := range storage.PartitionedTables {
		var exists bool
		require.NoError(t, db.SQL.QueryRowContext(ctx, `SELECT to_regclass(quote_ident(current_schema()) || '.' || $1) IS NOT NULL`,
			table+suffix).Scan(&exists))
		require.False(t, exists, table)
	}
	require.Zero(t, count(t, db, "requests WHERE key = 'far'"))
	// Every day up to the one dropped went too (they had passed); the day after it stays.
	remaining, err := storage.PartitionDays(ctx, db.DB)
	require.NoError(t, err)
	require.Equal(t, []time.Time{after}, remaining)
}

// A database of the layout before partitioning upgrades in place with one Migrate: every row is kept, each
// delivery and attempt takes its request's expiry, ids go on from where they were, and the schema is the one a
// fresh database gets.
func TestMigrateUpgradesToPartitionedHistory(t *testing.T) {
	t.Parallel()
	db := dbtest.OpenEmpty(t)
	ctx := context.Background()
	files := migrationFiles(t)
	last := slices.IndexFunc(files, func(f string) bool { return strings.Contains(f, "history_partitions") })
	require.Positive(t, last)
	version, err := strconv.ParseInt(strings.SplitN(path.Base(files[last-1]), "_", 2)[0], 10, 64)
	require.NoError(t, err)
	require.NoError(t, storage.MigrateUpTo(ctx, db.DB, version))

	// Rows as the old layout held them, written with plain SQL: the ent client knows only the new one.
	expires := time.Now().UTC().Add(48 * time.Hour).Truncate(time.Second)
	q := func(query string) string {
		if db.Postgres() {
			return query
		}
		return strings.ReplaceAll(query, "$", "?") // numbered alike: ?1, ?2…
	}
	exec := func(query string, args ...any) {
		t.Helper()
		_, err := db.SQL.ExecContext(ctx, q(query), args...)
		require.NoError(t, err)
	}
	id := func(query string, args ...any) int64 {
		t.Helper()
		var id int64
		require.NoError(t, db.SQL.QueryRowContext(ctx, q(query), args...).Scan(&id))
		return id
	}
	plan := id(`INSERT INTO plans (created_at, name, monthly_credits, retention_days, max_servers,
		max_recipients_per_server, selectable) VALUES ($1, 'p', 10, 30, 1, 1, false) RETURNING id`, time.Now().UTC())
	tenant := id(`INSERT INTO tenants (created_at, name, credit_balance, plan_id) VALUES ($1, 'acme', 5, $2) RETURNING id`,
		time.Now().UTC(), plan)
	server := id(`INSERT INTO servers (created_at, name, inbound_key, tenant_id) VALUES ($1, 's', 'key', $2) RETURNING id`,
		time.Now().UTC(), tenant)
	recipient := id(`INSERT INTO recipients (created_at, name, method, url, max_attempts, retry_schedule, timeout_seconds,
		tenant_id, server_id, signing_secret) VALUES ($1, 'r', 'DIRECT_HTTP', 'http://example.com', 3, 'QUADRATIC', 30, $2, $3, 'whsec_x')
		RETURNING id`, time.Now().UTC(), tenant, server)
	var requests, deliveries []int64
	for i := range 3 {
		r := id(`INSERT INTO requests (key, method, headers, body, received_at, expires_at, tenant_id, server_id)
			VALUES ($1, 'POST', $2, $3, $4, $5, $6, $7) RETURNING id`, "k"+strconv.Itoa(i), []byte(`{}`), []byte(`{"n":1}`),
			time.Now().UTC(), expires.Add(time.Duration(i)*24*time.Hour), tenant, server)
		d := id(`INSERT INTO deliveries (created_at, max_attempts, retry_schedule, tenant_id, recipient_id, request_id)
			VALUES ($1, 3, 'QUADRATIC', $2, $3, $4) RETURNING id`, time.Now().UTC(), tenant, recipient, r)
		exec(`INSERT INTO attempts (number, started_at, finished_at, status, duration_ms, tenant_id, delivery_id)
			VALUES (1, $1, $1, 'FAILED', 3, $2, $3)`, time.Now().UTC(), tenant, d)
		requests, deliveries = append(requests, r), append(deliveries, d)
	}

	n, err := storage.Migrate(ctx, db.DB)
	require.NoError(t, err)
	require.Equal(t, len(files)-last, n)
	require.NoError(t, storage.CheckMigrated(ctx, db.DB))
	for i := range requests {
		var got time.Time
		for _, query := range []string{
			`SELECT expires_at FROM requests WHERE id = $1`,
			`SELECT expires_at FROM deliveries WHERE id = $1`,
		} {
			arg := requests[i]
			if strings.Contains(query, "deliveries") {
				arg = deliveries[i]
			}
			require.NoError(t, db.SQL.QueryRowContext(ctx, q(query), arg).Scan(&got))
			require.True(t, got.Equal(expires.Add(time.Duration(i)*24*time.Hour)), "%s: %v", query, got)
		}
		require.NoError(t, db.SQL.QueryRowContext(ctx, q(`SELECT expires_at FROM attempts WHERE delivery_id = $1`),
			deliveries[i]).Scan(&got))
		require.True(t, got.Equal(expires.Add(time.Duration(i)*24*time.Hour)))
	}
	for _, table := range []string{"requests", "deliveries", "attempts"} {
		require.Equal(t, 3, count(t, db, table), table)
	}
	// New rows take ids after the old ones.
	next := id(`INSERT INTO requests (key, method, headers, body, received_at, expires_at, tenant_id, server_id)
		VALUES ('new', 'GET', $1, $1, $2, $3, $4, $5) RETURNING id`, []byte(`{}`), time.Now().UTC(), expires, tenant, server)
	require.Greater(t, next, requests[len(requests)-1])
	if db.Postgres() {
		// Each row is in its day's partition, none left in the default one: the plan's 30 days are ahead.
		require.Zero(t, count(t, db, "requests_default"))
		require.Zero(t, count(t, db, "attempts_default"))
		require.Equal(t, 1, count(t, db, "deliveries_p"+expires.Format("20060102")))
	}
	require.Equal(t, schemaDump(t, dbtest.Open(t)), schemaDump(t, db))
}

// count counts the rows of from (a table, and maybe a WHERE clause).
func count(t *testing.T, db *dbtest.DB, from string) int {
	t.Helper()
	var n int
	require.NoError(t, db.SQL.QueryRowContext(context.Background(), `SELECT count(*) FROM `+from).Scan(&n))
	return n
}
