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
