// Package relaytest starts a whole Adal process in a test — real database (SQLite, or Postgres when
// ADAL_TEST_DATABASE_URL is set), real HTTP server — and talks to it the way clients do: GraphQL over HTTP and
// webhooks to /in/{key}.
package relaytest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/attempt"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/predicate"
	"github.com/adal-relay/adal/internal/testproc"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
)

// Clock is a settable clock for tests that must control time (retention, billing periods).
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock stopped at t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Env is a running Adal process under test.
type Env struct {
	T      testing.TB
	DB     *dbtest.DB
	Relay  *relay.Relay
	Server *httptest.Server
	// Ctx is cancelled when the test ends; background services run under it.
	Ctx context.Context
}

// Start opens a fresh database, builds a process from cfg (Addr, DataDir and DatabaseURL are filled in) and
// serves it on a loopback httptest server. Everything stops when the test ends.
func Start(t testing.TB, configure ...func(*relay.Config)) *Env {
	t.Helper()
	return start(t, dbtest.Open(t), configure)
}

// StartAt starts a process as Start does (configure runs after), on a clock stopped at now that the test
// moves forward.
func StartAt(t testing.TB, now time.Time, configure ...func(*relay.Config)) (*Env, *Clock) {
	t.Helper()
	clock := NewClock(now)
	return Start(t, append([]func(*relay.Config){clock.Use}, configure...)...), clock
}

// Use makes a process's configuration take its time from c.
func (c *Clock) Use(cfg *relay.Config) { cfg.Now = c.Now }

// StartTenantServer starts a process as Start does, with a tenant of credits and its server, both called name.
func StartTenantServer(t testing.TB, name string, credits int, configure ...func(*relay.Config)) (*Env, Tenant, Server) {
	t.Helper()
	env := Start(t, configure...)
	tn := env.NewTenant(name, PlanLimits{Credits: credits})
	return env, tn, env.NewServer(tn, name, nil)
}

// StartWithServer starts a process as Start does, with NewTenantServer's tenant and server on it.
func StartWithServer(t testing.TB, credits int, configure ...func(*relay.Config)) (*Env, Tenant, Server) {
	t.Helper()
	env := Start(t, configure...)
	tn, srv := env.NewTenantServer(credits)
	return env, tn, srv
}

// Peer starts another process on e's database, as a second replica of a scale-out deployment would run:
// its own services, scheduler and HTTP server, sharing nothing with e but the database. Only PostgreSQL is
// shared between processes; on SQLite the test is skipped.
func (e *Env) Peer(t testing.TB, configure ...func(*relay.Config)) *Env {
	t.Helper()
	dbtest.SkipUnlessPostgres(t)
	return start(t, e.DB, configure)
}

func start(t testing.TB, db *dbtest.DB, configure []func(*relay.Config)) *Env {
	t.Helper()
	cfg := relay.Config{
		DatabaseURL:         db.URL,
		DataDir:             db.Dir,
		JWTSecret:           "test-secret-test-secret-test-secret-0123",
		AllowPrivateTargets: true, // test recipients are httptest servers on loopback
		Logger:              slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	// The process opens its own connections to the test database; e.DB stays open for direct assertions.
	srv := httptest.NewUnstartedServer(nil)
	cfg.PublicURL = "http://" + srv.Listener.Addr().String()
	for _, f := range configure {
		f(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r, err := relay.Open(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatalf("open relay: %v", err)
	}
	srv.Config.Handler = r.Handler()
	srv.Start()
	if err := r.Start(ctx); err != nil {
		t.Fatalf("start relay: %v", err)
	}
	t.Cleanup(func() {
		srv.Close()
		cancel()
		r.Stop()
		r.Close()
	})
	return &Env{T: t, DB: db, Relay: r, Server: srv, Ctx: ctx}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// Token returns a JWT for v signed by the process.
func (e *Env) Token(v viewer.Viewer) string {
	e.T.Helper()
	if v.Subject == "" {
		v.Subject = "test"
	}
	tok, err := e.Relay.Auth.Issue(v, time.Hour)
	if err != nil {
		e.T.Fatalf("issue token: %v", err)
	}
	return tok
}

// AdminToken returns an operator token.
func (e *Env) AdminToken() string { return e.Token(viewer.Viewer{Role: viewer.Admin}) }

// GQLError is one GraphQL error as a client sees it.
type GQLError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

// Code is the error's extensions.code.
func (e GQLError) Code() string {
	s, _ := e.Extensions["code"].(string)
	return s
}

// Response is a GraphQL response.
type Response struct {
	Data   json.RawMessage `json:"data"`
	Errors []GQLError      `json:"errors"`
	Status int             `json:"-"`
}

// Code is the first error's code, or "".
func (r Response) Code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	return r.Errors[0].Code()
}

// GraphQL posts one operation with token ("" for none) and returns the decoded response.
func (e *Env) GraphQL(token, query string, vars map[string]any) Response {
	e.T.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, e.Server.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.Server.Client().Do(req)
	if err != nil {
		e.T.Fatalf("graphql: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out Response
	if err := json.Unmarshal(raw, &out); err != nil {
		e.T.Fatalf("graphql: status %d, undecodable body %q", resp.StatusCode, raw)
	}
	out.Status = resp.StatusCode
	return out
}

// ConcurrentCodes sends token's operation n times at once, the i-th with vars(i), and returns each answer's
// error code ("" for none), in order.
func (e *Env) ConcurrentCodes(n int, token, query string, vars func(i int) map[string]any) []string {
	codes := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { codes[i] = e.GraphQL(token, query, vars(i)).Code() })
	}
	wg.Wait()
	return codes
}

// MustGraphQL runs an operation that must succeed and decodes its data into out (if not nil).
func (e *Env) MustGraphQL(token, query string, vars map[string]any, out any) {
	e.T.Helper()
	resp := e.GraphQL(token, query, vars)
	if len(resp.Errors) > 0 {
		e.T.Fatalf("graphql errors: %+v\nquery: %s", resp.Errors, query)
	}
	if out != nil {
		if err := json.Unmarshal(resp.Data, out); err != nil {
			e.T.Fatalf("decode data %s: %v", resp.Data, err)
		}
	}
}

// Post sends a webhook to the inbound URL with the given key, path suffix and body.
func (e *Env) Post(key, suffix string, body []byte) *http.Response {
	e.T.Helper()
	resp, err := e.Server.Client().Post(e.Server.URL+"/in/"+key+suffix, "application/json", bytes.NewReader(body))
	if err != nil {
		e.T.Fatalf("post webhook: %v", err)
	}
	return resp
}

// Accept posts an empty JSON webhook with the given key, requires it accepted and returns the request's ID.
func (e *Env) Accept(key string) int {
	e.T.Helper()
	raw := e.Send(key, "", "{}")
	id, err := strconv.Atoi(raw)
	if err != nil {
		e.T.Fatalf("request ID %q: %v", raw, err)
	}
	return id
}

// Send posts a webhook with the given key, path suffix and body, requires it accepted and returns the
// request's ID.
func (e *Env) Send(key, suffix, body string) string {
	e.T.Helper()
	return e.SendWith(key, suffix, body, http.Header{"Content-Type": {"application/json"}})
}

// SendWith posts a webhook as Send does, with header as its only header fields.
func (e *Env) SendWith(key, suffix, body string, header http.Header) string {
	e.T.Helper()
	req, err := http.NewRequest(http.MethodPost, e.Server.URL+"/in/"+key+suffix, strings.NewReader(body))
	if err != nil {
		e.T.Fatalf("post webhook: %v", err)
	}
	req.Header = header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	resp, err := e.Server.Client().Do(req)
	if err != nil {
		e.T.Fatalf("post webhook: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		e.T.Fatalf("post webhook: %d %s", resp.StatusCode, raw)
	}
	var out struct{ RequestID string }
	if err := json.Unmarshal(raw, &out); err != nil {
		e.T.Fatalf("decode accept answer %s: %v", raw, err)
	}
	return out.RequestID
}

// NewCLIRecipient creates a server with the given deliverPendingOnConnect and a CLI recipient on it, and returns
// both.
func (e *Env) NewCLIRecipient(t Tenant, pendingOnConnect bool) (Server, int) {
	e.T.Helper()
	srv := e.NewServer(t, "s", map[string]any{"deliverPendingOnConnect": pendingOnConnect})
	id, err := strconv.Atoi(e.NewRecipient(t, srv.ID, map[string]any{"method": "CLI"}))
	if err != nil {
		e.T.Fatalf("recipient ID: %v", err)
	}
	return srv, id
}

// Tenant is a tenant set up for a test, with tokens for its roles.
type Tenant struct {
	ID     string
	PlanID string
	Owner  string // OWNER token
	Member string // MEMBER token
}

// PlanLimits are the plan settings a fixture tenant gets.
type PlanLimits struct {
	Credits                int
	RetentionDays          int
	MaxServers             int
	MaxRecipientsPerServer int
}

// NewTenant creates a plan with the given limits (zero fields take generous defaults) and a tenant on it,
// whose balance is then the plan's monthly credits.
func (e *Env) NewTenant(name string, limits PlanLimits) Tenant {
	e.T.Helper()
	limits.RetentionDays = cmp.Or(limits.RetentionDays, 7)
	limits.MaxServers = cmp.Or(limits.MaxServers, 10)
	limits.MaxRecipientsPerServer = cmp.Or(limits.MaxRecipientsPerServer, 10)
	admin := e.AdminToken()
	var p struct{ CreatePlan struct{ ID string } }
	e.MustGraphQL(admin, `mutation($in: CreatePlanInput!){ createPlan(input: $in){ id } }`, map[string]any{"in": map[string]any{
		"name": name + "-plan-" + strconv.FormatInt(time.Now().UnixNano(), 36), "monthlyCredits": limits.Credits,
		"retentionDays": limits.RetentionDays, "maxServers": limits.MaxServers,
		"maxRecipientsPerServer": limits.MaxRecipientsPerServer,
	}}, &p)
	var tn struct{ CreateTenant struct{ ID string } }
	e.MustGraphQL(admin, `mutation($in: CreateTenantInput!){ createTenant(input: $in){ id } }`, map[string]any{"in": map[string]any{
		"name": name, "planId": p.CreatePlan.ID,
	}}, &tn)
	id, err := strconv.Atoi(tn.CreateTenant.ID)
	if err != nil {
		e.T.Fatalf("tenant id %q: %v", tn.CreateTenant.ID, err)
	}
	return Tenant{
		ID:     tn.CreateTenant.ID,
		PlanID: p.CreatePlan.ID,
		Owner:  e.Token(viewer.Viewer{Role: viewer.Owner, TenantID: id, Subject: name + "-owner"}),
		Member: e.Token(viewer.Viewer{Role: viewer.Member, TenantID: id, Subject: name + "-member"}),
	}
}

// NewTenantServer creates a tenant "acme" with credits (other limits as NewTenant gives them) and a server
// "s" of its: the fixture most tests start from.
func (e *Env) NewTenantServer(credits int) (Tenant, Server) {
	e.T.Helper()
	tn := e.NewTenant("acme", PlanLimits{Credits: credits})
	return tn, e.NewServer(tn, "s", nil)
}

// Fixture is a running process with one tenant on it.
type Fixture struct {
	Env    *Env
	Tenant Tenant
}

// StartFixture starts a process as Start does, with a tenant "acme" of credits on it.
func StartFixture(t testing.TB, credits int, configure ...func(*relay.Config)) Fixture {
	t.Helper()
	env := Start(t, configure...)
	return Fixture{Env: env, Tenant: env.NewTenant("acme", PlanLimits{Credits: credits})}
}

// Server is a server created for a test.
type Server struct {
	ID         string
	InboundURL string
	Key        string
}

// NewServer creates a server as the tenant's owner.
func (e *Env) NewServer(t Tenant, name string, extra map[string]any) Server {
	e.T.Helper()
	in := map[string]any{"name": name}
	for k, v := range extra {
		in[k] = v
	}
	var out struct{ CreateServer Server }
	e.MustGraphQL(t.Owner, `mutation($in: CreateServerInput!){ createServer(input: $in){ id inboundUrl } }`,
		map[string]any{"in": in}, &out)
	s := out.CreateServer
	prefix := e.Server.URL + "/in/"
	if len(s.InboundURL) <= len(prefix) || s.InboundURL[:len(prefix)] != prefix {
		e.T.Fatalf("inbound URL %q does not start with %q", s.InboundURL, prefix)
	}
	s.Key = s.InboundURL[len(prefix):]
	return s
}

// NewRecipient creates a recipient as the tenant's owner; in must hold at least method (and url for
// DIRECT_HTTP). It returns the recipient's ID.
func (e *Env) NewRecipient(t Tenant, serverID string, in map[string]any) string {
	e.T.Helper()
	in["serverId"] = serverID
	if _, ok := in["name"]; !ok {
		in["name"] = fmt.Sprintf("recipient-%d", time.Now().UnixNano())
	}
	var out struct{ CreateRecipient struct{ ID string } }
	e.MustGraphQL(t.Owner, `mutation($in: CreateRecipientInput!){ createRecipient(input: $in){ id } }`,
		map[string]any{"in": in}, &out)
	return out.CreateRecipient.ID
}

// Deliveries reads, as the system, the deliveries that match where (all of them without), by ID, each with
// its attempts by number.
func (e *Env) Deliveries(where ...predicate.Delivery) []*ent.Delivery {
	e.T.Helper()
	ds, err := e.DB.Client.Delivery.Query().Where(where...).
		WithAttempts(func(q *ent.AttemptQuery) { q.Order(ent.Asc(attempt.FieldNumber)) }).
		Order(ent.Asc(entdelivery.FieldID)).
		All(viewer.SystemContext(e.Ctx))
	if err != nil {
		e.T.Fatalf("read deliveries: %v", err)
	}
	return ds
}

// RowID is the database row ID that a GraphQL ID names; t fails when it names none.
func RowID(t testing.TB, id string) int {
	t.Helper()
	n, err := strconv.Atoi(id)
	if err != nil {
		t.Fatalf("ID %q: %v", id, err)
	}
	return n
}

// Eventually polls cond until it returns true or the deadline passes; it never sleeps to wait for a state
// it could ask about.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// LogBuffer collects a process's log for a test to read, such as the sign-in link of a first run. The logger
// writes to it from any goroutine.
type LogBuffer struct{ testproc.Buffer }

// CaptureLogs sends the process's log (text, info and above) to buf: pass it to Start.
func CaptureLogs(buf *LogBuffer) func(*relay.Config) {
	return func(c *relay.Config) {
		c.Logger = slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
}

// signInURL matches the url attribute of a logged sign-in link, quoted or not.
var signInURL = regexp.MustCompile(`url="?([^"\s]+/#/signin\?code=[^"\s]+)`)

// SignInLinks returns the sign-in links logged so far, in order.
func (l *LogBuffer) SignInLinks() []string {
	var out []string
	for _, m := range signInURL.FindAllStringSubmatch(l.String(), -1) {
		out = append(out, m[1])
	}
	return out
}
