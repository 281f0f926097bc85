package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"entgo.io/ent/dialect"
	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
)

// dialects are the dialects this run can replay: SQLite always, PostgreSQL when the tests have a server.
func dialects() []string {
	if dbtest.Postgres() {
		return storage.Dialects
	}
	return []string{dialect.SQLite}
}

// The committed migrations agree with the ent schema; a directory that lacks them gets a migration, and one
// whose files no longer match their atlas.sum is refused.
func TestCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pgURL := os.Getenv(dbtest.EnvURL)
	for _, d := range dialects() {
		committed := filepath.Join("..", "..", "migrations", storage.MigrationsDir(d))
		changed, err := checkDir(ctx, d, committed, pgURL)
		require.NoError(t, err, d)
		require.False(t, changed, "%s: the migrations are current", d)

		empty := t.TempDir()
		changed, err = checkDir(ctx, d, empty, pgURL)
		require.NoError(t, err, d)
		require.True(t, changed, "%s: an empty directory needs the baseline", d)

		edited := t.TempDir()
		require.NoError(t, os.CopyFS(edited, os.DirFS(committed)))
		files, err := filepath.Glob(filepath.Join(edited, "*.sql"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(files[0], []byte("-- +goose Up\n-- +goose Down\n"), 0o644))
		_, err = checkDir(ctx, d, edited, pgURL)
		require.ErrorContains(t, err, "checksum", d)
	}
}

// NAME writes the baseline into an empty directory of each dialect, with its atlas.sum, after which the
// directory is current.
func TestGenerate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pgURL := os.Getenv(dbtest.EnvURL)
	for _, d := range dialects() {
		dir := t.TempDir()
		require.NoError(t, diff(ctx, d, dir, "baseline", pgURL))
		files, err := filepath.Glob(filepath.Join(dir, "*_baseline.sql"))
		require.NoError(t, err)
		require.Len(t, files, 1, d)
		require.FileExists(t, filepath.Join(dir, "atlas.sum"))
		changed, err := checkDir(ctx, d, dir, pgURL)
		require.NoError(t, err)
		require.False(t, changed, d)
	}
}
