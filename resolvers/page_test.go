package resolvers_test

import (
	"testing"

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
