package resolvers_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/stats"
)

// The charts' fields answer every hour or day of the range, oldest first and zeros included, with the figures
// of the work done; ranges beyond the bounds are INVALID_INPUT; another tenant reaches none of them.
func TestChartFields(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 100)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(receiver.Close)
	rcp := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": receiver.URL})
	for range 3 {
		postID(t, env, srv.Key)
	}

	type hour struct {
		Hour                          time.Time
		Attempts, Successes, Failures int
		SuccessRate, P50Ms, P95Ms     *float64
	}
	var out struct {
		Node   struct{ HourlyStats []hour }
		Server struct {
			RequestsPerHour []struct {
				Hour              time.Time
				Requests, Replays int
			}
		}
		Viewer struct {
			Tenant struct {
				CreditsPerDay []struct {
					Day                                           time.Time
					Credits, Requests, Retries, Replays, Outbound int
				}
			}
		}
	}
	query := `query($r: ID!, $s: ID!){
		node(id: $r){ ... on Recipient { hourlyStats(hours: 2){ hour attempts successes failures successRate p50Ms p95Ms } } }
		server(id: $s){ requestsPerHour { hour requests replays } }
		viewer { tenant { creditsPerDay(days: 2) { day credits requests retries replays outbound } } }
	}`
	vars := map[string]any{"r": rcp, "s": srv.ID}
	relaytest.Eventually(t, 20*time.Second, "three attempts counted", func() bool {
		env.MustGraphQL(tn.Member, query, vars, &out)
		n := 0
		for _, h := range out.Node.HourlyStats {
			n += h.Attempts
		}
		return n == 3
	})
	now := time.Now().UTC()

	hs := out.Node.HourlyStats
	require.Len(t, hs, 2)
	require.True(t, hs[1].Hour.Equal(now.Truncate(time.Hour)) || hs[1].Hour.Equal(now.Truncate(time.Hour).Add(-time.Hour)),
		"the current hour last: %v", hs[1].Hour)
	require.Equal(t, time.Hour, hs[1].Hour.Sub(hs[0].Hour))
	for _, h := range hs {
		if h.Attempts == 0 {
			require.Nil(t, h.SuccessRate, "an hour without attempts has no rate")
			require.Nil(t, h.P50Ms)
			continue
		}
		require.Equal(t, h.Attempts, h.Successes)
		require.Zero(t, h.Failures)
		require.InDelta(t, 1, *h.SuccessRate, 1e-9)
		require.NotNil(t, h.P50Ms)
		require.GreaterOrEqual(t, *h.P95Ms, *h.P50Ms)
	}

	rs := out.Server.RequestsPerHour
	require.Len(t, rs, stats.MaxHours, "168 hours by default, zeros included")
	requests := 0
	for _, h := range rs {
		requests += h.Requests
		require.Zero(t, h.Replays)
	}
	require.Equal(t, 3, requests)

	days := out.Viewer.Tenant.CreditsPerDay
	require.Len(t, days, 2)
	require.Equal(t, 24*time.Hour, days[1].Day.Sub(days[0].Day))
	credits := 0
	for _, d := range days {
		credits += d.Credits
		require.Equal(t, d.Credits, d.Requests)
	}
	require.Equal(t, 3, credits)

	for _, q := range []string{
		`query($r: ID!){ node(id: $r){ ... on Recipient { hourlyStats(hours: 169){ hour } } } }`,
		`query($r: ID!){ node(id: $r){ ... on Recipient { hourlyStats(hours: 0){ hour } } } }`,
	} {
		require.Equal(t, "INVALID_INPUT", env.GraphQL(tn.Member, q, map[string]any{"r": rcp}).Code(), q)
	}
	require.Equal(t, "INVALID_INPUT", env.GraphQL(tn.Member,
		`query($s: ID!){ server(id: $s){ requestsPerHour(hours: 1000){ hour } } }`, map[string]any{"s": srv.ID}).Code())
	require.Equal(t, "INVALID_INPUT", env.GraphQL(tn.Member,
		`{ viewer { tenant { creditsPerDay(days: 8){ day } } } }`, nil).Code())

	// Another tenant's member reaches neither the recipient nor the server, so none of their figures.
	other := env.NewTenant("other", relaytest.PlanLimits{Credits: 10})
	resp := env.GraphQL(other.Member, query, vars)
	require.Equal(t, "NOT_FOUND", resp.Code())
	var leak struct {
		Node   *struct{ HourlyStats []hour }
		Server *struct{}
		Viewer struct {
			Tenant struct {
				CreditsPerDay []struct{ Credits int }
			}
		}
	}
	require.NoError(t, json.Unmarshal(resp.Data, &leak), "%s", resp.Data)
	require.Nil(t, leak.Node)
	require.Nil(t, leak.Server)
	for _, d := range leak.Viewer.Tenant.CreditsPerDay {
		require.Zero(t, d.Credits, "its own tenant's days are its own")
	}
}
