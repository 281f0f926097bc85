package search_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/search"
)

// post sends a webhook with a header of its own and returns its request ID.
func post(t *testing.T, env *relaytest.Env, key, suffix, header string, body []byte) string {
	t.Helper()
	h := http.Header{}
	if header != "" {
		h.Set("X-Event", header)
	}
	return env.SendWith(key, suffix, string(body), h)
}

type page struct {
	Requests struct {
		TotalCount int
		Edges      []struct {
			Cursor string
			Node   struct{ ID string }
		}
		PageInfo struct {
			HasNextPage bool
			EndCursor   *string
		}
		Search *struct {
			Scanned      int
			StoppedEarly bool
			ExaminedTo   *string
		}
	}
}

func (p page) ids() []string {
	var out []string
	for _, e := range p.Requests.Edges {
		out = append(out, e.Node.ID)
	}
	return out
}

const searchQuery = `query($s: ID!, $q: String, $first: Int, $after: Cursor, $where: RequestWhereInput, $order: RequestOrder) {
	requests(serverId: $s, search: $q, first: $first, after: $after, where: $where, orderBy: $order) {
		totalCount
		edges { cursor node { id } }
		pageInfo { hasNextPage endCursor }
		search { scanned stoppedEarly examinedTo }
	}
}`

func searchPage(t *testing.T, env *relaytest.Env, token string, vars map[string]any) page {
	t.Helper()
	var p page
	env.MustGraphQL(token, searchQuery, vars, &p)
	return p
}

// A search finds the requests whose path, query, headers or body contain the text, in either case of ASCII
// letters, newest first, and nothing else; the bytes of a body that is not UTF-8 are searched as they are.
func TestSearchFindsTextInEveryPart(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 100)
	inPath := post(t, env, srv.Key, "/Orders/Created", "", []byte(`{}`))
	inQuery := post(t, env, srv.Key, "/x?kind=ORDER-paid", "", []byte(`{}`))
	inHeader := post(t, env, srv.Key, "", `order "shipped" <b>`, []byte(`{}`))
	inBody := post(t, env, srv.Key, "", "", []byte(`{"type":"Order.Refunded"}`))
	binary := post(t, env, srv.Key, "", "", []byte("\xff\xfe\x00ORDER\x00\xc3"))
	nonASCII := post(t, env, srv.Key, "", "", []byte(`{"city":"Zürich"}`))
	post(t, env, srv.Key, "/other", "", []byte(`{"type":"invoice"}`))

	got := searchPage(t, env, tn.Member, map[string]any{"s": srv.ID, "q": "order"})
	require.Equal(t, []string{binary, inBody, inHeader, inQuery, inPath}, got.ids(), "newest first")
	require.Equal(t, 5, got.Requests.TotalCount)
	require.False(t, got.Requests.PageInfo.HasNextPage)
	require.NotNil(t, got.Requests.Search)
	require.False(t, got.Requests.Search.StoppedEarly)
	require.Equal(t, 7, got.Requests.Search.Scanned)

	for q, want := range map[string][]string{
		`"shipped" <b`: {inHeader}, // as the sender wrote it, whatever JSON escapes
		"x-event":      {inHeader}, // header names too
		"ZÜRICH":       nil,        // letters beyond ASCII match as typed
		"zürich":       {nonASCII},
		"\x00ORD":      {binary},
		"refunded\"}":  {inBody},
	} {
		got := searchPage(t, env, tn.Member, map[string]any{"s": srv.ID, "q": q})
		require.Equal(t, want, got.ids(), "search %q", q)
	}
	// Without search the list is as before, with no search progress.
	got = searchPage(t, env, tn.Member, map[string]any{"s": srv.ID})
	require.Len(t, got.ids(), 7)
	require.Nil(t, got.Requests.Search)
}

// Search text shorter than three characters, a backward page, or another tenant's server are refused.
func TestSearchRefusesBadInput(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 10)
	other := env.NewTenant("other", relaytest.PlanLimits{Credits: 10})
	for _, c := range []struct {
		token, query string
		vars         map[string]any
		code         string
	}{
		{tn.Member, searchQuery, map[string]any{"s": srv.ID, "q": "ab"}, "INVALID_INPUT"},
		{tn.Member, searchQuery, map[string]any{"s": srv.ID, "q": ""}, "INVALID_INPUT"},
		{tn.Member, `query($s: ID!){ requests(serverId: $s, search: "abc", last: 5) { totalCount } }`, map[string]any{"s": srv.ID}, "INVALID_INPUT"},
		{other.Member, searchQuery, map[string]any{"s": srv.ID, "q": "abc"}, "NOT_FOUND"},
	} {
		resp := env.GraphQL(c.token, c.query, c.vars)
		require.Equal(t, c.code, resp.Code(), "%v", c.vars)
	}
}

// A search combines with the list's filters (status, received time) and pages through every match exactly
// once, in either order.
func TestSearchCombinesWithFiltersAndPages(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 100)
	var matches []string
	for i := range 12 {
		body := fmt.Sprintf(`{"n":%d,"kind":"match-me"}`, i)
		if i%3 == 0 {
			body = fmt.Sprintf(`{"n":%d}`, i)
			post(t, env, srv.Key, "", "", []byte(body))
			continue
		}
		matches = append(matches, post(t, env, srv.Key, "", "", []byte(body)))
	}
	newestFirst := slices.Clone(matches)
	slices.Reverse(newestFirst)

	for _, order := range []string{"DESC", "ASC"} {
		want := newestFirst
		if order == "ASC" {
			want = matches
		}
		var got []string
		var after any
		for range 10 {
			p := searchPage(t, env, tn.Member, map[string]any{"s": srv.ID, "q": "MATCH-ME", "first": 3, "after": after,
				"order": map[string]any{"field": "RECEIVED_AT", "direction": order}})
			got = append(got, p.ids()...)
			if !p.Requests.PageInfo.HasNextPage {
				break
			}
			require.Len(t, p.ids(), 3)
			after = *p.Requests.PageInfo.EndCursor
		}
		require.Equal(t, want, got, order)
	}

	// Every request here has no recipient, so every one is FAILED: a status filter of PENDING finds none, of
	// FAILED all the matches.
	require.Empty(t, searchPage(t, env, tn.Member, map[string]any{"s": srv.ID, "q": "match-me",
		"where": map[string]any{"status": "PENDING"}}).ids())
	require.Equal(t, newestFirst, searchPage(t, env, tn.Member, map[string]any{"s": srv.ID, "q": "match-me",
		"where": map[string]any{"status": "FAILED"}}).ids())

	// Conditions on edges too (evaluated per row, with the text): no request here has a delivery.
	require.Empty(t, searchPage(t, env, tn.Member, map[string]any{"s": srv.ID, "q": "match-me",
		"where": map[string]any{"hasDeliveries": true}}).ids())
	require.Equal(t, newestFirst, searchPage(t, env, tn.Member, map[string]any{"s": srv.ID, "q": "match-me",
		"where": map[string]any{"hasDeliveries": false, "or": []any{map[string]any{"status": "FAILED"}, map[string]any{"status": "PARTIAL"}}}}).ids())

	// A received-time range keeps to the requests inside it.
	var times struct {
		Requests struct {
			Edges []struct {
				Node struct{ ID, ReceivedAt string }
			}
		}
	}
	env.MustGraphQL(tn.Member, `query($s: ID!){ requests(serverId: $s, first: 50, orderBy: {field: RECEIVED_AT, direction: ASC}) {
		edges { node { id receivedAt } } } }`, map[string]any{"s": srv.ID}, &times)
	edges := times.Requests.Edges
	require.Len(t, edges, 12)
	// From the 5th request (index 4) on: matches are indexes 4, 5, 7, 8, 10, 11.
	since := edges[4].Node.ReceivedAt
	got := searchPage(t, env, tn.Member, map[string]any{"s": srv.ID, "q": "match-me",
		"where": map[string]any{"receivedAtGTE": since}})
	var want []string
	for _, id := range newestFirst {
		if slices.IndexFunc(edges, func(e struct {
			Node struct{ ID, ReceivedAt string }
		}) bool {
			return e.Node.ID == id && e.Node.ReceivedAt >= since
		}) >= 0 {
			want = append(want, id)
		}
	}
	require.Len(t, want, 6)
	require.Equal(t, want, got.ids())
}

// A search examines a bounded number of requests per call. One that reaches its bound says so and points past
// the last request it examined, so the next page goes on searching from there: a rare match among old requests
// is found after a few pages, each examining no more than the bound.
func TestSearchStopsAtItsBoundAndGoesOn(t *testing.T) {
	t.Parallel()
	const bound = 4
	env, tn, srv := relaytest.StartWithServer(t, 100, func(c *relay.Config) { c.Search = search.Bounds{MaxRows: bound} })
	rare := post(t, env, srv.Key, "", "", []byte(`{"needle":"haystack-rare"}`))
	for i := range 9 {
		post(t, env, srv.Key, "", "", []byte(fmt.Sprintf(`{"n":%d}`, i)))
	}

	var after any
	scanned := 0
	for call := 1; ; call++ {
		require.LessOrEqual(t, call, 3, "the rare request is found on the third call")
		p := searchPage(t, env, tn.Member, map[string]any{"s": srv.ID, "q": "HAYSTACK-RARE", "first": 5, "after": after})
		s := p.Requests.Search
		require.LessOrEqual(t, s.Scanned, bound)
		require.NotNil(t, s.ExaminedTo)
		scanned += s.Scanned
		if len(p.ids()) > 0 {
			require.Equal(t, []string{rare}, p.ids())
			require.False(t, s.StoppedEarly, "the last call reached the oldest request")
			require.False(t, p.Requests.PageInfo.HasNextPage)
			break
		}
		require.True(t, s.StoppedEarly)
		require.True(t, p.Requests.PageInfo.HasNextPage, "stopping early offers the next page")
		require.NotNil(t, p.Requests.PageInfo.EndCursor)
		after = *p.Requests.PageInfo.EndCursor
	}
	require.Equal(t, 10, scanned, "every request examined exactly once over the calls")
}
