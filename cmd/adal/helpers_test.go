package main_test

import (
	"bufio"
	"fmt"
	"io"
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

	"github.com/adal-relay/adal/ent"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/internal/testproc"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
)

// adalBin is the adal binary, built once for the whole package: the tests run the real CLI, as users do.
var adalBin = &testproc.Binary{Pkg: "github.com/adal-relay/adal/cmd/adal"}

func TestMain(m *testing.M) { os.Exit(testproc.Run(m)) }

// unit compresses the retry schedule (ADAL_RETRY_UNIT).
func unit(d time.Duration) func(*relay.Config) {
	return func(c *relay.Config) { c.RetryUnit = d }
}

// cliProcess is a running `adal` with its output collected line by line.
type cliProcess struct {
	t    *testing.T
	cmd  *exec.Cmd
	home string

	mu       sync.Mutex
	lines    []string // stdout, and stderr too unless split
	errLines []string // stderr, when split
	done     chan struct{}
	err      error // the exit, once done
}

// run is how to start adal.
type run struct {
	home  string   // config home; "" for a fresh one
	env   []string // extra environment
	split bool     // keep stderr apart from stdout
}

// adalEnv is a clean environment whose config dir is home: the tests never read or write the real one.
func adalEnv(home string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ADAL_") || strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config")), extra...)
}

// startAdal runs adal with args; home is its config home ("" for a fresh one).
func startAdal(t *testing.T, home string, args ...string) *cliProcess {
	t.Helper()
	return start(t, run{home: home}, args...)
}

// start runs adal as r says.
func start(t *testing.T, r run, args ...string) *cliProcess {
	t.Helper()
	if r.home == "" {
		r.home = t.TempDir()
	}
	cmd := exec.Command(adalBin.Path(t), args...)
	cmd.Env = adalEnv(r.home, r.env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr io.ReadCloser
	if r.split {
		stderr, err = cmd.StderrPipe()
		require.NoError(t, err)
	} else {
		cmd.Stderr = cmd.Stdout // one stream, in order
	}
	require.NoError(t, cmd.Start())
	p := &cliProcess{t: t, cmd: cmd, home: r.home, done: make(chan struct{})}
	var readers sync.WaitGroup
	collect := func(from io.Reader, into *[]string, tag string) {
		defer readers.Done()
		sc := bufio.NewScanner(from)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			*into = append(*into, sc.Text())
			p.mu.Unlock()
			if testing.Verbose() {
				t.Logf("adal[%d]%s: %s", cmd.Process.Pid, tag, sc.Text())
			}
		}
	}
	readers.Add(1)
	go collect(stdout, &p.lines, "")
	if stderr != nil {
		readers.Add(1)
		go collect(stderr, &p.errLines, " stderr")
	}
	go func() {
		readers.Wait()
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// runAdal runs a command to its end and returns its exit code, stdout and stderr.
func runAdal(t *testing.T, r run, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	r.split = true
	p := start(t, r, args...)
	code = p.exit(30 * time.Second)
	p.mu.Lock()
	defer p.mu.Unlock()
	return code, strings.Join(p.lines, "\n"), strings.Join(p.errLines, "\n")
}

// listen starts `adal listen` for recipientID, forwarding to forward, with the given journal directory.
func listen(t *testing.T, env *relaytest.Env, token, recipientID, forward, journal string) *cliProcess {
	t.Helper()
	return startAdal(t, "", "listen", "--api", env.Server.URL, "--token", token,
		"--recipient", recipientID, "--forward", forward, "--journal-dir", journal)
}

// output is everything printed so far.
func (p *cliProcess) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// waitOutput waits until the output contains s.
func (p *cliProcess) waitOutput(s string) {
	p.t.Helper()
	relaytest.Eventually(p.t, 20*time.Second, fmt.Sprintf("adal to print %q; output so far:\n%s", s, p.output()), func() bool {
		return strings.Contains(p.output(), s)
	})
}

// waitConnected waits until the CLI is attached (the server has marked the recipient connected).
func (p *cliProcess) waitConnected() { p.t.Helper(); p.waitOutput("  connected: ") }

// exit waits for the process to end and returns its exit code.
func (p *cliProcess) exit(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("adal did not exit within %v; output:\n%s", timeout, p.output())
	}
	return p.cmd.ProcessState.ExitCode()
}

// interrupt sends Ctrl-C and expects a clean exit.
func (p *cliProcess) interrupt() {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(syscall.SIGINT))
	require.Equal(p.t, 0, p.exit(40*time.Second), "exit code after Ctrl-C; output:\n%s", p.output())
}

// kill ends the process the hard way (SIGKILL): no cleanup, no goodbye to the server.
func (p *cliProcess) kill() {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Kill())
	p.exit(10 * time.Second)
}

// localService is the developer's service the CLI forwards to: it records calls, answers what status says
// and can hold calls open.
type localService struct {
	*httptest.Server
	status func(n int) int

	mu    sync.Mutex
	calls []localCall
	gate  chan struct{}
}

type localCall struct {
	at     time.Time
	method string
	uri    string
	header http.Header
	body   string
}

func newLocalService(t *testing.T, status func(n int) int) *localService {
	t.Helper()
	s := &localService{status: status}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.calls = append(s.calls, localCall{at: time.Now(), method: r.Method, uri: r.URL.RequestURI(), header: r.Header.Clone(), body: string(body)})
		n, gate := len(s.calls), s.gate
		s.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(s.status(n))
	}))
	t.Cleanup(s.Close)
	return s
}

func answer(code int) func(int) int { return func(int) int { return code } }

func (s *localService) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

func (s *localService) callsCopy() []localCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]localCall(nil), s.calls...)
}

// hold makes calls wait until the caller hangs up.
func (s *localService) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = make(chan struct{})
}

// release lets held calls answer, and later ones answer at once.
func (s *localService) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
}

// closedURL is a local URL nobody listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	return u + "/hook"
}

// balance reads the tenant's credit balance from the API.
func balance(t *testing.T, env *relaytest.Env, token string) int {
	t.Helper()
	var out struct {
		Viewer struct{ Tenant struct{ CreditBalance int } }
	}
	env.MustGraphQL(token, `{ viewer { tenant { creditBalance } } }`, nil, &out)
	return out.Viewer.Tenant.CreditBalance
}

// deliveryOf reads the (only) delivery of a request to a recipient, with its attempts, as the system.
func deliveryOf(t *testing.T, env *relaytest.Env, requestID, recipientID string) *ent.Delivery {
	t.Helper()
	req, err := strconv.Atoi(requestID)
	require.NoError(t, err)
	rec, err := strconv.Atoi(recipientID)
	require.NoError(t, err)
	ds := env.Deliveries(entdelivery.RequestID(req), entdelivery.RecipientID(rec))
	require.Len(t, ds, 1)
	return ds[0]
}

// cliConnected asks the API, as the tenant, whether a CLI is attached for the recipient.
func cliConnected(t *testing.T, env *relaytest.Env, token, serverID, recipientID string) bool {
	t.Helper()
	var out struct {
		Server struct {
			Recipients []struct {
				ID           string
				CliConnected bool
			}
		}
	}
	env.MustGraphQL(token, `query($id: ID!){ server(id: $id){ recipients { id cliConnected } } }`, map[string]any{"id": serverID}, &out)
	for _, r := range out.Server.Recipients {
		if r.ID == recipientID {
			return r.CliConnected
		}
	}
	t.Fatalf("recipient %s not on server %s", recipientID, serverID)
	return false
}

// fixture is a tenant with a server and a CLI recipient on it.
type fixture struct {
	env       *relaytest.Env
	tenant    relaytest.Tenant
	server    relaytest.Server
	recipient string
}

func newFixture(t *testing.T, env *relaytest.Env, serverExtra, recipientExtra map[string]any) fixture {
	t.Helper()
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 1000})
	srv := env.NewServer(tn, "laptop", serverExtra)
	in := map[string]any{"method": "CLI"}
	for k, v := range recipientExtra {
		in[k] = v
	}
	return fixture{env: env, tenant: tn, server: srv, recipient: env.NewRecipient(tn, srv.ID, in)}
}

// newWebhook builds a PUT to an inbound URL.
func newWebhook(url, body string) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, err
}
