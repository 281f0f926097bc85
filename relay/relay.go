// Package relay assembles one Adal process from its configuration: database, services, background loops and
// the HTTP surface. cmd/server runs it; tests start it in-process.
package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/adal-relay/adal/alerting"
	"github.com/adal-relay/adal/api"
	"github.com/adal-relay/adal/auth"
	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/broker"
	"github.com/adal-relay/adal/bulk"
	"github.com/adal-relay/adal/clihub"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/egress"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/events"
	"github.com/adal-relay/adal/inbound"
	"github.com/adal-relay/adal/leader"
	"github.com/adal-relay/adal/metrics"
	"github.com/adal-relay/adal/outbound"
	"github.com/adal-relay/adal/panel"
	"github.com/adal-relay/adal/rejection"
	"github.com/adal-relay/adal/resolvers"
	"github.com/adal-relay/adal/retention"
	"github.com/adal-relay/adal/routing"
	"github.com/adal-relay/adal/scheduler"
	"github.com/adal-relay/adal/search"
	"github.com/adal-relay/adal/startstop"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/tracing"
	"github.com/adal-relay/adal/viewer"
)

// Config is everything a process needs; cmd/server fills it from ADAL_* variables.
type Config struct {
	Addr        string // listen address, default ":8080"
	DataDir     string // SQLite file and local state, default "./data"
	DatabaseURL string // postgres:// URL; empty means SQLite in DataDir
	JWTSecret   string // signing secret; empty means generated once and stored with the data
	// PublicURL is the base of inbound URLs shown to users; default http://localhost:<port>.
	PublicURL string
	// AllowPrivateTargets lets recipients reach private addresses; AllowedTargetCIDRs lets them reach these
	// ranges only. Neither opens the cloud metadata services.
	AllowPrivateTargets bool
	AllowedTargetCIDRs  []netip.Prefix
	CORSOrigins         []string
	MaxBodyBytes        int64
	// IntakeBodyBudget bounds the bytes of webhook bodies in flight in this process (ADAL_INTAKE_BODY_BUDGET);
	// 0 is inbound.DefaultBodyBudget.
	IntakeBodyBudget int64
	// MaxResponseBytes caps one GraphQL response's JSON (ADAL_GRAPHQL_MAX_RESPONSE_BYTES); 0 is the default.
	MaxResponseBytes int
	RetryUnit        time.Duration
	// Sender makes the direct and outbound attempts; nil is the HTTP sender behind the egress guard. Tests give
	// others (one that fails in a way HTTP cannot).
	Sender scheduler.Sender
	// Workers bounds attempts in flight in this process (ADAL_WORKERS).
	Workers int
	// TenantShare is the share of Workers one tenant may hold while it is the only one with work here
	// (ADAL_TENANT_WORKER_SHARE); 0 is scheduler.DefaultTenantShare.
	TenantShare float64
	// IntakeCommitters is how many intake batches may commit at once on PostgreSQL (ADAL_INTAKE_COMMITTERS;
	// default 2). Size it to the database server's cores: more concurrent batches than cores only queue on each
	// other. Beyond the first, a committer commits beside another only once its batch is crowded (inbound's
	// batcher), so at moderate load one batch is in flight. SQLite has one writer and always uses one.
	IntakeCommitters int
	// PollInterval is the longest the scheduler waits without being woken; default 1s.
	PollInterval time.Duration
	// RetentionSpec is when the retention purge runs (robfig/cron spec, ADAL_RETENTION_SCHEDULE); default
	// "@every 5m".
	RetentionSpec string
	// BillingSpec is when plan grants are checked (ADAL_BILLING_SCHEDULE); default "@every 1h".
	BillingSpec string
	// Health are the recipient disable/freeze rules; zero means the product's (delivery.DefaultHealthRules).
	Health delivery.HealthRules
	// RescueInterval is how often expired leases are looked for (ADAL_RESCUE_INTERVAL); default 10s.
	RescueInterval time.Duration
	// Lease is how long a claimed delivery belongs to this process before the rescuer may record it as
	// interrupted (ADAL_LEASE); default 60s. A lease under 40s cuts attempts to three quarters of it.
	Lease time.Duration
	// NoAutoMigrate leaves pending migrations to `server migrate` (ADAL_AUTO_MIGRATE=false): Open then refuses
	// a database that lacks some. By default Open applies them.
	NoAutoMigrate bool
	// TokenRefresh is how often revoked token ids are reloaded (a revocation reaches every process within
	// about this long, and expired or revoked tokens' websockets close); default 2s.
	TokenRefresh time.Duration
	// AlertInterval is how often the leader looks for alert events written by other processes
	// (ADAL_ALERT_INTERVAL); default 2s. Its own it handles at once.
	AlertInterval time.Duration
	// Search bounds one page of a search of stored requests; zero fields take search's defaults.
	Search search.Bounds
	Dev    bool
	Logger *slog.Logger
	// Now is the clock, for tests; default time.Now.
	Now func() time.Time
	// Tracing configures OpenTelemetry tracing (tracing.FromEnv reads the OTEL_* variables); off unless
	// Tracing.Enabled. Its Dropped and Logger are the process's own unless set.
	Tracing tracing.Config
}

func (c *Config) defaults() {
	if c.Addr == "" {
		c.Addr = ":8080"
	}
	if c.DataDir == "" {
		c.DataDir = "./data"
	}
	if c.PublicURL == "" {
		port := "8080"
		if _, p, err := net.SplitHostPort(c.Addr); err == nil && p != "" && p != "0" {
			port = p
		}
		c.PublicURL = "http://localhost:" + port
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = inbound.DefaultMaxBody
	}
	if c.RetryUnit <= 0 {
		c.RetryUnit = time.Minute
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Now == nil {
		c.Now = storage.Now // UTC throughout (see storage.Now)
	}
}

// Relay is one running Adal process.
type Relay struct {
	cfg       Config
	DB        *storage.DB
	Auth      *auth.Authenticator
	Tokens    *auth.Store
	Billing   *billing.Service
	Routing   *routing.Service
	Delivery  *delivery.Service
	Outbound  *outbound.Service
	Inbound   *inbound.Handler
	Scheduler *scheduler.Scheduler
	Rescuer   *scheduler.Rescuer
	CLIHub    *clihub.Hub
	Leader    *leader.Elector
	Retention *retention.Purger
	Cycle     *billing.Cycle
	Alerts    *alerting.Service
	Events    events.Service
	// Tracing owns the tracer provider and its export queue; its tracer is off unless tracing is configured.
	Tracing *tracing.Service
	// Rejections keeps the requests intake refused for failing their server's verification.
	Rejections *rejection.Recorder
	// Brokers publishes the attempts of broker recipients over pooled connections, closed by Close.
	Brokers   *broker.Publisher
	crons     []*leader.Cron
	publisher *publisher
	handler   http.Handler

	// Bulk starts bulk jobs; BulkRunner runs them.
	Bulk       *bulk.Service
	BulkRunner *bulk.Runner
}

// Migrate applies the database's pending migrations and reports how many it applied.
func Migrate(ctx context.Context, cfg Config) (int, error) {
	cfg.defaults()
	db, err := storage.Connect(cfg.DatabaseURL, cfg.DataDir)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	return storage.Migrate(ctx, db)
}

// Open connects to the database, migrates it (unless NoAutoMigrate) and builds the services. It starts
// nothing.
func Open(ctx context.Context, cfg Config) (*Relay, error) {
	cfg.defaults()
	db, err := storage.Connect(cfg.DatabaseURL, cfg.DataDir)
	if err != nil {
		return nil, err
	}
	r, err := build(ctx, cfg, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	return r, nil
}

// build migrates db (unless NoAutoMigrate) and builds the services on it.
func build(ctx context.Context, cfg Config, db *storage.DB) (*Relay, error) {
	var err error
	if cfg.NoAutoMigrate {
		err = storage.CheckMigrated(ctx, db)
	} else {
		var n int
		if n, err = storage.Migrate(ctx, db); n > 0 {
			cfg.Logger.Info("applied migrations", "count", n)
		}
	}
	if err != nil {
		return nil, err
	}
	secret := []byte(cfg.JWTSecret)
	if len(secret) == 0 {
		if secret, err = db.Secret(ctx, "jwt"); err != nil {
			return nil, err
		}
	}
	authn, err := auth.New(secret, cfg.Now)
	if err != nil {
		return nil, fmt.Errorf("ADAL_JWT_SECRET: %w", err)
	}
	tokens, err := auth.NewStore(auth.StoreConfig{
		Auth: authn, Client: db.Client, Interval: cfg.TokenRefresh, Logger: cfg.Logger, Now: cfg.Now,
	})
	if err != nil {
		return nil, err
	}
	r := &Relay{
		cfg:     cfg,
		DB:      db,
		Auth:    authn,
		Tokens:  tokens,
		Billing: billing.New(db.Dialect, cfg.Now),
		Routing: routing.New(cfg.PublicURL, cfg.Now),
	}
	if r.Events, err = buses.For(db)(cfg, db); err != nil {
		return nil, err
	}
	r.publisher = newPublisher(r.Events, cfg.Logger)
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	meters := metrics.New(registry, func(ctx context.Context) (int, error) {
		return scheduler.DueCount(ctx, db, cfg.Now())
	})
	tc := cfg.Tracing
	if tc.Dropped == nil {
		tc.Dropped = meters.SpansDropped
	}
	tc.Logger = cmp.Or(tc.Logger, cfg.Logger)
	r.Tracing = tracing.New(tc)
	tracer := r.Tracing.Tracer()
	r.Delivery = delivery.New(delivery.Config{
		Billing: r.Billing,
		Unit:    cfg.RetryUnit,
		Now:     cfg.Now,
		Notify:  r.changed,
		Health:  cfg.Health,
		Dialect: db.Dialect,
		Alerted: func() { r.Alerts.Wake() }, // called after commits, once the alert service exists
		// The heartbeat of an attached CLI, kept fresh by the CLI hub of whichever process it is attached to.
		CLIConnected: func(rec *ent.Recipient, now time.Time) bool {
			return rec.CliSeenUntil != nil && rec.CliSeenUntil.After(now)
		},
		Tracer: tracer,
	})
	r.Outbound = outbound.New(outbound.Config{
		Billing: r.Billing,
		Dialect: db.Dialect,
		Now:     cfg.Now,
		Wake:    func() { r.Scheduler.WakeOutbound() }, // called after commits, once the scheduler exists
	})
	if r.CLIHub, err = clihub.New(clihub.Config{
		DB:       db,
		Delivery: r.Delivery,
		Wake:     func() { r.Scheduler.WakeCLI() }, // called once the scheduler exists
		Tracer:   tracer,
		Logger:   cfg.Logger,
		Now:      cfg.Now,
	}); err != nil {
		return nil, err
	}
	policy := egress.Policy{AllowPrivate: cfg.AllowPrivateTargets, AllowedCIDRs: cfg.AllowedTargetCIDRs}
	var httpSender scheduler.Sender = cfg.Sender
	if httpSender == nil {
		httpSender = delivery.NewHTTPSender(policy, cmp.Or(cfg.Workers, scheduler.DefaultWorkers), cfg.Now)
	}
	r.Brokers = broker.NewPublisher(broker.Config{Egress: policy, Name: "adal", Now: cfg.Now})
	sender := broker.Sender{HTTP: httpSender, Brokers: r.Brokers}
	if r.Scheduler, err = scheduler.New(scheduler.Config{
		DB:           db,
		Delivery:     r.Delivery,
		Outbound:     r.Outbound,
		CLI:          r.CLIHub,
		Sender:       sender,
		Workers:      cfg.Workers,
		TenantShare:  cfg.TenantShare,
		PollInterval: cfg.PollInterval,
		Lease:        cfg.Lease,
		Observer:     meters,
		Tracer:       tracer,
		Logger:       cfg.Logger,
		Now:          cfg.Now,
	}); err != nil {
		return nil, err
	}
	r.Rejections = rejection.New(rejection.Config{Client: db.Client, Logger: cfg.Logger})
	r.Inbound = inbound.New(inbound.Config{
		Client:     db.Client,
		Delivery:   r.Delivery,
		MaxBody:    cfg.MaxBodyBytes,
		BodyBudget: cfg.IntakeBodyBudget,
		Logger:     cfg.Logger,
		Now:        cfg.Now,
		Observe:    meters.Intake,
		// SQLite has one writer: one committer, batching everything queued behind it.
		Committers: db.Writers(cmp.Or(cfg.IntakeCommitters, 2)),
		Dispatch:   r.Scheduler,
		NoCredit:   func(tenantID int) { r.Alerts.NoCredit(tenantID) },
		Rejections: r.Rejections,
		Rejected:   meters.Rejected,
		Tracer:     tracer,
	})
	if r.Rescuer, err = scheduler.NewRescuer(scheduler.RescuerConfig{
		DB:         db,
		Delivery:   r.Delivery,
		Outbound:   r.Outbound,
		Wake:       r.Scheduler.WakeOutbound,
		WakeCapped: r.Scheduler.Wake,
		Tracer:     tracer,
		Interval:   cfg.RescueInterval,
		Logger:     cfg.Logger,
		Now:        cfg.Now,
	}); err != nil {
		return nil, err
	}
	if r.BulkRunner, err = bulk.NewRunner(bulk.RunnerConfig{
		DB:           db,
		Delivery:     r.Delivery,
		Events:       r.Events,
		Lease:        cfg.Lease,
		PollInterval: cfg.PollInterval,
		Logger:       cfg.Logger,
		Now:          cfg.Now,
	}); err != nil {
		return nil, err
	}
	r.Bulk = bulk.New(bulk.Config{
		Dialect: db.Dialect, Events: r.Events, Wake: r.BulkRunner.Wake, Logger: cfg.Logger, Now: cfg.Now,
	})
	r.Routing.OnRecipientResumed(r.Scheduler.WakeLanes)
	if err := r.openCron(cfg); err != nil {
		return nil, err
	}
	if r.Alerts, err = alerting.New(alerting.Config{
		DB: db, Delivery: r.Delivery, Routing: r.Routing, Billing: r.Billing, Leader: r.Leader,
		Interval: cfg.AlertInterval, Logger: cfg.Logger, Now: cfg.Now,
	}); err != nil {
		return nil, err
	}
	r.handler = api.New(api.Config{
		Resolver: &resolvers.Resolver{
			Client:       db.Client,
			Billing:      r.Billing,
			Delivery:     r.Delivery,
			Routing:      r.Routing,
			Events:       r.Events,
			Auth:         authn,
			Tokens:       tokens,
			Now:          cfg.Now,
			CLIHub:       r.CLIHub,
			Outbound:     r.Outbound,
			Alerting:     r.Alerts,
			MaxBodyBytes: cfg.MaxBodyBytes,
			Logger:       cfg.Logger,
			Search:       search.New(db.Dialect, cfg.Search),
			Bulk:         r.Bulk,
		},
		Client:           db.Client,
		Auth:             authn,
		Inbound:          r.Inbound,
		MaxBodyBytes:     cfg.MaxBodyBytes,
		MaxResponseBytes: cfg.MaxResponseBytes,
		Ready:            func(ctx context.Context) error { return db.SQL.PingContext(ctx) },
		CORSOrigins:      cfg.CORSOrigins,
		Dev:              cfg.Dev,
		Registry:         registry,
		Panel:            panel.Handler(),
		Logger:           cfg.Logger,
	})
	return r, nil
}

// Handler is the process's HTTP surface.
func (r *Relay) Handler() http.Handler { return r.handler }

// Close stops intake and releases the database.
func (r *Relay) Close() error {
	r.Inbound.Close()
	r.Brokers.Close()
	return r.DB.Close()
}

// Serve listens on the configured address and serves until ctx is cancelled, then shuts down gracefully:
// in-flight requests finish (up to 25 s), nothing new is accepted.
func (r *Relay) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           r.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	r.cfg.Logger.Info("adal serving", "addr", ln.Addr().String(), "public_url", r.cfg.PublicURL,
		"database", r.DB.Dialect)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if serveErr := <-errc; serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return err
}

// openCron builds the once-per-cluster jobs: retention purge, outbound purge, monthly plan grants. They run
// only on the process holding the leader lock (always the one process on SQLite).
func (r *Relay) openCron(cfg Config) error {
	var err error
	if r.Leader, err = leader.New(leader.Config{DB: r.DB, Logger: cfg.Logger}); err != nil {
		return err
	}
	if r.Retention, err = retention.New(retention.Config{
		DB: r.DB, Leader: r.Leader, Spec: cfg.RetentionSpec, Now: cfg.Now, Logger: cfg.Logger,
	}); err != nil {
		return err
	}
	if r.Cycle, err = billing.NewCycle(billing.CycleConfig{
		Client: r.DB.Client, Billing: r.Billing, Leader: r.Leader, Spec: cfg.BillingSpec, Logger: cfg.Logger,
	}); err != nil {
		return err
	}
	purgeOutbound, err := leader.NewCron(leader.CronConfig{
		Name: "outbound-purge", Spec: cmp.Or(cfg.RetentionSpec, "@every 5m"), Leader: r.Leader, Logger: cfg.Logger,
		Run: func(ctx context.Context) error {
			_, err := r.Outbound.PurgeExpired(viewer.SystemContext(ctx), r.DB.Client, cfg.Now(), 1000)
			return err
		},
	})
	if err != nil {
		return err
	}
	r.crons = append(r.crons, purgeOutbound)
	return nil
}

// services are the background services in the order they start; they stop in the reverse order, so the
// engine's attempts in flight finish and are recorded, and their changes published, before the bus stops, and
// the spans of all of it are exported last.
func (r *Relay) services() []startstop.Service {
	svcs := []startstop.Service{r.Tracing, r.Tokens, r.Events, r.Leader, r.Retention, r.Cycle}
	for _, c := range r.crons {
		svcs = append(svcs, c)
	}
	return append(svcs, r.Rejections, r.publisher, r.CLIHub, r.Scheduler, r.Rescuer, r.Alerts, r.BulkRunner)
}

// Start starts the background services under ctx. If one fails to start, those already started are stopped.
func (r *Relay) Start(ctx context.Context) error {
	svcs := r.services()
	for i, svc := range svcs {
		if err := svc.Start(ctx); err != nil {
			for j := i - 1; j >= 0; j-- {
				svcs[j].Stop()
			}
			return err
		}
	}
	r.announceFirstRun(ctx)
	return nil
}

// SignInLink makes a one-time operator sign-in code and returns the console link that redeems it, with the
// code's expiry.
func (r *Relay) SignInLink(ctx context.Context) (string, time.Time, error) {
	code, exp, err := r.Tokens.NewSignInCode(ctx, r.DB.Client)
	if err != nil {
		return "", time.Time{}, err
	}
	return r.cfg.PublicURL + auth.SignInPath + code, exp, nil
}

// announceFirstRun logs a sign-in link when the installation is empty (no plan, no tenant), so whoever
// started it can open the console without minting a token by hand. Every process that starts on an empty
// database logs its own link; each works once.
func (r *Relay) announceFirstRun(ctx context.Context) {
	empty, err := billing.Empty(ctx, r.DB.Client)
	if err == nil && empty {
		var link string
		if link, _, err = r.SignInLink(ctx); err == nil {
			r.cfg.Logger.Info(fmt.Sprintf("empty installation: open this link to sign in to the console as the "+
				"operator (it works once, within %d minutes; `server signin-link` prints another)",
				int(auth.SignInCodeTTL.Minutes())), "url", link)
			return
		}
	}
	if err != nil {
		r.cfg.Logger.Warn("could not make a first-run sign-in link; use `server signin-link`", "err", err)
	}
}

// Stop stops the background services and waits for them: attempts in flight finish and are recorded.
func (r *Relay) Stop() {
	svcs := r.services()
	for i := len(svcs) - 1; i >= 0; i-- {
		svcs[i].Stop()
	}
}

// buses are the live-event bus of each dialect: PostgreSQL's LISTEN/NOTIFY reaches every process sharing the
// database; SQLite's one process needs only its own.
var buses = storage.PerDialect[func(Config, *storage.DB) (events.Service, error)]{
	Postgres: func(cfg Config, db *storage.DB) (events.Service, error) {
		return events.NewPostgres(cfg.DatabaseURL, db.SQL, cfg.Logger, events.WithChannel(eventChannel(cfg.DatabaseURL)))
	},
	SQLite: func(Config, *storage.DB) (events.Service, error) { return events.NewLocal(), nil },
}

// changed hears of every committed delivery change: it wakes the dispatcher of new or rescheduled work — only
// that one, and none for deliveries parked behind a paused or disabled recipient — and publishes the change to
// live subscribers.
func (r *Relay) changed(changes []delivery.Change) {
	var direct, cli bool
	for _, c := range changes {
		if c.Status != "PENDING" {
			continue
		}
		switch c.Lane {
		case delivery.LaneDirect, delivery.LaneCapped:
			direct = true
		case delivery.LaneCLI:
			cli = true
		case delivery.LaneAny:
			direct, cli = true, true
		}
		if direct && cli {
			break
		}
	}
	if direct {
		r.Scheduler.Wake()
	}
	if cli {
		r.Scheduler.WakeCLI()
	}
	r.publisher.add(changes)
}
