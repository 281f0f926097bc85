// Package testproc runs Adal's own commands as child processes in tests: binaries built once per test binary,
// and `server serve` started, killed and restarted as an operator would.
package testproc

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/auth"
	"github.com/adal-relay/adal/viewer"
)

// Buffer collects a child process's output; it is safe for concurrent use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// JWTSecret is the ADAL_JWT_SECRET of every Server; tests sign their tokens with it.
const JWTSecret = "testproc-secret-testproc-secret-0123456"

// Server is `server serve` as a child process on a fixed loopback port, restartable after a kill.
type Server struct {
	URL    string
	Logs   *Buffer
	Starts int // how many times Start has run

	t    testing.TB
	bin  string
	env  []string
	cmd  *exec.Cmd
	done chan struct{}
}

// NewServer prepares a server process with the ADAL_* variables env (they override the defaults: JWTSecret,
// private targets allowed). It is stopped when the test ends, and its output logged if the test failed.
func NewServer(t testing.TB, env ...string) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	p := &Server{
		URL:  "http://" + addr,
		Logs: &Buffer{},
		t:    t,
		bin:  ServerBinary.Path(t),
		env:  append([]string{"ADAL_ADDR=" + addr, "ADAL_JWT_SECRET=" + JWTSecret, "ADAL_ALLOW_PRIVATE_TARGETS=true"}, env...),
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			out := p.Logs.String()
			if len(out) > 20000 {
				out = "…" + out[len(out)-20000:]
			}
			t.Logf("server output:\n%s", out)
		}
	})
	return p
}

// Start launches the process and waits (bounded) until it answers /readyz.
func (p *Server) Start() {
	p.t.Helper()
	cmd := exec.Command(p.bin, "serve")
	cmd.Env = append(os.Environ(), p.env...) // the last of duplicate keys wins
	cmd.Stdout, cmd.Stderr = p.Logs, p.Logs
	require.NoError(p.t, cmd.Start())
	p.cmd, p.done = cmd, make(chan struct{})
	p.Starts++
	go func() { _ = cmd.Wait(); close(p.done) }()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if !p.Alive() {
			p.t.Fatalf("server exited at start: %v\n%s", cmd.ProcessState, p.Logs.String())
		}
		if resp, err := http.Get(p.URL + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("server not ready after 30s")
		}
		<-tick.C
	}
}

// Alive reports whether the process is still running.
func (p *Server) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Kill ends the process with SIGKILL: no shutdown, nothing flushed or recorded.
func (p *Server) Kill() {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done
}

// Stop ends a running process gracefully, or by force after 20 s.
func (p *Server) Stop() {
	if p.cmd == nil || !p.Alive() {
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

// GraphQL runs an operation that must succeed and decodes its data into out (if not nil).
func (p *Server) GraphQL(token, query string, vars map[string]any, out any) {
	p.t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/graphql", bytes.NewReader(body))
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

// Fixture is a tenant with one server, set up through the API of a running process.
type Fixture struct {
	TenantID string
	ServerID string
	Key      string // the server's inbound key: webhooks go to URL + "/in/" + Key
	Owner    string // the tenant owner's token
	Credits  int
}

// Setup creates a plan with credits, a tenant on it and a server, as an operator would.
func (p *Server) Setup(credits int) *Fixture {
	p.t.Helper()
	t := p.t
	signer, err := auth.New([]byte(JWTSecret), nil)
	require.NoError(t, err)
	admin, err := signer.Issue(viewer.Viewer{Role: viewer.Admin, Subject: "testproc"}, time.Hour)
	require.NoError(t, err)
	var plan struct{ CreatePlan struct{ ID string } }
	p.GraphQL(admin, `mutation($in: CreatePlanInput!){ createPlan(input: $in){ id } }`, map[string]any{"in": map[string]any{
		"name": "testproc", "monthlyCredits": credits, "retentionDays": 7, "maxServers": 5, "maxRecipientsPerServer": 5,
	}}, &plan)
	var tenant struct{ CreateTenant struct{ ID string } }
	p.GraphQL(admin, `mutation($in: CreateTenantInput!){ createTenant(input: $in){ id } }`, map[string]any{"in": map[string]any{
		"name": "acme", "planId": plan.CreatePlan.ID,
	}}, &tenant)
	tenantID, err := strconv.Atoi(tenant.CreateTenant.ID)
	require.NoError(t, err)
	owner, err := signer.Issue(viewer.Viewer{Role: viewer.Owner, TenantID: tenantID, Subject: "owner"}, time.Hour)
	require.NoError(t, err)
	var srv struct {
		CreateServer struct{ ID, InboundURL string }
	}
	p.GraphQL(owner, `mutation{ createServer(input: {name: "testproc"}){ id inboundUrl } }`, nil, &srv)
	_, key, ok := strings.Cut(srv.CreateServer.InboundURL, "/in/")
	require.True(t, ok, srv.CreateServer.InboundURL)
	return &Fixture{TenantID: tenant.CreateTenant.ID, ServerID: srv.CreateServer.ID, Key: key, Owner: owner, Credits: credits}
}

// Recipient adds a DIRECT_HTTP recipient of the fixture's server and returns its ID.
func (f *Fixture) Recipient(p *Server, target string, maxAttempts int) string {
	p.t.Helper()
	var out struct{ CreateRecipient struct{ ID string } }
	p.GraphQL(f.Owner, `mutation($in: CreateRecipientInput!){ createRecipient(input: $in){ id } }`, map[string]any{"in": map[string]any{
		"serverId": f.ServerID, "name": target, "method": "DIRECT_HTTP", "url": target, "maxAttempts": maxAttempts,
	}}, &out)
	return out.CreateRecipient.ID
}
