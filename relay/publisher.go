package relay

import (
	"context"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/events"
	"github.com/adal-relay/adal/startstop"
)

// publisher hands committed delivery changes to the event bus off the hot path: the attempt that caused a
// change does not wait for a NOTIFY round trip, and changes that arrive together go out in one publish.
type publisher struct {
	startstop.BaseStartStop
	bus    events.Bus
	logger *slog.Logger
	queue  chan events.Event
	// dropped counts the changes a full queue refused since the last report, and lost holds their tenants:
	// each such tenant's viewers are told to re-read (KindOverflow), and one log line counts them, not one
	// per event, which under a fan-out burst would be thousands a second.
	mu      sync.Mutex
	dropped int
	lost    map[int]bool
}

const publishQueue = 4096

func newPublisher(bus events.Bus, logger *slog.Logger) *publisher {
	return &publisher{bus: bus, logger: logger, queue: make(chan events.Event, publishQueue), lost: map[int]bool{}}
}

// add queues changes; when the queue is full the change is dropped (live status is best effort: viewers
// re-read state, and no delivery depends on an event).
func (p *publisher) add(changes []delivery.Change) {
	for _, c := range changes {
		e := events.Event{TenantID: c.TenantID, ServerID: c.ServerID, RequestID: c.RequestID,
			DeliveryID: c.DeliveryID, Status: string(c.Status), Kind: c.Kind}
		select {
		case p.queue <- e:
		default:
			p.mu.Lock()
			p.dropped++
			p.lost[c.TenantID] = true
			p.mu.Unlock()
		}
	}
}

// Start publishes queued changes until Stop or ctx ends, then publishes what is still queued.
func (p *publisher) Start(ctx context.Context) error {
	return p.Run(ctx, nil, func(ctx context.Context) {
		batch := make([]events.Event, 0, 256)
		for {
			select {
			case e := <-p.queue:
				p.publishSafely(append(batch[:0], e))
			case <-ctx.Done():
				for len(p.queue) > 0 {
					p.publishSafely(batch[:0])
				}
				p.reportDropped()
				return
			}
		}
	})
}

// publishSafely publishes, and if that panics drops the batch (live status is best effort, as when the queue
// is full) and goes on with the next.
func (p *publisher) publishSafely(batch []events.Event) {
	_ = startstop.Recover(p.logger, "publish live events", func() { p.publish(batch) })
}

// publish sends batch, topped up with what else is queued, and reports dropped changes.
func (p *publisher) publish(batch []events.Event) {
drain:
	for len(batch) < cap(batch) {
		select {
		case more := <-p.queue:
			batch = append(batch, more)
		default:
			break drain
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if err := p.bus.Publish(ctx, batch...); err != nil {
		p.logger.Warn("publish live events", "err", err, "count", len(batch))
	}
	cancel()
	p.reportDropped()
}

// reportDropped tells the viewers of every tenant that lost events since the last report to re-read what they
// show, and logs how many were lost.
func (p *publisher) reportDropped() {
	p.mu.Lock()
	n := p.dropped
	if n == 0 {
		p.mu.Unlock()
		return
	}
	p.dropped = 0
	overflows := make([]events.Event, 0, len(p.lost))
	for tenant := range p.lost {
		overflows = append(overflows, events.Event{TenantID: tenant, Kind: events.KindOverflow})
	}
	clear(p.lost)
	p.mu.Unlock()
	p.logger.Warn("live events dropped: publish queue full", "count", n, "tenants", len(overflows))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.bus.Publish(ctx, overflows...); err != nil {
		p.logger.Warn("publish live events", "err", err, "count", len(overflows))
	}
}

// eventChannel names the NOTIFY channel after the database schema in use, so deployments (and tests)
// sharing one Postgres database never hear each other's events.
func eventChannel(databaseURL string) string {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return events.DefaultChannel
	}
	if sp := u.Query().Get("search_path"); sp != "" {
		return events.DefaultChannel + "_" + sp
	}
	return events.DefaultChannel
}
