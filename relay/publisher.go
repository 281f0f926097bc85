package relay

import (
	"context"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/events"
)

// publisher hands committed delivery changes to the event bus off the hot path: the attempt that caused a
// change does not wait for a NOTIFY round trip, and changes that arrive together go out in one publish.
type publisher struct {
	bus    events.Bus
	logger *slog.Logger
	queue  chan events.Event
	done   sync.WaitGroup
	once   sync.Once
}

const publishQueue = 4096

func newPublisher(bus events.Bus, logger *slog.Logger) *publisher {
	return &publisher{bus: bus, logger: logger, queue: make(chan events.Event, publishQueue)}
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
			p.logger.Warn("live event dropped: publish queue full", "delivery", c.DeliveryID)
		}
	}
}

func (p *publisher) start() {
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		batch := make([]events.Event, 0, 256)
		for e := range p.queue {
			batch = append(batch[:0], e)
		drain:
			for len(batch) < cap(batch) {
				select {
				case more, ok := <-p.queue:
					if !ok {
						break drain
					}
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
		}
	}()
}

// stop publishes what is queued and returns.
func (p *publisher) stop() {
	p.once.Do(func() { close(p.queue) })
	p.done.Wait()
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
