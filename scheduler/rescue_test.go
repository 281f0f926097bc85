package scheduler_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/auth"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
)

// binDir holds binaries built for the tests that run a real server process.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "adal-scheduler-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir:", err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildOnce sync.Once
	serverBin string
	buildErr  error
)

// serverBinary builds ./cmd/server once per test binary (only when a test needs it, so a test run filtered
// to other tests pays nothing).
func serverBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		bin := filepath.Join(binDir, "adal-server")
		out, err := exec.Command("go", "build", "-o", bin, "github.com/adal-relay/adal/cmd/server").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/server: %v\n%s", err, out)
			return
		}
		serverBin = bin
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return serverBin
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

// serverProcess is `server serve` running as a child process, configured by ADAL_* variables.
type serverProcess struct {
	t    *testing.T
	bin  string
	env  []string
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	logs *lockedBuffer
}

func newServerProcess(t *testing.T, env ...string) *serverProcess {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	p := &serverProcess{
		t:    t,
		bin:  serverBinary(t),
		env:  append([]string{"ADAL_ADDR=" + addr}, env...),
		url:  "http://" + addr,
		logs: &lockedBuffer{},
	}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("server output:\n%s", p.logs.String())
		}
	})
	return p
}

// start launches the process and waits until it answers /readyz.
func (p *serverProcess) start() {
	p.t.Helper()
	cmd := exec.Command(p.bin, "serve")
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	require.NoError(p.t, cmd.Start())
	p.cmd, p.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(p.done) }()
	relaytest.Eventually(p.t, 30*time.Second, "the server to be ready", func() bool {
		select {
		case <-p.done:
			p.t.Fatalf("server exited at start: %v\n%s", cmd.ProcessState, p.logs.String())
		default:
		}
		resp, err := http.Get(p.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// kill ends the process with SIGKILL: no shutdown, nothing recorded.
func (p *serverProcess) kill() {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done
}

// stop ends a running process gracefully (SIGTERM), or by force if it does not stop in time.
func (p *serverProcess) stop() {
	if p.cmd == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
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
	resp, err := http.DefaultClient.Do(req)
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

// holdingReceiver holds every call open until released, and records each (path, request, attempt).
type holdingReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	calls   []heldCall
	release chan struct{}
}

type heldCall struct {
	path    string
	request string
	attempt int
}

func newHoldingReceiver(t *testing.T) *holdingReceiver {
	h := &holdingReceiver{release: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice when the caller hangs up (r.Context() ends).
		_, _ = io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.calls = append(h.calls, heldCall{r.URL.Path, r.Header.Get("X-Adal-Request-Id"), atoiOr(r.Header.Get("X-Adal-Attempt"))})
		release := h.release
		h.mu.Unlock()
		select {
		case <-release:
			w.WriteHeader(http.StatusOK)
		case <-r.Context().Done(): // the caller went away (was killed)
		}
	}))
	t.Cleanup(func() { h.open(); h.Close() })
	return h
}

// open releases held calls and lets later ones through at once.
func (h *holdingReceiver) open() {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.release:
	default:
		close(h.release)
	}
}

func (h *holdingReceiver) received() []heldCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]heldCall(nil), h.calls...)
}

type rescuedAttempt struct {
	Number     int
	Status     string
	ErrorKind  *string
	StartedAt  time.Time
	FinishedAt time.Time
}

type rescuedDelivery struct {
	ID           string
	Status       string
	AttemptCount int
	MaxAttempts  int
	Recipient    struct{ ID, URL string }
	Attempts     []rescuedAttempt
}

// A server process killed with SIGKILL while attempts are in flight loses nothing: once restarted, its
// rescuer records each of them as an INTERRUPTED attempt (which counts) when the lease expires, and the
// deliveries go on per their schedule — retried where attempts remain, FAILED where they do not.
func TestKilledServerLosesNoDelivery(t *testing.T) {
	t.Parallel()
	const (
		requests = 5
		secret   = "rescue-test-secret-rescue-test-secret-0123"
		lease    = 3 * time.Second
	)
	env := []string{
		"ADAL_JWT_SECRET=" + secret,
		"ADAL_ALLOW_PRIVATE_TARGETS=true",
		"ADAL_RETRY_UNIT=20ms",
		"ADAL_LEASE=" + lease.String(),
		"ADAL_RESCUE_INTERVAL=250ms",
		"ADAL_LOG_LEVEL=info",
	}
	if dbtest.Postgres() {
		env = append(env, "ADAL_DATABASE_URL="+dbtest.NewSchema(t), "ADAL_DATA_DIR=")
	} else {
		env = append(env, "ADAL_DATA_DIR="+dbtest.DataDir(t), "ADAL_DATABASE_URL=")
	}
	proc := newServerProcess(t, env...)
	proc.start()

	signer, err := auth.New([]byte(secret), nil)
	require.NoError(t, err)
	admin, err := signer.Issue(viewer.Viewer{Role: viewer.Admin, Subject: "rescue-test"}, time.Hour)
	require.NoError(t, err)
	var plan struct{ CreatePlan struct{ ID string } }
	proc.graphql(admin, `mutation($in: CreatePlanInput!){ createPlan(input: $in){ id } }`, map[string]any{"in": map[string]any{
		"name": "p", "monthlyCredits": 100, "retentionDays": 7, "maxServers": 5, "maxRecipientsPerServer": 5,
	}}, &plan)
	var tenant struct{ CreateTenant struct{ ID string } }
	proc.graphql(admin, `mutation($in: CreateTenantInput!){ createTenant(input: $in){ id } }`, map[string]any{"in": map[string]any{
		"name": "acme", "planId": plan.CreatePlan.ID,
	}}, &tenant)
	tenantID, err := strconv.Atoi(tenant.CreateTenant.ID)
	require.NoError(t, err)
	owner, err := signer.Issue(viewer.Viewer{Role: viewer.Owner, TenantID: tenantID, Subject: "owner"}, time.Hour)
	require.NoError(t, err)
	var srv struct {
		CreateServer struct{ ID, InboundURL string }
	}
	proc.graphql(owner, `mutation{ createServer(input: {name: "s"}){ id inboundUrl } }`, nil, &srv)
	_, key, ok := strings.Cut(srv.CreateServer.InboundURL, "/in/")
	require.True(t, ok, srv.CreateServer.InboundURL)

	rcv := newHoldingReceiver(t)
	createRecipient := func(path string, maxAttempts int) string {
		var out struct{ CreateRecipient struct{ ID string } }
		proc.graphql(owner, `mutation($in: CreateRecipientInput!){ createRecipient(input: $in){ id } }`, map[string]any{"in": map[string]any{
			"serverId": srv.CreateServer.ID, "name": path, "method": "DIRECT_HTTP", "url": rcv.URL + path, "maxAttempts": maxAttempts,
		}}, &out)
		return out.CreateRecipient.ID
	}
	retrying := createRecipient("/retrying", 3) // an interrupted attempt leaves two
	lastTry := createRecipient("/last-try", 1)  // the interrupted attempt was its only one

	for i := range requests {
		resp, err := http.Post(proc.url+"/in/"+key, "application/json", strings.NewReader(strconv.Itoa(i)))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
	}
	relaytest.Eventually(t, 20*time.Second, "every delivery's first attempt to be held by the receiver", func() bool {
		return len(rcv.received()) == 2*requests
	})
	killedAt := time.Now()
	proc.kill()
	rcv.open()
	proc.start()

	// Every delivery reaches a terminal state.
	var deliveries []rescuedDelivery
	relaytest.Eventually(t, 40*time.Second, "every delivery to settle", func() bool {
		var out struct {
			Requests struct {
				Edges []struct {
					Node struct{ Deliveries []rescuedDelivery }
				}
			}
		}
		proc.graphql(owner, `query($s: ID!){ requests(serverId: $s, first: 100){ edges { node { deliveries {
			id status attemptCount maxAttempts recipient { id url } attempts { number status errorKind startedAt finishedAt } } } } } }`,
			map[string]any{"s": srv.CreateServer.ID}, &out)
		deliveries = deliveries[:0]
		settled := len(out.Requests.Edges) == requests
		for _, e := range out.Requests.Edges {
			for _, d := range e.Node.Deliveries {
				deliveries = append(deliveries, d)
				settled = settled && (d.Status == "SUCCEEDED" || d.Status == "FAILED")
			}
		}
		return settled
	})
	t.Logf("all settled %v after the kill", time.Since(killedAt).Round(time.Millisecond))

	require.Len(t, deliveries, 2*requests, "no delivery lost")
	for _, d := range deliveries {
		require.LessOrEqual(t, d.AttemptCount, d.MaxAttempts, "delivery %s", d.ID)
		require.Len(t, d.Attempts, d.AttemptCount, "delivery %s", d.ID)
		first := d.Attempts[0]
		require.Equal(t, 1, first.Number)
		require.Equal(t, "FAILED", first.Status)
		require.NotNil(t, first.ErrorKind)
		require.Equal(t, "INTERRUPTED", *first.ErrorKind, "the attempt in flight at the kill is recorded as interrupted")
		// Rescued only once its lease had expired, and well within a minute after.
		held := first.FinishedAt.Sub(first.StartedAt)
		require.GreaterOrEqual(t, held, lease, "delivery %s rescued before its lease expired", d.ID)
		require.Less(t, held, lease+60*time.Second)
		switch d.Recipient.ID {
		case retrying:
			require.Equal(t, "SUCCEEDED", d.Status)
			require.Equal(t, 2, d.AttemptCount, "the rescue scheduled the next attempt")
			require.Equal(t, "SUCCEEDED", d.Attempts[1].Status)
			require.False(t, d.Attempts[1].StartedAt.Before(first.FinishedAt), "the retry started before the rescue")
		case lastTry:
			require.Equal(t, "FAILED", d.Status, "no attempt left after the interrupted one")
			require.Equal(t, 1, d.AttemptCount)
		default:
			t.Fatalf("delivery %s to unknown recipient %s", d.ID, d.Recipient.ID)
		}
	}

	// The receiver saw each attempt once: the five held ones per recipient, and the rescued retries.
	seen := map[heldCall]int{}
	for _, c := range rcv.received() {
		seen[c]++
	}
	for c, n := range seen {
		require.Equal(t, 1, n, "%+v received %d times", c, n)
	}
	require.Len(t, seen, 3*requests)
	for i := range seen {
		if i.path == "/last-try" {
			require.Equal(t, 1, i.attempt)
		}
	}
}
