package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
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
)

// Incoming is one request to store for a server, with the recipients it goes to.
type Incoming struct {
	Server     *ent.Server
	Recipients []*ent.Recipient
	Request    NewRequest
	// Key is the request's own random identity (sent as X-Adal-Idempotency).
	Key string
	// FilteredOut are the recipients of the server whose routing filter the request did not match: StoreBatch
	// moves them here from Recipients.
	FilteredOut []int
	// ServerLocked says the caller read Server, live, in this transaction and holds it until commit (intake
	// on SQLite does): StoreBatch then does not read it again. On PostgreSQL StoreBatch's statement locks the
	// servers itself.
	ServerLocked bool
	// ServerVersion, when set, is Server's version as the caller read it with Recipients (ServerVersionSQL), on
	// PostgreSQL: the request is stored only if the server is still so, and is refused with ErrServerChanged
	// otherwise. Intake reads its servers from a cache and lets this check that they are current.
	ServerVersion string
}

// ErrServerChanged refuses a request whose Incoming.ServerVersion is no longer its server's: the caller reads
// the server again and stores the request anew.
var ErrServerChanged = errors.New("the server or its recipients changed since they were read")

// Stored is what became of one Incoming: the request and its deliveries, or why it was refused
// (INSUFFICIENT_CREDITS, or NOT_FOUND for a server deleted meanwhile).
type Stored struct {
	Request    *ent.Request
	Deliveries []*ent.Delivery
	// Claimed are the deliveries stored already claimed under the batch's Handoff, for the caller to start
	// once the transaction commits.
	Claimed []Claimed
	Err     error
}

// StoreBatch stores many requests in the caller's transaction with a handful of statements whatever their
// number: the paid requests with their deliveries, the debit and its ledger entries. On PostgreSQL that is one
// statement (insertSQL), which also locks the servers and tenants and grants the credits, so that a batch
// OneStatement accepts may be stored outside any transaction, in one round trip; on SQLite it is a read of
// the servers, billing.Reserve, two bulk inserts and billing.Settle. The returned entities are the rows as
// written, bound to no client (StoreRequest reads its request back for callers that load edges). Items beyond
// a tenant's balance are refused (Stored.Err), in arrival order, and leave nothing behind. Each request goes to
// the recipients whose routing filter it matches; the others are noted on it as filtered out. An error return
// means nothing of the batch may be committed. The first handoff.Slots direct deliveries, in arrival order and
// within each tenant's part of them, are stored claimed; a slot that falls to a refused item is left unused.
func (s *Service) StoreBatch(ctx context.Context, client *ent.Client, items []Incoming, reason ledgerentry.Reason, handoff Handoff) ([]Stored, error) {
	route(items)
	return s.store(s, ctx, client, items, reason, handoff)
}

// storePostgres builds every item's rows and lets insertSQL decide which are stored.
func (s *Service) storePostgres(ctx context.Context, client *ent.Client, items []Incoming, reason ledgerentry.Reason, handoff Handoff) ([]Stored, error) {
	const op = "delivery.StoreBatch"
	out := make([]Stored, len(items))
	now := s.cfg.Now()
	all := make([]int, len(items))
	for i := range all {
		all[i] = i
	}
	b := s.build(items, all, nil, handoff, now) // expiry comes back from the statement
	live, changed, err := insertPostgres(ctx, client, b.reqs, b.ds, b.owners, serverVersions(items), reason, now)
	if err != nil {
		return nil, storage.Err(op, "request", err)
	}
	for n, r := range b.reqs {
		switch i := b.items[n]; {
		case r.ID != 0:
		case changed[items[i].Server.ID]:
			out[i].Err = fault.Wrap(op, fault.Unavailable, ErrServerChanged)
		case !live[items[i].Server.ID]:
			out[i].Err = fault.E(op, fault.NotFound, "server not found")
		default:
			out[i].Err = fault.E(op, fault.InsufficientCredits, "not enough credits: 1 needed")
		}
	}
	s.finish(ctx, out, b.stored(), now)
	return out, nil
}

// serverVersions is the statement's $6: the ServerVersion of each server whose items carry one, as a JSON array
// of {id, version}.
func serverVersions(items []Incoming) []byte {
	type version struct {
		ID      int    `json:"id"`
		Version string `json:"version"`
	}
	var list []version
	seen := map[int]bool{}
	for _, it := range items {
		if it.ServerVersion != "" && !seen[it.Server.ID] {
			seen[it.Server.ID] = true
			list = append(list, version{it.Server.ID, it.ServerVersion})
		}
	}
	if len(list) == 0 {
		return []byte("[]")
	}
	b, _ := json.Marshal(list) // ints and hex digests: nothing to fail on
	return b
}

// storeSQLite reads which servers are live, reserves the credits under billing.Reserve's lock, and stores the
// paid items with ent's bulk inserts and billing.Settle.
func (s *Service) storeSQLite(ctx context.Context, client *ent.Client, items []Incoming, reason ledgerentry.Reason, handoff Handoff) ([]Stored, error) {
	const op = "delivery.StoreBatch"
	out := make([]Stored, len(items))
	live, err := s.liveServers(ctx, client, items)
	if err != nil {
		return nil, err
	}
	byTenant := map[int][]int{}
	for i, it := range items {
		if !live[it.Server.ID] {
			out[i].Err = fault.E(op, fault.NotFound, "server not found")
			continue
		}
		byTenant[it.Server.TenantID] = append(byTenant[it.Server.TenantID], i)
	}
	tenantIDs := make([]int, 0, len(byTenant))
	for id := range byTenant {
		tenantIDs = append(tenantIDs, id)
	}
	slices.Sort(tenantIDs)
	wants := make([]billing.Want, len(tenantIDs))
	for k, tid := range tenantIDs {
		wants[k] = billing.Want{TenantID: tid, N: len(byTenant[tid])}
	}
	reservations, err := s.cfg.Billing.Reserve(ctx, client, wants)
	if err != nil {
		return nil, err
	}
	planDays := map[int]int{}
	var paid []int // indexes into items, grouped by tenant in reservation order
	for _, r := range reservations {
		idx := byTenant[r.TenantID]
		planDays[r.TenantID] = r.RetentionDays
		paid = append(paid, idx[:r.Granted]...)
		for _, i := range idx[r.Granted:] {
			out[i].Err = fault.E(op, fault.InsufficientCredits, "not enough credits: 1 needed")
		}
	}
	if len(paid) == 0 {
		return out, nil
	}
	now := s.cfg.Now()
	b := s.build(items, paid, planDays, handoff, now)
	if err := insertEach(ctx, client, b.reqs, b.ds, b.owners); err != nil {
		return nil, storage.Err(op, "request", err)
	}
	// The reference names the request as insertSQL's entries name it on PostgreSQL.
	refs := make([][]string, len(reservations))
	n := 0
	for k, r := range reservations {
		for range r.Granted {
			refs[k] = append(refs[k], billing.RequestReference(b.reqs[n].ID))
			n++
		}
	}
	if err := s.cfg.Billing.Settle(ctx, client, reservations, reason, refs); err != nil {
		return nil, err
	}
	s.finish(ctx, out, b, now)
	return out, nil
}

// batchRows are the rows StoreBatch writes for some of its items.
type batchRows struct {
	items      []int // for each request, the index of its item
	reqs       []*ent.Request
	ds         []*ent.Delivery
	owners     []int // for each delivery, the index into reqs
	recipients []*ent.Recipient
}

// build makes the rows of the items at idx, in that order: a request each, kept for the retention.Days of its
// tenant's plan (planDays, by tenant id; nil leaves the expiry to the statement) and its server, and a
// delivery per recipient, the first handoff.Slots direct ones claimed.
func (s *Service) build(items []Incoming, idx []int, planDays map[int]int, handoff Handoff, now time.Time) batchRows {
	n := 0
	for _, i := range idx {
		n += len(items[i].Recipients)
	}
	b := batchRows{items: idx, reqs: make([]*ent.Request, len(idx)), ds: make([]*ent.Delivery, 0, n),
		owners: make([]int, 0, n), recipients: make([]*ent.Recipient, 0, n)}
	for n, i := range idx {
		it := items[i]
		status := request.StatusPENDING
		if len(it.Recipients) == 0 {
			status = request.StatusFAILED // nobody to deliver to: nothing will ever succeed
		}
		in := it.Request
		if in.Body == nil {
			in.Body = []byte{} // an empty body is still a body: the column holds no NULL (a replay reads one back as nil)
		}
		b.reqs[n] = &ent.Request{
			TenantID: it.Server.TenantID, ServerID: it.Server.ID, Key: it.Key, Method: in.Method, Path: in.Path,
			Query: in.Query, Headers: in.Header, Body: in.Body, SourceAddr: in.SourceAddr, ReceivedAt: now,
			Status: status, ReplayOfID: in.ReplayOf, FilteredOut: it.FilteredOut, Verified: in.Verified,
			TraceParent: in.TraceParent, EventType: in.EventType, SchemaError: in.SchemaError,
		}
		if planDays != nil {
			b.reqs[n].ExpiresAt = retention.ExpiresAt(now, retention.Days(planDays[it.Server.TenantID], it.Server.RetentionDays))
		}
	}
	slots := handoff.taker()
	for n, i := range idx {
		for _, r := range items[i].Recipients {
			d := s.newDelivery(b.reqs[n], r, entdelivery.TriggerAUTOMATIC, now)
			if LaneOf(r) == LaneDirect && slots.take(d.TenantID) {
				handoff.claim(d, now)
			}
			b.ds = append(b.ds, d)
			b.owners = append(b.owners, n)
			b.recipients = append(b.recipients, r)
		}
	}
	return b
}

// stored is b without the requests and deliveries that were not stored (ID 0).
func (b batchRows) stored() batchRows {
	out := batchRows{items: make([]int, 0, len(b.items)), reqs: make([]*ent.Request, 0, len(b.reqs)),
		ds: make([]*ent.Delivery, 0, len(b.ds)), owners: make([]int, 0, len(b.ds)),
		recipients: make([]*ent.Recipient, 0, len(b.ds))}
	at := make([]int, len(b.reqs)) // index into out.reqs of each request kept
	for n, r := range b.reqs {
		if r.ID != 0 {
			at[n] = len(out.reqs)
			out.items = append(out.items, b.items[n])
			out.reqs = append(out.reqs, r)
		}
	}
	for k, d := range b.ds {
		if d.ID != 0 {
			out.ds = append(out.ds, d)
			out.owners = append(out.owners, at[b.owners[k]])
			out.recipients = append(out.recipients, b.recipients[k])
		}
	}
	return out
}

// finish reports the stored rows b in out, and their deliveries' creation once the transaction commits.
func (s *Service) finish(ctx context.Context, out []Stored, b batchRows, now time.Time) {
	changes := make([]Change, len(b.ds))
	for k, d := range b.ds {
		req := b.reqs[b.owners[k]]
		o := &out[b.items[b.owners[k]]]
		o.Deliveries = append(o.Deliveries, d)
		if d.Status == entdelivery.StatusIN_PROGRESS { // only the handoff's claim stores a delivery under way
			o.Claimed = append(o.Claimed, Claimed{Claim: claimOf(d, req.ServerID, now), Request: req, Recipient: b.recipients[k]})
		}
		changes[k] = Change{TenantID: d.TenantID, ServerID: req.ServerID, RequestID: req.ID, DeliveryID: d.ID,
			Status: d.Status, Kind: KindCreated, Due: d.NextAttemptAt, Lane: LaneOf(b.recipients[k])}
	}
	for n, i := range b.items {
		out[i].Request = b.reqs[n]
	}
	s.notify(ctx, changes...)
}

// insertEach stores the requests, then their deliveries, with ent's bulk inserts (SQLite). It sets the IDs
// of reqs and ds, and each delivery's request (ds[k] belongs to reqs[owners[k]]).
func insertEach(ctx context.Context, client *ent.Client, reqs []*ent.Request, ds []*ent.Delivery, owners []int) error {
	creates := make([]*ent.RequestCreate, len(reqs))
	for n, r := range reqs {
		creates[n] = client.Request.Create().
			SetTenantID(r.TenantID).
			SetServerID(r.ServerID).
			SetKey(r.Key).
			SetMethod(r.Method).
			SetPath(r.Path).
			SetQuery(r.Query).
			SetHeaders(r.Headers).
			SetBody(r.Body).
			SetSourceAddr(r.SourceAddr).
			SetReceivedAt(r.ReceivedAt).
			SetExpiresAt(r.ExpiresAt).
			SetStatus(r.Status).
			SetNillableReplayOfID(r.ReplayOfID).
			SetNillableVerified(r.Verified).
			SetTraceParent(r.TraceParent).
			SetEventType(r.EventType).
			SetSchemaError(r.SchemaError)
		if len(r.FilteredOut) > 0 {
			creates[n].SetFilteredOut(r.FilteredOut)
		}
	}
	if err := saveAll(ctx, creates, client.Request.CreateBulk, func(n int, r *ent.Request) { reqs[n].ID = r.ID }); err != nil {
		return err
	}
	if len(ds) == 0 {
		return nil
	}
	builders := make([]*ent.DeliveryCreate, len(ds))
	for k, d := range ds {
		d.RequestID = reqs[owners[k]].ID
		builders[k] = deliveryCreate(client, d)
	}
	return saveAll(ctx, builders, client.Delivery.CreateBulk, func(k int, d *ent.Delivery) { ds[k].ID = d.ID })
}

// bulkSaver is a multi-row INSERT that saves rows of type T.
type bulkSaver[T any] interface {
	Save(context.Context) ([]T, error)
}

// saveAll saves builders with multi-row INSERTs of bulk, in chunks (inChunks), and hands each saved row to
// saved with its index, in order.
func saveAll[B, T any, S bulkSaver[T]](ctx context.Context, builders []B, bulk func(...B) S, saved func(n int, row T)) error {
	rows, err := inChunks(builders, func(c []B) ([]T, error) { return bulk(c...).Save(ctx) })
	if err != nil {
		return err
	}
	for n, row := range rows {
		saved(n, row)
	}
	return nil
}

// maxRowsPerInsert bounds the rows of one multi-row INSERT. A statement takes at most 32,766 bind parameters
// on SQLite and 65,535 on PostgreSQL, and a request or delivery row binds about 14: a full intake batch for a
// server with ten recipients (2,560 deliveries) is already beyond SQLite's limit in one statement.
const maxRowsPerInsert = 1000

// inChunks saves builders maxRowsPerInsert at a time, in order, and returns what each chunk saved, in order.
func inChunks[B, T any](builders []B, save func([]B) ([]T, error)) ([]T, error) {
	if len(builders) <= maxRowsPerInsert {
		return save(builders)
	}
	out := make([]T, 0, len(builders))
	for start := 0; start < len(builders); start += maxRowsPerInsert {
		saved, err := save(builders[start:min(start+maxRowsPerInsert, len(builders))])
		if err != nil {
			return nil, err
		}
		out = append(out, saved...)
	}
	return out, nil
}

// newDelivery is a pending delivery of req to r, due at now, with the recipient's attempts and schedule
// copied in: the row to store (its RequestID is set once req has an ID). A CLI delivery created while no CLI
// is attached is backlog.
func (s *Service) newDelivery(req *ent.Request, r *ent.Recipient, trigger entdelivery.Trigger, now time.Time) *ent.Delivery {
	due := now
	return &ent.Delivery{
		TenantID: req.TenantID, CreatedAt: now, RequestID: req.ID, RecipientID: r.ID, ExpiresAt: req.ExpiresAt,
		Status: entdelivery.StatusPENDING, Trigger: trigger, MaxAttempts: r.MaxAttempts,
		RetrySchedule: entdelivery.RetrySchedule(r.RetrySchedule), NextAttemptAt: &due,
		Backlog: r.Method == recipient.MethodCLI && !s.cfg.CLIConnected(r, now), Lane: LaneOf(r).column(),
	}
}

// deliveryCreate is the builder that inserts d as it stands.
func deliveryCreate(client *ent.Client, d *ent.Delivery) *ent.DeliveryCreate {
	return client.Delivery.Create().
		SetTenantID(d.TenantID).
		SetCreatedAt(d.CreatedAt).
		SetRequestID(d.RequestID).
		SetRecipientID(d.RecipientID).
		SetExpiresAt(d.ExpiresAt).
		SetStatus(d.Status).
		SetTrigger(d.Trigger).
		SetAttemptCount(d.AttemptCount).
		SetMaxAttempts(d.MaxAttempts).
		SetRetrySchedule(d.RetrySchedule).
		SetNillableNextAttemptAt(d.NextAttemptAt).
		SetNillableFirstAttemptAt(d.FirstAttemptAt).
		SetNillableLeaseExpiresAt(d.LeaseExpiresAt).
		SetLeaseOwner(d.LeaseOwner).
		SetNillableAttemptStartedAt(d.AttemptStartedAt).
		SetBacklog(d.Backlog).
		SetLane(d.Lane)
}

// liveServers re-reads the batch's servers inside storeSQLite's transaction, which holds the database's write
// lock until commit, so a server deleted since intake looked it up gets no request, and a deletion waits for
// the requests already being stored (and then cancels their deliveries). Servers the caller already holds
// (Incoming.ServerLocked) are live without a second read.
func (s *Service) liveServers(ctx context.Context, client *ent.Client, items []Incoming) (map[int]bool, error) {
	out := make(map[int]bool, len(items))
	ids := make([]int, 0, len(items))
	seen := map[int]bool{}
	for _, it := range items {
		switch {
		case it.ServerLocked:
			out[it.Server.ID] = true
		case !seen[it.Server.ID]:
			seen[it.Server.ID] = true
			ids = append(ids, it.Server.ID)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	slices.Sort(ids)
	live, err := client.Server.Query().Where(server.IDIn(ids...), server.DeletedAtIsNil()).IDs(ctx)
	if err != nil {
		return nil, storage.Err("delivery.liveServers", "server", err)
	}
	for _, id := range live {
		out[id] = true
	}
	return out, nil
}

// NewRequest is a request to store: as received, or copied by a replay.
type NewRequest struct {
	Method     string
	Path       string
	Query      string
	Header     http.Header
	Body       []byte
	SourceAddr string
	ReplayOf   *int
	// Verified is the outcome of the server's sender verification; nil when it verifies nothing.
	Verified *bool
	// TraceParent is the W3C traceparent of the span that took the request in (intake's, or a replay's), the
	// parent of every claim and attempt of its deliveries; "" when tracing is off.
	TraceParent string
	// EventType is the request's type as its server reads it; "" when none. Recipients subscribed to other
	// types get no delivery of it.
	EventType string
	// SchemaError is why the body did not follow its type's schema, under shadow validation; "" otherwise.
	SchemaError string
}

// StoreRequest stores one request for srv, debits one credit for it (reason says why) and creates one
// pending delivery per recipient. client must be bound to a transaction: all of it commits, or none.
func (s *Service) StoreRequest(ctx context.Context, client *ent.Client, srv *ent.Server, recipients []*ent.Recipient, in NewRequest, reason ledgerentry.Reason, key string) (*ent.Request, []*ent.Delivery, error) {
	stored, err := s.StoreBatch(ctx, client, []Incoming{{Server: srv, Recipients: recipients, Request: in, Key: key}}, reason, Handoff{})
	if err != nil {
		return nil, nil, err
	}
	if stored[0].Err != nil {
		return nil, nil, stored[0].Err
	}
	// StoreBatch's entities are the rows it wrote, bound to no client; the caller gets the request as ent
	// reads it, so its edges load.
	req, err := client.Request.Get(ctx, stored[0].Request.ID)
	if err != nil {
		return nil, nil, storage.Err("delivery.StoreRequest", "request", err)
	}
	return req, stored[0].Deliveries, nil
}

// createDeliveries creates one pending delivery of req per recipient (manual retries).
func (s *Service) createDeliveries(ctx context.Context, client *ent.Client, req *ent.Request, recipients []*ent.Recipient, trigger entdelivery.Trigger) ([]*ent.Delivery, error) {
	now := s.cfg.Now()
	builders := make([]*ent.DeliveryCreate, len(recipients))
	for i, r := range recipients {
		builders[i] = deliveryCreate(client, s.newDelivery(req, r, trigger, now))
	}
	ds, err := client.Delivery.CreateBulk(builders...).Save(ctx)
	if err != nil {
		return nil, storage.Err("delivery.create", "delivery", err)
	}
	changes := make([]Change, len(ds))
	for i, d := range ds {
		changes[i] = Change{TenantID: d.TenantID, ServerID: req.ServerID, RequestID: req.ID, DeliveryID: d.ID,
			Status: d.Status, Kind: KindCreated, Due: d.NextAttemptAt, Lane: LaneOf(recipients[i])}
	}
	s.notify(ctx, changes...)
	return ds, nil
}
