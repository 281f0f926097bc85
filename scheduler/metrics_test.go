package scheduler_test

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
)

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
