package scheduler_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/adal-relay/adal/ent/outboundjob"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
)

// TestBacklogDrainsOnCompletions: with more due deliveries than worker slots, each finished attempt brings the
// next claim; the backlog never waits for the poll. The poll interval is an hour here, so a claim loop that
// slept while its slots were full, and was not woken when they freed, would leave the backlog undelivered.
func TestBacklogDrainsOnCompletions(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, func(c *relay.Config) {
		c.Workers = 2
		c.PollInterval = time.Hour
	})
	tn, srv := env.NewTenantServer(100)

	// The receiver holds every attempt until all requests are accepted: the two slots are then full and the
	// rest of the deliveries are a backlog, with nothing left to wake the loop but finished attempts.
	gate := make(chan struct{})
	var received atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-gate
		received.Add(1)
	}))
	t.Cleanup(rcv.Close)
	t.Cleanup(func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	})
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL, "maxAttempts": 1})

	const n = 30
	for range n {
		env.Send(srv.Key, "", `{}`)
	}
	close(gate)
	relaytest.Eventually(t, 30*time.Second, "every delivery to reach the receiver", func() bool {
		return received.Load() == n
	})
}

// holding is a receiver that holds each call until the test lets one go, and keeps the peak of calls in flight.
type holding struct {
	*httptest.Server
	arrived, inFlight, peak atomic.Int64
	release                 chan struct{}
}

// newHolding starts a holding receiver for n calls; the ones still held are let go when the test ends.
func newHolding(t *testing.T, n int) *holding {
	h := &holding{release: make(chan struct{}, n)}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := h.inFlight.Add(1)
		for p := h.peak.Load(); now > p && !h.peak.CompareAndSwap(p, now); p = h.peak.Load() {
		}
		h.arrived.Add(1)
		<-h.release
		h.inFlight.Add(-1)
	}))
	t.Cleanup(h.Close)
	t.Cleanup(func() {
		for range n {
			h.release <- struct{}{}
		}
	})
	return h
}

// letThrough lets the n calls go one at a time, each only once workers calls (or all that are left) are held:
// an engine that ran an attempt beyond its workers would show more in flight at once. It returns the peak.
func (h *holding) letThrough(t *testing.T, n, workers int) int64 {
	t.Helper()
	for i := range n {
		want := int64(min(i+workers, n))
		relaytest.Eventually(t, 30*time.Second, "every worker to hold an attempt", func() bool {
			return h.arrived.Load() >= want
		})
		h.release <- struct{}{}
	}
	relaytest.Eventually(t, 30*time.Second, "every attempt to finish", func() bool { return h.inFlight.Load() == 0 })
	return h.peak.Load()
}

// TestNeverMoreAttemptsInFlightThanWorkers: attempts run on at most Workers workers, which take one attempt
// after another; outbound jobs are a lane of the engine and run on the same workers, never beyond them.
func TestNeverMoreAttemptsInFlightThanWorkers(t *testing.T) {
	t.Parallel()
	for name, outboundEvery := range map[string]int{"deliveries": 0, "deliveries and outbound jobs": 2} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const workers, n = 3, 40
			env := relaytest.Start(t, func(c *relay.Config) {
				c.Workers = workers
				c.TenantShare = 1 // one tenant may take every worker: the bound under test is the workers'
				c.PollInterval = time.Hour
			})
			tn, srv := env.NewTenantServer(100)
			rcv := newHolding(t, n)
			env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL, "maxAttempts": 1})

			var jobs []int
			for i := range n {
				if outboundEvery > 0 && i%outboundEvery == 1 {
					jobs = append(jobs, send(t, env, tn, map[string]any{"url": rcv.URL + "/job"}))
				} else {
					env.Send(srv.Key, "", `{}`)
				}
			}
			if got := rcv.letThrough(t, n, workers); got != workers {
				t.Fatalf("at most %d attempts were in flight at once, want exactly %d (the workers)", got, workers)
			}
			for _, id := range jobs {
				if j := waitFinished(t, env, id); j.Status != outboundjob.StatusSUCCEEDED {
					t.Fatalf("outbound job %d is %s, want SUCCEEDED", id, j.Status)
				}
			}
		})
	}
}
