package events

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/lib/pq"

	"github.com/adal-relay/adal/startstop"
)

// maxPayload is the largest NOTIFY payload PostgreSQL accepts in its default configuration: it must be
// shorter than 8000 bytes.
const maxPayload = 7999

// The listener retries quickly at first because subscribers watch deliveries live and every second of outage
// is a second of missed events; it backs off to maxReconnect so a long database outage is not hammered.
// maxReconnect also bounds how long Stop can wait for the listener to notice it was closed mid-backoff.
const (
	minReconnect = 250 * time.Millisecond
	maxReconnect = 10 * time.Second
)

// Postgres is the cross-process Bus: Publish sends NOTIFY through the shared *sql.DB, and a
// dedicated lib/pq Listener connection per process receives every notification, its own included, and fans
// them out to that process's subscribers. Going through the database even for local subscribers gives every
// process the same order of events.
type Postgres struct {
	dsn     string
	db      *sql.DB
	logger  *slog.Logger
	channel string
	hub     *hub

	startstop.BaseStartStop
}

var _ Service = (*Postgres)(nil)

// NewPostgres returns a stopped cross-process bus. dsn opens the listener's own connection (a LISTEN holds a
// connection for the life of the process, so it cannot come from db's pool); db is used to publish. A nil
// logger discards. Call Start before Subscribe; Publish works without Start, for processes that only publish.
func NewPostgres(dsn string, db *sql.DB, logger *slog.Logger, opts ...Option) (*Postgres, error) {
	if db == nil {
		return nil, errors.New("events: NewPostgres needs a *sql.DB to publish with")
	}
	// Parse now so a bad DSN fails at construction, not at the first reconnect.
	if _, err := pq.NewConnector(dsn); err != nil {
		return nil, fmt.Errorf("events: listener dsn: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := newConfig(opts)
	return &Postgres{dsn: dsn, db: db, logger: logger, channel: c.channel, hub: newHub(c.buffer)}, nil
}

// Start connects the listener and LISTENs on the channel; when it returns nil, every event published from then
// on, by any process, reaches this process's subscribers. It fails if the first connection attempt fails
// (a wrong DSN or a database that is down at boot should stop the process, not be retried silently), or
// when ctx ends first. After that the listener reconnects by itself, and subscribers get a KindResync event
// for what they may have missed. The bus runs until ctx is done or Stop is called; starting a running bus does
// nothing, and a stopped bus can be started again.
func (p *Postgres) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx, ok, stopped := p.StartInit(ctx)
	if !ok {
		return nil
	}

	var (
		firstOnce sync.Once
		firstFail = make(chan error, 1)
	)
	l := pq.NewListener(p.dsn, minReconnect, maxReconnect, func(ev pq.ListenerEventType, err error) {
		// Runs on the listener's goroutine, which also feeds notifications: log and return, never block.
		switch ev {
		case pq.ListenerEventConnectionAttemptFailed:
			firstOnce.Do(func() { firstFail <- err })
			p.logger.Warn("events: listener connection attempt failed", "channel", p.channel, "err", err)
		case pq.ListenerEventDisconnected:
			p.logger.Warn("events: listener disconnected; reconnecting", "channel", p.channel, "err", err)
		case pq.ListenerEventReconnected:
			p.logger.Info("events: listener reconnected", "channel", p.channel)
		}
	})
	listened := make(chan error, 1)
	go func() { listened <- l.Listen(p.channel) }()

	var err error
	select {
	case err = <-listened:
		listened = nil // consumed: do not wait for it again below
		if err != nil {
			err = fmt.Errorf("events: listen on %q: %w", p.channel, err)
		}
	case err = <-firstFail:
		err = fmt.Errorf("events: connect listener: %w", err)
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		// Close unblocks Listen; draining Notify until the listener closes it waits for its goroutine, so a
		// failed Start leaves nothing running.
		_ = l.Close()
		if listened != nil {
			<-listened
		}
		for range l.Notify {
		}
		stopped()
		return err
	}

	done := make(chan struct{}) // closed when the dispatch goroutine has exited
	p.hub.start()
	go p.dispatch(l, done)
	go func() {
		defer stopped()
		<-ctx.Done()
		// Subscribers first: from here on, notifications still in flight are dispatched to nobody.
		p.hub.stop()
		_ = l.Close()
		<-done
	}()
	return nil
}

// Stop (BaseStartStop's) closes every subscriber's channel, closes the listener connection and waits for its
// goroutines. If the listener is in the middle of a reconnect backoff, that wait can last up to maxReconnect.

// dispatch feeds notifications to the hub until the listener closes its channel. It must keep reading until
// then: lib/pq's goroutine blocks on sending to Notify, so stopping early would leak it.
// A notification whose handling panics is dropped, as an undecodable one is, and the loop goes on.
func (p *Postgres) dispatch(l *pq.Listener, done chan<- struct{}) {
	defer close(done)
	for n := range l.Notify {
		_ = startstop.Recover(p.logger, "events dispatch", func() { p.handle(n) })
	}
}

// handle hands one notification's events to the subscribers.
func (p *Postgres) handle(n *pq.Notification) {
	if n == nil {
		// lib/pq sends nil after a reconnect: whatever was notified while the connection was down is lost.
		p.hub.resync()
		return
	}
	if p.hub.idle() {
		return // every process hears every event; most have no viewer to tell
	}
	var evs []Event
	if err := json.Unmarshal([]byte(n.Extra), &evs); err != nil {
		// Not ours (someone else NOTIFYing on the channel) or a format this version does not know; dropping
		// it is all we can do, and the log says why a subscriber missed an update.
		p.logger.Warn("events: undecodable notification dropped", "channel", n.Channel, "err", err,
			"bytes", len(n.Extra))
		return
	}
	p.hub.publish(evs)
}

// Publish sends evs with NOTIFY, packed as JSON arrays into as few notifications as fit the payload limit.
// Several notifications are sent in one transaction: PostgreSQL delivers a transaction's notifications
// together and in order, so every process sees one Publish call's events in order, never interleaved with
// another call's. It fails with ErrEventTooLarge, before sending anything, if one event alone does not fit.
// ctx bounds the round trips to the database; it does not involve subscribers, which are never waited for.
func (p *Postgres) Publish(ctx context.Context, evs ...Event) error {
	payloads, err := encodeBatches(evs, maxPayload)
	if err != nil {
		return err
	}
	const notify = "SELECT pg_notify($1, $2)"
	switch len(payloads) {
	case 0:
		return nil
	case 1: // the common case: no need for an explicit transaction
		if _, err := p.db.ExecContext(ctx, notify, p.channel, payloads[0]); err != nil {
			return fmt.Errorf("events: notify: %w", err)
		}
		return nil
	}
	tx, err := p.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("events: notify: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // no-op after Commit
	for _, pl := range payloads {
		if _, err := tx.ExecContext(ctx, notify, p.channel, pl); err != nil {
			return fmt.Errorf("events: notify: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("events: notify: commit: %w", err)
	}
	return nil
}

// Subscribe returns a channel of the events matching f, from any process, closed when ctx is done or the bus
// stops. It fails with ErrNotRunning before Start or after Stop, and with ctx's error if ctx is already done.
func (p *Postgres) Subscribe(ctx context.Context, f Filter) (<-chan Event, error) {
	return p.hub.subscribe(ctx, f)
}

// encodeBatches packs evs, in order, into JSON arrays of at most limit bytes each. Greedy packing is optimal
// here: the order is fixed, so filling each payload before starting the next gives the fewest notifications.
func encodeBatches(evs []Event, limit int) ([]string, error) {
	var (
		out []string
		buf []byte
	)
	for i, e := range evs {
		j, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("events: encode event %d: %w", i, err)
		}
		if len(j)+2 > limit { // "[" + event + "]"
			return nil, fmt.Errorf("%w: event %d (delivery %d) is %d bytes", ErrEventTooLarge, i, e.DeliveryID,
				len(j))
		}
		if len(buf) > 0 && len(buf)+1+len(j)+1 > limit { // "," + event + "]"
			out = append(out, string(append(buf, ']')))
			buf = buf[:0]
		}
		if len(buf) == 0 {
			buf = append(buf, '[')
		} else {
			buf = append(buf, ',')
		}
		buf = append(buf, j...)
	}
	if len(buf) > 0 {
		out = append(out, string(append(buf, ']')))
	}
	return out, nil
}
