package routing_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/ent/server"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

const createRecipient = `mutation($in: CreateRecipientInput!){ createRecipient(input: $in){ id maxAttempts retrySchedule timeoutSeconds url method } }`

func TestRecipientValidation(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	tn := env.NewTenant("valid", relaytest.PlanLimits{Credits: 1, MaxRecipientsPerServer: 50})
	srv := env.NewServer(tn, "valid", nil)

	direct := func(extra map[string]any) map[string]any {
		in := map[string]any{"serverId": srv.ID, "name": "r", "method": "DIRECT_HTTP", "url": "https://example.com/hook"}
		for k, v := range extra {
			in[k] = v
		}
		return in
	}
	bad := []struct {
		name    string
		in      map[string]any
		message string // what the error must mention
	}{
		{"maxAttempts 0", direct(map[string]any{"maxAttempts": 0}), "maxAttempts"},
		{"maxAttempts -1", direct(map[string]any{"maxAttempts": -1}), "maxAttempts"},
		{"maxAttempts 11 QUADRATIC", direct(map[string]any{"maxAttempts": 11}), "maxAttempts"},
		{"maxAttempts 11 explicit QUADRATIC", direct(map[string]any{"maxAttempts": 11, "retrySchedule": "QUADRATIC"}), "maxAttempts"},
		{"maxAttempts 11 STEPPED", direct(map[string]any{"maxAttempts": 11, "retrySchedule": "STEPPED"}), "maxAttempts"},
		{"maxAttempts 13 EXPONENTIAL", direct(map[string]any{"maxAttempts": 13, "retrySchedule": "EXPONENTIAL"}), "maxAttempts"},
		{"DIRECT_HTTP without url", map[string]any{"serverId": srv.ID, "name": "r", "method": "DIRECT_HTTP"}, "url"},
		{"DIRECT_HTTP empty url", direct(map[string]any{"url": "  "}), "url"},
		{"ftp url", direct(map[string]any{"url": "ftp://example.com/hook"}), "url"},
		{"file url", direct(map[string]any{"url": "file:///etc/passwd"}), "url"},
		{"no host", direct(map[string]any{"url": "http://"}), "url"},
		{"no host with path", direct(map[string]any{"url": "http:///hook"}), "url"},
		{"relative", direct(map[string]any{"url": "/hook"}), "url"},
		{"no scheme", direct(map[string]any{"url": "example.com/hook"}), "url"},
		{"credentials", direct(map[string]any{"url": "https://user:pass@example.com/hook"}), "url"},
		{"user only", direct(map[string]any{"url": "https://user@example.com/hook"}), "url"},
		{"fragment", direct(map[string]any{"url": "https://example.com/hook#x"}), "url"},
		{"garbage", direct(map[string]any{"url": "http://exa mple.com/%zz"}), "url"},
		{"too long", direct(map[string]any{"url": "https://example.com/" + strings.Repeat("a", 2100)}), "url"},
		{"CLI with url", map[string]any{"serverId": srv.ID, "name": "r", "method": "CLI", "url": "http://localhost:3000"}, "url"},
		{"timeout 0", direct(map[string]any{"timeoutSeconds": 0}), "timeoutSeconds"},
		{"timeout 31", direct(map[string]any{"timeoutSeconds": 31}), "timeoutSeconds"},
		{"timeout -1", direct(map[string]any{"timeoutSeconds": -1}), "timeoutSeconds"},
		{"empty name", direct(map[string]any{"name": "   "}), "name"},
		{"long name", direct(map[string]any{"name": strings.Repeat("n", 201)}), "name"},
	}
	for _, c := range bad {
		resp := env.GraphQL(tn.Owner, createRecipient, map[string]any{"in": c.in})
		require.Equal(t, "INVALID_INPUT", resp.Code(), "%s: %+v", c.name, resp.Errors)
		require.Contains(t, resp.Errors[0].Message, c.message, c.name)
	}

	good := []struct {
		name string
		in   map[string]any
		want map[string]any
	}{
		{"defaults", direct(nil), map[string]any{"maxAttempts": 10.0, "retrySchedule": "QUADRATIC", "timeoutSeconds": 30.0}},
		{"maxAttempts 1", direct(map[string]any{"maxAttempts": 1}), map[string]any{"maxAttempts": 1.0}},
		{"maxAttempts 10 STEPPED", direct(map[string]any{"maxAttempts": 10, "retrySchedule": "STEPPED"}), map[string]any{"maxAttempts": 10.0}},
		{"maxAttempts 11 EXPONENTIAL", direct(map[string]any{"maxAttempts": 11, "retrySchedule": "EXPONENTIAL"}), map[string]any{"maxAttempts": 11.0, "retrySchedule": "EXPONENTIAL"}},
		{"maxAttempts 12 EXPONENTIAL", direct(map[string]any{"maxAttempts": 12, "retrySchedule": "EXPONENTIAL"}), map[string]any{"maxAttempts": 12.0, "retrySchedule": "EXPONENTIAL"}},
		{"timeout 1", direct(map[string]any{"timeoutSeconds": 1}), map[string]any{"timeoutSeconds": 1.0}},
		{"timeout 30", direct(map[string]any{"timeoutSeconds": 30}), map[string]any{"timeoutSeconds": 30.0}},
		{"http with port and query", direct(map[string]any{"url": "http://10.0.0.5:8080/hook?x=1"}), map[string]any{"url": "http://10.0.0.5:8080/hook?x=1"}},
		{"CLI without url", map[string]any{"serverId": srv.ID, "name": "cli", "method": "CLI"}, map[string]any{"url": "", "method": "CLI"}},
	}
	for _, c := range good {
		var out struct{ CreateRecipient map[string]any }
		env.MustGraphQL(tn.Owner, createRecipient, map[string]any{"in": c.in}, &out)
		for k, v := range c.want {
			require.Equal(t, v, out.CreateRecipient[k], "%s: %s", c.name, k)
		}
	}
}

func TestUpdateRecipientValidation(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartTenantServer(t, "upd", 1)
	id := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": "https://example.com/a"})
	cli := env.NewRecipient(tn, srv.ID, map[string]any{"method": "CLI"})
	const q = `mutation($id: ID!, $in: UpdateRecipientInput!){ updateRecipient(id: $id, input: $in){ id maxAttempts retrySchedule url timeoutSeconds } }`

	for name, in := range map[string]map[string]any{
		"maxAttempts 11 on QUADRATIC": {"maxAttempts": 11},
		"maxAttempts 0":               {"maxAttempts": 0},
		"ftp url":                     {"url": "ftp://example.com"},
		"credentials":                 {"url": "https://a:b@example.com"},
		"clear url of DIRECT_HTTP":    {"url": ""},
		"timeout 31":                  {"timeoutSeconds": 31},
		"empty name":                  {"name": ""},
	} {
		resp := env.GraphQL(tn.Owner, q, map[string]any{"id": id, "in": in})
		require.Equal(t, "INVALID_INPUT", resp.Code(), "%s: %+v", name, resp.Errors)
	}
	resp := env.GraphQL(tn.Owner, q, map[string]any{"id": cli, "in": map[string]any{"url": "http://localhost:1"}})
	require.Equal(t, "INVALID_INPUT", resp.Code(), "a CLI recipient takes no url: %+v", resp.Errors)

	// Schedule and attempts are validated together: 12 becomes valid with EXPONENTIAL, and going back to
	// QUADRATIC while at 12 is refused.
	var out struct {
		UpdateRecipient struct {
			MaxAttempts   int
			RetrySchedule string
		}
	}
	env.MustGraphQL(tn.Owner, q, map[string]any{"id": id, "in": map[string]any{"maxAttempts": 12, "retrySchedule": "EXPONENTIAL"}}, &out)
	require.Equal(t, 12, out.UpdateRecipient.MaxAttempts)
	resp = env.GraphQL(tn.Owner, q, map[string]any{"id": id, "in": map[string]any{"maxAttempts": 13}})
	require.Equal(t, "INVALID_INPUT", resp.Code(), "13 is past EXPONENTIAL's 12: %+v", resp.Errors)
	resp = env.GraphQL(tn.Owner, q, map[string]any{"id": id, "in": map[string]any{"retrySchedule": "QUADRATIC"}})
	require.Equal(t, "INVALID_INPUT", resp.Code(), "%+v", resp.Errors)
	env.MustGraphQL(tn.Owner, q, map[string]any{"id": id, "in": map[string]any{"maxAttempts": 5, "retrySchedule": "STEPPED"}}, &out)
	require.Equal(t, "STEPPED", out.UpdateRecipient.RetrySchedule)

	// A deleted recipient is gone for updates.
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ deleteRecipient(id: $id){ id } }`, map[string]any{"id": id}, nil)
	resp = env.GraphQL(tn.Owner, q, map[string]any{"id": id, "in": map[string]any{"name": "x"}})
	require.Equal(t, "NOT_FOUND", resp.Code(), "%+v", resp.Errors)
}

func TestServerValidation(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	tn := env.NewTenant("srvval", relaytest.PlanLimits{Credits: 1})
	const q = `mutation($in: CreateServerInput!){ createServer(input: $in){ id } }`
	for name, in := range map[string]map[string]any{
		"empty name":       {"name": " "},
		"long name":        {"name": strings.Repeat("s", 201)},
		"retention 0":      {"name": "s", "retentionDays": 0},
		"retention -1":     {"name": "s", "retentionDays": -1},
		"retention 100000": {"name": "s", "retentionDays": 100000},
	} {
		resp := env.GraphQL(tn.Owner, q, map[string]any{"in": in})
		require.Equal(t, "INVALID_INPUT", resp.Code(), "%s: %+v", name, resp.Errors)
	}
	srv := env.NewServer(tn, "ok", map[string]any{"retentionDays": 3})
	const upd = `mutation($id: ID!, $in: UpdateServerInput!){ updateServer(id: $id, input: $in){ id name retentionDays deliverPendingOnConnect } }`
	resp := env.GraphQL(tn.Owner, upd, map[string]any{"id": srv.ID, "in": map[string]any{"retentionDays": 0}})
	require.Equal(t, "INVALID_INPUT", resp.Code(), "%+v", resp.Errors)
	var out struct {
		UpdateServer struct {
			Name                    string
			RetentionDays           *int
			DeliverPendingOnConnect bool
		}
	}
	env.MustGraphQL(tn.Owner, upd, map[string]any{"id": srv.ID, "in": map[string]any{"name": "renamed", "deliverPendingOnConnect": true, "clearRetentionDays": true}}, &out)
	require.Equal(t, "renamed", out.UpdateServer.Name)
	require.Nil(t, out.UpdateServer.RetentionDays)
	require.True(t, out.UpdateServer.DeliverPendingOnConnect)

	// Operators must name the tenant; an unknown one is NOT_FOUND.
	resp = env.GraphQL(env.AdminToken(), q, map[string]any{"in": map[string]any{"name": "s"}})
	require.Equal(t, "INVALID_INPUT", resp.Code(), "%+v", resp.Errors)
	resp = env.GraphQL(env.AdminToken(), q, map[string]any{"in": map[string]any{"name": "s", "tenantId": "999999"}})
	require.Equal(t, "NOT_FOUND", resp.Code(), "%+v", resp.Errors)
	env.MustGraphQL(env.AdminToken(), q, map[string]any{"in": map[string]any{"name": "by-operator", "tenantId": tn.ID}}, nil)
}

func TestPlanLimits(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	tn := env.NewTenant("limits", relaytest.PlanLimits{Credits: 1, MaxServers: 2, MaxRecipientsPerServer: 2})
	s1 := env.NewServer(tn, "one", nil)
	env.NewServer(tn, "two", nil)
	const q = `mutation($in: CreateServerInput!){ createServer(input: $in){ id } }`
	resp := env.GraphQL(tn.Owner, q, map[string]any{"in": map[string]any{"name": "three"}})
	require.Equal(t, "INVALID_INPUT", resp.Code(), "%+v", resp.Errors)
	require.Contains(t, resp.Errors[0].Message, "allows 2 servers")
	// Operators are held to the tenant's plan too.
	resp = env.GraphQL(env.AdminToken(), q, map[string]any{"in": map[string]any{"name": "three", "tenantId": tn.ID}})
	require.Equal(t, "INVALID_INPUT", resp.Code(), "%+v", resp.Errors)

	// A deleted server frees its slot.
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ deleteServer(id: $id){ id } }`, map[string]any{"id": s1.ID}, nil)
	s3 := env.NewServer(tn, "three", nil)

	r1 := env.NewRecipient(tn, s3.ID, map[string]any{"method": "CLI"})
	env.NewRecipient(tn, s3.ID, map[string]any{"method": "CLI"})
	resp = env.GraphQL(tn.Owner, createRecipient, map[string]any{"in": map[string]any{"serverId": s3.ID, "name": "third", "method": "CLI"}})
	require.Equal(t, "INVALID_INPUT", resp.Code(), "%+v", resp.Errors)
	require.Contains(t, resp.Errors[0].Message, "allows 2 recipients per server")
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ deleteRecipient(id: $id){ id } }`, map[string]any{"id": r1}, nil)
	env.NewRecipient(tn, s3.ID, map[string]any{"method": "CLI"})

	// The limit is per server: another server has its own.
	var srvs struct {
		Servers struct {
			Edges []struct{ Node struct{ ID string } }
		}
	}
	env.MustGraphQL(tn.Owner, `{ servers(first: 10){ edges { node { id } } } }`, nil, &srvs)
	require.Len(t, srvs.Servers.Edges, 2, "deleted servers are not listed")
	var s2 string
	for _, e := range srvs.Servers.Edges {
		if e.Node.ID != s3.ID {
			s2 = e.Node.ID
		}
	}
	env.NewRecipient(tn, s2, map[string]any{"method": "CLI"})
	env.NewRecipient(tn, s2, map[string]any{"method": "CLI"})

	// Recipients cannot be added to a deleted server.
	resp = env.GraphQL(tn.Owner, createRecipient, map[string]any{"in": map[string]any{"serverId": s1.ID, "name": "late", "method": "CLI"}})
	require.Equal(t, "NOT_FOUND", resp.Code(), "%+v", resp.Errors)
}

var keyPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{43,}$`)

func TestInboundURL(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	tn := env.NewTenant("urls", relaytest.PlanLimits{Credits: 1})
	keys := map[string]bool{}
	for i := range 5 {
		srv := env.NewServer(tn, "s"+strconv.Itoa(i), nil)
		u, err := url.Parse(srv.InboundURL)
		require.NoError(t, err)
		require.True(t, u.IsAbs(), srv.InboundURL)
		require.Equal(t, "http", u.Scheme)
		require.Equal(t, env.Server.Listener.Addr().String(), u.Host, "the public URL's host")
		require.True(t, strings.HasPrefix(u.Path, "/in/"), u.Path)
		key := strings.TrimPrefix(u.Path, "/in/")
		require.Regexp(t, keyPattern, key, "an unguessable (≥256-bit), URL-safe key")
		require.False(t, keys[key], "keys are unique")
		keys[key] = true
	}
	// The key is not exposed anywhere else (it is the server's credential), but the URL is stable.
	var out struct {
		Servers struct {
			Edges []struct{ Node map[string]any }
		}
	}
	env.MustGraphQL(tn.Member, `{ servers(first: 10){ edges { node { id name inboundUrl } } } }`, nil, &out)
	require.Len(t, out.Servers.Edges, 5)
	for _, e := range out.Servers.Edges {
		key := strings.TrimPrefix(e.Node["inboundUrl"].(string), env.Server.URL+"/in/")
		require.True(t, keys[key])
	}
}

// TestDeleteServer: intake stops, recipients are deleted, their pending deliveries cancelled; the stored
// requests stay readable.
func TestDeleteServer(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartTenantServer(t, "del", 10)
	r1 := env.NewRecipient(tn, srv.ID, map[string]any{"method": "CLI"})
	r2 := env.NewRecipient(tn, srv.ID, map[string]any{"method": "CLI"})
	keep := env.NewServer(tn, "keep", nil)
	rk := env.NewRecipient(tn, keep.ID, map[string]any{"method": "CLI"})

	var ids []string
	for range 2 {
		resp := env.Post(srv.Key, "/x", []byte(`{"a":1}`))
		resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
	}
	resp := env.Post(keep.Key, "", []byte(`{}`))
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	ctx := viewer.SystemContext(t.Context())
	db := env.DB.Client
	sid := relaytest.RowID(t, srv.ID)
	reqs, err := db.Request.Query().Where(request.ServerID(sid)).IDs(ctx)
	require.NoError(t, err)
	require.Len(t, reqs, 2)
	for _, id := range reqs {
		ids = append(ids, strconv.Itoa(id))
	}

	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ deleteServer(id: $id){ id deletedAt } }`, map[string]any{"id": srv.ID}, nil)

	for _, rid := range []string{r1, r2} {
		r, err := db.Recipient.Get(ctx, relaytest.RowID(t, rid))
		require.NoError(t, err)
		require.NotNil(t, r.DeletedAt, "recipient %s deleted with its server", rid)
		ds, err := db.Delivery.Query().Where(delivery.RecipientID(r.ID)).All(ctx)
		require.NoError(t, err)
		require.Len(t, ds, 2)
		for _, d := range ds {
			require.Equal(t, delivery.StatusCANCELED, d.Status, "pending delivery cancelled")
			require.NotNil(t, d.FinishedAt)
			require.Nil(t, d.NextAttemptAt)
		}
	}
	// The other server is untouched.
	rk2, err := db.Recipient.Get(ctx, relaytest.RowID(t, rk))
	require.NoError(t, err)
	require.Nil(t, rk2.DeletedAt)
	require.Equal(t, recipient.StateACTIVE, rk2.State)
	pending, err := db.Delivery.Query().Where(delivery.RecipientID(rk2.ID), delivery.StatusEQ(delivery.StatusPENDING)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, pending)

	// The requests stay readable, with their (cancelled) deliveries, and the request status follows.
	for _, id := range ids {
		var out struct {
			Request struct {
				ID         string
				Body       string
				Status     string
				Server     struct{ DeletedAt *string }
				Deliveries []struct{ Status string }
			}
		}
		env.MustGraphQL(tn.Member, `query($id: ID!){ request(id: $id){ id body status server { deletedAt } deliveries { status } } }`, map[string]any{"id": id}, &out)
		require.Equal(t, id, out.Request.ID)
		require.Equal(t, `{"a":1}`, out.Request.Body)
		require.NotNil(t, out.Request.Server.DeletedAt)
		require.Len(t, out.Request.Deliveries, 2)
		for _, d := range out.Request.Deliveries {
			require.Equal(t, "CANCELED", d.Status)
		}
		require.Equal(t, "FAILED", out.Request.Status, "no delivery can succeed any more")
	}
	var list struct{ Requests struct{ TotalCount int } }
	env.MustGraphQL(tn.Owner, `query($s: ID!){ requests(serverId: $s, first: 10){ totalCount } }`, map[string]any{"s": srv.ID}, &list)
	require.Equal(t, 2, list.Requests.TotalCount, "the deleted server's requests are still listed")

	// Deleting again, or changing the deleted server, is NOT_FOUND; the recipients are gone from the API.
	for _, q := range []string{
		`mutation($id: ID!){ deleteServer(id: $id){ id } }`,
		`mutation($id: ID!){ updateServer(id: $id, input: {name: "x"}){ id } }`,
	} {
		require.Equal(t, "NOT_FOUND", env.GraphQL(tn.Owner, q, map[string]any{"id": srv.ID}).Code())
	}
	var s struct {
		Server struct{ Recipients []struct{ ID string } }
	}
	env.MustGraphQL(tn.Owner, `query($id: ID!){ server(id: $id){ recipients { id } } }`, map[string]any{"id": srv.ID}, &s)
	require.Empty(t, s.Server.Recipients)
}

// TestPlanLimitsUnderConcurrency: parallel creates cannot together exceed a plan limit.
func TestPlanLimitsUnderConcurrency(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	tn := env.NewTenant("race", relaytest.PlanLimits{Credits: 1, MaxServers: 3, MaxRecipientsPerServer: 3})
	srv := env.NewServer(tn, "first", nil)

	run := func(n int, query string, vars func(i int) map[string]any) map[string]int {
		out := map[string]int{}
		for _, c := range env.ConcurrentCodes(n, tn.Owner, query, vars) {
			out[c]++
		}
		return out
	}
	got := run(12, `mutation($in: CreateServerInput!){ createServer(input: $in){ id } }`, func(i int) map[string]any {
		return map[string]any{"in": map[string]any{"name": "s" + strconv.Itoa(i)}}
	})
	require.Equal(t, map[string]int{"": 2, "INVALID_INPUT": 10}, got, "servers")
	got = run(12, createRecipient, func(i int) map[string]any {
		return map[string]any{"in": map[string]any{"serverId": srv.ID, "name": "r" + strconv.Itoa(i), "method": "CLI"}}
	})
	require.Equal(t, map[string]int{"": 3, "INVALID_INPUT": 9}, got, "recipients")

	ctx := viewer.SystemContext(t.Context())
	tid := relaytest.RowID(t, tn.ID)
	n, err := env.DB.Client.Server.Query().Where(server.TenantID(tid)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
}

// An owner's pause, resume and enable move a recipient's health as the health rules move it: enabling a
// DISABLED recipient forgets its failures and its probe; pausing and resuming keep its record.
func TestOwnerStateChangesFollowTheHealthRules(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartTenantServer(t, "health", 1)
	rid := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": "https://example.com/hook"})
	ctx := viewer.SystemContext(t.Context())
	id := relaytest.RowID(t, rid)
	change := func(mutation, want string) *ent.Recipient {
		t.Helper()
		var out map[string]struct{ State string }
		env.MustGraphQL(tn.Owner, `mutation($id: ID!){ `+mutation+`(id: $id){ state } }`, map[string]any{"id": rid}, &out)
		require.Equal(t, want, out[mutation].State, mutation)
		return env.DB.Client.Recipient.GetX(ctx, id)
	}

	r := change("pauseRecipient", "PAUSED")
	require.NotNil(t, r.StateChangedAt)
	env.DB.Client.Recipient.UpdateOneID(id).SetConsecutiveFailures(3).SetWindowAttempts(4).SetWindowFailures(3).ExecX(ctx)
	r = change("resumeRecipient", "ACTIVE")
	require.Equal(t, []int64{3, 4, 3}, []int64{r.ConsecutiveFailures, r.WindowAttempts, r.WindowFailures}, "resuming keeps the record")

	env.DB.Client.Recipient.UpdateOneID(id).SetState(recipient.StateDISABLED).SetNextProbeAt(time.Now()).ExecX(ctx)
	r = change("enableRecipient", "ACTIVE")
	require.Equal(t, []int64{0, 0, 0}, []int64{r.ConsecutiveFailures, r.WindowAttempts, r.WindowFailures}, "enabling forgets the failures")
	require.Nil(t, r.NextProbeAt, "an ACTIVE recipient has no probe due")
}

// TestRotateInboundKey: a rotation answers with a new key at once; the old one is accepted (202) for the grace
// and answers 404 after it, as does a key a second rotation replaced; grace 0 revokes at once. Only the
// tenant's owner or an operator rotates: a member gets FORBIDDEN, another tenant NOT_FOUND.
func TestRotateInboundKey(t *testing.T) {
	t.Parallel()
	env, clock := relaytest.StartAt(t, time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	tn := env.NewTenant("rotate", relaytest.PlanLimits{Credits: 100})
	other := env.NewTenant("rotate-other", relaytest.PlanLimits{Credits: 100})
	srv := env.NewServer(tn, "rotate", nil)
	prefix := env.Server.URL + "/in/"

	post := func(key string) int {
		t.Helper()
		resp := env.Post(key, "/hook", []byte(`{}`))
		resp.Body.Close()
		return resp.StatusCode
	}
	type rotated struct {
		InboundURL           string
		PreviousKeyExpiresAt *time.Time
	}
	const q = `mutation($id: ID!, $grace: Int){ rotateInboundKey(serverId: $id, graceSeconds: $grace){ inboundUrl previousKeyExpiresAt } }`
	rotate := func(token string, grace any) (string, rotated) {
		t.Helper()
		var out struct{ RotateInboundKey rotated }
		env.MustGraphQL(token, q, map[string]any{"id": srv.ID, "grace": grace}, &out)
		key, ok := strings.CutPrefix(out.RotateInboundKey.InboundURL, prefix)
		require.True(t, ok, out.RotateInboundKey.InboundURL)
		return key, out.RotateInboundKey
	}

	k0 := srv.Key
	require.Equal(t, http.StatusAccepted, post(k0))
	k1, got := rotate(tn.Owner, 3600)
	require.NotEqual(t, k0, k1)
	require.NotNil(t, got.PreviousKeyExpiresAt)
	require.True(t, clock.Now().Add(time.Hour).Equal(*got.PreviousKeyExpiresAt), "%v", got.PreviousKeyExpiresAt)
	require.Equal(t, http.StatusAccepted, post(k1), "the new key works at once")
	require.Equal(t, http.StatusAccepted, post(k0), "the old key works during the grace")
	clock.Advance(time.Hour - time.Second)
	require.Equal(t, http.StatusAccepted, post(k0), "the old key works until the grace ends")
	clock.Advance(time.Second)
	require.Equal(t, http.StatusNotFound, post(k0), "the old key is refused once the grace is over")
	require.Equal(t, http.StatusAccepted, post(k1))

	// The default grace is a day; a second rotation during it ends it: only one replaced key is kept.
	k2, got := rotate(tn.Owner, nil)
	require.True(t, clock.Now().Add(24*time.Hour).Equal(*got.PreviousKeyExpiresAt), "%v", got.PreviousKeyExpiresAt)
	require.Equal(t, http.StatusAccepted, post(k1))
	k3, _ := rotate(tn.Owner, 3600)
	require.Equal(t, http.StatusNotFound, post(k1), "a key replaced twice is refused at once")
	require.Equal(t, http.StatusAccepted, post(k2))
	require.Equal(t, http.StatusAccepted, post(k3))

	// Grace 0 revokes now, and with it the key still in its grace.
	k4, got := rotate(env.AdminToken(), 0)
	require.Nil(t, got.PreviousKeyExpiresAt)
	require.Equal(t, http.StatusNotFound, post(k3))
	require.Equal(t, http.StatusNotFound, post(k2))
	require.Equal(t, http.StatusAccepted, post(k4))

	// Refused: a grace out of bounds, a member, another tenant, a deleted server. The key stays as it was.
	for _, grace := range []int{-1, 30*24*3600 + 1} {
		resp := env.GraphQL(tn.Owner, q, map[string]any{"id": srv.ID, "grace": grace})
		require.Equal(t, "INVALID_INPUT", resp.Code(), "grace %d: %+v", grace, resp.Errors)
	}
	for _, tc := range []struct{ who, token, code string }{
		{"member", tn.Member, "FORBIDDEN"},
		{"another tenant's owner", other.Owner, "NOT_FOUND"},
		{"another tenant's member", other.Member, "FORBIDDEN"},
	} {
		resp := env.GraphQL(tc.token, q, map[string]any{"id": srv.ID, "grace": 3600})
		require.Equal(t, tc.code, resp.Code(), "%s: %+v", tc.who, resp.Errors)
		require.True(t, resp.Data == nil || string(resp.Data) == "null", "%s: %s", tc.who, resp.Data)
	}
	require.Equal(t, http.StatusAccepted, post(k4), "refused rotations changed nothing")
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ deleteServer(id: $id){ id } }`, map[string]any{"id": srv.ID}, nil)
	resp := env.GraphQL(tn.Owner, q, map[string]any{"id": srv.ID})
	require.Equal(t, "NOT_FOUND", resp.Code(), "a deleted server: %+v", resp.Errors)
	require.Equal(t, http.StatusNotFound, post(k4))
}
