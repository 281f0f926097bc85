package scheduler_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	entdelivery "github.com/adal-relay/adal/ent/delivery"
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

// scrape fetches the process's /metrics.
func scrape(t *testing.T, env *relaytest.Env) string {
	t.Helper()
	resp, err := env.Server.Client().Get(env.Server.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return string(body)
}

// metricValue is the value of the sample whose name and labels are exactly series (e.g.
// `adal_attempts_total{outcome="succeeded"}`), or -1 when there is none.
func metricValue(t *testing.T, text, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

func TestMetricsAfterTraffic(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 10, compressed(5*time.Millisecond))
	rcv := newReceiver(t, 1) // one failed attempt, then successes
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL, "retrySchedule": "STEPPED"})

	var ids []string
	for range 3 {
		ids = append(ids, env.Send(srv.Key, "", `{}`))
	}
	resp := env.Post("no-such-key", "", []byte(`{}`))
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	relaytest.Eventually(t, 20*time.Second, "deliveries to succeed", func() bool {
		for _, id := range ids {
			if deliveriesOf(t, env, id)[0].Status != entdelivery.StatusSUCCEEDED {
				return false
			}
		}
		return true
	})

	text := scrape(t, env)
	require.Equal(t, 3.0, metricValue(t, text, `adal_inbound_requests_total{code="202"}`), text)
	require.Equal(t, 1.0, metricValue(t, text, `adal_inbound_requests_total{code="404"}`))
	require.Equal(t, 3.0, metricValue(t, text, `adal_attempts_total{outcome="succeeded"}`))
	require.Equal(t, 1.0, metricValue(t, text, `adal_attempts_total{outcome="HTTP_STATUS"}`))
	require.Equal(t, 4.0, metricValue(t, text, `adal_attempt_duration_seconds_count`))
	require.Equal(t, 4.0, metricValue(t, text, `adal_attempt_duration_seconds_bucket{le="+Inf"}`))
	require.Greater(t, metricValue(t, text, `adal_attempt_duration_seconds_sum`), 0.0)
	// Every claim is observed (empty polls included), and together they took the four attempts.
	require.GreaterOrEqual(t, metricValue(t, text, `adal_claim_batch_size_count`), 1.0)
	require.Equal(t, 4.0, metricValue(t, text, `adal_claim_batch_size_sum`))
	require.Equal(t, 0.0, metricValue(t, text, `adal_due_deliveries`), "nothing is due once all succeeded")
}

// The backlog gauge counts deliveries that are due but not yet claimed: with one worker held busy, the
// others wait.
func TestMetricsDueBacklog(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 10, compressed(5*time.Millisecond), func(c *relay.Config) { c.Workers = 1 })
	busy, arrived, release := blockingReceiver(t)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": busy.URL})

	for range 3 {
		env.Send(srv.Key, "", `{}`)
	}
	<-arrived // one attempt in flight
	relaytest.Eventually(t, 20*time.Second, "two due", func() bool {
		return metricValue(t, scrape(t, env), `adal_due_deliveries`) == 2
	})
	for range 3 {
		release <- struct{}{}
	}
	<-arrived
	<-arrived
	relaytest.Eventually(t, 20*time.Second, "backlog drained", func() bool {
		return metricValue(t, scrape(t, env), `adal_due_deliveries`) == 0
	})
}
