package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
)

// setDatabase points the ADAL_* variables at a fresh, empty database of the test's dialect.
func setDatabase(t *testing.T) {
	t.Setenv("ADAL_DATA_DIR", dbtest.DataDir(t))
	t.Setenv("ADAL_DATABASE_URL", "")
	t.Setenv("ADAL_JWT_SECRET", "")
	t.Setenv("ADAL_AUTO_MIGRATE", "")
	if dbtest.Postgres() {
		t.Setenv("ADAL_DATABASE_URL", dbtest.NewSchema(t))
	}
}

// With ADAL_AUTO_MIGRATE=false the server refuses a database with pending migrations, naming `server
// migrate`; once that has run, it starts.
func TestServerMigrateBeforeStart(t *testing.T) {
	setDatabase(t)
	t.Setenv("ADAL_AUTO_MIGRATE", "false")
	cfg, err := configFromEnv()
	require.NoError(t, err)
	require.True(t, cfg.NoAutoMigrate)
	_, err = relay.Open(context.Background(), cfg)
	require.ErrorIs(t, err, storage.ErrPending)
	require.ErrorContains(t, err, "server migrate")

	require.NoError(t, run([]string{"migrate"}))
	r, err := relay.Open(context.Background(), cfg)
	require.NoError(t, err)
	require.NoError(t, storage.CheckMigrated(context.Background(), r.DB))
	require.NoError(t, r.Close())
}

// By default the server applies pending migrations itself.
func TestServerMigratesAtStartByDefault(t *testing.T) {
	setDatabase(t)
	cfg, err := configFromEnv()
	require.NoError(t, err)
	require.False(t, cfg.NoAutoMigrate)
	r, err := relay.Open(context.Background(), cfg)
	require.NoError(t, err)
	require.NoError(t, storage.CheckMigrated(context.Background(), r.DB))
	require.NoError(t, r.Close())

	t.Setenv("ADAL_AUTO_MIGRATE", "sometimes")
	_, err = configFromEnv()
	require.ErrorContains(t, err, "ADAL_AUTO_MIGRATE")
}
