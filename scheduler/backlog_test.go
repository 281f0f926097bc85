package scheduler_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

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
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 100})
	srv := env.NewServer(tn, "s", nil)

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
		post(t, env, srv.Key, "", `{}`)
	}
	close(gate)
	relaytest.Eventually(t, 30*time.Second, "every delivery to reach the receiver", func() bool {
		return received.Load() == n
	})
}

// TestNeverMoreAttemptsInFlightThanWorkers: attempts run on at most Workers workers, which take one attempt
// after another. The receiver holds each attempt until the test lets one go, and only after every worker
// has one: a scheduler that started an attempt beyond its workers would show more in flight at once.
func TestNeverMoreAttemptsInFlightThanWorkers(t *testing.T) {
	t.Parallel()
	const workers, n = 3, 40
	env := relaytest.Start(t, func(c *relay.Config) {
		c.Workers = workers
		c.PollInterval = time.Hour
	})
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 100})
	srv := env.NewServer(tn, "s", nil)

	var arrived, inFlight, peak atomic.Int64
	release := make(chan struct{}, n)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := inFlight.Add(1)
		for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
		}
		arrived.Add(1)
		<-release
		inFlight.Add(-1)
	}))
	t.Cleanup(rcv.Close)
	t.Cleanup(func() {
		for range n {
			release <- struct{}{}
		}
	})
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL, "maxAttempts": 1})

	for range n {
		post(t, env, srv.Key, "", `{}`)
	}
	for i := range n {
		want := int64(min(i+workers, n))
		relaytest.Eventually(t, 30*time.Second, "every worker to hold an attempt", func() bool {
			return arrived.Load() >= want
		})
		release <- struct{}{}
	}
	relaytest.Eventually(t, 30*time.Second, "every attempt to finish", func() bool { return inFlight.Load() == 0 })
	if got := peak.Load(); got != workers {
		t.Fatalf("at most %d attempts were in flight at once, want exactly %d (the workers)", got, workers)
	}
}
