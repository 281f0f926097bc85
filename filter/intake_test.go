package filter_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/filter"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
)

// receiver records the paths it was called on: each recipient of a test posts to a path of its own.
type receiver struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string]int
}

func newReceiver(t *testing.T) *receiver {
	rcv := &receiver{calls: map[string]int{}}
	rcv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rcv.mu.Lock()
		rcv.calls[r.URL.Path]++
		rcv.mu.Unlock()
	}))
	t.Cleanup(rcv.Close)
	return rcv
}

func (r *receiver) count(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[path]
}

type routed struct {
	Status      string
	FilteredOut []struct{ ID, Name string }
	Deliveries  []struct {
		Status    string
		Recipient struct{ Name string }
	}
}

// route reads how a request was routed once its deliveries are done: the names of the recipients that got a
// delivery, and of those filtered out.
func route(t *testing.T, env *relaytest.Env, tn relaytest.Tenant, id string) (got, out []string) {
	t.Helper()
	var r struct{ Request routed }
	relaytest.Eventually(t, 20*time.Second, "request "+id+" settled", func() bool {
		env.MustGraphQL(tn.Member, `query($id: ID!){ request(id: $id){ status filteredOut { id name }
			deliveries { status recipient { name } } } }`, map[string]any{"id": id}, &r)
		return r.Request.Status != "PENDING"
	})
	for _, d := range r.Request.Deliveries {
		require.Equal(t, "SUCCEEDED", d.Status, d.Recipient.Name)
		got = append(got, d.Recipient.Name)
	}
	for _, f := range r.Request.FilteredOut {
		out = append(out, f.Name)
	}
	slices.Sort(got)
	slices.Sort(out)
	return got, out
}

// Each operator, dot paths into arrays and headers by any case, through intake: one request to a server whose
// recipients each hold one rule; those whose rule matches get the request, the others are listed as filtered
// out, by name.
func TestIntakeRoutesByEachRecipientsFilter(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 100, MaxRecipientsPerServer: 60})
	srv := env.NewServer(tn, "stripe", nil)
	rcv := newReceiver(t)
	rules := []struct {
		name, rule string
		match      bool
	}{
		{"everything", ``, true},
		{"eq", `{"body.type": "invoice.paid"}`, true},
		{"eq-miss", `{"body.type": {"$eq": "invoice.failed"}}`, false},
		{"neq", `{"body.type": {"$neq": "invoice.failed"}}`, true},
		{"neq-miss", `{"body.type": {"$neq": "invoice.paid"}}`, false},
		{"gt", `{"body.data.object.amount": {"$gt": 2499}}`, true},
		{"gt-miss", `{"body.data.object.amount": {"$gt": 2500}}`, false},
		{"gte", `{"body.data.object.amount": {"$gte": 2500}}`, true},
		{"lt", `{"body.data.object.amount": {"$lt": 2500.5}}`, true},
		{"lte-miss", `{"body.data.object.amount": {"$lte": 2499}}`, false},
		{"in", `{"body.data.object.currency": {"$in": ["usd", "eur"]}}`, true},
		{"in-miss", `{"body.data.object.currency": {"$in": ["usd"]}}`, false},
		{"nin", `{"body.data.object.currency": {"$nin": ["usd"]}}`, true},
		{"nin-miss", `{"body.data.object.currency": {"$nin": ["eur"]}}`, false},
		{"exists", `{"body.data.object.customer": {"$exists": true}}`, true},
		{"exists-miss", `{"body.data.object.refund": {"$exists": true}}`, false},
		{"regex", `{"body.data.object.note": {"$regex": "^rush"}}`, true},
		{"regex-miss", `{"body.data.object.note": {"$regex": "^slow"}}`, false},
		{"and", `{"$and": [{"method": "POST"}, {"path": "/v1/events"}]}`, true},
		{"and-miss", `{"$and": [{"method": "POST"}, {"path": "/v2"}]}`, false},
		{"or", `{"$or": [{"method": "GET"}, {"query.live": "true"}]}`, true},
		{"or-miss", `{"$or": [{"method": "GET"}, {"query.live": "false"}]}`, false},
		{"not", `{"$not": {"body.livemode": true}}`, true},
		{"not-miss", `{"body.type": {"$not": {"$regex": "^invoice\\."}}}`, false},
		{"array-index", `{"body.data.object.lines.1.sku": "B-7"}`, true},
		{"array-index-miss", `{"body.data.object.lines.0.sku": "B-7"}`, false},
		{"array-each", `{"body.data.object.lines.sku": "B-7"}`, true},
		{"array-each-miss", `{"body.data.object.lines.sku": "C-9"}`, false},
		{"array-contains", `{"body.data.object.lines.tags": "gift"}`, true},
		{"header-any-case", `{"headers.x-github-event": "push"}`, true},
		{"header-upper-case", `{"headers.X-GITHUB-EVENT": {"$in": ["push", "ping"]}}`, true},
		{"header-miss", `{"headers.x-github-event": "ping"}`, false},
		{"nested", `{"body": {"data": {"object": {"amount": {"$gte": 1000, "$lt": 5000}}}}}`, true},
	}
	for _, r := range rules {
		in := map[string]any{"name": r.name, "method": "DIRECT_HTTP", "url": rcv.URL + "/" + r.name}
		if r.rule != "" {
			in["filter"] = json.RawMessage(r.rule)
		}
		env.NewRecipient(tn, srv.ID, in)
	}
	header := http.Header{"Content-Type": {"application/json"}, "X-GitHub-Event": {"push"}}
	id := env.SendWith(srv.Key, "/v1/events?live=true", order, header)
	got, out := route(t, env, tn, id)
	var wantGot, wantOut []string
	for _, r := range rules {
		if r.match {
			wantGot = append(wantGot, r.name)
		} else {
			wantOut = append(wantOut, r.name)
		}
	}
	slices.Sort(wantGot)
	slices.Sort(wantOut)
	require.Equal(t, wantGot, got)
	require.Equal(t, wantOut, out)
	for _, r := range rules {
		want := 0
		if r.match {
			want = 1
		}
		require.Equal(t, want, rcv.count("/"+r.name+"/v1/events"), r.name)
	}
	// The rule reads back as it was saved.
	var back struct {
		Server struct {
			Recipients []struct {
				Name   string
				Filter json.RawMessage
			}
		}
	}
	env.MustGraphQL(tn.Member, `query($id: ID!){ server(id: $id){ recipients { name filter } } }`, map[string]any{"id": srv.ID}, &back)
	for _, r := range back.Server.Recipients {
		switch r.Name {
		case "everything":
			require.Equal(t, "null", string(r.Filter))
		case "eq":
			require.JSONEq(t, `{"body.type": "invoice.paid"}`, string(r.Filter))
		}
	}
}

// A request that matches no recipient's rule is stored and charged, with no delivery: every recipient is
// listed as filtered out.
func TestRequestFilteredOutForEveryRecipient(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 10)
	rcv := newReceiver(t)
	env.NewRecipient(tn, srv.ID, map[string]any{"name": "a", "method": "DIRECT_HTTP", "url": rcv.URL + "/a",
		"filter": map[string]any{"body.type": "x"}})
	env.NewRecipient(tn, srv.ID, map[string]any{"name": "b", "method": "CLI", "filter": map[string]any{"method": "GET"}})
	id := env.Send(srv.Key, "", `{"type": "y"}`)
	got, out := route(t, env, tn, id)
	require.Empty(t, got)
	require.Equal(t, []string{"a", "b"}, out)
	var bal struct {
		Viewer struct{ Tenant struct{ CreditBalance int } }
	}
	env.MustGraphQL(tn.Owner, `{ viewer { tenant { creditBalance } } }`, nil, &bal)
	require.Equal(t, 9, bal.Viewer.Tenant.CreditBalance, "a request filtered out is still accepted, and paid for")
}

// Rules are refused with INVALID_INPUT and a message that points at the bad part, on create and on update;
// an update with no filter keeps the rule, clearFilter removes it.
func TestInvalidFiltersAreRefused(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 10)
	create := `mutation($in: CreateRecipientInput!){ createRecipient(input: $in){ id filter } }`
	for _, c := range []struct {
		rule any
		msg  string
	}{
		{map[string]any{"body.amount": map[string]any{"$gte": "x", "$lt": true}}, `filter: $.body.amount.$lt: expected a number or a string`},
		{map[string]any{"$or": []any{map[string]any{"method": "GET"}, 3}}, `filter: $.$or[1]: expected a rule (a JSON object)`},
		{map[string]any{"bdy.x": 1}, `filter: $.bdy.x: unknown field "bdy"`},
		{map[string]any{"body.s": map[string]any{"$regex": "a(b"}}, `filter: $.body.s.$regex: invalid pattern`},
		{map[string]any{"body.s": map[string]any{"$regex": strings.Repeat("x", filter.MaxPattern+1)}}, `a pattern is at most 256 bytes`},
		{map[string]any{"body.s": map[string]any{"$in": make([]int, filter.MaxListValues+1)}}, `expected at most 256 values`},
		{"invoice.paid", `filter: $: a rule is a JSON object`},
		{map[string]any{"body.s": strings.Repeat("x", filter.MaxRuleBytes)}, `a rule is at most 16384 bytes`},
	} {
		resp := env.GraphQL(tn.Owner, create, map[string]any{"in": map[string]any{
			"serverId": srv.ID, "name": "r", "method": "DIRECT_HTTP", "url": "http://127.0.0.1:1/x", "filter": c.rule}})
		require.Equal(t, "INVALID_INPUT", resp.Code(), "%v", c.rule)
		require.Contains(t, resp.Errors[0].Message, c.msg)
	}
	var none struct {
		Server struct{ Recipients []struct{ ID string } }
	}
	env.MustGraphQL(tn.Owner, `query($id: ID!){ server(id: $id){ recipients { id } } }`, map[string]any{"id": srv.ID}, &none)
	require.Empty(t, none.Server.Recipients, "nothing half-written")

	id := env.NewRecipient(tn, srv.ID, map[string]any{"name": "r", "method": "DIRECT_HTTP", "url": "http://127.0.0.1:1/x",
		"filter": map[string]any{"method": "POST"}})
	update := `mutation($id: ID!, $in: UpdateRecipientInput!){ updateRecipient(id: $id, input: $in){ filter } }`
	resp := env.GraphQL(tn.Owner, update, map[string]any{"id": id, "in": map[string]any{"filter": map[string]any{"query.a.b": 1}}})
	require.Equal(t, "INVALID_INPUT", resp.Code())
	require.Contains(t, resp.Errors[0].Message, "filter: $.query.a.b: a query parameter has no fields")
	var out struct {
		UpdateRecipient struct{ Filter json.RawMessage }
	}
	env.MustGraphQL(tn.Owner, update, map[string]any{"id": id, "in": map[string]any{"name": "renamed"}}, &out)
	require.JSONEq(t, `{"method": "POST"}`, string(out.UpdateRecipient.Filter), "an update without a filter keeps it")
	env.MustGraphQL(tn.Owner, update, map[string]any{"id": id, "in": map[string]any{"clearFilter": true}}, &out)
	require.Equal(t, "null", string(out.UpdateRecipient.Filter))
}

// A body larger than filter.MaxBodyParsed is not parsed: rules on its fields do not match; rules on the rest
// of the request still do.
func TestLargeBodiesAreNotParsedAtIntake(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 10, func(c *relay.Config) { c.MaxBodyBytes = 2 * filter.MaxBodyParsed })
	rcv := newReceiver(t)
	env.NewRecipient(tn, srv.ID, map[string]any{"name": "on-body", "method": "DIRECT_HTTP", "url": rcv.URL + "/b",
		"filter": map[string]any{"body.type": "big"}})
	env.NewRecipient(tn, srv.ID, map[string]any{"name": "on-path", "method": "DIRECT_HTTP", "url": rcv.URL + "/p",
		"filter": map[string]any{"path": "/big"}})
	big := fmt.Sprintf(`{"type": "big", "pad": %q}`, strings.Repeat("a", filter.MaxBodyParsed))
	got, out := route(t, env, tn, env.Send(srv.Key, "/big", big))
	require.Equal(t, []string{"on-path"}, got)
	require.Equal(t, []string{"on-body"}, out)
	got, _ = route(t, env, tn, env.Send(srv.Key, "/big", `{"type": "big"}`))
	require.Equal(t, []string{"on-body", "on-path"}, got)
}

// A replay is routed by the filters as they are when it is replayed; the original keeps its routing.
func TestReplayAppliesCurrentFilters(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 10)
	rcv := newReceiver(t)
	a := env.NewRecipient(tn, srv.ID, map[string]any{"name": "a", "method": "DIRECT_HTTP", "url": rcv.URL + "/a",
		"filter": map[string]any{"body.type": "paid"}})
	b := env.NewRecipient(tn, srv.ID, map[string]any{"name": "b", "method": "DIRECT_HTTP", "url": rcv.URL + "/b",
		"filter": map[string]any{"body.type": "refunded"}})
	id := env.Send(srv.Key, "", `{"type": "paid"}`)
	got, out := route(t, env, tn, id)
	require.Equal(t, []string{"a"}, got)
	require.Equal(t, []string{"b"}, out)

	update := `mutation($id: ID!, $in: UpdateRecipientInput!){ updateRecipient(id: $id, input: $in){ id } }`
	env.MustGraphQL(tn.Owner, update, map[string]any{"id": a, "in": map[string]any{"filter": map[string]any{"body.type": "other"}}}, nil)
	env.MustGraphQL(tn.Owner, update, map[string]any{"id": b, "in": map[string]any{"clearFilter": true}}, nil)
	var replay struct{ ReplayRequest struct{ ID string } }
	env.MustGraphQL(tn.Member, `mutation($id: ID!){ replayRequest(id: $id){ id } }`, map[string]any{"id": id}, &replay)
	got, out = route(t, env, tn, replay.ReplayRequest.ID)
	require.Equal(t, []string{"b"}, got)
	require.Equal(t, []string{"a"}, out)
	got, out = route(t, env, tn, id)
	require.Equal(t, []string{"a"}, got, "the original is unchanged")
	require.Equal(t, []string{"b"}, out)
}

// testFilter tells whether a rule would match a stored request, or why it is refused; another tenant's request
// is not found.
func TestTestFilter(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 10)
	other, otherSrv := env.NewTenant("other", relaytest.PlanLimits{Credits: 5}), ""
	otherSrv = env.NewServer(other, "o", nil).Key
	req, err := http.NewRequest(http.MethodPost, env.Server.URL+"/in/"+srv.Key+"/hook?x=1", bytes.NewReader([]byte(order)))
	require.NoError(t, err)
	req.Header.Set("X-Shop-Topic", "orders/create")
	resp, err := env.Server.Client().Do(req)
	require.NoError(t, err)
	var accepted struct{ RequestID string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&accepted))
	resp.Body.Close()

	q := `query($f: JSON!, $id: ID!){ testFilter(filter: $f, requestId: $id){ matches error } }`
	type result struct {
		TestFilter struct {
			Matches bool
			Error   *string
		}
	}
	for _, c := range []struct {
		rule    any
		matches bool
		err     string
	}{
		{map[string]any{"headers.x-shop-topic": "orders/create", "query.x": 1, "path": "/hook"}, true, ""},
		{map[string]any{"body.data.object.lines.sku": map[string]any{"$in": []string{"B-7"}}}, true, ""},
		{map[string]any{"body.data.object.amount": map[string]any{"$lt": 100}}, false, ""},
		{map[string]any{"body.amount": map[string]any{"$gte": false}}, false, "$.body.amount.$gte: expected a number or a string"},
	} {
		var r result
		env.MustGraphQL(tn.Member, q, map[string]any{"f": c.rule, "id": accepted.RequestID}, &r)
		require.Equal(t, c.matches, r.TestFilter.Matches, "%v", c.rule)
		if c.err == "" {
			require.Nil(t, r.TestFilter.Error)
		} else {
			require.NotNil(t, r.TestFilter.Error)
			require.Equal(t, c.err, *r.TestFilter.Error)
		}
	}
	otherID := env.Send(otherSrv, "", `{}`)
	res := env.GraphQL(tn.Member, q, map[string]any{"f": map[string]any{"method": "POST"}, "id": otherID})
	require.Equal(t, "NOT_FOUND", res.Code())
}
