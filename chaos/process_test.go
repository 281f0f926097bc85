//go:build chaos

package chaos_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"
	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/internal/testproc"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
)

func TestMain(m *testing.M) { os.Exit(testproc.Run(m)) }

// database is where a test's server processes keep their data, and a handle of the test's own on it.
type database struct {
	env []string // ADAL_DATABASE_URL / ADAL_DATA_DIR for the server
	SQL *sql.DB
	pg  bool
	// appName is the application_name of the server's PostgreSQL connections (see settled).
	appName string
}

// newDatabase gives the test a fresh database: a schema on ADAL_TEST_DATABASE_URL's PostgreSQL, or an SQLite
// data directory.
func newDatabase(t *testing.T) *database {
	t.Helper()
	if !dbtest.Postgres() {
		dir := dbtest.DataDir(t)
		return &database{env: []string{"ADAL_DATA_DIR=" + dir, "ADAL_DATABASE_URL="}, SQL: sqliteOnceMigrated(t, dir)}
	}
	u := dbtest.NewSchema(t)
	db, err := sql.Open("postgres", u)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	// The server's connections carry a name of their own, so the test can tell when a killed server's backends
	// are gone.
	var b [5]byte
	_, _ = rand.Read(b[:])
	app := "adal-chaos-server-" + hex.EncodeToString(b[:])
	su, err := url.Parse(u)
	require.NoError(t, err)
	q := su.Query()
	q.Set("application_name", app)
	su.RawQuery = q.Encode()
	return &database{env: []string{"ADAL_DATABASE_URL=" + su.String(), "ADAL_DATA_DIR="}, SQL: db, pg: true, appName: app}
}

// settled waits until a killed server's PostgreSQL backends have gone. A backend that had received a COMMIT
// before its client died still finishes it, a moment after the kill: reading the database before then could
// miss a claim or an outcome that does commit. (On SQLite the dead process commits nothing more.)
func (d *database) settled(t *testing.T) {
	t.Helper()
	if d.appName == "" {
		return
	}
	waitFor(t, 30*time.Second, "the killed server's backends to exit", func() bool {
		return d.count(t, `SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = '`+d.appName+`'`) == 0
	})
}

// newOwnDatabase creates a PostgreSQL database for this test alone (dropped at the end), so that what the test
// does to "its" backends — terminating them — can never touch anyone else's connections.
func newOwnDatabase(t *testing.T) (*database, string) {
	t.Helper()
	dbtest.SkipUnlessPostgres(t)
	admin, err := sql.Open("postgres", os.Getenv(dbtest.EnvURL))
	require.NoError(t, err)
	var b [5]byte
	_, _ = rand.Read(b[:])
	name := "adal_chaos_" + hex.EncodeToString(b[:])
	_, err = admin.Exec("CREATE DATABASE " + pq.QuoteIdentifier(name))
	require.NoError(t, err)
	t.Cleanup(func() {
		defer admin.Close()
		if _, err := admin.Exec("DROP DATABASE IF EXISTS " + pq.QuoteIdentifier(name) + " WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(os.Getenv(dbtest.EnvURL))
	require.NoError(t, err)
	u.Path = "/" + name
	q := u.Query()
	q.Del("search_path")
	u.RawQuery = q.Encode()
	serverURL := u.String()
	// The test's own connections name themselves, so terminating the server's backends spares them.
	q.Set("application_name", "adal-chaos-test")
	u.RawQuery = q.Encode()
	db, err := sql.Open("postgres", u.String())
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return &database{env: []string{"ADAL_DATABASE_URL=" + serverURL, "ADAL_DATA_DIR="}, SQL: db, pg: true}, name
}

// sqliteOnceMigrated opens the SQLite file the server will use, migrated first so the test can read it before
// the server's first start completes.
func sqliteOnceMigrated(t *testing.T, dir string) *sql.DB {
	t.Helper()
	db, err := storage.Open(context.Background(), "", dir)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db.SQL
}

// count runs a COUNT query.
func (d *database) count(t *testing.T, query string) int {
	t.Helper()
	var n int
	require.NoError(t, d.SQL.QueryRow(query).Scan(&n), query)
	return n
}

// newServerProcess is `server serve` on the test's database, logging warnings only.
func newServerProcess(t *testing.T, env ...string) *testproc.Server {
	t.Helper()
	return testproc.NewServer(t, append([]string{"ADAL_LOG_LEVEL=warn"}, env...)...)
}

// post sends one webhook and returns the status and, for a 202, the request ID. A transport error is status 0.
func post(client *http.Client, base, key, body string) (int, string) {
	resp, err := client.Post(base+"/in/"+key, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	var out struct{ RequestID string }
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusAccepted {
		_ = json.Unmarshal(raw, &out)
	}
	return resp.StatusCode, out.RequestID
}

// waitFor polls cond every 50 ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
