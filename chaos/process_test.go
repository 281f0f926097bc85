//go:build chaos

package chaos_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lib/pq"
	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/auth"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
)

// serverBin is cmd/server, built once in TestMain.
var serverBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "adal-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		os.Exit(1)
	}
	serverBin = filepath.Join(dir, "adal-server")
	if out, err := exec.Command("go", "build", "-o", serverBin, "github.com/adal-relay/adal/cmd/server").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/server: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const jwtSecret = "chaos-test-secret-chaos-test-secret-0123"

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

// lockedBuffer collects a child process's output.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serverProcess is `server serve` as a child process on a fixed loopback port, restartable after a kill.
type serverProcess struct {
	t      *testing.T
	env    []string
	url    string
	cmd    *exec.Cmd
	done   chan struct{}
	logs   *lockedBuffer
	starts int
}

func newServerProcess(t *testing.T, env ...string) *serverProcess {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	p := &serverProcess{
		t: t,
		env: append([]string{"ADAL_ADDR=" + addr, "ADAL_JWT_SECRET=" + jwtSecret, "ADAL_ALLOW_PRIVATE_TARGETS=true",
			"ADAL_LOG_LEVEL=warn"}, env...),
		url:  "http://" + addr,
		logs: &lockedBuffer{},
	}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			out := p.logs.String()
			if len(out) > 20000 {
				out = "…" + out[len(out)-20000:]
			}
			t.Logf("server output:\n%s", out)
		}
	})
	return p
}

// start launches the process and waits (bounded) until it answers /readyz.
func (p *serverProcess) start() {
	p.t.Helper()
	cmd := exec.Command(serverBin, "serve")
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	require.NoError(p.t, cmd.Start())
	p.cmd, p.done = cmd, make(chan struct{})
	p.starts++
	go func() { _ = cmd.Wait(); close(p.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-p.done:
			p.t.Fatalf("server exited at start: %v\n%s", cmd.ProcessState, p.logs.String())
		default:
		}
		if resp, err := http.Get(p.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("server not ready after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether the process is still running.
func (p *serverProcess) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill ends the process with SIGKILL: no shutdown, nothing flushed or recorded.
func (p *serverProcess) kill() {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done
}

// stop ends a running process gracefully, or by force after 20 s.
func (p *serverProcess) stop() {
	if p.cmd == nil || !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// graphql runs an operation that must succeed and decodes its data into out.
func (p *serverProcess) graphql(token, query string, vars map[string]any, out any) {
	p.t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, p.url+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err := client.Do(req)
	require.NoError(p.t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r struct {
		Data   json.RawMessage
		Errors []any
	}
	require.NoError(p.t, json.Unmarshal(raw, &r), string(raw))
	require.Empty(p.t, r.Errors, "query: %s", query)
	if out != nil {
		require.NoError(p.t, json.Unmarshal(r.Data, out))
	}
}

// fixture is a tenant with one server, set up through the API of a running process.
type fixture struct {
	tenantID string
	serverID string
	key      string
	owner    string
	credits  int
}

// setup creates a plan with credits, a tenant on it and a server, and returns the owner's token.
func setup(t *testing.T, p *serverProcess, credits int) *fixture {
	t.Helper()
	signer, err := auth.New([]byte(jwtSecret), nil)
	require.NoError(t, err)
	admin, err := signer.Issue(viewer.Viewer{Role: viewer.Admin, Subject: "chaos"}, time.Hour)
	require.NoError(t, err)
	var plan struct{ CreatePlan struct{ ID string } }
	p.graphql(admin, `mutation($in: CreatePlanInput!){ createPlan(input: $in){ id } }`, map[string]any{"in": map[string]any{
		"name": "chaos", "monthlyCredits": credits, "retentionDays": 7, "maxServers": 5, "maxRecipientsPerServer": 5,
	}}, &plan)
	var tenant struct{ CreateTenant struct{ ID string } }
	p.graphql(admin, `mutation($in: CreateTenantInput!){ createTenant(input: $in){ id } }`, map[string]any{"in": map[string]any{
		"name": "acme", "planId": plan.CreatePlan.ID,
	}}, &tenant)
	tenantID, err := strconv.Atoi(tenant.CreateTenant.ID)
	require.NoError(t, err)
	owner, err := signer.Issue(viewer.Viewer{Role: viewer.Owner, TenantID: tenantID, Subject: "owner"}, time.Hour)
	require.NoError(t, err)
	var srv struct {
		CreateServer struct{ ID, InboundURL string }
	}
	p.graphql(owner, `mutation{ createServer(input: {name: "chaos"}){ id inboundUrl } }`, nil, &srv)
	_, key, ok := strings.Cut(srv.CreateServer.InboundURL, "/in/")
	require.True(t, ok, srv.CreateServer.InboundURL)
	return &fixture{tenantID: tenant.CreateTenant.ID, serverID: srv.CreateServer.ID, key: key, owner: owner, credits: credits}
}

// recipient adds a direct recipient of the fixture's server.
func (f *fixture) recipient(t *testing.T, p *serverProcess, target string, maxAttempts int) string {
	t.Helper()
	var out struct{ CreateRecipient struct{ ID string } }
	p.graphql(f.owner, `mutation($in: CreateRecipientInput!){ createRecipient(input: $in){ id } }`, map[string]any{"in": map[string]any{
		"serverId": f.serverID, "name": target, "method": "DIRECT_HTTP", "url": target, "maxAttempts": maxAttempts,
	}}, &out)
	return out.CreateRecipient.ID
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
