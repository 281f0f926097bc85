package delivery

import (
	"context"
	"fmt"
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
	"github.com/adal-relay/adal/storage"
)

// Incoming is one request to store for a server, with the recipients it goes to.
type Incoming struct {
	Server     *ent.Server
	Recipients []*ent.Recipient
	Request    NewRequest
	// Key is the request's own random identity (sent as X-Adal-Idempotency).
	Key string
	// ServerLocked says the caller read Server, live, in this transaction and holds it shared until commit
	// (intake does): StoreBatch then does not read it again.
	ServerLocked bool
	// Tenant, when set, says the caller locked the server's tenant in this transaction as billing.Reserve
	// locks it, and read this of it (intake does on PostgreSQL): StoreBatch then grants from it rather than
	// locking the tenants again.
	Tenant *billing.Locked
}

// Stored is what became of one Incoming: the request and its deliveries, or why it was refused
// (INSUFFICIENT_CREDITS).
type Stored struct {
	Request    *ent.Request
	Deliveries []*ent.Delivery
	// Claimed are the deliveries stored already claimed under the batch's Handoff, for the caller to start
	// once the transaction commits.
	Claimed []Claimed
	Err     error
}

// StoreBatch stores many requests in the caller's transaction with a handful of statements whatever their
// number: one lock of all its tenants (billing.Reserve), then the paid requests with their deliveries, the
// debit and its ledger entries (on PostgreSQL one statement, the entries those billing.Settle would write; on
// SQLite four, the last two billing.Settle's). The returned entities are the rows as written, bound to no client
// (StoreRequest reads its request back for callers that load edges). Items beyond a tenant's balance are
// refused (Stored.Err), in arrival order, and leave nothing behind. An error return means nothing of the batch
// may be committed. Up to handoff.Slots deliveries, the first in arrival order, are stored claimed.
func (s *Service) StoreBatch(ctx context.Context, client *ent.Client, items []Incoming, reason ledgerentry.Reason, handoff Handoff) ([]Stored, error) {
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
	reservations, err := s.reserve(ctx, client, items, byTenant, wants)
	if err != nil {
		return nil, err
	}
	retention := map[int]int{}
	var paid []int // indexes into items, grouped by tenant in reservation order
	for _, r := range reservations {
		idx := byTenant[r.TenantID]
		retention[r.TenantID] = r.RetentionDays
		paid = append(paid, idx[:r.Granted]...)
		for _, i := range idx[r.Granted:] {
			out[i].Err = fault.E(op, fault.InsufficientCredits, "not enough credits: 1 needed")
		}
	}
	now := s.cfg.Now()
	if len(paid) == 0 {
		return out, nil
	}

	reqs := make([]*ent.Request, len(paid))
	for n, i := range paid {
		it := items[i]
		days := retention[it.Server.TenantID]
		if it.Server.RetentionDays != nil && *it.Server.RetentionDays < days {
			days = *it.Server.RetentionDays
		}
		status := request.StatusPENDING
		if len(it.Recipients) == 0 {
			status = request.StatusFAILED // nobody to deliver to: nothing will ever succeed
		}
		in := it.Request
		if in.Body == nil {
			in.Body = []byte{} // an empty body is still a body: the column holds no NULL (a replay reads one back as nil)
		}
		reqs[n] = &ent.Request{
			TenantID: it.Server.TenantID, ServerID: it.Server.ID, Key: it.Key, Method: in.Method, Path: in.Path,
			Query: in.Query, Headers: in.Header, Body: in.Body, SourceAddr: in.SourceAddr, ReceivedAt: now,
			ExpiresAt: now.Add(time.Duration(days) * 24 * time.Hour), Status: status, ReplayOfID: in.ReplayOf,
		}
	}
	var ds []*ent.Delivery
	var owners []int // for each delivery, the index into paid
	var lanes []Lane
	var recipients []*ent.Recipient
	var claimed []bool
	slots := handoff.Slots
	for n, i := range paid {
		for _, r := range items[i].Recipients {
			d := s.newDelivery(reqs[n], r, entdelivery.TriggerAUTOMATIC, now)
			lane := LaneOf(r)
			claim := lane == LaneDirect && slots > 0
			if claim {
				slots--
				handoff.claim(d, now)
			}
			ds = append(ds, d)
			owners = append(owners, n)
			lanes = append(lanes, lane)
			recipients = append(recipients, r)
			claimed = append(claimed, claim)
		}
	}
	if s.cfg.Postgres {
		// The requests' statement debits them too: billing.Settle's entries, one round trip less while every
		// tenant of the batch is locked.
		if err := insertPostgres(ctx, client, reqs, ds, owners, billing.Debits(reservations), reason, now); err != nil {
			return nil, storage.Err(op, "request", err)
		}
	} else {
		if err := insertEach(ctx, client, reqs, ds, owners); err != nil {
			return nil, storage.Err(op, "request", err)
		}
		// The reference names the request as insertSQL's entries name it on PostgreSQL.
		refs := make([][]string, len(reservations))
		n := 0
		for k, r := range reservations {
			for range r.Granted {
				refs[k] = append(refs[k], fmt.Sprintf("request:%d", reqs[n].ID))
				n++
			}
		}
		if err := s.cfg.Billing.Settle(ctx, client, reservations, reason, refs); err != nil {
			return nil, err
		}
	}

	changes := make([]Change, len(ds))
	for k, d := range ds {
		req := reqs[owners[k]]
		o := &out[paid[owners[k]]]
		o.Deliveries = append(o.Deliveries, d)
		if claimed[k] {
			o.Claimed = append(o.Claimed, Claimed{Claim: claimOf(d, req.ServerID, now), Request: req, Recipient: recipients[k]})
		}
		changes[k] = Change{TenantID: d.TenantID, ServerID: req.ServerID, RequestID: req.ID, DeliveryID: d.ID,
			Status: d.Status, Kind: KindCreated, Due: d.NextAttemptAt, Lane: lanes[k]}
	}
	for n, i := range paid {
		out[i].Request = reqs[n]
	}
	s.notify(ctx, changes...)
	return out, nil
}

// reserve grants the batch its credits: from the tenants its caller locked (Incoming.Tenant) when it locked
// every one of them, else under billing.Reserve's lock.
func (s *Service) reserve(ctx context.Context, client *ent.Client, items []Incoming, byTenant map[int][]int, wants []billing.Want) ([]billing.Reservation, error) {
	locked := make(map[int]billing.Locked, len(byTenant))
	for tid, idx := range byTenant {
		for _, i := range idx {
			if items[i].Tenant == nil {
				return s.cfg.Billing.Reserve(ctx, client, wants)
			}
		}
		locked[tid] = *items[idx[0]].Tenant
	}
	return billing.Grant(wants, locked)
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
			SetNillableReplayOfID(r.ReplayOfID)
	}
	saved, err := inChunks(creates, func(c []*ent.RequestCreate) ([]*ent.Request, error) {
		return client.Request.CreateBulk(c...).Save(ctx)
	})
	if err != nil {
		return err
	}
	for n, r := range saved {
		reqs[n].ID = r.ID
	}
	if len(ds) == 0 {
		return nil
	}
	builders := make([]*ent.DeliveryCreate, len(ds))
	for k, d := range ds {
		d.RequestID = reqs[owners[k]].ID
		builders[k] = deliveryCreate(client, d)
	}
	savedDs, err := inChunks(builders, func(c []*ent.DeliveryCreate) ([]*ent.Delivery, error) {
		return client.Delivery.CreateBulk(c...).Save(ctx)
	})
	if err != nil {
		return err
	}
	for k, d := range savedDs {
		ds[k].ID = d.ID
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
		TenantID: req.TenantID, CreatedAt: now, RequestID: req.ID, RecipientID: r.ID,
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

// liveServers re-reads the batch's servers inside the transaction, holding them shared on Postgres until
// commit, so a server deleted since intake looked it up gets no request, and a deletion waits for the
// requests already being stored (and then cancels their deliveries). Servers the caller already holds
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
	q := client.Server.Query().Where(server.IDIn(ids...), server.DeletedAtIsNil())
	if s.cfg.Postgres {
		q.ForShare()
	}
	live, err := q.IDs(ctx)
	if err != nil {
		return nil, storage.Err("delivery.liveServers", "server", err)
	}
	for _, id := range live {
		out[id] = true
	}
	return out, nil
}
