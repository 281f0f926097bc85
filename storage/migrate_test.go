package storage_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
)

// The request history's foreign keys are not in the database, whether it is created now or was created with
// them by an earlier version; the others are.
//
// Not parallel: it runs the generated schema's migration itself, outside Migrate's lock, and ent's migrator
// writes to the package-level table descriptions as it goes (see migrateMu).
func TestMigrationLeavesHistoryUnchecked(t *testing.T) {
	db := dbtest.Open(t)
	ctx := context.Background()
	history := []string{"attempts.delivery_id", "deliveries.request_id", "requests.replay_of_id",
		"attempts.tenant_id", "deliveries.recipient_id", "deliveries.tenant_id", "requests.server_id",
		"requests.tenant_id", "ledger_entries.tenant_id"}
	kept := []string{"recipients.server_id", "recipients.tenant_id", "servers.tenant_id", "tenants.plan_id",
		"outbound_jobs.tenant_id", "outbound_attempts.job_id"}

	fks := foreignKeys(t, db)
	for _, fk := range history {
		require.False(t, fks[fk], "%s is checked by the application, not the database", fk)
	}
	for _, fk := range kept {
		require.True(t, fks[fk], "%s is a foreign key", fk)
	}

	// The schema as generated — what earlier versions migrated to — has them all.
	require.NoError(t, db.Client.Schema.Create(ctx))
	fks = foreignKeys(t, db)
	for _, fk := range append(history, kept...) {
		require.True(t, fks[fk], "the generated schema has %s", fk)
	}

	require.NoError(t, storage.Migrate(ctx, db.DB))
	fks = foreignKeys(t, db)
	for _, fk := range history {
		require.False(t, fks[fk], "the upgrade drops %s", fk)
	}
	for _, fk := range kept {
		require.True(t, fks[fk], "the upgrade keeps %s", fk)
	}
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

// The deliveries' full indexes of earlier versions are dropped on upgrade, and the partial ones that replace
// them hold only the rows of their status.
func TestMigrationReplacesFullDeliveryIndexes(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	ctx := context.Background()
	old := map[string]string{
		"delivery_status_next_attempt_at":  "status, next_attempt_at",
		"delivery_status_lease_expires_at": "status, lease_expires_at",
		"delivery_recipient_id_status":     "recipient_id, status",
	}
	for name, columns := range old { // as earlier versions created them
		_, err := db.SQL.ExecContext(ctx, "CREATE INDEX "+name+" ON deliveries ("+columns+")")
		require.NoError(t, err)
	}
	require.NoError(t, storage.Migrate(ctx, db.DB))
	got := indexes(t, db, "deliveries")
	for name := range old {
		require.NotContains(t, got, name, "the upgrade drops %s", name)
	}
	for name, where := range map[string]string{
		"delivery_pending_due":       "PENDING",
		"delivery_direct_due":        "PENDING",
		"delivery_pending_lane":      "PENDING",
		"delivery_in_progress_lease": "IN_PROGRESS",
	} {
		require.Contains(t, got, name)
		require.Contains(t, got[name], "'"+where+"'", "%s is partial", name)
	}
	require.Contains(t, got, "delivery_request_id")
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

// The request history's tables carry no tenant_id index, no index of the requests' random keys, and only
// partial indexes on what few of their rows have (a replay's original, a grant's period), whether the database is created now or upgraded from the
// indexes earlier versions made; on PostgreSQL the requests table keeps room on its pages for the status
// update.
func TestMigrationIndexesTheHistorySparingly(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	ctx := context.Background()
	old := map[string]string{ // as earlier versions created them
		"request_tenant_id":     "requests (tenant_id)",
		"request_replay_of_id":  "requests (replay_of_id)",
		"delivery_tenant_id":    "deliveries (tenant_id)",
		"attempt_tenant_id":     "attempts (tenant_id)",
		"ledgerentry_tenant_id": "ledger_entries (tenant_id)",
	}
	for _, fresh := range []bool{true, false} {
		if !fresh {
			for name, on := range old {
				_, err := db.SQL.ExecContext(ctx, "CREATE INDEX "+name+" ON "+on)
				require.NoError(t, err)
			}
			_, err := db.SQL.ExecContext(ctx, "DROP INDEX ledgerentry_grant_period")
			require.NoError(t, err)
			_, err = db.SQL.ExecContext(ctx, "CREATE UNIQUE INDEX ledgerentry_tenant_id_period ON ledger_entries (tenant_id, period)")
			require.NoError(t, err)
			_, err = db.SQL.ExecContext(ctx, "CREATE UNIQUE INDEX requests_key_key ON requests (key)")
			require.NoError(t, err)
			require.NoError(t, storage.Migrate(ctx, db.DB))
		}
		all := map[string]string{}
		for _, table := range []string{"requests", "deliveries", "attempts", "ledger_entries"} {
			for name, def := range indexes(t, db, table) {
				all[name] = def
			}
		}
		for name := range old {
			require.NotContains(t, all, name, "fresh %v", fresh)
		}
		require.NotContains(t, all, "ledgerentry_tenant_id_period", "fresh %v", fresh)
		require.NotContains(t, all, "requests_key_key", "fresh %v: a request's key is unique by construction", fresh)
		require.Contains(t, all, "request_replays")
		require.Contains(t, all["request_replays"], "replay_of_id IS NOT NULL")
		require.Contains(t, all, "ledgerentry_grant_period")
		require.Contains(t, all["ledgerentry_grant_period"], "UNIQUE")
		require.Contains(t, all["ledgerentry_grant_period"], "period IS NOT NULL")
	}
	if db.Postgres() {
		var options string
		require.NoError(t, db.SQL.QueryRowContext(ctx, `SELECT array_to_string(reloptions, ',') FROM pg_class
			WHERE oid = to_regclass(quote_ident(current_schema()) || '.requests')`).Scan(&options))
		require.Equal(t, fmt.Sprintf("fillfactor=%d", storage.RequestsFillFactor), options)
	}
}

// A PostgreSQL database whose header columns are jsonb, as earlier versions made them, is upgraded to bytea
// with the stored headers intact.
func TestMigrationTurnsJSONBHeadersIntoBytes(t *testing.T) {
	t.Parallel()
	dbtest.SkipUnlessPostgres(t)
	db := dbtest.Open(t)
	ctx := viewer.SystemContext(context.Background())
	plan, err := db.Client.Plan.Create().SetName("p").SetMonthlyCredits(10).SetRetentionDays(7).
		SetMaxServers(1).SetMaxRecipientsPerServer(1).Save(ctx)
	require.NoError(t, err)
	tn, err := db.Client.Tenant.Create().SetName("acme").SetPlanID(plan.ID).Save(ctx)
	require.NoError(t, err)
	srv, err := db.Client.Server.Create().SetTenantID(tn.ID).SetName("s").SetInboundKey("k").Save(ctx)
	require.NoError(t, err)
	headers := http.Header{"Content-Type": {"application/json"}, "X-Many": {"a", "b"}}
	req, err := db.Client.Request.Create().SetTenantID(tn.ID).SetServerID(srv.ID).SetKey("r").SetMethod("POST").
		SetHeaders(headers).SetBody([]byte("{}")).SetExpiresAt(time.Now().Add(time.Hour)).Save(ctx)
	require.NoError(t, err)
	for _, table := range []string{"requests", "outbound_jobs"} {
		_, err := db.SQL.ExecContext(ctx, `ALTER TABLE `+table+
			` ALTER COLUMN headers TYPE jsonb USING convert_from(headers, 'UTF8')::jsonb`)
		require.NoError(t, err)
	}

	require.NoError(t, storage.Migrate(ctx, db.DB))
	for _, table := range []string{"requests", "outbound_jobs"} {
		var typ string
		require.NoError(t, db.SQL.QueryRowContext(ctx, `SELECT data_type FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = $1 AND column_name = 'headers'`, table).Scan(&typ))
		require.Equal(t, "bytea", typ, table)
	}
	got, err := db.Client.Request.Get(ctx, req.ID)
	require.NoError(t, err)
	require.Equal(t, headers, got.Headers)
}
