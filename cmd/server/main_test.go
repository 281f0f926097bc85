package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	enttoken "github.com/adal-relay/adal/ent/token"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
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

// `server token` stores the token it prints, so it can be listed and revoked like any other.
func TestServerTokenIsStored(t *testing.T) {
	setDatabase(t)
	require.NoError(t, run([]string{"token", "--admin", "--subject", "ops-laptop", "--ttl", "2h"}))
	cfg, err := configFromEnv()
	require.NoError(t, err)
	r, err := relay.Open(context.Background(), cfg)
	require.NoError(t, err)
	defer r.Close()
	row, err := r.DB.Client.Token.Query().Where(enttoken.Subject("ops-laptop")).
		Only(viewer.SystemContext(context.Background()))
	require.NoError(t, err)
	require.Equal(t, "ADMIN", row.Role)
	require.Equal(t, "server token", row.IssuedBy)
	require.Nil(t, row.TenantID)
	require.WithinDuration(t, time.Now().Add(2*time.Hour), row.ExpiresAt, time.Minute)
}

// `server signin-link` prints a console link whose code buys an operator token, once.
func TestServerSigninLink(t *testing.T) {
	setDatabase(t)
	t.Setenv("ADAL_PUBLIC_URL", "https://hooks.example.com")
	out := captureStdout(t, func() { require.NoError(t, run([]string{"signin-link"})) })
	link := strings.TrimSpace(out)
	prefix := "https://hooks.example.com/#/signin?code="
	require.True(t, strings.HasPrefix(link, prefix), link)
	code := strings.TrimPrefix(link, prefix)

	cfg, err := configFromEnv()
	require.NoError(t, err)
	r, err := relay.Open(context.Background(), cfg)
	require.NoError(t, err)
	defer r.Close()
	ctx := context.Background()
	_, row, err := r.Tokens.RedeemSignInCode(ctx, r.DB.Client, code)
	require.NoError(t, err)
	require.Equal(t, "ADMIN", row.Role)
	require.Equal(t, "sign-in link", row.IssuedBy)
	_, _, err = r.Tokens.RedeemSignInCode(ctx, r.DB.Client, code)
	require.ErrorContains(t, err, "already used")
}

// captureStdout returns what f prints on standard output.
func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	rd, wr, err := os.Pipe()
	require.NoError(t, err)
	saved := os.Stdout
	os.Stdout = wr
	defer func() { os.Stdout = saved }()
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(rd)
		done <- b
	}()
	f()
	require.NoError(t, wr.Close())
	return string(<-done)
}
