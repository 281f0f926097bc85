package storage_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/migrations"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
	"github.com/adal-relay/adal/webhook"
)

// The baseline migration makes the schema the automatic migration made before it, to the index and the
// storage option.
func TestBaselineIsTheAutomaticMigrationsSchema(t *testing.T) {
	t.Parallel()
	if dbtest.Postgres() {
		// A later migration partitions the history and puts the tenant in its keys, which ent's automatic
		// migration cannot express; `migrations -check` compares the two through storage.PostgresTables.
		t.Skip("the PostgreSQL layout is checked by go run ./cmd/migrations -check")
	}
	auto := dbtest.OpenEmpty(t)
	require.NoError(t, storage.AutoMigrate(context.Background(), auto.DB))
	require.Equal(t, schemaDump(t, auto), schemaDump(t, dbtest.Open(t)))
}

// Migrate applies what is pending once; CheckMigrated tells whether anything is.
func TestMigrateAppliesPendingOnce(t *testing.T) {
	t.Parallel()
	db := dbtest.OpenEmpty(t)
	ctx := context.Background()
	require.ErrorIs(t, storage.CheckMigrated(ctx, db.DB), storage.ErrPending)
	n, err := storage.Migrate(ctx, db.DB)
	require.NoError(t, err)
	require.Positive(t, n)
	require.NoError(t, storage.CheckMigrated(ctx, db.DB))
	n, err = storage.Migrate(ctx, db.DB)
	require.NoError(t, err)
	require.Zero(t, n)
}

// A database of the automatic migration is upgraded in place: with its rows, to the schema a fresh one gets,
// and recorded as migrated.
func TestMigrateUpgradesTheAutomaticMigrationsDatabase(t *testing.T) {
	t.Parallel()
	db, ctx, req := autoMigratedWithRows(t)
	require.NoError(t, storage.DownToBaseline(ctx, db.DB))
	require.ErrorIs(t, storage.CheckMigrated(ctx, db.DB), storage.ErrPending)

	_, err := storage.Migrate(ctx, db.DB)
	require.NoError(t, err)
	require.NoError(t, storage.CheckMigrated(ctx, db.DB))
	requireRows(t, db, req)
	require.Equal(t, schemaDump(t, dbtest.Open(t)), schemaDump(t, db))
}

// Recipients from before deliveries were signed get a signing key each from the migration: of the size new
// ones get, and their own.
func TestMigrationGivesEveryRecipientASigningKey(t *testing.T) {
	t.Parallel()
	db, ctx, req := autoMigratedWithRows(t)
	rec, err := db.Client.Recipient.Query().Only(ctx)
	require.NoError(t, err)
	_, err = db.Client.Recipient.Create().SetTenantID(rec.TenantID).SetServerID(rec.ServerID).SetName("cli").
		SetMethod("CLI").Save(ctx)
	require.NoError(t, err)
	require.NoError(t, storage.DownToBaseline(ctx, db.DB))

	_, err = storage.Migrate(ctx, db.DB)
	require.NoError(t, err)
	recs, err := db.Client.Recipient.Query().All(ctx)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	for _, r := range recs {
		require.Len(t, r.SigningSecret, webhook.KeySize, "recipient %s", r.Name)
		require.Nil(t, r.PreviousSigningSecret)
		require.Equal(t, recipient.SignatureHeadersADAL, r.SignatureHeaders)
	}
	require.NotEqual(t, recs[0].SigningSecret, recs[1].SigningSecret, "each recipient has a key of its own")
	require.Equal(t, rec.Name, recs[0].Name, "the rows survive")
	require.Equal(t, rec.URL, recs[0].URL)
	got, err := db.Client.Request.Get(ctx, req.ID)
	require.NoError(t, err)
	require.Equal(t, req.Body, got.Body)
}

// A database of the automatic migration of earlier versions — the request history's foreign keys, the
// deliveries' and history's indexes since replaced or dropped, jsonb headers, no fill factor — is upgraded to
// the baseline too, its rows intact.
func TestMigrateUpgradesEarlierAutomaticMigrations(t *testing.T) {
	t.Parallel()
	db := dbtest.OpenEmpty(t)
	ctx := viewer.SystemContext(context.Background())
	require.NoError(t, storage.CreateGenerated(ctx, db.DB)) // every foreign key of the generated schema
	req := writeRows(t, db)
	require.NoError(t, storage.DownToBaseline(ctx, db.DB))
	for _, stmt := range []string{ // as earlier versions created them
		"CREATE INDEX delivery_status_next_attempt_at ON deliveries (status, next_attempt_at)",
		"CREATE INDEX delivery_status_lease_expires_at ON deliveries (status, lease_expires_at)",
		"CREATE INDEX delivery_recipient_id_status ON deliveries (recipient_id, status)",
		"CREATE INDEX request_tenant_id ON requests (tenant_id)",
		"CREATE INDEX request_replay_of_id ON requests (replay_of_id)",
		"CREATE INDEX delivery_tenant_id ON deliveries (tenant_id)",
		"CREATE INDEX attempt_tenant_id ON attempts (tenant_id)",
		"CREATE INDEX ledgerentry_tenant_id ON ledger_entries (tenant_id)",
		"DROP INDEX ledgerentry_grant_period",
		"CREATE UNIQUE INDEX ledgerentry_tenant_id_period ON ledger_entries (tenant_id, period)",
		"CREATE UNIQUE INDEX requests_key_key ON requests (key)",
	} {
		_, err := db.SQL.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	if db.Postgres() {
		for _, table := range []string{"requests", "outbound_jobs"} {
			_, err := db.SQL.ExecContext(ctx, `ALTER TABLE `+table+
				` ALTER COLUMN headers TYPE jsonb USING convert_from(headers, 'UTF8')::jsonb`)
			require.NoError(t, err)
		}
		_, err := db.SQL.ExecContext(ctx, `ALTER TABLE requests RESET (fillfactor)`)
		require.NoError(t, err)
	}
	require.Contains(t, foreignKeys(t, db), "attempts.delivery_id")

	_, err := storage.Migrate(ctx, db.DB)
	require.NoError(t, err)
	requireRows(t, db, req)
	require.Equal(t, schemaDump(t, dbtest.Open(t)), schemaDump(t, db))
}

// The request history's foreign keys are not in the database; the others are.
func TestMigrationsLeaveHistoryUnchecked(t *testing.T) {
	t.Parallel()
	fks := foreignKeys(t, dbtest.Open(t))
	for _, fk := range []string{"attempts.delivery_id", "deliveries.request_id", "requests.replay_of_id",
		"attempts.tenant_id", "deliveries.recipient_id", "deliveries.tenant_id", "requests.server_id",
		"requests.tenant_id", "ledger_entries.tenant_id"} {
		require.NotContains(t, fks, fk, "%s is checked by the application, not the database", fk)
	}
	for _, fk := range []string{"recipients.server_id", "recipients.tenant_id", "servers.tenant_id",
		"tenants.plan_id", "outbound_jobs.tenant_id", "outbound_attempts.job_id"} {
		require.Contains(t, fks, fk)
	}
}

// The deliveries' indexes are partial, and the request history carries no tenant_id index, no index of the
// requests' random keys, and only partial indexes on what few of its rows have (a replay's original, a
// grant's period); on PostgreSQL the requests table keeps room on its pages for the status update.
func TestMigrationsIndexTheHistorySparingly(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	all := map[string]string{}
	for _, table := range []string{"requests", "deliveries", "attempts", "ledger_entries"} {
		for name, def := range indexes(t, db, table) {
			all[name] = def
		}
	}
	for name, where := range map[string]string{
		"delivery_pending_due":       "PENDING",
		"delivery_direct_due":        "PENDING",
		"delivery_pending_lane":      "PENDING",
		"delivery_in_progress_lease": "IN_PROGRESS",
	} {
		require.Contains(t, all[name], "'"+where+"'", "%s is partial", name)
	}
	require.Contains(t, all, "delivery_request_id")
	for _, name := range []string{"request_tenant_id", "delivery_tenant_id", "attempt_tenant_id",
		"ledgerentry_tenant_id", "ledgerentry_tenant_id_period", "requests_key_key"} {
		require.NotContains(t, all, name)
	}
	require.Contains(t, all["request_replays"], "replay_of_id IS NOT NULL")
	require.Contains(t, all["ledgerentry_grant_period"], "UNIQUE")
	require.Contains(t, all["ledgerentry_grant_period"], "period IS NOT NULL")
	if db.Postgres() {
		// Every partition of requests keeps the room: the default one and each day's.
		rows, err := db.SQL.QueryContext(context.Background(), `SELECT COALESCE(array_to_string(c.reloptions, ','), '')
			FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = to_regclass(quote_ident(current_schema()) || '.requests')`)
		require.NoError(t, err)
		options, err := storage.ScanColumn[string](rows)
		require.NoError(t, err)
		require.Greater(t, len(options), 7, "the default partition and the days ahead")
		for _, o := range options {
			require.Equal(t, fmt.Sprintf("fillfactor=%d", storage.RequestsFillFactor), o)
		}
	}
}

var testHeaders = http.Header{"Content-Type": {"application/json"}, "X-Many": {"a", "b"}}

// autoMigratedWithRows opens an empty database, creates the schema with the automatic migration and writes
// rows into it (writeRows); it returns it, a system context and the request written.
func autoMigratedWithRows(t *testing.T) (*dbtest.DB, context.Context, *ent.Request) {
	t.Helper()
	db := dbtest.OpenEmpty(t)
	ctx := viewer.SystemContext(context.Background())
	require.NoError(t, storage.AutoMigrate(ctx, db.DB))
	return db, ctx, writeRows(t, db)
}

// writeRows stores a tenant with a server, a recipient and a request with one delivery, and returns the
// request.
func writeRows(t *testing.T, db *dbtest.DB) *ent.Request {
	t.Helper()
	ctx := viewer.SystemContext(context.Background())
	plan, err := db.Client.Plan.Create().SetName("p").SetMonthlyCredits(10).SetRetentionDays(7).
		SetMaxServers(1).SetMaxRecipientsPerServer(1).Save(ctx)
	require.NoError(t, err)
	tn, err := db.Client.Tenant.Create().SetName("acme").SetPlanID(plan.ID).Save(ctx)
	require.NoError(t, err)
	srv, err := db.Client.Server.Create().SetTenantID(tn.ID).SetName("s").SetInboundKey("k").Save(ctx)
	require.NoError(t, err)
	rec, err := db.Client.Recipient.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetName("r").
		SetMethod("DIRECT_HTTP").SetURL("http://example.com/hook").Save(ctx)
	require.NoError(t, err)
	req, err := db.Client.Request.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetKey("r").SetMethod("POST").
		SetHeaders(testHeaders).SetBody([]byte(`{"a":1}`)).SetExpiresAt(time.Now().Add(time.Hour)).Save(ctx)
	require.NoError(t, err)
	_, err = db.Client.Delivery.Create().SetTenantID(tn.ID).SetRecipientID(rec.ID).SetRequestID(req.ID).
		SetExpiresAt(req.ExpiresAt).SetMaxAttempts(3).SetRetrySchedule("QUADRATIC").SetCreatedAt(time.Now()).Save(ctx)
	require.NoError(t, err)
	return req
}

// requireRows checks that the rows of writeRows are all there, the request as stored.
func requireRows(t *testing.T, db *dbtest.DB, want *ent.Request) {
	t.Helper()
	ctx := viewer.SystemContext(context.Background())
	got, err := db.Client.Request.Get(ctx, want.ID)
	require.NoError(t, err)
	require.Equal(t, testHeaders, got.Headers)
	require.Equal(t, want.Body, got.Body)
	n, err := got.QueryDeliveries().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	for _, count := range []func(context.Context) (int, error){db.Client.Tenant.Query().Count,
		db.Client.Server.Query().Count, db.Client.Recipient.Query().Count, db.Client.Plan.Query().Count} {
		n, err := count(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
}

// schemaDump lists the tables' columns, constraints, indexes and storage options, sorted, without goose's
// table: two databases with the same dump have the same schema.
func schemaDump(t *testing.T, db *dbtest.DB) []string {
	t.Helper()
	query := `SELECT m.name || ' column ' || c.name, c.type || ' notnull=' || c."notnull" || ' default=' ||
			COALESCE(c.dflt_value, '') || ' pk=' || c.pk
		FROM sqlite_master m, pragma_table_info(m.name) c WHERE m.type = 'table'
		UNION ALL SELECT m.name || ' fk ' || f."from", f."table" || '.' || f."to" || ' ' || f.on_update || ' ' || f.on_delete
		FROM sqlite_master m, pragma_foreign_key_list(m.name) f WHERE m.type = 'table'
		UNION ALL SELECT tbl_name || ' index ' || name, COALESCE(sql, '') FROM sqlite_master WHERE type = 'index'`
	skip := []string{"goose_db_version", "sqlite_sequence"}
	if db.Postgres() {
		// The history's day partitions are left out: which days a database has depends on when it was made
		// and on its plans (storage.PartitionHorizon), not on its migrations.
		days := `(SELECT relname FROM pg_class WHERE relispartition AND relname ~ '_p[0-9]{8}$'
			AND relnamespace = current_schema()::regnamespace)`
		query = `SELECT table_name || ' column ' || column_name, data_type || ' ' || is_nullable || ' default=' ||
				COALESCE(column_default, '') || ' identity=' || is_identity || COALESCE(identity_start, '')
			FROM information_schema.columns WHERE table_schema = current_schema() AND table_name NOT IN ` + days + `
			UNION ALL SELECT conrelid::regclass::text || ' constraint ' || conname, pg_get_constraintdef(oid)
			FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
				AND conrelid::regclass::text NOT IN ` + days + `
			UNION ALL SELECT tablename || ' index ' || indexname, replace(indexdef, current_schema() || '.', '')
			FROM pg_indexes WHERE schemaname = current_schema() AND tablename NOT IN ` + days + `
			UNION ALL SELECT relname || ' options', COALESCE(array_to_string(reloptions, ','), '')
			FROM pg_class WHERE relnamespace = current_schema()::regnamespace AND relkind IN ('r', 'p')
				AND relname NOT IN ` + days + `
			UNION ALL SELECT inhrelid::regclass::text || ' partition of', inhparent::regclass::text
			FROM pg_inherits WHERE inhrelid::regclass::text NOT IN ` + days + `
				AND inhparent IN (SELECT oid FROM pg_class WHERE relnamespace = current_schema()::regnamespace
					AND relkind IN ('r', 'p'))`
		skip = skip[:1]
	}
	var out []string
	for _, row := range pairs(t, db, query) {
		if !slices.ContainsFunc(skip, func(s string) bool { return len(row[0]) > len(s) && row[0][:len(s)+1] == s+" " }) {
			out = append(out, row[0]+": "+row[1])
		}
	}
	require.Greater(t, len(out), 100, "a dump of the whole schema")
	slices.Sort(out)
	return out
}

// foreignKeys lists the database's foreign keys as table.column.
func foreignKeys(t *testing.T, db *dbtest.DB) map[string]bool {
	t.Helper()
	query := `SELECT m.name, f."from" FROM sqlite_master m, pragma_foreign_key_list(m.name) f WHERE m.type = 'table'`
	if db.Postgres() {
		query = `SELECT c.conrelid::regclass::text, a.attname
			FROM pg_constraint c JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey)
			WHERE c.contype = 'f' AND c.connamespace = current_schema()::regnamespace`
	}
	out := map[string]bool{}
	for _, row := range pairs(t, db, query) {
		out[row[0]+"."+row[1]] = true
	}
	return out
}

// pairs runs a query of two text columns and returns its rows.
func pairs(t *testing.T, db *dbtest.DB, query string) [][2]string {
	t.Helper()
	rows, err := db.SQL.QueryContext(context.Background(), query)
	require.NoError(t, err)
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var row [2]string
		require.NoError(t, rows.Scan(&row[0], &row[1]))
		out = append(out, row)
	}
	require.NoError(t, rows.Err())
	return out
}

// indexes maps the names of a table's indexes to their definitions.
func indexes(t *testing.T, db *dbtest.DB, table string) map[string]string {
	t.Helper()
	query := `SELECT name, COALESCE(sql, '') FROM sqlite_master WHERE type = 'index' AND tbl_name = '` + table + `'`
	if db.Postgres() {
		query = `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename = '` +
			table + `'`
	}
	out := map[string]string{}
	for _, row := range pairs(t, db, query) {
		out[row[0]] = row[1]
	}
	return out
}

// Servers started together on one PostgreSQL schema take turns: one upgrades a database of the automatic
// migration, and the other finds it done.
func TestMigrateTakesTurns(t *testing.T) {
	t.Parallel()
	dbtest.SkipUnlessPostgres(t)
	legacy := dbtest.OpenEmpty(t)
	ctx := context.Background()
	require.NoError(t, storage.AutoMigrate(ctx, legacy.DB))
	require.NoError(t, storage.DownToBaseline(ctx, legacy.DB))
	url := legacy.URL
	type result struct {
		n   int
		err error
	}
	results := make(chan result, 2)
	start := make(chan struct{})
	for range 2 {
		db, err := storage.Connect(url, "")
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		go func() {
			<-start
			n, err := storage.Migrate(ctx, db)
			results <- result{n, err}
		}()
	}
	close(start)
	a, b := <-results, <-results
	require.NoError(t, a.err)
	require.NoError(t, b.err)
	// The baseline is recorded, not run; one process applies the later migrations, the other finds them done.
	require.ElementsMatch(t, []int{len(migrationFiles(t)) - 1, 0}, []int{a.n, b.n})
	require.NoError(t, storage.CheckMigrated(ctx, legacy.DB))
}

// migrationFiles lists the migrations of the test's dialect.
func migrationFiles(t *testing.T) []string {
	t.Helper()
	d := "sqlite"
	if dbtest.Postgres() {
		d = "postgres"
	}
	files, err := fs.Glob(migrations.FS, d+"/*.sql")
	require.NoError(t, err)
	return files
}
