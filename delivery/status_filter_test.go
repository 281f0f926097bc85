package delivery_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The derived request status is stored, so a server's requests can be filtered by it.
func TestRequestsFilteredByStatus(t *testing.T) {
	t.Parallel()
	env, tn, srv := startFast(t, 20)
	other := env.NewServer(tn, "other", nil)
	// A fails requests whose path contains "allfail"; B fails those containing "fail" (so "allfail" too).
	failOn := func(word string) func(int, *http.Request) int {
		return func(_ int, r *http.Request) int {
			if strings.Contains(r.URL.Path, word) {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		}
	}
	a := newHook(t, failOn("allfail"))
	b := newHook(t, failOn("fail"))
	for _, s := range []string{srv.ID, other.ID} {
		env.NewRecipient(tn, s, map[string]any{"method": "DIRECT_HTTP", "url": a.URL, "maxAttempts": 1})
		env.NewRecipient(tn, s, map[string]any{"method": "DIRECT_HTTP", "url": b.URL, "maxAttempts": 1})
	}

	want := map[string]string{} // request ID → status
	for _, c := range []struct{ path, status string }{
		{"/ok", "DELIVERED"}, {"/fail-1", "PARTIAL"}, {"/allfail", "FAILED"}, {"/fail-2", "PARTIAL"}, {"/ok-2", "DELIVERED"},
	} {
		want[env.Send(srv.Key, c.path, `{}`)] = c.status
	}
	env.Send(other.Key, "/fail-other", `{}`) // PARTIAL, but on another server
	for id, status := range want {
		r := waitRequest(t, env, tn.Member, id, "request settled", func(r requestView) bool { return r.Status != "PENDING" })
		require.Equal(t, status, r.Status, "request %s (%s)", id, r.Path)
	}

	list := func(where map[string]any) []string {
		var out struct {
			Requests struct {
				TotalCount int
				Edges      []struct{ Node struct{ ID, Status string } }
			}
		}
		env.MustGraphQL(tn.Member, `query($s: ID!, $w: RequestWhereInput){ requests(serverId: $s, where: $w) {
			totalCount edges { node { id status } } } }`, map[string]any{"s": srv.ID, "w": where}, &out)
		var ids []string
		for _, e := range out.Requests.Edges {
			ids = append(ids, e.Node.ID)
		}
		require.Equal(t, len(ids), out.Requests.TotalCount)
		return ids
	}
	having := func(statuses ...string) []string {
		var ids []string
		for id, s := range want {
			for _, st := range statuses {
				if s == st {
					ids = append(ids, id)
				}
			}
		}
		return ids
	}
	require.ElementsMatch(t, having("PARTIAL"), list(map[string]any{"status": "PARTIAL"}))
	require.ElementsMatch(t, having("DELIVERED"), list(map[string]any{"status": "DELIVERED"}))
	require.ElementsMatch(t, having("FAILED"), list(map[string]any{"status": "FAILED"}))
	require.Empty(t, list(map[string]any{"status": "PENDING"}))
	require.ElementsMatch(t, having("FAILED", "PARTIAL"), list(map[string]any{"statusIn": []string{"FAILED", "PARTIAL"}}))
	require.Len(t, list(nil), len(want))
}
