package relay

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/events"
)

// gatedBus is a bus whose first Publish waits for the test to open the gate: the publisher's queue fills
// behind it.
type gatedBus struct {
	entered chan struct{}
	gate    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	got     []events.Event
}

func (b *gatedBus) Publish(_ context.Context, evs ...events.Event) error {
	b.once.Do(func() {
		close(b.entered)
		<-b.gate
	})
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, evs...)
	return nil
}

func (b *gatedBus) Subscribe(context.Context, events.Filter) (<-chan events.Event, error) {
	return nil, nil
}

// TestPublisherCountsDroppedEvents overflows the queue while the bus is stuck: every change that fits is
// published, the rest are counted in one log line, and the viewers of each tenant that lost events are told to
// re-read (they read what an event points at from the database, so its place among the others does not matter).
func TestPublisherCountsDroppedEvents(t *testing.T) {
	bus := &gatedBus{entered: make(chan struct{}), gate: make(chan struct{})}
	var logs bytes.Buffer
	p := newPublisher(bus, slog.New(slog.NewTextHandler(&logs, nil)))
	require.NoError(t, p.Start(context.Background()))
	p.add([]delivery.Change{{TenantID: 7, DeliveryID: 1, Kind: events.KindCreated}})
	select {
	case <-bus.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the publisher did not publish the first change")
	}
	const over = 100
	changes := make([]delivery.Change, publishQueue+over)
	for i := range changes {
		changes[i] = delivery.Change{TenantID: 7, DeliveryID: 2 + i, Kind: events.KindCreated}
	}
	changes[len(changes)-1].TenantID = 8 // dropped: the queue was full long before
	p.add(changes)
	close(bus.gate)
	p.Stop()

	var kept, overflows []events.Event
	for _, e := range bus.got {
		if e.Kind == events.KindOverflow {
			overflows = append(overflows, e)
		} else {
			kept = append(kept, e)
		}
	}
	require.Len(t, kept, 1+publishQueue, "the first change and a full queue are published")
	for i, e := range kept {
		require.Equal(t, 1+i, e.DeliveryID, "in order")
	}
	require.ElementsMatch(t, []events.Event{{TenantID: 7, Kind: events.KindOverflow}, {TenantID: 8, Kind: events.KindOverflow}},
		overflows, "one overflow per tenant that lost events")
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 1, "one report, however many were dropped: %s", logs.String())
	require.Contains(t, lines[0], "live events dropped: publish queue full")
	require.Contains(t, lines[0], "count=100")
	require.Contains(t, lines[0], "tenants=2")
}
