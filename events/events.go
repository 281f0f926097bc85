// Package events is the live-event bus behind the deliveryUpdated GraphQL subscription: whoever creates or
// changes a delivery publishes a small Event (IDs and the new status), and every subscriber whose Filter
// matches gets it on a channel.
//
// Two implementations share the Bus interface so the relay does not care which database it runs on: Local
// fans out inside one process (the SQLite deployment), Postgres crosses processes with LISTEN/NOTIFY (N
// stateless processes on one database). Both follow the Start/Stop service pattern.
//
// # Events are hints, not the record
//
// An Event carries no more than identifiers and a status: the subscriber reads everything else (attempts, HTTP
// codes, nextAttemptAt) from the database, under its own viewer and so under its own tenant's privacy rules.
// Keeping payloads small keeps NOTIFY under its 8000-byte limit and keeps the bus from becoming a second,
// possibly stale, copy of the data. It also means losing an event is recoverable, which is why the bus never
// blocks: a subscriber that falls behind or misses events during a reconnect gets a marker event
// (KindOverflow, KindResync) telling it to re-read the state instead of being waited for.
//
// # Publish after commit
//
// Callers publish AFTER the transaction that made the change commits, never inside it:
//
//	if err := tx.Commit(); err != nil {
//		return err
//	}
//	// WithoutCancel: the change is committed, so the event must go out even if the HTTP client that caused it
//	// has already hung up; the timeout keeps a stuck database from holding the caller.
//	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
//	defer cancel()
//	if err := bus.Publish(pctx, evs...); err != nil {
//		logger.Warn("publish delivery events", "err", err) // the change stands; subscribers resync later
//	}
//
// Publishing before the commit would let a subscriber read the old state and never be told again, and would
// announce changes a rollback undoes. A failed publish is logged, not returned: the data is committed and the
// event only a hint. One rule for both databases (SQLite cannot make NOTIFY part of a transaction) keeps
// callers from depending on the database they run on.
package events

import (
	"context"
	"errors"
)

// Kinds of Event. The first three describe a change to a delivery; KindOverflow and KindResync are synthetic,
// made by the bus itself, and mean "you may have missed events: re-read what you show".
const (
	// KindCreated: a delivery was created (a request was accepted, or a retry/replay made a new one).
	KindCreated = "created"
	// KindUpdated: a delivery changed state or schedule (status, nextAttemptAt, superseded).
	KindUpdated = "updated"
	// KindAttempt: an attempt on the delivery was recorded (its outcome is in the database).
	KindAttempt = "attempt"
	// KindBulkJob: a bulk job progressed, or ended (its state is in the database).
	KindBulkJob = "bulk"
	// KindOverflow is sent by the bus to a subscriber whose buffer filled up: the events after it were dropped
	// until the subscriber caught up. Its IDs are the subscriber's Filter, so it says which scope to re-read.
	KindOverflow = "overflow"
	// KindResync is sent by the Postgres bus to every subscriber after its listener reconnected to the
	// database: notifications sent while the connection was down are lost for good. Its IDs are the
	// subscriber's Filter, like KindOverflow.
	KindResync = "resync"
)

// DefaultBuffer is how many events a subscriber may have waiting before the bus starts dropping them. It is
// sized for a burst such as a request fanned out to a few hundred recipients, while a subscriber that is
// really stuck costs only a few kilobytes.
const DefaultBuffer = 256

// DefaultChannel is the PostgreSQL NOTIFY channel the Postgres bus uses unless WithChannel says otherwise.
const DefaultChannel = "adal_events"

// ErrNotRunning is returned by Subscribe on a bus that was never started or has been stopped: a subscription
// there would never receive anything, and its channel would never be closed by Stop.
var ErrNotRunning = errors.New("events: bus is not running")

// ErrEventTooLarge is returned by the Postgres bus's Publish for an event that does not fit in one NOTIFY
// payload on its own. Events are IDs plus two short strings, so this means a caller put something in Status or
// Kind that belongs in the database.
var ErrEventTooLarge = errors.New("events: event too large for one notification")

// Event says that a delivery was created or changed; payloads stay small (IDs + state) and subscribers read
// the rest. The short JSON names keep more events in each 8000-byte NOTIFY payload.
// Decoding ignores fields it does not know, so processes of different versions can share the channel during a
// rolling deploy as long as fields are only added.
type Event struct {
	// TenantID owns the delivery; it is what keeps one tenant's events away from another's subscribers.
	TenantID int `json:"t"`
	// ServerID is the Adal server (inbound endpoint) the request came in on.
	ServerID int `json:"s"`
	// RequestID is the accepted webhook request the delivery belongs to.
	RequestID int `json:"r"`
	// DeliveryID is the delivery that was created or changed; zero on the synthetic overflow/resync events.
	DeliveryID int `json:"d"`
	// Status is the delivery status after the change, so a list can recolour a row without a read.
	Status string `json:"st"`
	// Kind is what happened: KindCreated, KindUpdated, KindAttempt, KindBulkJob, or the synthetic
	// KindOverflow/KindResync.
	Kind string `json:"k"`
	// BulkJobID is the bulk job that progressed or ended (KindBulkJob); such an event names no server or
	// request, so only subscribers of that job (Filter.BulkJobID) get it.
	BulkJobID int `json:"b,omitempty"`
}

// Bus carries Events from the code that changes deliveries to the subscriptions that show them.
type Bus interface {
	// Publish sends events to every matching subscriber, in order. It never blocks on slow subscribers: a
	// subscriber whose buffer is full loses events and is told so with a KindOverflow event. Call it after
	// the change is committed (see the package documentation).
	Publish(ctx context.Context, evs ...Event) error
	// Subscribe returns a channel of the events matching f. The channel is closed when ctx is done or the
	// bus stops, so ranging over it ends by itself; the subscriber must not close it.
	Subscribe(ctx context.Context, f Filter) (<-chan Event, error)
}

// Service is a Bus with its lifecycle, so the relay can hold whichever implementation its database calls for.
type Service interface {
	Bus
	// Start makes the bus ready for subscribers; it runs until ctx is done or Stop is called.
	Start(ctx context.Context) error
	// Stop closes every subscriber's channel and waits for the bus's goroutines to exit.
	Stop()
}

// Filter selects the events a subscriber receives; a zero field matches any value. The bus does not know who
// is asking, so the caller (the subscription resolver) must set TenantID from the viewer: TenantID 0 sees
// every tenant's events and is only for operators.
type Filter struct {
	// TenantID keeps to one tenant's events; 0 (all tenants) is for operators only.
	TenantID int
	// ServerID keeps to one server's events; 0 for any.
	ServerID int
	// RequestID keeps to one request's events (the request page); 0 for any.
	RequestID int
	// BulkJobID keeps to one bulk job's events; 0 for none: delivery subscribers never get a job's.
	BulkJobID int
}

// Match reports whether e is within f. A synthetic event names the scope that may have missed events — a
// tenant, say, with no server or request — and reaches every subscriber within it; it never crosses tenants. A
// bulk job's events reach its own subscribers only, and theirs no delivery events.
func (f Filter) Match(e Event) bool {
	synthetic := e.Kind == KindOverflow || e.Kind == KindResync
	within := func(want, got int) bool { return want == 0 || want == got || (synthetic && got == 0) }
	return (f.TenantID == 0 || f.TenantID == e.TenantID) && within(f.ServerID, e.ServerID) &&
		within(f.RequestID, e.RequestID) && (f.BulkJobID == e.BulkJobID || (synthetic && e.BulkJobID == 0))
}

// Option tunes a bus at construction.
type Option func(*config)

type config struct {
	buffer  int
	channel string
}

func newConfig(opts []Option) config {
	c := config{buffer: DefaultBuffer, channel: DefaultChannel}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithBuffer sets how many events each subscriber may have waiting (DefaultBuffer if n < 1). Larger absorbs
// longer bursts; smaller bounds memory per stuck subscriber.
func WithBuffer(n int) Option {
	return func(c *config) {
		if n >= 1 {
			c.buffer = n
		}
	}
}

// WithChannel sets the NOTIFY channel of the Postgres bus (Local ignores it). NOTIFY channels are per database,
// not per schema, so two Adal deployments sharing one database in different schemas must use different
// channels, or each would deliver the other's events to subscribers with colliding tenant IDs.
func WithChannel(name string) Option {
	return func(c *config) {
		if name != "" {
			c.channel = name
		}
	}
}
