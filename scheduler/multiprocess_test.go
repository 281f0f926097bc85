package scheduler_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/storage/dbtest"
	"github.com/adal-relay/adal/viewer"
)

// Two complete processes on one PostgreSQL database share the work without ever sending the same attempt
// twice: SKIP LOCKED claims hand each due delivery to exactly one of them.
func TestTwoProcessesNeverSendAnAttemptTwice(t *testing.T) {
	t.Parallel()
	dbtest.SkipUnlessPostgres(t)
	const requests = 300
	small := func(c *relay.Config) {
		c.Workers = 3
		c.RetryUnit = time.Millisecond
	}
	a := relaytest.Start(t, small)
	b := a.Peer(t, small)
	tn, srv := a.NewTenantServer(requests)

	// The receiver counts (request, attempt) pairs; there is one recipient, so a request names its delivery.
	// Every fifth request fails its first attempt, so retries are claimed by either process too.
	type key struct {
		request string
		attempt int
	}
	var mu sync.Mutex
	seen := map[key]int{}
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := key{r.Header.Get("X-Adal-Request-Id"), atoiOr(r.Header.Get("X-Adal-Attempt"))}
		mu.Lock()
		seen[k]++
		mu.Unlock()
		time.Sleep(2 * time.Millisecond) // a little work, so both claim loops get their turns
		if id := atoiOr(k.request); id%5 == 0 && k.attempt == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rcv.Close)
	a.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv.URL, "retrySchedule": "STEPPED"})

	// Intake goes to both processes, as behind a load balancer.
	for i := range requests {
		env := a
		if i%2 == 1 {
			env = b
		}
		env.Send(srv.Key, "", strconv.Itoa(i))
	}

	ctx := viewer.SystemContext(t.Context())
	relaytest.Eventually(t, 60*time.Second, "every delivery to succeed", func() bool {
		n, err := a.DB.Client.Delivery.Query().Where(entdelivery.StatusEQ(entdelivery.StatusSUCCEEDED)).Count(ctx)
		require.NoError(t, err)
		return n == requests
	})
	ds := a.Deliveries()
	require.Len(t, ds, requests)

	mu.Lock()
	defer mu.Unlock()
	received := 0
	for k, n := range seen {
		require.Equal(t, 1, n, "request %s attempt %d received %d times", k.request, k.attempt, n)
		received += n
	}
	recorded := 0
	for _, d := range ds {
		require.Equal(t, entdelivery.StatusSUCCEEDED, d.Status)
		require.Len(t, d.Edges.Attempts, d.AttemptCount)
		for i, at := range d.Edges.Attempts {
			require.Equal(t, i+1, at.Number)
			require.Equal(t, 1, seen[key{strconv.Itoa(d.RequestID), at.Number}], "recorded attempt %d of request %d was not received exactly once", at.Number, d.RequestID)
		}
		recorded += len(d.Edges.Attempts)
	}
	require.Equal(t, recorded, received, "every reception is a recorded attempt")
	require.Greater(t, recorded, requests, "some deliveries were retried")

	// Both processes did part of the work.
	doneA := metricValue(t, scrape(t, a), `adal_attempts_total{outcome="succeeded"}`)
	doneB := metricValue(t, scrape(t, b), `adal_attempts_total{outcome="succeeded"}`)
	t.Logf("successful attempts: process A %v, process B %v", doneA, doneB)
	require.Equal(t, float64(requests), max(doneA, 0)+max(doneB, 0))
	require.Positive(t, doneA, "process A sent nothing")
	require.Positive(t, doneB, "process B sent nothing")
}

func atoiOr(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
