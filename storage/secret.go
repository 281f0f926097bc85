package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// Secret returns the named secret stored with the data, creating it (32 random bytes, hex) the first time. It
// lives in the database rather than a file so that every process of a Postgres deployment signs and verifies
// tokens with the same key, and a restart keeps tokens valid.
func (db *DB) Secret(ctx context.Context, name string) ([]byte, error) {
	if _, err := db.SQL.ExecContext(ctx,
		`CREATE TABLE IF NOT EXISTS adal_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL)`); err != nil {
		return nil, fmt.Errorf("create secrets table: %w", err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("generate secret: %w", err)
	}
	insert := `INSERT INTO adal_secrets (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`
	sel := `SELECT value FROM adal_secrets WHERE name = ?`
	if db.Postgres() {
		insert = `INSERT INTO adal_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`
		sel = `SELECT value FROM adal_secrets WHERE name = $1`
	}
	// Whoever inserts first wins; everyone then reads the winner's value.
	if _, err := db.SQL.ExecContext(ctx, insert, name, hex.EncodeToString(b[:])); err != nil {
		return nil, fmt.Errorf("store secret: %w", err)
	}
	var value string
	if err := db.SQL.QueryRowContext(ctx, sel, name).Scan(&value); err != nil {
		return nil, fmt.Errorf("read secret: %w", err)
	}
	return []byte(value), nil
}
