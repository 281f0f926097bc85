package events

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waitFor bounds every wait on a channel: long enough for a loaded CI machine, short enough to fail fast.
const waitFor = 10 * time.Second

func recv(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	select {
	case e, ok := <-ch:
		require.True(t, ok, "channel closed while waiting for an event")
		return e
	case <-time.After(waitFor):
		t.Fatal("no event within", waitFor)
	}
	return Event{}
}

// mustSubscribe subscribes to bus with f for the rest of the test.
func mustSubscribe(t *testing.T, bus Bus, f Filter) <-chan Event {
	t.Helper()
	ch, err := bus.Subscribe(t.Context(), f)
	require.NoError(t, err)
	return ch
}

func recvN(t *testing.T, ch <-chan Event, n int) []Event {
	t.Helper()
	out := make([]Event, 0, n)
	for range n {
		out = append(out, recv(t, ch))
	}
	return out
}

func requireClosed(t *testing.T, ch <-chan Event) {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("channel not closed within", waitFor)
		}
	}
}

// requireEmpty checks that nothing is waiting; the hub delivers synchronously inside Publish, so for Local
// "nothing yet" is "nothing ever".
func requireEmpty(t *testing.T, ch <-chan Event) {
	t.Helper()
	select {
	case e, ok := <-ch:
		t.Fatalf("unexpected event %+v (open %v)", e, ok)
	default:
	}
}

func startLocal(t *testing.T, opts ...Option) *Local {
	t.Helper()
	b := NewLocal(opts...)
	require.NoError(t, b.Start(t.Context()))
	t.Cleanup(b.Stop)
	return b
}

func TestFilterMatch(t *testing.T) {
	t.Parallel()
	e := Event{TenantID: 1, ServerID: 2, RequestID: 3, DeliveryID: 4, Status: "PENDING", Kind: KindCreated}
	for _, tc := range []struct {
		f    Filter
		want bool
	}{
		{Filter{}, true},
		{Filter{TenantID: 1}, true},
		{Filter{TenantID: 9}, false},
		{Filter{TenantID: 1, ServerID: 2}, true},
		{Filter{TenantID: 1, ServerID: 9}, false},
		{Filter{TenantID: 1, ServerID: 2, RequestID: 3}, true},
		{Filter{TenantID: 1, ServerID: 2, RequestID: 9}, false},
		{Filter{ServerID: 2}, true},
		{Filter{RequestID: 3}, true},
		{Filter{TenantID: 9, RequestID: 3}, false}, // every set field must match, not any
	} {
		require.Equal(t, tc.want, tc.f.Match(e), "%+v", tc.f)
	}
}

// TestFilterMatchOverflowOfATenant: an overflow naming only a tenant reaches every subscriber of that tenant,
// whatever server or request it watches, and no subscriber of another tenant.
func TestFilterMatchOverflowOfATenant(t *testing.T) {
	t.Parallel()
	e := Event{TenantID: 1, Kind: KindOverflow}
	for _, tc := range []struct {
		f    Filter
		want bool
	}{
		{Filter{}, true},
		{Filter{TenantID: 1}, true},
		{Filter{TenantID: 1, ServerID: 2}, true},
		{Filter{TenantID: 1, ServerID: 2, RequestID: 3}, true},
		{Filter{TenantID: 9}, false},
		{Filter{TenantID: 9, ServerID: 2}, false},
	} {
		require.Equal(t, tc.want, tc.f.Match(e), "%+v", tc.f)
	}
	server := Event{TenantID: 1, ServerID: 2, Kind: KindOverflow}
	require.True(t, Filter{TenantID: 1, ServerID: 2, RequestID: 3}.Match(server))
	require.False(t, Filter{TenantID: 1, ServerID: 5}.Match(server), "another server's overflow")
	require.False(t, Filter{TenantID: 1}.Match(Event{Kind: KindOverflow}), "an overflow that names no tenant is no tenant's")
}

func TestLocalManySubscribersGetTheirEventsInOrder(t *testing.T) {
	t.Parallel()
	b := startLocal(t)

	filters := []Filter{{}, {TenantID: 1}, {TenantID: 2}, {TenantID: 1, ServerID: 10}, {TenantID: 1, ServerID: 10, RequestID: 100}}
	const copies = 20 // several subscribers with the same filter must each get every event
	type sub struct {
		f  Filter
		ch <-chan Event
	}
	var subs []sub
	for _, f := range filters {
		for range copies {
			ch := mustSubscribe(t, b, f)
			subs = append(subs, sub{f, ch})
		}
	}

	var evs []Event
	for i := range 60 {
		evs = append(evs, Event{TenantID: 1 + i%2, ServerID: 10 + i%3, RequestID: 100 + i%4, DeliveryID: i,
			Status: "PENDING", Kind: KindCreated})
	}
	require.NoError(t, b.Publish(t.Context(), evs[:30]...))
	require.NoError(t, b.Publish(t.Context(), evs[30:]...))

	for _, s := range subs {
		var want []Event
		for _, e := range evs {
			if s.f.Match(e) {
				want = append(want, e)
			}
		}
		require.NotEmpty(t, want)
		require.Equal(t, want, recvN(t, s.ch, len(want)), "%+v", s.f)
		requireEmpty(t, s.ch)
	}
}

func TestLocalUnsubscribeOnContextEnd(t *testing.T) {
	t.Parallel()
	b := startLocal(t)

	ctx, cancel := context.WithCancel(t.Context())
	gone, err := b.Subscribe(ctx, Filter{TenantID: 1})
	require.NoError(t, err)
	stays := mustSubscribe(t, b, Filter{TenantID: 1})
	require.Equal(t, 2, b.hub.count())

	cancel()
	requireClosed(t, gone)
	require.Equal(t, 1, b.hub.count(), "the cancelled subscriber must be removed, not just closed")

	// The bus keeps serving the others, and publishing after a close must not panic on the closed channel.
	require.NoError(t, b.Publish(t.Context(), Event{TenantID: 1, DeliveryID: 7, Kind: KindUpdated}))
	require.Equal(t, 7, recv(t, stays).DeliveryID)

	_, err = b.Subscribe(ctx, Filter{})
	require.ErrorIs(t, err, context.Canceled, "a done ctx must not register a subscriber")
	require.Equal(t, 1, b.hub.count())
}

func TestLocalStopClosesSubscribersAndCanRestart(t *testing.T) {
	t.Parallel()
	b := NewLocal()
	_, err := b.Subscribe(t.Context(), Filter{})
	require.ErrorIs(t, err, ErrNotRunning)
	require.NoError(t, b.Publish(t.Context(), Event{Kind: KindCreated}), "publishing to nobody is fine")

	require.NoError(t, b.Start(t.Context()))
	require.NoError(t, b.Start(t.Context()), "Start on a running bus is a no-op")
	ch := mustSubscribe(t, b, Filter{})
	b.Stop()
	requireClosed(t, ch)
	require.Zero(t, b.hub.count())
	b.Stop() // idempotent
	requireRestarts(t, b)
}

// requireRestarts checks that the stopped bus b refuses subscribers, and serves them again once started.
func requireRestarts(t *testing.T, b *Local) {
	t.Helper()
	_, err := b.Subscribe(t.Context(), Filter{})
	require.ErrorIs(t, err, ErrNotRunning)

	require.NoError(t, b.Start(t.Context()))
	t.Cleanup(b.Stop)
	ch := mustSubscribe(t, b, Filter{})
	require.NoError(t, b.Publish(t.Context(), Event{DeliveryID: 1}))
	require.Equal(t, 1, recv(t, ch).DeliveryID)
}

func TestLocalStopsWhenStartContextEnds(t *testing.T) {
	t.Parallel()
	b := NewLocal()
	ctx, cancel := context.WithCancel(t.Context())
	require.NoError(t, b.Start(ctx))
	ch := mustSubscribe(t, b, Filter{})
	cancel()
	requireClosed(t, ch)
	// Started again under a live ctx, the ended ctx of the first run has no say any more.
	requireRestarts(t, b)
}

func TestLocalSlowSubscriberDoesNotBlockPublishers(t *testing.T) {
	t.Parallel()
	const buffer = 8
	b := startLocal(t, WithBuffer(buffer))

	slow, err := b.Subscribe(t.Context(), Filter{TenantID: 1}) // never read until the end
	require.NoError(t, err)
	fast := mustSubscribe(t, b, Filter{TenantID: 1})

	// Publish and read the reader's copy in lock-step: the reader must lose nothing, and if Publish ever
	// blocked on the subscriber that never reads, the loop would stall and the deadline below would fire.
	const total = 20 * buffer
	done := make(chan error, 1)
	go func() {
		for i := range total {
			_ = b.Publish(context.Background(), Event{TenantID: 1, DeliveryID: i, Kind: KindUpdated})
			select {
			case e := <-fast:
				if e.DeliveryID != i {
					done <- fmt.Errorf("reader got %+v, want delivery %d", e, i)
					return
				}
			case <-time.After(waitFor):
				done <- fmt.Errorf("reader got nothing for delivery %d", i)
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(2 * waitFor):
		t.Fatal("Publish blocked on a subscriber that does not read")
	}

	// The slow one kept the first `buffer` events, then one overflow marker for everything it lost.
	evs := recvN(t, slow, buffer+1)
	for i := range buffer {
		require.Equal(t, i, evs[i].DeliveryID)
	}
	require.Equal(t, Event{TenantID: 1, Kind: KindOverflow}, evs[buffer])
	requireEmpty(t, slow)

	// Having caught up, it gets events again; a later overflow gets a new marker.
	require.NoError(t, b.Publish(t.Context(), Event{TenantID: 1, DeliveryID: 1000}))
	require.Equal(t, 1000, recv(t, slow).DeliveryID)
	for i := range buffer + 5 {
		require.NoError(t, b.Publish(t.Context(), Event{TenantID: 1, DeliveryID: 2000 + i}))
	}
	evs = recvN(t, slow, buffer+1)
	require.Equal(t, KindOverflow, evs[buffer].Kind)
	requireEmpty(t, slow)
}

func TestHubResync(t *testing.T) {
	t.Parallel()
	h := newHub(2)
	h.start()
	defer h.stop()
	idle, err := h.subscribe(t.Context(), Filter{TenantID: 5, ServerID: 6})
	require.NoError(t, err)
	full, err := h.subscribe(t.Context(), Filter{TenantID: 7})
	require.NoError(t, err)
	h.publish([]Event{{TenantID: 7, DeliveryID: 1}, {TenantID: 7, DeliveryID: 2}})

	h.resync()
	require.Equal(t, Event{TenantID: 5, ServerID: 6, Kind: KindResync}, recv(t, idle))
	// A full subscriber has no room for a resync but has the reserved slot: it is told with an overflow marker,
	// which means the same thing (re-read), and a second resync adds nothing while that marker waits.
	h.resync()
	evs := recvN(t, full, 3)
	require.Equal(t, []int{1, 2}, []int{evs[0].DeliveryID, evs[1].DeliveryID})
	require.Equal(t, Event{TenantID: 7, Kind: KindOverflow}, evs[2])
	requireEmpty(t, full)
}

func TestEncodeBatches(t *testing.T) {
	t.Parallel()
	var evs []Event
	for i := range 500 {
		evs = append(evs, Event{TenantID: 123456, ServerID: 234567, RequestID: 3456789, DeliveryID: 9000000 + i,
			Status: "IN_PROGRESS", Kind: KindAttempt})
	}
	for _, limit := range []int{maxPayload, 1000, 200} {
		payloads, err := encodeBatches(evs, limit)
		require.NoError(t, err)
		var back []Event
		for _, p := range payloads {
			require.LessOrEqual(t, len(p), limit)
			var part []Event
			require.NoError(t, json.Unmarshal([]byte(p), &part))
			require.NotEmpty(t, part)
			back = append(back, part...)
		}
		require.Equal(t, evs, back, "limit %d", limit)
		if limit == maxPayload {
			require.Less(t, len(payloads), 10, "events must be packed, not one per notification")
		}
	}

	payloads, err := encodeBatches(nil, maxPayload)
	require.NoError(t, err)
	require.Empty(t, payloads)

	big := Event{DeliveryID: 42, Status: fmt.Sprintf("%08000d", 0)}
	_, err = encodeBatches([]Event{{DeliveryID: 1}, big}, maxPayload)
	require.ErrorIs(t, err, ErrEventTooLarge)
}
