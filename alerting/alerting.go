// Package alerting tells tenants about their relay's trouble: recipients disabled, frozen or recovered,
// deliveries that failed for good, credits low or exhausted. A tenant subscribes URLs to those events; each
// subscription is a DIRECT_HTTP recipient of the tenant's hidden server of alerts (routing.AlertServer) whose
// routing filter selects its events, and each alert is a request stored on that server free of charge
// (delivery.StoreFree). So alerts are delivered by the engine like any webhook: retried, signed, recorded
// attempt by attempt, and shown with their deliveries.
//
// The events themselves are written by the code that causes them, in its own transaction (package alert); the
// Dispatcher, on the leader, takes them from that outbox and turns them into alerts.
package alerting

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/adal-relay/adal/alert"
	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/alertsubscription"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/leader"
	"github.com/adal-relay/adal/routing"
	"github.com/adal-relay/adal/startstop"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/viewer"
)

// Defaults and bounds.
const (
	// DefaultInterval is how often the dispatcher looks for events when nothing wakes it (events written by
	// another process are found this way).
	DefaultInterval = 2 * time.Second
	// MaxSubscriptions bounds a tenant's subscriptions, and so what one event fans out to.
	MaxSubscriptions = 10
	// FailureWindow is the least time between two delivery.failed alerts about one recipient.
	FailureWindow = time.Hour
	// hintEvery is how often a refusal for want of credit wakes the dispatcher: intake may refuse thousands a
	// second, and the first refusal after a credit is all that matters. The others wait for its next run.
	hintEvery = 10 * time.Second
	// batch is how many events one transaction of the dispatcher takes.
	batch = 200
)

// Format is how an alert is written for its URL.
type Format string

// The formats.
const (
	// FormatJSON is {"type", "timestamp", "data"}, as Standard Webhooks payloads are.
	FormatJSON Format = "JSON"
	// FormatSlack is a Slack incoming webhook's {"text": …}, which Mattermost and others also take.
	FormatSlack Format = "SLACK"
)

// FormatFor is the format a URL gets unless its subscription says otherwise: Slack's for Slack's incoming
// webhooks, JSON for the rest.
func FormatFor(rawURL string) Format {
	if u, err := url.Parse(rawURL); err == nil && strings.EqualFold(u.Hostname(), "hooks.slack.com") {
		return FormatSlack
	}
	return FormatJSON
}

// Config configures the Service.
type Config struct {
	DB       *storage.DB
	Delivery *delivery.Service
	Routing  *routing.Service
	Billing  *billing.Service
	// Leader gates the dispatcher's turning events into alerts to one process of the cluster.
	Leader leader.Status
	// Interval defaults to DefaultInterval.
	Interval time.Duration
	Logger   *slog.Logger
	Now      func() time.Time
}

func (c *Config) validate() error {
	switch {
	case c.DB == nil:
		return errors.New("alerting: Config.DB is required")
	case c.Delivery == nil:
		return errors.New("alerting: Config.Delivery is required")
	case c.Routing == nil:
		return errors.New("alerting: Config.Routing is required")
	case c.Billing == nil:
		return errors.New("alerting: Config.Billing is required")
	case c.Leader == nil:
		return errors.New("alerting: Config.Leader is required")
	}
	return nil
}

// Service manages alert subscriptions and runs the dispatcher: a background service that turns recorded
// events into alerts (on the leader) and passes on intake's refusals for want of credit (on every process).
type Service struct {
	startstop.BaseStartStop
	cfg  Config
	wake chan struct{}

	mu       sync.Mutex
	noCredit map[int]bool // tenants refused for want of credit, to mark (billing.MarkExhausted)
	hinted   sync.Map     // tenant id → time of the hint last taken
}

// New validates cfg and returns a stopped Service.
func New(cfg Config) (*Service, error) {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultInterval)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, wake: make(chan struct{}, 1), noCredit: map[int]bool{}}, nil
}

// Wake makes the dispatcher look for events now.
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// NoCredit hears that intake refused a request of the tenant for want of credit. It never blocks, and costs
// the database nothing: the dispatcher's next run marks the tenant (one statement per tenant and run, however
// many refusals), and wakes for it at once at most every hintEvery per tenant.
func (s *Service) NoCredit(tenantID int) {
	s.mu.Lock()
	s.noCredit[tenantID] = true
	s.mu.Unlock()
	now := s.cfg.Now()
	if last, ok := s.hinted.Load(tenantID); ok && now.Sub(last.(time.Time)) < hintEvery {
		return
	}
	s.hinted.Store(tenantID, now)
	s.Wake()
}

// SubscriptionInput is what createAlertSubscription takes.
type SubscriptionInput struct {
	// TenantID is for operators, who name the tenant; owners subscribe their own.
	TenantID *int
	URL      string
	Events   []alert.Type
	// Format defaults to FormatFor(URL).
	Format *Format
}

// Subscribe subscribes a URL to events: the owner's tenant's (operators name one).
func (s *Service) Subscribe(ctx context.Context, client *ent.Client, in SubscriptionInput) (*ent.AlertSubscription, error) {
	const op = "alerting.Subscribe"
	tenantID, err := tenantOf(ctx, op, in.TenantID, true)
	if err != nil {
		return nil, err
	}
	if len(in.Events) == 0 {
		return nil, fault.E(op, fault.InvalidInput, "events must name at least one event")
	}
	var events []string
	for _, e := range in.Events {
		if !e.Valid() {
			return nil, fault.E(op, fault.InvalidInput, "unknown event %q", e)
		}
		if !slices.Contains(events, string(e)) {
			events = append(events, string(e))
		}
	}
	format := FormatFor(in.URL)
	if in.Format != nil {
		format = *in.Format
	}
	if format != FormatJSON && format != FormatSlack {
		return nil, fault.E(op, fault.InvalidInput, "format must be JSON or SLACK")
	}
	srv, err := s.cfg.Routing.AlertServer(ctx, client, tenantID)
	if err != nil {
		return nil, err
	}
	n, err := client.AlertSubscription.Query().Where(alertsubscription.TenantID(tenantID)).Count(ctx)
	if err != nil {
		return nil, storage.Err(op, "alert subscription", err)
	}
	if n >= MaxSubscriptions {
		return nil, fault.E(op, fault.InvalidInput, "a tenant has at most %d alert subscriptions; delete one first", MaxSubscriptions)
	}
	rule, err := json.Marshal(subscriptionFilter(format, events))
	if err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	name := "alerts to " + in.URL
	if u, err := url.Parse(in.URL); err == nil && u.Host != "" {
		name = "alerts to " + u.Host
	}
	r, err := s.cfg.Routing.AddAlertRecipient(ctx, client, srv, routing.AlertRecipient{Name: name, URL: in.URL, Filter: rule})
	if err != nil {
		return nil, err
	}
	sub, err := client.AlertSubscription.Create().
		SetTenantID(tenantID).
		SetRecipientID(r.ID).
		SetFormat(alertsubscription.Format(format)).
		SetEvents(events).
		SetCreatedAt(s.cfg.Now()).
		Save(ctx)
	return sub, storage.Err(op, "alert subscription", err)
}

// subscriptionFilter is the routing rule of a subscription's recipient: alerts of its format, of one of its
// events. An alert carries both as headers, the same whatever its format's body.
func subscriptionFilter(format Format, events []string) map[string]any {
	return map[string]any{
		"headers." + headerFormat: formatHeader(format),
		"headers." + headerType:   map[string]any{"$in": events},
	}
}

// The headers of an alert that its subscriptions' filters select it by.
const (
	headerType   = "Adal-Alert-Type"
	headerFormat = "Adal-Alert-Format"
)

// Subscriptions lists the viewer's tenant's subscriptions (operators': every tenant's), oldest first.
func (s *Service) Subscriptions(ctx context.Context, client *ent.Client) ([]*ent.AlertSubscription, error) {
	subs, err := client.AlertSubscription.Query().Order(ent.Asc(alertsubscription.FieldID)).All(ctx)
	return subs, storage.Err("alerting.Subscriptions", "alert subscription", err)
}

// Unsubscribe deletes a subscription: its recipient is deleted and its pending alerts cancelled; the alerts
// it was sent stay in the history.
func (s *Service) Unsubscribe(ctx context.Context, client *ent.Client, id int) (*ent.AlertSubscription, error) {
	const op = "alerting.Unsubscribe"
	if _, err := tenantOf(ctx, op, nil, false); err != nil {
		return nil, err
	}
	sub, err := client.AlertSubscription.Get(ctx, id)
	if err != nil {
		return nil, storage.Err(op, "alert subscription", err)
	}
	if err := s.cfg.Routing.RemoveAlertRecipient(ctx, client, sub.RecipientID); err != nil {
		return nil, err
	}
	if err := client.AlertSubscription.DeleteOne(sub).Exec(ctx); err != nil {
		return nil, storage.Err(op, "alert subscription", err)
	}
	return sub, nil
}

// tenantOf is the tenant an owner or operator manages subscriptions of: the owner's own, or the one an
// operator names (required when create is set).
func tenantOf(ctx context.Context, op string, named *int, create bool) (int, error) {
	v, _ := viewer.FromContext(ctx)
	switch {
	case v.Global():
		if named == nil && create {
			return 0, fault.E(op, fault.InvalidInput, "tenantId is required for operators")
		}
		if named != nil {
			return *named, nil
		}
		return 0, nil
	case v.Role != viewer.Owner:
		return 0, fault.E(op, fault.Forbidden, "only an operator or the tenant's owner can manage alert subscriptions")
	case named != nil && *named != v.TenantID:
		return 0, fault.E(op, fault.NotFound, "tenant not found")
	}
	return v.TenantID, nil
}
