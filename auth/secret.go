package auth

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// SecretFile is the name of the generated signing secret inside the data directory.
const SecretFile = "jwt-secret"

// LoadOrCreateSecret returns the JWT signing secret. A non-empty fromEnv (the value of ADAL_JWT_SECRET)
// wins, used as-is, so operators running several replicas can share one key. Otherwise the secret is read
// from dir/jwt-secret, which is created on first use (32 random bytes, hex-encoded, mode 0600, in a dir
// created 0700) so that tokens survive restarts without any setup.
//
// The file's text itself is the key, not the bytes it decodes to: an operator who later copies the file
// into ADAL_JWT_SECRET keeps every issued token valid.
func LoadOrCreateSecret(fromEnv, dir string) ([]byte, error) {
	if fromEnv != "" {
		return []byte(fromEnv), nil
	}
	if dir == "" {
		return nil, errors.New("auth: no ADAL_JWT_SECRET and no data dir to keep a generated one in")
	}
	path := filepath.Join(dir, SecretFile)
	secret, err := readSecret(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return secret, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("auth: create data dir for jwt secret: %w", err)
	}
	if err := createSecret(path); err != nil {
		return nil, err
	}
	// Read back rather than return what we generated: if another process won the race to create the file,
	// its secret is the one everybody must use.
	return readSecret(path)
}

// readSecret reads an existing secret file. Surrounding whitespace is dropped because operators edit the
// file by hand and editors add a trailing newline.
func readSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("auth: read jwt secret: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) < MinSecretLen {
		// Refuse rather than regenerate: replacing the key would silently invalidate every issued token.
		return nil, fmt.Errorf("auth: jwt secret in %s is %d bytes, need at least %d", path, len(b), MinSecretLen)
	}
	return b, nil
}

// createSecret writes a fresh secret to path without ever exposing a partial file: the content is written
// and synced under a temporary name, then hard-linked into place. Linking fails if path already exists,
// so two servers starting at once on the same data dir cannot overwrite each other's key.
func createSecret(path string) error {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw) // crypto/rand.Read never fails (it crashes the program instead).
	content := hex.EncodeToString(raw) + "\n"

	tmp, err := os.CreateTemp(filepath.Dir(path), "."+SecretFile+"-*") // CreateTemp uses mode 0600.
	if err != nil {
		return fmt.Errorf("auth: create jwt secret: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("auth: create jwt secret: %w", err)
	}
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		return fmt.Errorf("auth: write jwt secret: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("auth: write jwt secret: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("auth: write jwt secret: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("auth: install jwt secret: %w", err)
	}
	return nil
}
