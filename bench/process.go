package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lib/pq"

	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/tracing"
	"github.com/adal-relay/adal/viewer"
)

// Process is an Adal process under test, in this process: its own fresh database on the PostgreSQL server,
// relay.Open + Serve on a loopback listener, and the background services started when the scenario says so.
type Process struct {
	Relay *relay.Relay
	URL   string // http://127.0.0.1:port
	// DB is a connection of the bench's own (not counted, not the process's pool) for fixtures and checks.
	DB     *sql.DB
	dbName string
	dbURL  string // the process's database, for processes of other kinds on it (the cluster scenario's)
	admin  *sql.DB
	token  string
	client *http.Client

	ctx     context.Context
	cancel  context.CancelFunc
	served  chan error
	started bool
}

// startProcess creates a fresh database named after the scenario and opens an Adal process on it. configure
// adjusts the relay configuration (retry unit, workers…). The background services are not started yet.
func (b *Runner) startProcess(scenario string, configure func(*relay.Config)) (*Process, error) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := "adal_bench_" + scenario + "_" + hex.EncodeToString(rnd[:])
	admin, err := sql.Open("postgres", b.cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if _, err := admin.Exec("CREATE DATABASE " + pq.QuoteIdentifier(name)); err != nil {
		admin.Close()
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u, _ := url.Parse(b.cfg.DatabaseURL)
	u.Path = "/" + name
	dbURL := u.String()
	p := &Process{dbName: name, dbURL: dbURL, admin: admin, served: make(chan error, 1)}
	fail := func(err error) (*Process, error) {
		p.Close()
		return nil, err
	}
	if p.DB, err = sql.Open("postgres", dbURL); err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	cfg := relay.Config{
		DatabaseURL:         dbURL,
		DataDir:             os.TempDir(),
		JWTSecret:           benchJWTSecret,
		PublicURL:           "http://" + ln.Addr().String(),
		AllowPrivateTargets: true, // the receiver is on loopback
		Logger:              slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		IntakeCommitters:    b.cfg.IntakeCommitters,
	}
	// The OTEL_* variables trace the process under test as they would a server: tracing's cost is measured
	// by running a scenario with them and without.
	if cfg.Tracing, err = tracing.FromEnv(); err != nil {
		return fail(err)
	}
	if configure != nil {
		configure(&cfg)
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if p.Relay, err = relay.Open(p.ctx, cfg); err != nil {
		ln.Close()
		return fail(err)
	}
	p.URL = cfg.PublicURL
	go func() { p.served <- p.Relay.Serve(p.ctx, ln) }()
	if p.token, err = p.Relay.Auth.Issue(viewer.Viewer{Role: viewer.Admin, Subject: "bench"}, 24*time.Hour); err != nil {
		return fail(err)
	}
	p.client = &http.Client{Timeout: 30 * time.Second}
	return p, nil
}

// benchJWTSecret signs the tokens of every Adal process the bench runs.
const benchJWTSecret = "bench-secret-bench-secret-bench-secret-0123"

// stage is where most scenarios start: a traffic process, an Adal process and the fixture set up on it.
type stage struct {
	tr *Traffic
	p  *Process
	fx *Fixture
}

// layout is the fixture a stage sets up (see Process.setup); an empty target is the traffic's receiver.
type layout struct {
	tenants, recipients int
	target              string
	paused              bool
	// method, when set, makes the recipients broker recipients of that method, publishing to target (a broker
	// URL) with the destination settings; else they are DIRECT_HTTP recipients of target + "/hook".
	method      string
	destination map[string]any
	// server adds fields to every server's CreateServerInput (an event type source, schemaValidation…);
	// eventTypes, name to JSON Schema, are created in every tenant before its server; transform, when set, is
	// every recipient's transformation (setRecipientTransform).
	server     map[string]any
	eventTypes map[string]string
	transform  string
}

// startStage starts a traffic process whose receiver answers by refuse, an Adal process for scenario
// (configure as in startProcess) and the fixture l. On error, what was started is closed.
func (b *Runner) startStage(scenario string, refuse Refusal, configure func(*relay.Config), l layout) (*stage, error) {
	tr, err := b.startTraffic(refuse)
	if err != nil {
		return nil, err
	}
	p, err := b.startProcess(scenario, configure)
	if err != nil {
		tr.Close()
		return nil, err
	}
	s := &stage{tr: tr, p: p}
	if l.target == "" {
		l.target = tr.ReceiverURL()
	}
	if s.fx, err = p.setupLayout(l); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close ends the Adal process, then the traffic process.
func (s *stage) Close() {
	s.p.Close()
	s.tr.Close()
}

// startStoreOnly opens an Adal process for scenario with one tenant and one server, whose one recipient is
// paused: for scenarios that measure the API over what the server stores, with nothing delivered.
func (b *Runner) startStoreOnly(scenario string) (*Process, FixtureServer, error) {
	p, err := b.startProcess(scenario, nil)
	if err != nil {
		return nil, FixtureServer{}, err
	}
	fx, err := p.setup(1, 1, "http://127.0.0.1:9/hook", true)
	if err != nil {
		p.Close()
		return nil, FixtureServer{}, err
	}
	return p, fx.Servers[0], nil
}

// committersSetting names the intake committers in a row's settings when the run sets them.
func (b *Runner) committersSetting() string {
	if b.cfg.IntakeCommitters == 0 {
		return ""
	}
	return fmt.Sprintf("; ADAL_INTAKE_COMMITTERS %d", b.cfg.IntakeCommitters)
}

// Start starts the background services: scheduler, rescuer, event bus.
func (p *Process) Start() error {
	if p.started {
		return nil
	}
	p.started = true
	return p.Relay.Start(p.ctx)
}

// Close stops the process and drops its database.
func (p *Process) Close() {
	p.stopRelay()
	if p.DB != nil {
		p.DB.Close()
	}
	if p.admin != nil {
		if _, err := p.admin.Exec("DROP DATABASE IF EXISTS " + pq.QuoteIdentifier(p.dbName) + " WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "bench: drop database %s: %v\n", p.dbName, err)
		}
		p.admin.Close()
	}
}

// stopRelay stops the Adal process but keeps its database, and the bench's connection to it, for processes of
// other kinds to run on (the cluster scenario's cmd/server processes).
func (p *Process) stopRelay() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	p.cancel = nil
	if p.Relay == nil { // relay.Open failed: nothing was served
		return
	}
	<-p.served
	if p.started {
		p.Relay.Stop()
	}
	p.Relay.Close()
}

// graphQL runs one operation as the operator and decodes its data into out.
func (p *Process) graphQL(query string, vars map[string]any, out any) error {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, p.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.token)
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("graphql: status %d: %s", resp.StatusCode, raw)
	}
	if len(r.Errors) > 0 {
		return fmt.Errorf("graphql: %s", r.Errors[0].Message)
	}
	if out != nil {
		return json.Unmarshal(r.Data, out)
	}
	return nil
}

// Fixture is what setup created.
type Fixture struct {
	Servers []FixtureServer
}

// FixtureServer is one server of a fixture tenant.
type FixtureServer struct {
	TenantID   int64
	ID         int64
	InboundURL string
	Recipients []int64
}

// Inbound lists the servers' inbound URLs.
func (f *Fixture) Inbound() []string {
	out := make([]string, len(f.Servers))
	for i, s := range f.Servers {
		out[i] = s.InboundURL
	}
	return out
}

// RecipientIDs lists every recipient.
func (f *Fixture) RecipientIDs() []int64 {
	var out []int64
	for _, s := range f.Servers {
		out = append(out, s.Recipients...)
	}
	return out
}

// setup creates, through the GraphQL API as an operator, one plan and tenants tenants with one server each
// and recipients DIRECT_HTTP recipients per server pointing at target (paused when paused is set).
func (p *Process) setup(tenants, recipients int, target string, paused bool) (*Fixture, error) {
	return p.setupLayout(layout{tenants: tenants, recipients: recipients, target: target, paused: paused})
}

// setupLayout is setup of l, whose recipients may be broker recipients.
func (p *Process) setupLayout(l layout) (*Fixture, error) {
	tenants, recipients := l.tenants, l.recipients
	var plan struct{ CreatePlan struct{ ID string } }
	err := p.graphQL(`mutation($in: CreatePlanInput!){ createPlan(input: $in){ id } }`, map[string]any{"in": map[string]any{
		"name": "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36), "monthlyCredits": 2_000_000_000, "retentionDays": 7, "maxServers": 10,
		"maxRecipientsPerServer": max(recipients, 10),
	}}, &plan)
	if err != nil {
		return nil, fmt.Errorf("create plan: %w", err)
	}
	f := &Fixture{Servers: make([]FixtureServer, tenants)}
	var wg sync.WaitGroup
	errs := make([]error, tenants)
	sem := make(chan struct{}, 8)
	for i := range tenants {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			f.Servers[i], errs[i] = p.setupTenant(plan.CreatePlan.ID, i, l)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Statistics as autovacuum would soon have them: a never-analyzed recipients table makes the planner
	// drive the claim from recipients and visit every due delivery. Only the tables the fixture filled:
	// statistics saying requests is empty make every connection plan, and keep, a sequential scan for the
	// foreign-key check of each delivery it inserts, until autovacuum analyzes the table again, which a short
	// run never sees.
	_, err = p.DB.Exec(`ANALYZE plans, tenants, servers, recipients`)
	return f, err
}

func (p *Process) setupTenant(planID string, i int, l layout) (FixtureServer, error) {
	var fs FixtureServer
	var tn struct{ CreateTenant struct{ ID string } }
	if err := p.graphQL(`mutation($in: CreateTenantInput!){ createTenant(input: $in){ id } }`, map[string]any{
		"in": map[string]any{"name": fmt.Sprintf("tenant-%03d", i), "planId": planID},
	}, &tn); err != nil {
		return fs, fmt.Errorf("create tenant: %w", err)
	}
	for name, schema := range l.eventTypes {
		if err := p.graphQL(`mutation($in: CreateEventTypeInput!){ createEventType(input: $in){ id } }`, map[string]any{
			"in": map[string]any{"tenantId": tn.CreateTenant.ID, "name": name, "schema": schema},
		}, nil); err != nil {
			return fs, fmt.Errorf("create event type %s: %w", name, err)
		}
	}
	var srv struct {
		CreateServer struct {
			ID         string
			InboundURL string
		}
	}
	sin := map[string]any{"tenantId": tn.CreateTenant.ID, "name": fmt.Sprintf("server-%03d", i)}
	maps.Copy(sin, l.server)
	if err := p.graphQL(`mutation($in: CreateServerInput!){ createServer(input: $in){ id inboundUrl } }`, map[string]any{
		"in": sin,
	}, &srv); err != nil {
		return fs, fmt.Errorf("create server: %w", err)
	}
	fs.TenantID, _ = strconv.ParseInt(tn.CreateTenant.ID, 10, 64)
	fs.ID, _ = strconv.ParseInt(srv.CreateServer.ID, 10, 64)
	fs.InboundURL = srv.CreateServer.InboundURL
	if !strings.HasPrefix(fs.InboundURL, p.URL) {
		return fs, fmt.Errorf("inbound URL %q is not on %s", fs.InboundURL, p.URL)
	}
	for j := range l.recipients {
		in := map[string]any{"serverId": srv.CreateServer.ID, "name": fmt.Sprintf("recipient-%d", j),
			"method": "DIRECT_HTTP", "url": l.target + "/hook"}
		if l.method != "" {
			in["method"], in["url"], in["destination"] = l.method, l.target, l.destination
		}
		var rc struct{ CreateRecipient struct{ ID string } }
		if err := p.graphQL(`mutation($in: CreateRecipientInput!){ createRecipient(input: $in){ id } }`,
			map[string]any{"in": in}, &rc); err != nil {
			return fs, fmt.Errorf("create recipient: %w", err)
		}
		if l.transform != "" {
			if err := p.graphQL(`mutation($id: ID!, $src: String!){ setRecipientTransform(recipientId: $id, source: $src){ id } }`,
				map[string]any{"id": rc.CreateRecipient.ID, "src": l.transform}, nil); err != nil {
				return fs, fmt.Errorf("set recipient transform: %w", err)
			}
		}
		if l.paused {
			if err := p.graphQL(`mutation($id: ID!){ pauseRecipient(id: $id){ id } }`, map[string]any{"id": rc.CreateRecipient.ID}, nil); err != nil {
				return fs, fmt.Errorf("pause recipient: %w", err)
			}
		}
		id, _ := strconv.ParseInt(rc.CreateRecipient.ID, 10, 64)
		fs.Recipients = append(fs.Recipients, id)
	}
	return fs, nil
}

// count runs a COUNT query on the bench's own connection.
func (p *Process) count(query string, args ...any) (int64, error) {
	var n int64
	err := p.DB.QueryRow(query, args...).Scan(&n)
	return n, err
}

// countBoth runs two COUNT queries on the bench's own connection, the second once the first has succeeded.
func (p *Process) countBoth(first, second string) (int64, int64, error) {
	a, err := p.count(first)
	if err != nil {
		return 0, 0, err
	}
	b, err := p.count(second)
	return a, b, err
}

// warmUp sends load at rate for the configured warm-up and then analyzes the tables, as autovacuum would
// have by the time a deployment is under steady load. It returns how many requests were accepted. Nothing of
// it is measured.
func (b *Runner) warmUp(ctx context.Context, tr *Traffic, p *Process, fx *Fixture, rate float64) (int64, error) {
	return b.warmUpWith(ctx, tr, p, fx.Inbound(), body1K(), rate)
}

// warmUpWith is warmUp sending body to targets.
func (b *Runner) warmUpWith(ctx context.Context, tr *Traffic, p *Process, targets []string, body []byte, rate float64) (int64, error) {
	if b.cfg.WarmUp <= 0 {
		return 0, nil
	}
	res, err := tr.Run(ctx, Load{Rate: rate, Duration: b.cfg.WarmUp, Targets: targets, Body: body})
	if err != nil {
		return 0, fmt.Errorf("warm-up: %w", err)
	}
	if _, err := p.DB.ExecContext(ctx, `ANALYZE`); err != nil {
		return 0, fmt.Errorf("analyze after warm-up: %w", err)
	}
	b.logf("warm-up: %d requests at %.0f/s, then ANALYZE", res.Accepted(), rate)
	return int64(res.Accepted()), nil
}
