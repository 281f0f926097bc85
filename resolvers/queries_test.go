package resolvers_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/resolvers"
)

func TestListsArePaged(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 200)
	for range resolvers.DefaultPage + 5 {
		postID(t, env, srv.Key)
	}
	var out struct {
		Requests struct {
			TotalCount int
			Edges      []struct{ Node struct{ ID string } }
			PageInfo   struct{ HasNextPage bool }
		}
	}
	env.MustGraphQL(tn.Member, `query($s: ID!){ requests(serverId: $s) { totalCount edges { node { id } } pageInfo { hasNextPage } } }`,
		map[string]any{"s": srv.ID}, &out)
	require.Equal(t, resolvers.DefaultPage+5, out.Requests.TotalCount)
	require.Len(t, out.Requests.Edges, resolvers.DefaultPage, "a list without first/last gets the default page")
	require.True(t, out.Requests.PageInfo.HasNextPage)

	for _, q := range []string{
		`query($s: ID!){ requests(serverId: $s, first: 501) { totalCount } }`,
		`query($s: ID!){ requests(serverId: $s, last: -1) { totalCount } }`,
	} {
		resp := env.GraphQL(tn.Member, q, map[string]any{"s": srv.ID})
		require.Equal(t, "INVALID_INPUT", resp.Code(), q)
	}
}

func TestTenantUsageFromTheLedger(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 100)
	other := env.NewTenant("other", relaytest.PlanLimits{Credits: 100})
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "CLI"})
	for range 3 {
		postID(t, env, srv.Key)
	}
	req := postID(t, env, srv.Key)
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ replayRequest(id: $id){ id } }`, map[string]any{"id": req}, nil)

	var out struct {
		Viewer struct {
			Tenant struct {
				CreditBalance int
				Usage         struct {
					Period                                                                 string
					RequestsAccepted, ManualRetries, Replays, CreditsSpent, CreditsGranted int
				}
			}
		}
	}
	env.MustGraphQL(tn.Member, `{ viewer { tenant { creditBalance usage { period requestsAccepted manualRetries replays creditsSpent creditsGranted } } } }`, nil, &out)
	u := out.Viewer.Tenant.Usage
	require.Equal(t, time.Now().UTC().Format("2006-01"), u.Period)
	require.Equal(t, 4, u.RequestsAccepted)
	require.Equal(t, 1, u.Replays)
	require.Equal(t, 0, u.ManualRetries)
	require.Equal(t, 5, u.CreditsSpent)
	require.Equal(t, 100, u.CreditsGranted)
	require.Equal(t, 95, out.Viewer.Tenant.CreditBalance)

	// Operators list tenants with balance and usage; a past period is empty.
	var list struct {
		Tenants struct {
			Edges []struct {
				Node struct {
					ID            string
					CreditBalance int
					Usage         struct{ RequestsAccepted int }
					Old           struct{ RequestsAccepted int }
				}
			}
		}
	}
	env.MustGraphQL(env.AdminToken(), `{ tenants(first: 10) { edges { node { id creditBalance usage { requestsAccepted } old: usage(period: "2001-01") { requestsAccepted } } } } }`, nil, &list)
	seen := map[string]int{}
	for _, e := range list.Tenants.Edges {
		seen[e.Node.ID] = e.Node.Usage.RequestsAccepted
		require.Zero(t, e.Node.Old.RequestsAccepted)
	}
	require.Equal(t, 4, seen[tn.ID])
	require.Equal(t, 0, seen[other.ID])

	bad := env.GraphQL(tn.Owner, `{ viewer { tenant { usage(period: "November") { period } } } }`, nil)
	require.Equal(t, "INVALID_INPUT", bad.Code())
}
