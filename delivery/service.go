package delivery

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"slices"
	"time"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/ent"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/ent/server"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/retention"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/tracing"
)

// Change tells that a delivery was created or changed. It is handed out only after the change committed.
type Change struct {
	TenantID   int
	ServerID   int
	RequestID  int
	DeliveryID int
	Status     entdelivery.Status
	// Kind is "created", "attempt" (an attempt finished) or "updated" (claimed, cancelled, superseded…).
	Kind string
	// Due is when the delivery may be attempted next, if it is pending.
	Due *time.Time
	// Lane is the dispatcher that will take the delivery when it is due, so that only that one is woken.
	Lane Lane
}

// Lane says which dispatcher takes a pending delivery once it is due.
type Lane uint8

// Lanes.
const (
	// LaneAny: not known here; every dispatcher is woken.
	LaneAny Lane = iota
	// LaneDirect: the scheduler, to a direct HTTP recipient.
	LaneDirect
	// LaneCapped: the scheduler, to a direct HTTP recipient with a maxConcurrency, within its free slots.
	// Intake never hands such a delivery over: only the claim counts it against the cap.
	LaneCapped
	// LaneCLI: the CLI hub, to an attached adal CLI.
	LaneCLI
	// LaneParked: none until its recipient's state changes (paused, disabled, frozen). Waking a dispatcher
	// for it would only make the claim walk past it; the state change wakes them when it comes.
	LaneParked
)

// column is the lane as the deliveries table keeps it.
func (l Lane) column() entdelivery.Lane {
	switch l {
	case LaneCLI:
		return entdelivery.LaneCLI
	case LaneCapped:
		return entdelivery.LaneCAPPED
	case LaneParked:
		return entdelivery.LanePARKED
	default:
		return entdelivery.LaneDIRECT
	}
}

// LaneOf is the lane of a new delivery to r.
func LaneOf(r *ent.Recipient) Lane {
	switch {
	case r.State != recipient.StateACTIVE:
		return LaneParked
	case r.Method == recipient.MethodCLI:
		return LaneCLI
	case r.MaxConcurrency != nil:
		return LaneCapped
	default:
		return LaneDirect
	}
}

// Change kinds.
const (
	KindCreated = "created"
	KindAttempt = "attempt"
	KindUpdated = "updated"
)

// Config configures the delivery service.
type Config struct {
	Billing *billing.Service
	// Unit is one schedule "minute" (ADAL_RETRY_UNIT).
	Unit time.Duration
	Now  func() time.Time
	// Notify hears of committed changes (to wake the scheduler and publish live events); may be nil.
	Notify func(changes []Change)
	// CLIConnected reports whether a CLI is attached for a recipient now; nil means never.
	CLIConnected func(r *ent.Recipient, now time.Time) bool
	// Health are the disable/freeze rules; zero means DefaultHealthRules.
	Health HealthRules
	// Dialect is the database's (storage.DB.Dialect): it chooses the statements and row locks.
	Dialect string
	// Alerted, if set, is called after a commit that recorded alert events (package alert), to wake their
	// dispatcher.
	Alerted func()
	// Tracer traces replays: each is a new trace (nil: off).
	Tracer *tracing.Tracer
}

// Service runs the delivery state machine: it stores accepted requests with their deliveries, records
// attempt outcomes, and performs the manual actions (retry, cancel, replay).
type Service struct {
	cfg   Config
	locks storage.RowLocks
	batches
}

// batches are StoreBatch's and RecordBatch's ways on one dialect.
type batches struct {
	store       func(s *Service, ctx context.Context, client *ent.Client, items []Incoming, reason ledgerentry.Reason, handoff Handoff) ([]Stored, error)
	recordBatch func(s *Service, ctx context.Context, tx *ent.Client, cs []Completion, recorded []bool) error
}

// dialectBatches are how each dialect stores and records batches: on PostgreSQL set-wise, in a few statements
// that lock rows; on SQLite, whose single writer makes round trips cheap, with ent's statements.
var dialectBatches = storage.PerDialect[batches]{
	Postgres: batches{store: (*Service).storePostgres, recordBatch: (*Service).recordBatchPostgres},
	SQLite:   batches{store: (*Service).storeSQLite, recordBatch: (*Service).recordEach},
}

// New returns a delivery service.
func New(cfg Config) *Service {
	if cfg.Unit <= 0 {
		cfg.Unit = DefaultUnit
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Health == (HealthRules{}) {
		cfg.Health = DefaultHealthRules
	}
	if cfg.CLIConnected == nil {
		cfg.CLIConnected = func(*ent.Recipient, time.Time) bool { return false }
	}
	return &Service{cfg: cfg, locks: storage.RowLocksOf(cfg.Dialect), batches: dialectBatches.Of(cfg.Dialect)}
}

// Dialect is the database's dialect the service was configured for, for callers that choose their own ways
// by it (storage.PerDialect.Of).
func (s *Service) Dialect() string { return s.cfg.Dialect }

// Unit is the schedule unit in force.
func (s *Service) Unit() time.Duration { return s.cfg.Unit }

// Now is the service's clock.
func (s *Service) Now() time.Time { return s.cfg.Now() }

// notify hands changes to the listener once ctx's transaction commits.
func (s *Service) notify(ctx context.Context, changes ...Change) {
	if s.cfg.Notify == nil || len(changes) == 0 {
		return
	}
	storage.AfterCommit(ctx, func() { s.cfg.Notify(changes) })
}

// Retry creates a new delivery of the same request to the same recipient (trigger MANUAL_RETRY) with the
// recipient's current settings, for 1 credit (none for an alert). Allowed from FAILED, CANCELED or SUCCEEDED,
// on the newest delivery of that request to that recipient; other recipients are untouched.
func (s *Service) Retry(ctx context.Context, client *ent.Client, deliveryID int) (*ent.Delivery, error) {
	const op = "delivery.Retry"
	r, err := s.retryable(ctx, client, op, deliveryID)
	if err != nil {
		return nil, err
	}
	isAlert, err := free(ctx, client, r.req.ServerID)
	if err != nil {
		return nil, storage.Err(op, "server", err)
	}
	if !isAlert {
		if _, err := s.cfg.Billing.Debit(ctx, client, r.d.TenantID, billing.CreditsPerAction, billing.ReasonManualRetry, billing.DeliveryReference(r.d.ID)); err != nil {
			return nil, err
		}
	}
	nd, err := s.retry(ctx, client, op, r)
	if err != nil {
		return nil, err
	}
	if err := RefreshRequestStatus(ctx, client, r.req.ID); err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	return nd, nil
}

// retryable is a delivery a retry may take over, with its request held (holdRequest).
type retryable struct {
	d   *ent.Delivery
	req *ent.Request
}

// retryable checks that the delivery may be retried: final, current, to a live recipient, of a request not
// expired.
func (s *Service) retryable(ctx context.Context, client *ent.Client, op string, deliveryID int) (retryable, error) {
	d, err := client.Delivery.Query().Where(entdelivery.ID(deliveryID)).WithRecipient().Only(ctx)
	if err != nil {
		return retryable{}, storage.Err(op, "delivery", err)
	}
	switch {
	case d.Status == entdelivery.StatusPENDING || d.Status == entdelivery.StatusIN_PROGRESS:
		return retryable{}, fault.E(op, fault.Conflict, "delivery is %s; only FAILED, CANCELED or SUCCEEDED deliveries can be retried", d.Status)
	case d.Superseded:
		return retryable{}, fault.E(op, fault.Conflict, "a newer delivery of this request to this recipient exists; retry that one")
	case d.Edges.Recipient.DeletedAt != nil:
		return retryable{}, fault.E(op, fault.Conflict, "the recipient was deleted")
	}
	req, err := s.holdRequest(ctx, client, d.RequestID)
	if err != nil {
		return retryable{}, storage.Err(op, "request", err)
	}
	if retention.Expired(req.ExpiresAt, s.cfg.Now()) {
		return retryable{}, fault.E(op, fault.NotFound, "the request expired and is being purged")
	}
	return retryable{d: d, req: req}, nil
}

// retry supersedes r's delivery and creates its successor. The request's status is the caller's to refresh.
func (s *Service) retry(ctx context.Context, client *ent.Client, op string, r retryable) (*ent.Delivery, error) {
	// Superseding is conditional on the delivery still being final and current, so two concurrent retries
	// cannot both succeed.
	n, err := client.Delivery.Update().
		Where(entdelivery.ID(r.d.ID), entdelivery.Superseded(false),
			entdelivery.StatusIn(entdelivery.StatusFAILED, entdelivery.StatusCANCELED, entdelivery.StatusSUCCEEDED)).
		SetSuperseded(true).
		Save(ctx)
	if err != nil {
		return nil, storage.Err(op, "delivery", err)
	}
	if n == 0 {
		return nil, fault.E(op, fault.Conflict, "the delivery changed meanwhile; reload and retry")
	}
	ds, err := s.createDeliveries(ctx, client, r.req, []*ent.Recipient{r.d.Edges.Recipient}, entdelivery.TriggerMANUAL_RETRY)
	if err != nil {
		return nil, err
	}
	return ds[0], nil
}

// RetryOutcome is what RetryBatch did with one delivery: its new delivery, or why there is none (CONFLICT or
// NOT_FOUND, as Retry would have answered).
type RetryOutcome struct {
	Retry *ent.Delivery
	Err   error
}

// RetryBatch retries each of a tenant's deliveries as Retry does — a new MANUAL_RETRY delivery, 1 credit (none
// for an alert) each with a ledger entry naming the delivery retried — and reports what became of each, in order. It holds
// the deliveries first (in id order), so what it checks stays true until the commit, and pays for every retry
// it made together at the end: the tenant's balance, which intake locks for every request, is held only for
// the last two statements of the transaction rather than from the first retry on. When the balance cannot pay
// for them all it returns INSUFFICIENT_CREDITS, and the caller must roll the transaction back (and ask for no
// more than the balance). client must be bound to the transaction.
func (s *Service) RetryBatch(ctx context.Context, client *ent.Client, tenantID int, deliveryIDs []int) ([]RetryOutcome, error) {
	const op = "delivery.RetryBatch"
	ids := slices.Sorted(slices.Values(deliveryIDs))
	hold := client.Delivery.Query().Where(entdelivery.IDIn(ids...)).Order(entdelivery.ByID())
	hold.Modify(s.locks.NoKeyUpdate)
	if _, err := hold.IDs(ctx); err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	out := make([]RetryOutcome, len(deliveryIDs))
	var refs []string
	var requests []int
	alerts := map[int]bool{} // server id → whether it is the tenant's alerts server, whose retries are free
	for i, id := range deliveryIDs {
		r, err := s.retryable(ctx, client, op, id)
		if err == nil && r.d.TenantID != tenantID {
			err = fault.E(op, fault.NotFound, "delivery not found")
		}
		if err != nil {
			if k := fault.KindOf(err); k != fault.Conflict && k != fault.NotFound {
				return nil, err
			}
			out[i].Err = err
			continue
		}
		if out[i].Retry, err = s.retry(ctx, client, op, r); err != nil {
			return nil, err
		}
		requests = append(requests, r.req.ID)
		isAlert, seen := alerts[r.req.ServerID]
		if !seen {
			if isAlert, err = free(ctx, client, r.req.ServerID); err != nil {
				return nil, storage.Err(op, "server", err)
			}
			alerts[r.req.ServerID] = isAlert
		}
		if !isAlert {
			refs = append(refs, billing.DeliveryReference(r.d.ID))
		}
	}
	if len(requests) == 0 {
		return out, nil
	}
	if err := RefreshRequestStatus(ctx, client, requests...); err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	if len(refs) == 0 {
		return out, nil
	}
	rs, err := s.cfg.Billing.Reserve(ctx, client, []billing.Want{{TenantID: tenantID, N: len(refs)}})
	if err != nil {
		return nil, err
	}
	if rs[0].Granted < len(refs) {
		return nil, fault.E(op, fault.InsufficientCredits, "not enough credits: %d needed, %d left", len(refs), rs[0].Granted)
	}
	if err := s.cfg.Billing.Settle(ctx, client, rs, billing.ReasonManualRetry, [][]string{refs}); err != nil {
		return nil, err
	}
	return out, nil
}

// holdRequest reads a stored request that new rows are about to point to (a retry's delivery, a replay's link)
// and, on PostgreSQL, holds it until commit with the lock a foreign key check would take (KEY SHARE): the
// database does not check those links (storage.unenforcedForeignKeys), and the purge skips what is held, so the
// request cannot be purged from under them. SQLite's single writer already excludes the purge.
func (s *Service) holdRequest(ctx context.Context, client *ent.Client, id int) (*ent.Request, error) {
	q := client.Request.Query().Where(request.ID(id))
	q.Modify(s.locks.KeyShare)
	return q.Only(ctx)
}

// Cancel stops a PENDING delivery; an attempt already in flight is not recalled, so IN_PROGRESS is a conflict.
func (s *Service) Cancel(ctx context.Context, client *ent.Client, deliveryID int) (*ent.Delivery, error) {
	const op = "delivery.Cancel"
	d, err := client.Delivery.Query().Where(entdelivery.ID(deliveryID)).WithRequest().Only(ctx)
	if err != nil {
		return nil, storage.Err(op, "delivery", err)
	}
	now := s.cfg.Now()
	n, err := client.Delivery.Update().
		Where(entdelivery.ID(d.ID), entdelivery.StatusEQ(entdelivery.StatusPENDING)).
		SetStatus(entdelivery.StatusCANCELED).
		SetFinishedAt(now).
		ClearNextAttemptAt().
		Save(ctx)
	if err != nil {
		return nil, storage.Err(op, "delivery", err)
	}
	if n == 0 {
		current, err := client.Delivery.Get(ctx, d.ID)
		if err != nil {
			return nil, storage.Err(op, "delivery", err)
		}
		if current.Status == entdelivery.StatusIN_PROGRESS {
			return nil, fault.E(op, fault.Conflict, "an attempt is in flight and cannot be recalled; cancel applies to PENDING deliveries")
		}
		return nil, fault.E(op, fault.Conflict, "delivery is already %s", current.Status)
	}
	if err := RefreshRequestStatus(ctx, client, d.RequestID); err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	s.notify(ctx, Change{TenantID: d.TenantID, ServerID: d.Edges.Request.ServerID, RequestID: d.RequestID,
		DeliveryID: d.ID, Status: entdelivery.StatusCANCELED, Kind: KindUpdated})
	return client.Delivery.Get(ctx, d.ID)
}

// CancelBatch cancels each of the deliveries that is still PENDING, as Cancel does, and reports for each
// whether it did: nil, or why not (CONFLICT when it is in flight or finished, NOT_FOUND). It locks the
// deliveries in id order, cancels them in one statement and then refreshes their requests' status in request
// order — deliveries before requests, each in one order, as the other statements that change both take them.
func (s *Service) CancelBatch(ctx context.Context, client *ent.Client, deliveryIDs []int) ([]error, error) {
	const op = "delivery.CancelBatch"
	q := client.Delivery.Query().Where(entdelivery.IDIn(deliveryIDs...)).Order(entdelivery.ByID()).
		WithRequest(func(q *ent.RequestQuery) { q.Select(request.FieldID, request.FieldServerID) })
	q.Modify(s.locks.NoKeyUpdate)
	held, err := q.All(ctx)
	if err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	byID := make(map[int]*ent.Delivery, len(held))
	var pending, requests []int
	for _, d := range held {
		byID[d.ID] = d
		if d.Status == entdelivery.StatusPENDING {
			pending = append(pending, d.ID)
			requests = append(requests, d.RequestID)
		}
	}
	out := make([]error, len(deliveryIDs))
	for i, id := range deliveryIDs {
		switch d, ok := byID[id]; {
		case !ok:
			out[i] = fault.E(op, fault.NotFound, "delivery not found")
		case d.Status != entdelivery.StatusPENDING:
			out[i] = fault.E(op, fault.Conflict, "delivery is %s; cancel applies to PENDING deliveries", d.Status)
		}
	}
	if len(pending) == 0 {
		return out, nil
	}
	if err := client.Delivery.Update().Where(entdelivery.IDIn(pending...)).
		SetStatus(entdelivery.StatusCANCELED).SetFinishedAt(s.cfg.Now()).ClearNextAttemptAt().
		Exec(ctx); err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	if err := RefreshRequestStatus(ctx, client, requests...); err != nil {
		return nil, fault.Wrap(op, fault.Internal, err)
	}
	changes := make([]Change, len(pending))
	for i, id := range pending {
		d := byID[id]
		changes[i] = Change{TenantID: d.TenantID, ServerID: d.Edges.Request.ServerID, RequestID: d.RequestID,
			DeliveryID: d.ID, Status: entdelivery.StatusCANCELED, Kind: KindUpdated}
	}
	s.notify(ctx, changes...)
	return out, nil
}

// Replay stores a new request copied from a stored one (replayOf points back, new key), delivered to the
// server's recipients as configured now (their routing filters too), for 1 credit (none for an alert). The
// original is unchanged.
func (s *Service) Replay(ctx context.Context, client *ent.Client, requestID int, key string) (*ent.Request, error) {
	const op = "delivery.Replay"
	orig, err := s.holdRequest(ctx, client, requestID)
	if err != nil {
		return nil, storage.Err(op, "request", err)
	}
	if retention.Expired(orig.ExpiresAt, s.cfg.Now()) {
		return nil, fault.E(op, fault.NotFound, "the request expired and is being purged")
	}
	srv, err := client.Server.Query().Where(server.ID(orig.ServerID)).
		WithRecipients(func(q *ent.RecipientQuery) {
			q.Where(recipient.DeletedAtIsNil()).Order(ent.Asc(recipient.FieldID))
		}).
		Only(ctx)
	if err != nil {
		return nil, storage.Err(op, "server", err)
	}
	if srv.DeletedAt != nil {
		return nil, fault.E(op, fault.Conflict, "the server was deleted; its requests can no longer be replayed")
	}
	in := NewRequest{
		Method: orig.Method, Path: orig.Path, Query: orig.Query, Header: orig.Headers, Body: orig.Body,
		SourceAddr: orig.SourceAddr, ReplayOf: &orig.ID, Verified: orig.Verified, EventType: orig.EventType,
		SchemaError: orig.SchemaError,
	}
	span := s.traceReplay(orig)
	if span != nil {
		in.TraceParent = tracing.TraceParent(span.SpanContext())
	}
	req, err := s.storeReplay(ctx, client, srv, in, key)
	if span != nil {
		if req != nil && span.IsRecording() {
			span.SetAttributes(AttrRequest.Int(req.ID))
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
	return req, err
}

// storeReplay stores in, a replay, for srv: free of charge on a server of alerts, for a credit otherwise.
func (s *Service) storeReplay(ctx context.Context, client *ent.Client, srv *ent.Server, in NewRequest, key string) (*ent.Request, error) {
	if srv.Kind == server.KindALERTS {
		plan, err := billing.PlanOf(ctx, client, srv.TenantID)
		if err != nil {
			return nil, err
		}
		req, _, err := s.StoreFree(ctx, client, srv, srv.Edges.Recipients, in, key, plan.RetentionDays)
		if err != nil {
			return nil, err
		}
		req, err = client.Request.Get(ctx, req.ID) // bound to the client, so its edges load
		return req, storage.Err("delivery.Replay", "request", err)
	}
	req, _, err := s.StoreRequest(ctx, client, srv, srv.Edges.Recipients, in, billing.ReasonReplay, key)
	return req, err
}
