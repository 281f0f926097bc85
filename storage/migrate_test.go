package storage_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
)

// The request history's foreign keys are not in the database, whether it is created now or was created with
// them by an earlier version; the others are.
func TestMigrationLeavesHistoryUnchecked(t *testing.T) {
	t.Parallel()
	db := dbtest.Open(t)
	ctx := context.Background()
	history := []string{"attempts.delivery_id", "deliveries.request_id", "requests.replay_of_id"}
	kept := []string{"attempts.tenant_id", "deliveries.recipient_id", "deliveries.tenant_id", "requests.server_id"}

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

	require.NoError(t, storage.Migrate(ctx, db.Client))
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
	rows, err := db.SQL.QueryContext(context.Background(), query)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var table, column string
		require.NoError(t, rows.Scan(&table, &column))
		out[table+"."+column] = true
	}
	require.NoError(t, rows.Err())
	return out
}
