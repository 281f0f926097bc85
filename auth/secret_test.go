package auth_test

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/auth"
)

func TestLoadOrCreateSecretPersists(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data", "nested")

	first, err := auth.LoadOrCreateSecret("", dir)
	require.NoError(t, err)
	require.Len(t, first, 64)
	raw, err := hex.DecodeString(string(first))
	require.NoError(t, err)
	require.Len(t, raw, 32)

	path := filepath.Join(dir, auth.SecretFile)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), di.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left behind")

	// A restart reads the same secret, so tokens issued before it still verify.
	second, err := auth.LoadOrCreateSecret("", dir)
	require.NoError(t, err)
	require.Equal(t, first, second)
	_, err = auth.New(second, nil)
	require.NoError(t, err)
}

func TestLoadOrCreateSecretEnvWins(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := strings.Repeat("e", 40)

	got, err := auth.LoadOrCreateSecret(env, dir)
	require.NoError(t, err)
	require.Equal(t, []byte(env), got)
	_, err = os.Stat(filepath.Join(dir, auth.SecretFile))
	require.ErrorIs(t, err, os.ErrNotExist, "no file is generated when the env provides the secret")

	// Even with a persisted secret present, the env value is the one used.
	persisted, err := auth.LoadOrCreateSecret("", dir)
	require.NoError(t, err)
	got, err = auth.LoadOrCreateSecret(env, dir)
	require.NoError(t, err)
	require.Equal(t, []byte(env), got)
	require.NotEqual(t, persisted, got)
}

func TestLoadOrCreateSecretHandEditedFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, auth.SecretFile)
	custom := strings.Repeat("k", 48)
	require.NoError(t, os.WriteFile(path, []byte(custom+"\n"), 0o600))
	got, err := auth.LoadOrCreateSecret("", dir)
	require.NoError(t, err)
	require.Equal(t, []byte(custom), got, "trailing newline dropped")

	// A too-short file is an error, never silently replaced (that would invalidate every token).
	require.NoError(t, os.WriteFile(path, []byte("short\n"), 0o600))
	_, err = auth.LoadOrCreateSecret("", dir)
	require.Error(t, err)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "short\n", string(b))
}

func TestLoadOrCreateSecretNeedsSomewhere(t *testing.T) {
	t.Parallel()
	_, err := auth.LoadOrCreateSecret("", "")
	require.Error(t, err)
}
