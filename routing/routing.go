// Package routing manages where requests go: a tenant's servers (inbound endpoints) and their recipients,
// with the validation and plan limits that keep them sane.
package routing

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/url"
	"strings"
	"time"

	entsql "entgo.io/ent/dialect/sql"

	"github.com/adal-relay/adal/alert"
	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/destauth"
	"github.com/adal-relay/adal/destination"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/ent/server"
	"github.com/adal-relay/adal/ent/tenant"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/filter"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/verify"
	"github.com/adal-relay/adal/viewer"
)

// Bounds of servers' and recipients' settings.
const (
	// MaxTimeoutSeconds is the longest a direct attempt may take, including reading the response.
	MaxTimeoutSeconds = 30
	// MaxNameLength is the longest name of a server or a recipient, in characters.
	MaxNameLength = 200
	// MaxURLLength is the longest URL of a direct recipient.
	MaxURLLength = 2048
)

// Service creates, changes and deletes servers and recipients.
type Service struct {
	publicURL string
	now       func() time.Time
	wake      func()
}

// OnRecipientResumed sets what to call (after commit) when a recipient's deliveries may flow again.
func (s *Service) OnRecipientResumed(wake func()) { s.wake = wake }

// New returns a routing service; publicURL is the base of inbound URLs (e.g. "https://hooks.example.com").
func New(publicURL string, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{publicURL: strings.TrimRight(publicURL, "/"), now: now}
}

// InboundURL is where senders post to reach srv.
func (s *Service) InboundURL(srv *ent.Server) string {
	return s.publicURL + "/in/" + srv.InboundKey
}

// NewKey returns an unguessable URL-safe key (256 random bits).
func NewKey() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // the OS entropy source never fails on supported systems
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ServerInput describes a server; nil fields of an update keep their value.
type ServerInput struct {
	TenantID                *int // operators only: the tenant to create in
	Name                    *string
	DeliverPendingOnConnect *bool
	RetentionDays           *int
	ClearRetentionDays      bool
	// MaxRequestsPerSecond caps the server's intake; ClearMaxRequestsPerSecond removes the cap.
	MaxRequestsPerSecond      *int
	ClearMaxRequestsPerSecond bool
	// Verification replaces the server's sender verification; nil keeps it.
	Verification *verify.Input
	// Response replaces what a sender gets for a stored request; ClearResponse restores 202 {"requestId"}.
	Response      *ResponseInput
	ClearResponse bool
	// AllowedMethods replaces the methods intake accepts; ClearAllowedMethods accepts all again.
	AllowedMethods      []string
	ClearAllowedMethods bool
	// EventTypeHeader or EventTypePath says where a request's event type is read; ClearEventTypeSource makes
	// requests untyped. SchemaValidation sets how bodies are checked against their type's schema.
	EventTypeHeader      *string
	EventTypePath        *string
	ClearEventTypeSource bool
	SchemaValidation     *server.SchemaValidation
}

// requireManagerOf is requireManager of the viewer in ctx.
func requireManagerOf(ctx context.Context, op string) error {
	v, _ := viewer.FromContext(ctx)
	return requireManager(op, v)
}

func requireManager(op string, v viewer.Viewer) error {
	if !v.CanManage() {
		return fault.E(op, fault.Forbidden, "only an operator or the tenant's owner can change servers and recipients")
	}
	return nil
}

func (in ServerInput) validate(op string) error {
	switch {
	case in.Name != nil && strings.TrimSpace(*in.Name) == "":
		return fault.E(op, fault.InvalidInput, "name must not be empty")
	case in.Name != nil && len(*in.Name) > MaxNameLength:
		return fault.E(op, fault.InvalidInput, "name must be at most %d characters", MaxNameLength)
	case in.RetentionDays != nil && (*in.RetentionDays < 1 || *in.RetentionDays > billing.MaxRetentionDays):
		return fault.E(op, fault.InvalidInput, "retentionDays must be between 1 and %d", billing.MaxRetentionDays)
	case in.MaxRequestsPerSecond != nil && *in.MaxRequestsPerSecond < 1:
		return fault.E(op, fault.InvalidInput, "maxRequestsPerSecond must be 1 or more")
	}
	return nil
}

// CreateServer creates a server in the viewer's tenant (operators name one), within the plan's server limit.
func (s *Service) CreateServer(ctx context.Context, client *ent.Client, in ServerInput) (*ent.Server, error) {
	const op = "routing.CreateServer"
	tenantID, err := managedTenant(ctx, op, in.TenantID)
	if err != nil {
		return nil, err
	}
	if in.Name == nil {
		return nil, fault.E(op, fault.InvalidInput, "name is required")
	}
	if err := in.validate(op); err != nil {
		return nil, err
	}
	plan, err := billing.PlanOf(ctx, client, tenantID)
	if err != nil {
		return nil, err
	}
	// Count under the tenant's row lock, so parallel creates cannot together pass the limit.
	if _, err := client.Tenant.Query().Where(tenant.ID(tenantID)).Select(tenant.FieldID).Modify(lockRow).Ints(ctx); err != nil {
		return nil, storage.Err(op, "tenant", err)
	}
	n, err := client.Server.Query().Where(server.TenantID(tenantID), server.DeletedAtIsNil(), server.KindEQ(server.KindINBOUND)).Count(ctx)
	if err != nil {
		return nil, storage.Err(op, "server", err)
	}
	if n >= plan.MaxServers {
		return nil, fault.E(op, fault.InvalidInput, "plan %q allows %d servers; delete one or change plan", plan.Name, plan.MaxServers)
	}
	c := client.Server.Create().
		SetTenantID(tenantID).
		SetName(strings.TrimSpace(*in.Name)).
		SetInboundKey(NewKey()).
		SetNillableRetentionDays(in.RetentionDays).
		SetNillableMaxRequestsPerSecond(in.MaxRequestsPerSecond).
		SetCreatedAt(s.now())
	if in.DeliverPendingOnConnect != nil {
		c.SetDeliverPendingOnConnect(*in.DeliverPendingOnConnect)
	}
	if err := senderSettings(op, c.Mutation(), nil, in); err != nil {
		return nil, err
	}
	if err := typeSettings(op, c.Mutation(), nil, in); err != nil {
		return nil, err
	}
	srv, err := c.Save(ctx)
	return srv, storage.Err(op, "server", err)
}

// managedTenant is the tenant a viewer who may manage it creates in: its own, or, for an operator, the one
// named (required). A tenant owner naming another tenant finds none.
func managedTenant(ctx context.Context, op string, named *int) (int, error) {
	v, _ := viewer.FromContext(ctx)
	if err := requireManager(op, v); err != nil {
		return 0, err
	}
	switch {
	case v.Global() && named == nil:
		return 0, fault.E(op, fault.InvalidInput, "tenantId is required for operators")
	case v.Global():
		return *named, nil
	case named != nil && *named != v.TenantID:
		return 0, fault.E(op, fault.NotFound, "tenant not found")
	}
	return v.TenantID, nil
}

// lockRow locks the selected row until the transaction ends (callers run in one: every GraphQL mutation
// does). Only PostgreSQL needs it: SQLite transactions begin IMMEDIATE, one writer at a time. NO KEY UPDATE
// leaves inserts referencing the row (requests, recipients) unblocked.
func lockRow(s *entsql.Selector) { storage.RowLocksOf(s.Dialect()).NoKeyUpdate(s) }

// liveServer loads a server that has not been deleted; a tenant's hidden server of alerts is none of its
// servers.
func liveServer(ctx context.Context, client *ent.Client, op string, id int) (*ent.Server, error) {
	srv, err := client.Server.Query().Where(server.ID(id), server.DeletedAtIsNil(), server.KindEQ(server.KindINBOUND)).Only(ctx)
	return srv, storage.Err(op, "server", err)
}

// UpdateServer changes a server's name and settings.
func (s *Service) UpdateServer(ctx context.Context, client *ent.Client, id int, in ServerInput) (*ent.Server, error) {
	const op = "routing.UpdateServer"
	if err := requireManagerOf(ctx, op); err != nil {
		return nil, err
	}
	if err := in.validate(op); err != nil {
		return nil, err
	}
	srv, err := liveServer(ctx, client, op, id)
	if err != nil {
		return nil, err
	}
	u := srv.Update()
	if in.Name != nil {
		u.SetName(strings.TrimSpace(*in.Name))
	}
	if in.DeliverPendingOnConnect != nil {
		u.SetDeliverPendingOnConnect(*in.DeliverPendingOnConnect)
	}
	if in.ClearRetentionDays {
		u.ClearRetentionDays()
	} else if in.RetentionDays != nil {
		u.SetRetentionDays(*in.RetentionDays)
	}
	if in.ClearMaxRequestsPerSecond {
		u.ClearMaxRequestsPerSecond()
	} else if in.MaxRequestsPerSecond != nil {
		u.SetMaxRequestsPerSecond(*in.MaxRequestsPerSecond)
	}
	if err := senderSettings(op, u.Mutation(), srv, in); err != nil {
		return nil, err
	}
	if err := typeSettings(op, u.Mutation(), srv, in); err != nil {
		return nil, err
	}
	srv, err = u.Save(ctx)
	return srv, storage.Err(op, "server", err)
}

// DeleteServer stops intake at once (the key no longer resolves), deletes the server's recipients and cancels
// their pending deliveries. Stored requests stay readable until their retention ends.
func (s *Service) DeleteServer(ctx context.Context, client *ent.Client, id int) (*ent.Server, error) {
	const op = "routing.DeleteServer"
	if err := requireManagerOf(ctx, op); err != nil {
		return nil, err
	}
	srv, err := liveServer(ctx, client, op, id)
	if err != nil {
		return nil, err
	}
	now := s.now()
	// Mark the server deleted first: the update takes its row, which intake holds (shared) while it stores a
	// request for it. So either intake committed before this and its deliveries are cancelled below, or it
	// waits, sees the server deleted and answers 404 — never a pending delivery to a deleted recipient.
	srv, err = srv.Update().SetDeletedAt(now).Save(ctx)
	if err != nil {
		return nil, storage.Err(op, "server", err)
	}
	ids, err := client.Recipient.Query().Where(recipient.ServerID(srv.ID), recipient.DeletedAtIsNil()).IDs(ctx)
	if err != nil {
		return nil, storage.Err(op, "recipient", err)
	}
	if err := s.deleteRecipients(ctx, client, now, ids...); err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	return srv, nil
}

func (s *Service) deleteRecipients(ctx context.Context, client *ent.Client, now time.Time, ids ...int) error {
	if len(ids) == 0 {
		return nil
	}
	if err := client.Recipient.Update().Where(recipient.IDIn(ids...)).SetDeletedAt(now).Exec(ctx); err != nil {
		return err
	}
	return delivery.CancelPendingOfRecipients(ctx, client, now, ids...)
}

// Bounds of a rotation's grace: how long the replaced inbound key is still accepted.
const (
	DefaultKeyGrace = 24 * time.Hour
	MaxKeyGrace     = 30 * 24 * time.Hour
)

// RotateInboundKey gives a live server a new inbound key at once. The key it replaces is still accepted for
// grace (nil: DefaultKeyGrace; 0 revokes it now), then intake answers it 404. Only one replaced key is kept:
// rotating again during a grace ends that grace, so a leaked key never outlives two rotations.
func (s *Service) RotateInboundKey(ctx context.Context, client *ent.Client, id int, graceSeconds *int) (*ent.Server, error) {
	const op = "routing.RotateInboundKey"
	if err := requireManagerOf(ctx, op); err != nil {
		return nil, err
	}
	grace, err := graceOf(op, graceSeconds)
	if err != nil {
		return nil, err
	}
	// Locked, so that of two rotations at once the second replaces the first's new key, not the key both read.
	srv, err := client.Server.Query().Where(server.ID(id), server.DeletedAtIsNil()).Modify(lockRow).Only(ctx)
	if err != nil {
		return nil, storage.Err(op, "server", err)
	}
	u := client.Server.UpdateOneID(srv.ID).SetInboundKey(NewKey())
	if grace > 0 {
		u.SetPreviousInboundKey(srv.InboundKey).SetPreviousKeyExpiresAt(s.now().Add(grace).UTC())
	} else {
		u.ClearPreviousInboundKey().ClearPreviousKeyExpiresAt()
	}
	srv, err = u.Save(ctx)
	return srv, storage.Err(op, "server", err)
}

// graceOf is a rotation's grace from its graceSeconds argument: DefaultKeyGrace when absent, at most
// MaxKeyGrace.
func graceOf(op string, graceSeconds *int) (time.Duration, error) {
	if graceSeconds == nil {
		return DefaultKeyGrace, nil
	}
	if *graceSeconds < 0 || time.Duration(*graceSeconds)*time.Second > MaxKeyGrace {
		return 0, fault.E(op, fault.InvalidInput, "graceSeconds must be between 0 and %d", int(MaxKeyGrace/time.Second))
	}
	return time.Duration(*graceSeconds) * time.Second, nil
}

// InboundKeys are the keys intake accepts for srv at now: its key and, during a rotation's grace, the one the
// rotation replaced. This is the rule; intake's lookup only finds the candidates by either key.
func InboundKeys(srv *ent.Server, now time.Time) []string {
	if srv.PreviousInboundKey != nil && srv.PreviousKeyExpiresAt != nil && now.Before(*srv.PreviousKeyExpiresAt) {
		return []string{srv.InboundKey, *srv.PreviousInboundKey}
	}
	return []string{srv.InboundKey}
}

// RecipientInput describes a recipient; nil fields keep their value on update and take defaults on create.
type RecipientInput struct {
	ServerID           int
	Name               *string
	Method             *recipient.Method
	URL                *string
	MaxAttempts        *int
	RetrySchedule      *recipient.RetrySchedule
	SendIdempotencyKey *bool
	SendTraceparent    *bool
	TimeoutSeconds     *int
	// Filter is the routing rule (package filter) as JSON; nil keeps it (none on create). ClearFilter removes
	// it: the recipient gets every request.
	Filter           []byte
	ClearFilter      bool
	SignatureHeaders *recipient.SignatureHeaders
	// MaxConcurrency caps the recipient's attempts in flight at once, across processes; ClearMaxConcurrency
	// removes the cap.
	MaxConcurrency      *int
	ClearMaxConcurrency bool
	// Destination is a broker recipient's settings beside its URL; nil keeps them. For a broker recipient URL
	// is the broker's URL with its credentials.
	Destination *destination.Settings
	// EventTypes replaces the recipient's subscription when non-nil (empty: every request).
	EventTypes []string
	// Auth replaces how attempts authenticate to the receiver; ClearAuth removes it.
	Auth      *destauth.Config
	ClearAuth bool
}

// recipientSettings is a recipient's configuration after defaults and updates, validated as a whole.
type recipientSettings struct {
	name          string
	method        recipient.Method
	url           string
	maxAttempts   int
	schedule      recipient.RetrySchedule
	idempotency   bool
	traceparent   bool
	timeoutSecond int
	filter        *string // the rule's text as compiled
	filterIn      []byte  // a new rule, to compile in validate
	sigHeaders    recipient.SignatureHeaders
	concurrency   *int
	// destination is a broker recipient's settings; url is then its broker's URL with the credentials.
	destination *destination.Settings
	eventTypes  []string
	auth        []byte // destauth.Config as JSON; nil: none
	authIn      *destauth.Config
}

func (rs *recipientSettings) apply(in RecipientInput) {
	if in.Name != nil {
		rs.name = strings.TrimSpace(*in.Name)
	}
	if in.Method != nil {
		rs.method = *in.Method
	}
	if in.URL != nil {
		rs.url = strings.TrimSpace(*in.URL)
	}
	if in.MaxAttempts != nil {
		rs.maxAttempts = *in.MaxAttempts
	}
	if in.RetrySchedule != nil {
		rs.schedule = *in.RetrySchedule
	}
	if in.SendIdempotencyKey != nil {
		rs.idempotency = *in.SendIdempotencyKey
	}
	if in.SendTraceparent != nil {
		rs.traceparent = *in.SendTraceparent
	}
	if in.TimeoutSeconds != nil {
		rs.timeoutSecond = *in.TimeoutSeconds
	}
	if in.ClearFilter {
		rs.filter, rs.filterIn = nil, nil
	} else if in.Filter != nil {
		rs.filterIn = in.Filter
	}
	if in.SignatureHeaders != nil {
		rs.sigHeaders = *in.SignatureHeaders
	}
	if in.Destination != nil {
		d := *in.Destination
		rs.destination = &d
	}
	if in.EventTypes != nil {
		rs.eventTypes = in.EventTypes
	}
	if in.ClearAuth {
		rs.auth, rs.authIn = nil, nil
	} else if in.Auth != nil {
		rs.authIn = in.Auth
	}
	if in.ClearMaxConcurrency {
		rs.concurrency = nil
	} else if in.MaxConcurrency != nil {
		n := *in.MaxConcurrency
		rs.concurrency = &n
	}
}

func (rs *recipientSettings) validate(op string) error {
	if rs.name == "" {
		return fault.E(op, fault.InvalidInput, "name must not be empty")
	}
	if len(rs.name) > MaxNameLength {
		return fault.E(op, fault.InvalidInput, "name must be at most %d characters", MaxNameLength)
	}
	if err := recipient.MethodValidator(rs.method); err != nil {
		return fault.E(op, fault.InvalidInput, "method must be DIRECT_HTTP, CLI, RABBITMQ, NATS, REDIS_STREAM or MQTT")
	}
	sched := delivery.Schedule(rs.schedule)
	if !sched.Valid() {
		return fault.E(op, fault.InvalidInput, "retrySchedule must be QUADRATIC, STEPPED or EXPONENTIAL")
	}
	if max := sched.MaxAttempts(); rs.maxAttempts < delivery.MinAttempts || rs.maxAttempts > max {
		return fault.E(op, fault.InvalidInput, "maxAttempts must be between %d and %d for %s", delivery.MinAttempts, max, sched)
	}
	if rs.timeoutSecond < 1 || rs.timeoutSecond > MaxTimeoutSeconds {
		return fault.E(op, fault.InvalidInput, "timeoutSeconds must be between 1 and %d", MaxTimeoutSeconds)
	}
	if rs.filterIn != nil {
		f, err := filter.Compile(rs.filterIn)
		if err != nil {
			return fault.E(op, fault.InvalidInput, "filter: %s", err.Error())
		}
		text := f.String()
		rs.filter, rs.filterIn = &text, nil
	}
	if err := recipient.SignatureHeadersValidator(rs.sigHeaders); err != nil {
		return fault.E(op, fault.InvalidInput, "signatureHeaders must be ADAL or STANDARD_WEBHOOKS")
	}
	if rs.concurrency != nil {
		if *rs.concurrency < 1 {
			return fault.E(op, fault.InvalidInput, "maxConcurrency must be 1 or more")
		}
		if rs.method == recipient.MethodCLI {
			return fault.E(op, fault.InvalidInput, "maxConcurrency is not for CLI recipients; a CLI takes its jobs a few at a time")
		}
	}
	if err := rs.validateShape(op); err != nil {
		return err
	}
	if destination.IsBroker(rs.method.String()) {
		if rs.destination == nil {
			return fault.E(op, fault.InvalidInput, "destination is required for %s recipients", rs.method)
		}
		if err := destination.Validate(destination.Method(rs.method), rs.url, rs.destination); err != nil {
			return fault.E(op, fault.InvalidInput, "%s", err.Error())
		}
		return nil
	}
	if rs.destination != nil {
		return fault.E(op, fault.InvalidInput, "destination is only for broker recipients (RABBITMQ, NATS, REDIS_STREAM, MQTT)")
	}
	switch rs.method {
	case recipient.MethodDIRECT_HTTP:
		if rs.url == "" {
			return fault.E(op, fault.InvalidInput, "url is required for DIRECT_HTTP recipients")
		}
		u, err := url.Parse(rs.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
			return fault.E(op, fault.InvalidInput, "url must be an absolute http(s) URL without credentials or fragment")
		}
		if len(rs.url) > MaxURLLength {
			return fault.E(op, fault.InvalidInput, "url must be at most %d characters", MaxURLLength)
		}
	case recipient.MethodCLI:
		if rs.url != "" {
			return fault.E(op, fault.InvalidInput, "url is only for DIRECT_HTTP recipients; a CLI recipient forwards where `adal listen --forward` says")
		}
	}
	return nil
}

// shownURL is the url column: a broker's URL without its password, any other recipient's as given.
func (rs *recipientSettings) shownURL() string {
	if destination.IsBroker(rs.method.String()) {
		return destination.Redact(rs.url)
	}
	return rs.url
}

// destinationURL is the destination_url column: a broker's URL with its credentials, empty for the others.
func (rs *recipientSettings) destinationURL() string {
	if destination.IsBroker(rs.method.String()) {
		return rs.url
	}
	return ""
}

// CreateRecipient adds a recipient to a live server, within the plan's recipient limit.
func (s *Service) CreateRecipient(ctx context.Context, client *ent.Client, in RecipientInput) (*ent.Recipient, error) {
	const op = "routing.CreateRecipient"
	if err := requireManagerOf(ctx, op); err != nil {
		return nil, err
	}
	rs := recipientSettings{
		maxAttempts:   10,
		schedule:      recipient.RetryScheduleQUADRATIC,
		timeoutSecond: MaxTimeoutSeconds,
		sigHeaders:    recipient.DefaultSignatureHeaders,
	}
	if in.Method == nil {
		return nil, fault.E(op, fault.InvalidInput, "method is required")
	}
	rs.apply(in)
	if err := rs.validate(op); err != nil {
		return nil, err
	}
	srv, err := liveServer(ctx, client, op, in.ServerID)
	if err != nil {
		return nil, err
	}
	plan, err := billing.PlanOf(ctx, client, srv.TenantID)
	if err != nil {
		return nil, err
	}
	// Count under the server's row lock, so parallel creates cannot together pass the limit.
	if _, err := client.Server.Query().Where(server.ID(srv.ID)).Select(server.FieldID).Modify(lockRow).Ints(ctx); err != nil {
		return nil, storage.Err(op, "server", err)
	}
	n, err := client.Recipient.Query().Where(recipient.ServerID(srv.ID), recipient.DeletedAtIsNil()).Count(ctx)
	if err != nil {
		return nil, storage.Err(op, "recipient", err)
	}
	if n >= plan.MaxRecipientsPerServer {
		return nil, fault.E(op, fault.InvalidInput, "plan %q allows %d recipients per server", plan.Name, plan.MaxRecipientsPerServer)
	}
	return s.createRecipient(ctx, client, op, srv, rs)
}

// createRecipient stores a recipient of srv with the validated settings rs.
func (s *Service) createRecipient(ctx context.Context, client *ent.Client, op string, srv *ent.Server, rs recipientSettings) (*ent.Recipient, error) {
	r := client.Recipient.Create().
		SetTenantID(srv.TenantID).
		SetServerID(srv.ID).
		SetName(rs.name).
		SetMethod(rs.method).
		SetURL(rs.shownURL()).
		SetDestinationURL(rs.destinationURL()).
		SetMaxAttempts(rs.maxAttempts).
		SetRetrySchedule(rs.schedule).
		SetSendIdempotencyKey(rs.idempotency).
		SetSendTraceparent(rs.traceparent).
		SetTimeoutSeconds(rs.timeoutSecond).
		SetNillableRoutingFilter(rs.filter).
		SetSignatureHeaders(rs.sigHeaders).
		SetNillableMaxConcurrency(rs.concurrency).
		SetCreatedAt(s.now())
	if rs.destination != nil {
		r.SetDestination(rs.destination)
	}
	if len(rs.eventTypes) > 0 {
		r.SetEventTypes(rs.eventTypes)
	}
	if rs.auth != nil {
		r.SetAuth(rs.auth)
	}
	created, err := r.Save(ctx)
	return created, storage.Err(op, "recipient", err)
}

// liveRecipient loads, for a viewer who may manage recipients, a recipient that has not been deleted, of one
// of the tenant's servers: an alert subscription's recipient changes only with its subscription.
func liveRecipient(ctx context.Context, client *ent.Client, op string, id int) (*ent.Recipient, error) {
	if err := requireManagerOf(ctx, op); err != nil {
		return nil, err
	}
	r, err := client.Recipient.Query().Where(recipient.ID(id), recipient.DeletedAtIsNil()).WithServer().Only(ctx)
	if err != nil {
		return nil, storage.Err(op, "recipient", err)
	}
	if r.Edges.Server.Kind == server.KindALERTS {
		return nil, fault.E(op, fault.InvalidInput, "this recipient is an alert subscription's: change it with deleteAlertSubscription and createAlertSubscription")
	}
	return r, nil
}

// UpdateRecipient changes a recipient's settings. Deliveries already created keep the attempts and schedule
// they were created with; new ones use the new settings.
func (s *Service) UpdateRecipient(ctx context.Context, client *ent.Client, id int, in RecipientInput) (*ent.Recipient, error) {
	const op = "routing.UpdateRecipient"
	r, err := liveRecipient(ctx, client, op, id)
	if err != nil {
		return nil, err
	}
	if in.Method != nil && *in.Method != r.Method {
		return nil, fault.E(op, fault.InvalidInput, "method cannot change; create a new recipient")
	}
	rs := recipientSettings{
		name: r.Name, method: r.Method, url: r.URL, maxAttempts: r.MaxAttempts, schedule: r.RetrySchedule,
		idempotency: r.SendIdempotencyKey, traceparent: r.SendTraceparent, timeoutSecond: r.TimeoutSeconds,
		filter: r.RoutingFilter, sigHeaders: r.SignatureHeaders, concurrency: r.MaxConcurrency,
		destination: r.Destination, eventTypes: r.EventTypes, auth: r.Auth,
	}
	if destination.IsBroker(r.Method.String()) {
		rs.url = r.DestinationURL
	}
	rs.apply(in)
	if err := rs.validate(op); err != nil {
		return nil, err
	}
	u := r.Update().
		SetName(rs.name).
		SetURL(rs.shownURL()).
		SetDestinationURL(rs.destinationURL()).
		SetMaxAttempts(rs.maxAttempts).
		SetRetrySchedule(rs.schedule).
		SetSendIdempotencyKey(rs.idempotency).
		SetSendTraceparent(rs.traceparent).
		SetTimeoutSeconds(rs.timeoutSecond).
		SetSignatureHeaders(rs.sigHeaders)
	if rs.destination == nil {
		u.ClearDestination()
	} else {
		u.SetDestination(rs.destination)
	}
	if len(rs.eventTypes) == 0 {
		u.ClearEventTypes()
	} else {
		u.SetEventTypes(rs.eventTypes)
	}
	if rs.auth == nil {
		u.ClearAuth()
	} else {
		u.SetAuth(rs.auth)
	}
	if rs.filter == nil {
		u.ClearRoutingFilter()
	} else {
		u.SetRoutingFilter(*rs.filter)
	}
	// A cap set or removed moves the recipient's pending deliveries between the DIRECT and CAPPED lanes: the
	// lane reconciler sees cap_changed_at and does it, at once when woken. Deliveries already in flight are not
	// counted against a new cap; it holds for every attempt claimed from then on.
	capChanged := (rs.concurrency == nil) != (r.MaxConcurrency == nil)
	if rs.concurrency == nil {
		u.ClearMaxConcurrency()
	} else {
		u.SetMaxConcurrency(*rs.concurrency)
	}
	if capChanged {
		u.SetCapChangedAt(s.now())
	}
	r, err = u.Save(ctx)
	if err == nil && capChanged && s.wake != nil {
		storage.AfterCommit(ctx, s.wake)
	}
	return r, storage.Err(op, "recipient", err)
}

// DeleteRecipient removes a recipient and cancels its pending deliveries; its history stays with the requests.
func (s *Service) DeleteRecipient(ctx context.Context, client *ent.Client, id int) (*ent.Recipient, error) {
	const op = "routing.DeleteRecipient"
	r, err := liveRecipient(ctx, client, op, id)
	if err != nil {
		return nil, err
	}
	if err := s.deleteRecipients(ctx, client, s.now(), r.ID); err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	r, err = client.Recipient.Get(ctx, r.ID)
	return r, storage.Err(op, "recipient", err)
}

// SetRecipientState is the effect of pauseRecipient, resumeRecipient and enableRecipient.
type SetRecipientState int

// The state changes an owner can make.
const (
	// Pause holds the recipient's deliveries; they wait without spending attempts.
	Pause SetRecipientState = iota
	// Resume lets a paused recipient's deliveries flow again.
	Resume
	// Enable brings a DISABLED or FROZEN recipient back to ACTIVE and clears its failure streak.
	Enable
)

// ChangeRecipientState pauses, resumes or re-enables a recipient.
func (s *Service) ChangeRecipientState(ctx context.Context, client *ent.Client, id int, change SetRecipientState) (*ent.Recipient, error) {
	const op = "routing.ChangeRecipientState"
	v, _ := viewer.FromContext(ctx)
	if err := requireManager(op, v); err != nil {
		return nil, err
	}
	// Locked: the move rewrites the health columns, which an attempt being recorded may be changing.
	r, err := client.Recipient.Query().Where(recipient.ID(id), recipient.DeletedAtIsNil()).Modify(lockRow).Only(ctx)
	if err != nil {
		return nil, storage.Err(op, "recipient", err)
	}
	var to recipient.State
	var reason string
	switch change {
	case Pause:
		if r.State == recipient.StatePAUSED {
			return r, nil
		}
		if r.State != recipient.StateACTIVE {
			return nil, fault.E(op, fault.Conflict, "recipient is %s; only an ACTIVE recipient can be paused", r.State)
		}
		to, reason = recipient.StatePAUSED, "paused by "+v.Subject
	case Resume:
		if r.State == recipient.StateACTIVE {
			return r, nil
		}
		if r.State != recipient.StatePAUSED {
			return nil, fault.E(op, fault.Conflict, "recipient is %s; use enableRecipient", r.State)
		}
		to, reason = recipient.StateACTIVE, ""
	case Enable:
		if r.State != recipient.StateDISABLED && r.State != recipient.StateFROZEN {
			return nil, fault.E(op, fault.Conflict, "recipient is %s; only DISABLED or FROZEN recipients are enabled", r.State)
		}
		to, reason = recipient.StateACTIVE, "enabled by "+v.Subject
	}
	u := client.Recipient.UpdateOneID(r.ID)
	delivery.MoveRecipient(u.Mutation(), r, to, reason, s.now())
	r, err = u.Save(ctx)
	if err != nil {
		return nil, storage.Err(op, "recipient", err)
	}
	if change == Enable {
		if err := alert.Record(ctx, client, recoveredEvent(r)); err != nil {
			return nil, fault.Wrap(op, fault.Internal, err)
		}
	}
	if change != Pause && s.wake != nil {
		storage.AfterCommit(ctx, s.wake)
	}
	return r, nil
}
