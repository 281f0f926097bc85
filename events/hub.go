package events

import (
	"context"
	"sync"
)

// hub is the in-process fan-out both buses share: Local publishes into it directly, Postgres from its
// listener. One mutex guards the subscriber set and every send, so a send can never hit a closed channel, and
// the len-then-send below cannot race with another sender.
type hub struct {
	size int // events a subscriber may have waiting; the channel holds one more, for the overflow marker

	mu      sync.Mutex
	running bool
	subs    map[*subscriber]struct{}
}

type subscriber struct {
	f  Filter
	ch chan Event
	// lost is set once the overflow marker is queued and cleared when an event is delivered again, so a
	// subscriber that stays stuck gets one marker, not one per dropped event.
	lost bool
	// unwatch stops the context.AfterFunc that removes the subscriber when its ctx ends; called when the bus
	// removes it first, so a long-lived ctx does not keep the subscriber reachable.
	unwatch func() bool
}

func newHub(size int) *hub {
	return &hub{size: size, subs: make(map[*subscriber]struct{})}
}

// start lets subscribers in. It is idempotent so a restart after stop needs no special case.
func (h *hub) start() {
	h.mu.Lock()
	h.running = true
	h.mu.Unlock()
}

// stop closes every subscriber's channel: Stop promises that no subscriber is left waiting on a bus that will
// never send again.
func (h *hub) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.running = false
	for s := range h.subs {
		s.unwatch()
		delete(h.subs, s)
		close(s.ch)
	}
}

func (h *hub) subscribe(ctx context.Context, f Filter) (<-chan Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.running {
		return nil, ErrNotRunning
	}
	s := &subscriber{f: f, ch: make(chan Event, h.size+1)}
	h.subs[s] = struct{}{}
	// AfterFunc rather than a goroutine per subscriber: nothing runs until ctx ends, so thousands of idle
	// subscriptions cost no goroutines. If ctx ended since the check above, remove waits for h.mu and runs
	// right after this returns.
	s.unwatch = context.AfterFunc(ctx, func() { h.remove(s) })
	return s.ch, nil
}

func (h *hub) remove(s *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; ok { // stop may have closed it already
		delete(h.subs, s)
		close(s.ch)
	}
}

// idle reports whether nobody is subscribed: a notification then need not even be decoded. A subscription
// that arrives just after the check misses only events sent before it existed.
func (h *hub) idle() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs) == 0
}

// publish hands evs to every matching subscriber without ever blocking. Holding the lock for the whole batch
// keeps one Publish call's events contiguous and in order for every subscriber.
func (h *hub) publish(evs []Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range evs {
		for s := range h.subs {
			if s.f.Match(e) {
				h.deliver(s, e)
			}
		}
	}
}

// deliver queues e or, if the subscriber's buffer is full, drops it and makes sure an overflow marker is
// queued. The channel has one slot beyond size reserved for that marker, so queueing it never blocks either.
// Only the hub sends, under h.mu, and the receiver only empties the channel, so len is a safe lower bound of
// the free space.
func (h *hub) deliver(s *subscriber, e Event) {
	switch {
	case len(s.ch) < h.size:
		s.ch <- e
		s.lost = false
	case !s.lost:
		s.ch <- s.marker(KindOverflow)
		s.lost = true
	}
}

// resync tells every subscriber that events may have been lost outside the hub (the Postgres listener was
// disconnected). A subscriber with an overflow marker still waiting needs nothing more: that marker already
// makes it re-read, and it is read after the loss happened.
func (h *hub) resync() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		switch {
		case s.lost:
		case len(s.ch) < h.size:
			s.ch <- s.marker(KindResync)
		default:
			s.ch <- s.marker(KindOverflow)
			s.lost = true
		}
	}
}

// marker is a synthetic event scoped to the subscriber's filter, so the receiver knows what to re-read.
func (s *subscriber) marker(kind string) Event {
	return Event{TenantID: s.f.TenantID, ServerID: s.f.ServerID, RequestID: s.f.RequestID, Kind: kind}
}
