package inbound

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"hash/fnv"
	"log/slog"
	"sync"
	"time"

	"github.com/lib/pq"
	"go.opentelemetry.io/otel/trace"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/destination"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/ent/server"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/routing"
	"github.com/adal-relay/adal/startstop"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/tracing"
	"github.com/adal-relay/adal/viewer"
)

// The batcher groups accepts that arrive together into one statement: each request is still committed before
// its 202, but shares the commit with its neighbours, and each tenant's credit row is locked once per batch.
// Nothing waits for a batch to fill: a free committer takes whatever is queued. Requests queue by partition
// (their inbound key's hash), so batches committing side by side rarely wait on the same tenants' rows. At
// moderate load one batch, the turn's, takes every partition's queue, since one commit costs the database less
// than several small ones; a partition whose queue reaches the crowd commits beside it, one batch at a time.
type batcher struct {
	client   *ent.Client
	delivery *delivery.Service
	dispatch Dispatcher         // nil: deliveries wait in the table for the dispatcher's claim
	noCredit func(tenantID int) // nil: nobody hears of refusals for want of credit
	logger   *slog.Logger
	maxBatch int
	// crowd is the queue length at which a partition commits without waiting for the turn.
	crowd int
	// way reads a batch's servers and stores it, as the database's dialect does best (storeWays).
	way storeWay
	// servers caches what the batches read of their servers, where way uses it (PostgreSQL); nil: none.
	servers *serverCache
	// commitBatch stores a batch and answers its requests: commit, or a stand-in in tests of the turn.
	commitBatch func([]*pendingAccept)
	tracer      *tracing.Tracer // traces each commit; nil: off
	wg          sync.WaitGroup

	mu     sync.Mutex
	wake   *sync.Cond         // a committer may have something to take, or intake is stopping
	queues [][]*pendingAccept // by partition, in arrival order
	queued int                // in all queues
	flying []bool             // by partition: a crowded batch of its requests is in flight
	turn   bool               // the turn's batch is in flight
	first  int                // the partition the next turn's batch takes first, so that each gets its turn first
	// stopped: intake is shutting down; committers finish the batches in flight and take no more.
	stopped bool
}

type pendingAccept struct {
	ctx  context.Context
	key  string // the server's inbound key; the batch fills in item.Server and item.Recipients
	item delivery.Incoming
	done chan acceptResult
}

type acceptResult struct {
	req *ent.Request
	err error
}

var errStopped = errors.New("intake is shutting down")

// newBatcher starts a batcher, with workers committers; the dialect comes with d (delivery.Service.Dialect).
func newBatcher(client *ent.Client, d *delivery.Service, dispatch Dispatcher, noCredit func(int), logger *slog.Logger, workers, maxBatch int, tracer *tracing.Tracer) *batcher {
	b := &batcher{
		client: client, delivery: d, dispatch: dispatch, noCredit: noCredit, logger: logger, maxBatch: maxBatch,
		crowd: crowdOf(maxBatch), way: storeWays.Of(d.Dialect()), servers: newServerCache(), tracer: tracer,
	}
	b.commitBatch = b.commit
	b.start(workers)
	return b
}

// crowdOf is the crowd for batches of at most maxBatch: a quarter of it (64 of the default 256), a batch big
// enough that its round trips and commit are spread thin, and that arrives during one commit only once the
// load nears what one committer can take.
func crowdOf(maxBatch int) int { return max(1, maxBatch/4) }

// start runs the committers, as many as partitions.
func (b *batcher) start(workers int) {
	b.wake = sync.NewCond(&b.mu)
	b.queues = make([][]*pendingAccept, workers)
	b.flying = make([]bool, workers)
	for range workers {
		b.wg.Add(1)
		go b.run()
	}
}

// partitionOf is the partition of requests for the server with this inbound key.
func (b *batcher) partitionOf(key string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(len(b.queues)))
}

// submit queues one accept and waits for its batch to commit (or for ctx to end: the request may then still
// commit, and the sender — who got no answer — will retry, as it must for any lost response).
func (b *batcher) submit(ctx context.Context, key string, item delivery.Incoming) (*ent.Request, error) {
	p := &pendingAccept{ctx: ctx, key: key, item: item, done: make(chan acceptResult, 1)}
	if err := b.enqueue(p); err != nil {
		return nil, err
	}
	select {
	case r := <-p.done:
		return r.req, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// enqueue queues accepts, each on its partition, together — as if they arrived during one commit — and wakes a
// committer for each that gives one something to take. Once intake is shutting down it refuses them.
func (b *batcher) enqueue(accepts ...*pendingAccept) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return errStopped
	}
	for _, p := range accepts {
		part := b.partitionOf(p.key)
		b.queues[part] = append(b.queues[part], p)
		b.queued++
		if !b.flying[part] && (!b.turn || len(b.queues[part]) >= b.crowd) {
			b.wake.Signal()
		}
	}
	return nil
}

// run is a committer: it commits the batches next hands it until intake stops.
func (b *batcher) run() {
	defer b.wg.Done()
	b.mu.Lock()
	defer b.mu.Unlock()
	for !b.stopped {
		batch, crowded := b.next()
		if len(batch) == 0 {
			b.wake.Wait()
			continue
		}
		b.mu.Unlock()
		b.commitSafely(batch)
		b.mu.Lock()
		if crowded >= 0 {
			b.flying[crowded] = false
		} else {
			b.turn = false
		}
		b.wake.Broadcast() // a partition or the turn is free again: what waited for it may go
	}
}

// commitSafely commits batch, and if that panics answers every request of it not answered yet with an error
// (a 503: the sender retries), never a 202 for what may not be stored; the committer goes on with the next.
func (b *batcher) commitSafely(batch []*pendingAccept) {
	err := startstop.Recover(b.logger, "intake commit", func() { b.commitBatch(batch) })
	if err == nil {
		return
	}
	for _, p := range batch {
		select {
		case p.done <- acceptResult{err: fault.Wrap("inbound.Accept", fault.Unavailable, err)}:
		default: // answered before the panic
		}
	}
}

// next takes the next batch to commit, if any, with mu held: the queue of a crowded partition with no crowded
// batch in flight, which it marks in flight and returns, or, when the turn is free, what the partitions with no
// crowded batch in flight have queued — all of it while that is less than the crowd, and otherwise one
// partition's, so that under load the others commit beside it, each its own; crowded is then -1.
func (b *batcher) next() (batch []*pendingAccept, crowded int) {
	for p, q := range b.queues {
		if len(q) >= b.crowd && !b.flying[p] {
			b.flying[p] = true
			return b.take(p, nil), p
		}
	}
	if b.turn || b.queued == 0 {
		return nil, -1
	}
	free := 0 // queued in partitions with no crowded batch in flight
	for p, q := range b.queues {
		if !b.flying[p] {
			free += len(q)
		}
	}
	n := len(b.queues)
	for i := range n {
		p := (b.first + i) % n
		if len(b.queues[p]) == 0 || b.flying[p] {
			continue
		}
		batch = b.take(p, batch)
		if free >= b.crowd || len(batch) == b.maxBatch {
			break // under load: the other partitions commit beside this batch once crowded
		}
	}
	if len(batch) == 0 { // what is queued waits for the crowded batches of its partitions in flight
		return nil, -1
	}
	b.first = (b.first + 1) % n
	b.turn = true
	return batch, -1
}

// take moves the oldest of partition p's queue to batch, as many as fit in maxBatch.
func (b *batcher) take(p int, batch []*pendingAccept) []*pendingAccept {
	q := b.queues[p]
	k := min(len(q), b.maxBatch-len(batch))
	if batch == nil {
		batch = make([]*pendingAccept, 0, k)
	}
	batch = append(batch, q[:k]...)
	rest := copy(q, q[k:])
	clear(q[rest:]) // the queue's array must not keep answered requests alive
	b.queues[p] = q[:rest]
	b.queued -= k
	return batch
}

// close stops the committers after the batches in flight, and answers what is still queued.
func (b *batcher) close() {
	b.mu.Lock()
	b.stopped = true
	b.wake.Broadcast()
	b.mu.Unlock()
	b.wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	for p, q := range b.queues {
		for _, a := range q {
			a.done <- acceptResult{err: errStopped}
		}
		b.queues[p] = nil
	}
	b.queued = 0
}

func (b *batcher) commit(batch []*pendingAccept) {
	const op = "inbound.Accept"
	live := batch[:0:0]
	for _, p := range batch {
		if p.ctx.Err() != nil {
			p.done <- acceptResult{err: p.ctx.Err()} // the sender is gone: store nothing it was not told of
			continue
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return
	}
	var span trace.Span
	if b.tracer.On() {
		span = b.startCommit(live)
	}
	results, err := b.store(live)
	if span != nil {
		b.endCommit(span, live, results, err)
	}
	if err != nil && len(live) > 1 && refusedData(err) {
		// One request the database refuses (a value it cannot store) must not cost its neighbours their
		// acceptance: nothing of the batch was stored, so each is tried again in a transaction of its own.
		b.logger.Warn("store accepted batch: a request was refused; storing one by one", "size", len(live), "err", err)
		for _, p := range live {
			b.commit([]*pendingAccept{p})
		}
		return
	}
	for i, p := range live {
		if err != nil {
			p.done <- acceptResult{err: fault.Wrap(op, fault.Internal, err)}
			continue
		}
		p.done <- results[i]
	}
	if err != nil {
		b.logger.Error("store accepted batch", "size", len(live), "err", err)
	}
}

// refusedData reports whether PostgreSQL refused a value (SQLSTATE class 22, data exception, or 23, integrity
// constraint violation) rather than failing as a whole: such an error belongs to one request, not the batch.
func refusedData(err error) bool {
	if fault.KindOf(err) == fault.Conflict { // a constraint violation, as storage.Err reports it
		return true
	}
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) {
		return false
	}
	class := pqErr.Code.Class()
	return class == "22" || class == "23"
}

// store stores the batch: the servers its keys name, then the requests of the live servers. On PostgreSQL the
// servers are read without a lock, and the batch is stored by one statement of its own that locks them and
// their tenants (delivery.StoreBatch): two round trips and one commit, half the round trips of a transaction
// around the read and the write. Only a batch too large for one statement (delivery.OneStatement) is stored in a
// transaction. Deliveries the dispatcher has free workers for are stored claimed and started once the batch
// commits.
func (b *batcher) store(live []*pendingAccept) ([]acceptResult, error) {
	ctx := viewer.SystemContext(context.Background())
	results := make([]acceptResult, len(live))
	handoff, claimed, err := b.way(b, ctx, live, results)
	if b.dispatch != nil {
		if err != nil {
			claimed = nil // nothing was stored: nothing was claimed
		}
		b.dispatch.Run(handoff, claimed)
	}
	return results, err
}

// storeWay reads the servers of live and stores their requests (write), filling in results.
type storeWay func(b *batcher, ctx context.Context, live []*pendingAccept, results []acceptResult) (delivery.Handoff, []delivery.Claimed, error)

// storeWays are how each dialect stores a batch (store).
var storeWays = storage.PerDialect[storeWay]{Postgres: (*batcher).storeUnlocked, SQLite: (*batcher).storeInTx}

// storeUnlocked stores the batch with servers read without a lock, from the cache where it has them, and lets
// the batch's statement lock them and check that each is still as read (delivery.Incoming.ServerVersion). The
// requests of a server that changed are stored by a second statement, with the server read again.
func (b *batcher) storeUnlocked(ctx context.Context, live []*pendingAccept, results []acceptResult) (handoff delivery.Handoff, claimed []delivery.Claimed, err error) {
	now := b.delivery.Now()
	if !delivery.OneStatement(incomingOf(live)) {
		// Several statements in a transaction, which cannot store some requests again after the others: the
		// servers are read afresh, as the statements find them.
		servers, _, err := serversPostgres(ctx, b.client, keysOf(live), now)
		if err != nil {
			return handoff, nil, err
		}
		items, stored := b.items(live, servers, results, false)
		err = storage.InTx(ctx, b.client, func(ctx context.Context, tx *ent.Client) error {
			handoff, claimed, err = b.write(ctx, tx, items, stored, results)
			return err
		})
		return handoff, claimed, err
	}
	servers, versions, err := b.readServers(ctx, keysOf(live), now)
	if err != nil {
		return handoff, nil, err
	}
	items, stored := b.items(live, servers, results, false)
	for i := range items {
		items[i].ServerVersion = versions[items[i].Server.ID]
	}
	handoff, claimed, err = b.write(ctx, b.client, items, stored, results)
	if err != nil {
		return handoff, claimed, err
	}
	var again []int // indexes into live of the requests of servers that changed
	var stale []int // servers that changed, or were found deleted: the cache drops them
	for k, i := range stored {
		switch {
		case errors.Is(results[i].err, delivery.ErrServerChanged):
			again = append(again, i)
			stale = append(stale, items[k].Server.ID)
		case fault.KindOf(results[i].err) == fault.NotFound:
			stale = append(stale, items[k].Server.ID)
		}
	}
	if b.servers != nil && len(stale) > 0 {
		b.servers.forget(stale)
	}
	if len(again) == 0 {
		return handoff, claimed, nil
	}
	// The statement committed: its deliveries start now, and the requests it left are stored as read anew.
	if b.dispatch != nil {
		b.dispatch.Run(handoff, claimed)
	}
	return b.storeAgain(ctx, live, again, results, now)
}

// storeAgain stores the requests of live at again, whose servers changed after they were read, with their
// servers read anew, and fills in their results. A failure fails these requests only: the others are stored.
func (b *batcher) storeAgain(ctx context.Context, live []*pendingAccept, again []int, results []acceptResult, now time.Time) (handoff delivery.Handoff, claimed []delivery.Claimed, err error) {
	retry := make([]*pendingAccept, len(again))
	for k, i := range again {
		retry[k] = live[i]
	}
	sub := make([]acceptResult, len(retry))
	servers, _, err := serversPostgres(ctx, b.client, keysOf(retry), now)
	if err == nil {
		items, stored := b.items(retry, servers, sub, false)
		handoff, claimed, err = b.write(ctx, b.client, items, stored, sub)
	}
	for k, i := range again {
		results[i] = sub[k]
		if err != nil {
			results[i] = acceptResult{err: fault.Wrap("inbound.Accept", fault.Unavailable, err)}
		}
	}
	if err != nil {
		return handoff, nil, nil // a failed statement claimed nothing: the slots it was offered go back
	}
	return handoff, claimed, nil
}

// incomingOf is the requests of batch, before their servers are read.
func incomingOf(batch []*pendingAccept) []delivery.Incoming {
	out := make([]delivery.Incoming, len(batch))
	for i, p := range batch {
		out[i] = p.item
	}
	return out
}

// readServers returns the live servers with these keys by key, with their versions by ID: from the cache, and
// for the keys it does not hold, read (and cached).
func (b *batcher) readServers(ctx context.Context, keys []string, now time.Time) (map[string]*ent.Server, map[int]string, error) {
	if b.servers == nil {
		return serversPostgres(ctx, b.client, keys, now)
	}
	servers, versions, missing := b.servers.get(keys, now)
	if len(missing) == 0 {
		return servers, versions, nil
	}
	read, readVersions, err := serversPostgres(ctx, b.client, missing, now)
	if err != nil {
		return nil, nil, err
	}
	b.servers.put(read, readVersions, now)
	for k, srv := range read {
		servers[k], versions[srv.ID] = srv, readVersions[srv.ID]
	}
	return servers, versions, nil
}

// storeInTx reads the servers in the batch's transaction, which holds the database until commit (SQLite).
func (b *batcher) storeInTx(ctx context.Context, live []*pendingAccept, results []acceptResult) (handoff delivery.Handoff, claimed []delivery.Claimed, err error) {
	err = storage.InTx(ctx, b.client, func(ctx context.Context, tx *ent.Client) error {
		servers, err := serversSQLite(ctx, tx, keysOf(live), b.delivery.Now())
		if err != nil {
			return err
		}
		items, stored := b.items(live, servers, results, true)
		handoff, claimed, err = b.write(ctx, tx, items, stored, results)
		return err
	})
	return handoff, claimed, err
}

// write stores items, the requests of live at the indexes stored, reserving the dispatcher's free workers for
// their direct deliveries, and fills in their results.
func (b *batcher) write(ctx context.Context, tx *ent.Client, items []delivery.Incoming, stored []int, results []acceptResult) (handoff delivery.Handoff, claimed []delivery.Claimed, err error) {
	if len(items) == 0 {
		return handoff, nil, nil
	}
	if b.dispatch != nil {
		handoff = b.dispatch.Reserve(directDeliveries(items))
		defer func() {
			if v := recover(); v != nil {
				// The slots go back; deliveries stored claimed on them, if the batch committed, wait for
				// their lease to lapse and the rescuer, as after a crash.
				b.dispatch.Run(handoff, nil)
				panic(v)
			}
		}()
	}
	out, err := b.delivery.StoreBatch(ctx, tx, items, billing.ReasonRequestAccepted, handoff)
	if err != nil {
		return handoff, nil, err
	}
	for k, i := range stored {
		results[i] = acceptResult{req: out[k].Request, err: out[k].Err}
		claimed = append(claimed, out[k].Claimed...)
		if b.noCredit != nil && out[k].Err != nil && fault.KindOf(out[k].Err) == fault.InsufficientCredits {
			b.noCredit(items[k].Server.TenantID)
		}
	}
	return handoff, claimed, nil
}

// items are the requests of live to store, those of the servers found, and the index into live of each;
// results gets NOT_FOUND for the others. locked says the servers were read under a lock held until commit.
func (b *batcher) items(live []*pendingAccept, servers map[string]*ent.Server, results []acceptResult, locked bool) ([]delivery.Incoming, []int) {
	items := make([]delivery.Incoming, 0, len(live))
	stored := make([]int, 0, len(live))
	for i, p := range live {
		srv := servers[p.key]
		if srv == nil {
			results[i].err = fault.E("inbound.Accept", fault.NotFound, "server not found")
			continue
		}
		item := p.item
		item.Server, item.Recipients, item.ServerLocked = srv, srv.Edges.Recipients, locked
		items = append(items, item)
		stored = append(stored, i)
	}
	return items, stored
}

// directDeliveries counts, by tenant, the deliveries items will get that a direct dispatcher may take at once.
func directDeliveries(items []delivery.Incoming) map[int]int {
	want := map[int]int{}
	for _, it := range items {
		for _, r := range it.Recipients {
			if delivery.LaneOf(r) == delivery.LaneDirect {
				want[it.Server.TenantID]++
			}
		}
	}
	return want
}

// keysOf is the distinct inbound keys of batch.
func keysOf(batch []*pendingAccept) []string {
	keys := make([]string, 0, len(batch))
	seen := make(map[string]bool, len(batch))
	for _, p := range batch {
		if !seen[p.key] {
			seen[p.key] = true
			keys = append(keys, p.key)
		}
	}
	return keys
}

// serversSQLite loads the live servers with these keys, current or replaced, with their live recipients, by
// the keys they accept at now.
func serversSQLite(ctx context.Context, tx *ent.Client, keys []string, now time.Time) (map[string]*ent.Server, error) {
	list, err := tx.Server.Query().
		Where(server.Or(server.InboundKeyIn(keys...), server.PreviousInboundKeyIn(keys...)), server.DeletedAtIsNil(),
			server.KindEQ(server.KindINBOUND)).
		WithRecipients(func(q *ent.RecipientQuery) {
			q.Where(recipient.DeletedAtIsNil()).Order(ent.Asc(recipient.FieldID))
		}).
		All(ctx)
	if err != nil {
		return nil, storage.Err("inbound.Accept", "server", err)
	}
	out := make(map[string]*ent.Server, len(list))
	for _, s := range list {
		byKey(out, s, now)
	}
	return out, nil
}

// byKey files srv under each key it accepts at now: a replaced key found after its grace is not filed, so it
// answers 404.
func byKey(out map[string]*ent.Server, srv *ent.Server, now time.Time) {
	for _, k := range routing.InboundKeys(srv, now) {
		out[k] = srv
	}
}

// serversSQL reads the live servers with the given keys (current or replaced by a rotation: both columns are
// uniquely indexed), with their versions (delivery.ServerVersionSQL), and their live recipients in one round
// trip, where ent's eager loading takes two: one row per recipient, or one with no recipient for a server that
// has none. Of a recipient it reads what intake uses (recipientRow).
// It takes no lock: the batch's statement locks the servers it stores requests for, stores none for a server
// deleted since this read, and none for one whose version changed.
var serversSQL = storage.Prepared(`
SELECT s.id, s.tenant_id, s.created_at, s.name, s.inbound_key, s.deliver_pending_on_connect, s.retention_days,
	s.previous_inbound_key, s.previous_key_expires_at, s.kind, s.event_type_header, s.event_type_path,
	s.schema_validation, s.version, r.id, r.tenant_id, r.server_id, r.method,
	r.url, r.max_attempts, r.retry_schedule, r.send_idempotency_key, r.timeout_seconds, r.state, r.cli_seen_until,
	r.routing_filter, r.signing_secret, r.previous_signing_secret, r.previous_secret_expires_at,
	r.signature_headers, r.max_concurrency, r.send_traceparent, r.destination_url, r.destination, r.event_types,
	r.transform_version_id, r.auth
FROM (
	SELECT servers.*, ` + delivery.ServerVersionSQL("servers") + ` AS version FROM servers
	WHERE (inbound_key = ANY($1) OR previous_inbound_key = ANY($1)) AND deleted_at IS NULL AND kind = 'INBOUND'
) AS s
LEFT JOIN recipients r ON r.server_id = s.id AND r.deleted_at IS NULL
ORDER BY s.id, r.id`)

// serversPostgres loads the live servers with these keys, current or replaced, with their live recipients, by
// the keys they accept at now, and their versions by ID (serversSQL).
func serversPostgres(ctx context.Context, client *ent.Client, keys []string, now time.Time) (map[string]*ent.Server, map[int]string, error) {
	const op = "inbound.Accept"
	rows, err := client.QueryContext(ctx, serversSQL, pq.Array(keys))
	if err != nil {
		return nil, nil, storage.Err(op, "server", err)
	}
	defer rows.Close()
	out := make(map[string]*ent.Server, len(keys))
	versions := make(map[int]string, len(keys))
	var s *ent.Server
	for rows.Next() {
		var row ent.Server
		var retention sql.NullInt64
		var previousKey sql.NullString
		var previousUntil sql.NullTime
		var version string
		var r recipientRow
		if err := rows.Scan(&row.ID, &row.TenantID, &row.CreatedAt, &row.Name, &row.InboundKey,
			&row.DeliverPendingOnConnect, &retention, &previousKey, &previousUntil, &row.Kind, &row.EventTypeHeader,
			&row.EventTypePath, &row.SchemaValidation, &version, &r.id,
			&r.tenantID, &r.serverID, &r.method, &r.url, &r.maxAttempts, &r.retrySchedule, &r.sendIdempotencyKey,
			&r.timeoutSeconds, &r.state, &r.cliSeenUntil, &r.routingFilter, &r.signingSecret,
			&r.previousSigningSecret, &r.previousSecretExpiresAt, &r.signatureHeaders, &r.maxConcurrency,
			&r.sendTraceparent, &r.destinationURL, &r.destination, &r.eventTypes, &r.transformVersionID,
			&r.auth); err != nil {
			return nil, nil, fault.Wrap(op, fault.Internal, err)
		}
		if s == nil || s.ID != row.ID {
			s = &row
			if retention.Valid {
				days := int(retention.Int64)
				s.RetentionDays = &days
			}
			if previousKey.Valid {
				s.PreviousInboundKey = &previousKey.String
			}
			if previousUntil.Valid {
				s.PreviousKeyExpiresAt = &previousUntil.Time
			}
			s.Edges.Recipients = []*ent.Recipient{} // as ent's eager loading leaves a server without recipients
			byKey(out, s, now)
			versions[s.ID] = version
		}
		if r.id.Valid {
			s.Edges.Recipients = append(s.Edges.Recipients, r.recipient())
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, storage.Err(op, "server", err)
	}
	return out, versions, nil
}

// recipientRow is a recipient's columns as the outer join returns them (all NULL for a server without one):
// those intake uses, to store its deliveries and to hand the first attempts to workers. Its health counters
// are not among them; the attempts' outcomes are recorded against the rows as they stand.
type recipientRow struct {
	id, tenantID, serverID, maxAttempts, timeoutSeconds sql.NullInt64
	maxConcurrency                                      sql.NullInt64
	method, url, retrySchedule, state                   sql.NullString
	routingFilter                                       sql.NullString
	signatureHeaders                                    sql.NullString
	sendIdempotencyKey, sendTraceparent                 sql.NullBool
	cliSeenUntil, previousSecretExpiresAt               sql.NullTime
	signingSecret, previousSigningSecret                []byte // the handed-over first attempts are signed
	destinationURL                                      sql.NullString
	destination                                         []byte // a broker recipient's settings, as JSON
	eventTypes                                          []byte // its subscription, as JSON
	transformVersionID                                  sql.NullInt64
	auth                                                []byte // destauth.Config as JSON
}

func (r *recipientRow) recipient() *ent.Recipient {
	at := func(t sql.NullTime) *time.Time {
		if !t.Valid {
			return nil
		}
		return &t.Time
	}
	rec := &ent.Recipient{
		ID: int(r.id.Int64), TenantID: int(r.tenantID.Int64), ServerID: int(r.serverID.Int64),
		Method: recipient.Method(r.method.String), URL: r.url.String, MaxAttempts: int(r.maxAttempts.Int64),
		RetrySchedule: recipient.RetrySchedule(r.retrySchedule.String), SendIdempotencyKey: r.sendIdempotencyKey.Bool,
		TimeoutSeconds: int(r.timeoutSeconds.Int64), State: recipient.State(r.state.String),
		CliSeenUntil: at(r.cliSeenUntil), SigningSecret: r.signingSecret, PreviousSigningSecret: r.previousSigningSecret,
		PreviousSecretExpiresAt: at(r.previousSecretExpiresAt), SignatureHeaders: recipient.SignatureHeaders(r.signatureHeaders.String),
		SendTraceparent: r.sendTraceparent.Bool,
	}
	if r.routingFilter.Valid {
		rec.RoutingFilter = &r.routingFilter.String
	}
	if r.maxConcurrency.Valid {
		n := int(r.maxConcurrency.Int64)
		rec.MaxConcurrency = &n
	}
	rec.DestinationURL = r.destinationURL.String
	if len(r.eventTypes) > 0 {
		// A subscription that does not read back subscribes to nothing rather than to everything.
		if json.Unmarshal(r.eventTypes, &rec.EventTypes) != nil {
			rec.EventTypes = []string{"\x00"}
		}
	}
	if r.transformVersionID.Valid {
		id := int(r.transformVersionID.Int64)
		rec.TransformVersionID = &id
	}
	rec.Auth = r.auth
	if len(r.destination) > 0 {
		var d destination.Settings
		// Written by routing from a validated value: a row that does not read back leaves the recipient
		// without its settings, and the broker refuses its attempts, rather than intake failing.
		if json.Unmarshal(r.destination, &d) == nil {
			rec.Destination = &d
		}
	}
	return rec
}
