// Package dbtest gives each test its own migrated database: a fresh SQLite file by default, or — when
// ADAL_TEST_DATABASE_URL names a PostgreSQL server — a fresh schema on it, dropped when the test ends. CI runs
// the suite once each way, so every database test runs on both.
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// EnvURL is the variable that switches tests to PostgreSQL.
const EnvURL = "ADAL_TEST_DATABASE_URL"

// DB is a test database plus how another process would reach it.
type DB struct {
	*storage.DB
	// URL is the postgres:// URL of this test's schema, or "" on SQLite.
	URL string
	// Dir is the data directory holding the SQLite file, or "" on PostgreSQL.
	Dir string
}

// Open returns a database that lives as long as t, with the migrations applied and no rows.
func Open(t testing.TB) *DB {
	t.Helper()
	db := OpenEmpty(t)
	if _, err := storage.Migrate(context.Background(), db.DB); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return db
}

// OpenAsSystem opens a database as Open does, with a context of t's that acts as the system, above every
// tenant.
func OpenAsSystem(t testing.TB) (*DB, context.Context) {
	t.Helper()
	return Open(t), viewer.SystemContext(t.Context())
}

// OpenEmpty returns a database without tables that lives as long as t.
func OpenEmpty(t testing.TB) *DB {
	t.Helper()
	if os.Getenv(EnvURL) == "" {
		dir := t.TempDir()
		db, err := storage.Connect("", dir)
		if err != nil {
			t.Fatalf("open sqlite: %v", err)
		}
		t.Cleanup(func() { db.Close() })
		return &DB{DB: db, Dir: dir}
	}
	schemaURL := NewSchema(t)
	db, err := storage.Connect(schemaURL, "")
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return &DB{DB: db, URL: schemaURL}
}

// Postgres reports whether tests run against PostgreSQL.
func Postgres() bool { return os.Getenv(EnvURL) != "" }

// SkipUnlessPostgres skips tests of the scale-out configuration when no PostgreSQL is configured.
func SkipUnlessPostgres(t testing.TB) {
	t.Helper()
	if !Postgres() {
		t.Skip("needs PostgreSQL: set " + EnvURL)
	}
}

// NewSchema creates an empty schema on the PostgreSQL server named by ADAL_TEST_DATABASE_URL, drops it when
// t ends, and returns a URL whose connections use it.
func NewSchema(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	admin, err := sql.Open("postgres", base)
	if err != nil {
		t.Fatalf("open %s: %v", EnvURL, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "adal_test_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec("CREATE SCHEMA " + name); err != nil {
		admin.Close()
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		if _, err := admin.Exec("DROP SCHEMA " + name + " CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse %s: %v", EnvURL, err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// DataDir returns a fresh data directory for a server process under test.
func DataDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}
