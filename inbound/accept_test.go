package inbound_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/inbound"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

// send makes one inbound request and returns the status and, for a 202, the request ID.
func send(t *testing.T, env *relaytest.Env, method, key, suffix string, body []byte, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, env.Server.URL+"/in/"+key+suffix, bytes.NewReader(body))
	require.NoError(t, err)
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := env.Server.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"), "%d %s", resp.StatusCode, raw)
	var out struct{ RequestID string }
	if resp.StatusCode == http.StatusAccepted {
		require.NoError(t, json.Unmarshal(raw, &out), string(raw))
		require.NotEmpty(t, out.RequestID, string(raw))
	}
	return resp.StatusCode, out.RequestID
}

// state is what intake may change: the number of stored requests, deliveries, and the balance.
type state struct {
	requests, deliveries, ledger int
	balance                      int64
}

func stateOf(t *testing.T, env *relaytest.Env, tn relaytest.Tenant) state {
	t.Helper()
	ctx := viewer.SystemContext(t.Context())
	tid := relaytest.RowID(t, tn.ID)
	var s state
	var err error
	s.requests, err = env.DB.Client.Request.Query().Where(request.TenantID(tid)).Count(ctx)
	require.NoError(t, err)
	s.deliveries, err = env.DB.Client.Delivery.Query().Where(delivery.TenantID(tid)).Count(ctx)
	require.NoError(t, err)
	s.ledger, err = env.DB.Client.LedgerEntry.Query().Where(ledgerentry.TenantID(tid)).Count(ctx)
	require.NoError(t, err)
	tenant, err := env.DB.Client.Tenant.Get(ctx, tid)
	require.NoError(t, err)
	s.balance = tenant.CreditBalance
	return s
}

func storedRequest(t *testing.T, env *relaytest.Env, id string) *ent.Request {
	t.Helper()
	r, err := env.DB.Client.Request.Query().Where(request.ID(relaytest.RowID(t, id))).
		WithDeliveries(func(q *ent.DeliveryQuery) { q.Order(ent.Asc(delivery.FieldRecipientID)) }).
		Only(viewer.SystemContext(t.Context()))
	require.NoError(t, err)
	return r
}

func TestUnknownOrDeletedServerIs404(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartTenantServer(t, "gone", 10)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "CLI"})
	other := env.NewServer(tn, "other", nil)

	status, _ := send(t, env, http.MethodPost, srv.Key, "", []byte("{}"), nil)
	require.Equal(t, http.StatusAccepted, status, "control: the live server accepts")
	before := stateOf(t, env, tn)

	for _, key := range []string{
		"nosuchkey",
		strings.Repeat("A", len(srv.Key)),
		srv.Key[:len(srv.Key)-1], // a prefix of a real key is not that key
		srv.Key + "x",
	} {
		status, _ := send(t, env, http.MethodPost, key, "/x", []byte("{}"), nil)
		require.Equal(t, http.StatusNotFound, status, key)
	}
	for _, path := range []string{"/in/", "/in//x"} {
		resp, err := env.Server.Client().Post(env.Server.URL+path, "application/json", strings.NewReader("{}"))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}

	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ deleteServer(id: $id){ id deletedAt } }`, map[string]any{"id": srv.ID}, nil)
	for _, suffix := range []string{"", "/", "/deep/path?q=1"} {
		status, _ := send(t, env, http.MethodPost, srv.Key, suffix, []byte("{}"), nil)
		require.Equal(t, http.StatusNotFound, status, "deleted server stops intake at once (%q)", suffix)
	}
	require.Equal(t, before, stateOf(t, env, tn), "a 404 stores nothing and costs nothing")

	status, _ = send(t, env, http.MethodPost, other.Key, "", []byte("{}"), nil)
	require.Equal(t, http.StatusAccepted, status, "the tenant's other server is unaffected")
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	const limit = 64
	env := relaytest.Start(t, func(c *relay.Config) { c.MaxBodyBytes = limit })
	tn := env.NewTenant("big", relaytest.PlanLimits{Credits: 10})
	srv := env.NewServer(tn, "big", nil)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "CLI"})
	before := stateOf(t, env, tn)

	for _, n := range []int{limit + 1, 10 * limit, 2 << 20} {
		status, _ := send(t, env, http.MethodPost, srv.Key, "", bytes.Repeat([]byte("x"), n), nil)
		require.Equal(t, http.StatusRequestEntityTooLarge, status, "%d bytes", n)
	}
	// Without a Content-Length (chunked), the limit holds too.
	req, err := http.NewRequest(http.MethodPost, env.Server.URL+"/in/"+srv.Key, io.MultiReader(strings.NewReader(strings.Repeat("y", limit)), strings.NewReader("z")))
	require.NoError(t, err)
	req.ContentLength = -1
	resp, err := env.Server.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "chunked")
	require.Equal(t, before, stateOf(t, env, tn), "a 413 stores nothing and costs nothing")

	// A body that ends before its Content-Length is refused, and nothing of it stored.
	conn, err := net.Dial("tcp", env.Server.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /in/%s HTTP/1.1\r\nHost: relay\r\nContent-Length: 10\r\n\r\nabc", srv.Key)
	require.NoError(t, err)
	require.NoError(t, conn.(*net.TCPConn).CloseWrite())
	short, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	short.Body.Close()
	require.Equal(t, http.StatusBadRequest, short.StatusCode, "a body shorter than declared")
	require.Equal(t, before, stateOf(t, env, tn))

	body := bytes.Repeat([]byte("k"), limit)
	status, id := send(t, env, http.MethodPost, srv.Key, "", body, nil)
	require.Equal(t, http.StatusAccepted, status, "exactly the limit is accepted")
	require.Equal(t, body, storedRequest(t, env, id).Body)
	after := stateOf(t, env, tn)
	require.Equal(t, before.balance-1, after.balance)
	require.Equal(t, before.requests+1, after.requests)
}

func TestAnyMethodPathQueryHeadersBody(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartTenantServer(t, "methods", 100)

	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodHead, http.MethodOptions, "PROPFIND"} {
		if method == http.MethodHead {
			// A HEAD answer has no body to carry the request ID; find it in the database.
			req, err := http.NewRequest(method, env.Server.URL+"/in/"+srv.Key+"/head", nil)
			require.NoError(t, err)
			resp, err := env.Server.Client().Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusAccepted, resp.StatusCode, method)
			continue
		}
		status, id := send(t, env, method, srv.Key, "/m/"+strings.ToLower(method), nil, nil)
		require.Equal(t, http.StatusAccepted, status, method)
		r := storedRequest(t, env, id)
		require.Equal(t, method, r.Method)
		require.Equal(t, "/m/"+strings.ToLower(method), r.Path)
	}

	body := []byte{0x00, 0xff, 0xfe, '{', '"', 'a', '"', '}', 0x80}
	header := http.Header{
		"X-Signature":   {"sha256=abc"},
		"X-Multi":       {"one", "two"},
		"Authorization": {"Bearer meant-for-the-recipient"}, // not judged by intake
		"Content-Type":  {"application/octet-stream"},
	}
	status, id := send(t, env, http.MethodPost, srv.Key, "/hooks/stripe/evt%2F1?b=2&a=1&a=0&empty=", body, header)
	require.Equal(t, http.StatusAccepted, status)
	r := storedRequest(t, env, id)
	require.Equal(t, http.MethodPost, r.Method)
	require.Equal(t, "/hooks/stripe/evt%2F1", r.Path, "the path suffix as sent")
	require.Equal(t, "b=2&a=1&a=0&empty=", r.Query, "the raw query, order kept")
	require.Equal(t, body, r.Body, "the body byte for byte")
	require.Equal(t, []string{"sha256=abc"}, r.Headers.Values("X-Signature"))
	require.Equal(t, []string{"one", "two"}, r.Headers.Values("X-Multi"))
	require.Equal(t, []string{"Bearer meant-for-the-recipient"}, r.Headers.Values("Authorization"))
	require.Equal(t, "127.0.0.1", r.SourceAddr)
	require.WithinDuration(t, time.Now(), r.ReceivedAt, time.Minute)

	// The API shows the same.
	var out struct {
		Request struct {
			Method, Path, Query, BodyBase64 string
			BodySize                        int
			Headers                         []struct{ Name, Value string }
		}
	}
	env.MustGraphQL(tn.Member, `query($id: ID!){ request(id: $id){ method path query bodyBase64 bodySize headers { name value } } }`,
		map[string]any{"id": id}, &out)
	require.Equal(t, "/hooks/stripe/evt%2F1", out.Request.Path)
	require.Equal(t, "b=2&a=1&a=0&empty=", out.Request.Query)
	require.Equal(t, base64.StdEncoding.EncodeToString(body), out.Request.BodyBase64)
	require.Equal(t, len(body), out.Request.BodySize)
	var multi []string
	for _, h := range out.Request.Headers {
		if h.Name == "X-Multi" {
			multi = append(multi, h.Value)
		}
	}
	require.Equal(t, []string{"one", "two"}, multi)

	// Suffix forms: none, a bare slash, nested, and unclean paths (a sender's base URL ending in "/" plus
	// "/events" gives "//events"): stored as sent, never redirected to a cleaned path.
	for suffix, want := range map[string]string{
		"": "", "/": "/", "/a/b/": "/a/b/", "//events": "//events", "/a/../b": "/a/../b", "/./x": "/./x",
	} {
		status, id := send(t, env, http.MethodPost, srv.Key, suffix, nil, nil)
		require.Equal(t, http.StatusAccepted, status, suffix)
		require.Equal(t, want, storedRequest(t, env, id).Path, "suffix %q", suffix)
	}
}

func TestOneDeliveryPerLiveRecipient(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartTenantServer(t, "fanout", 10)
	r1 := env.NewRecipient(tn, srv.ID, map[string]any{"method": "CLI", "maxAttempts": 3})
	r2 := env.NewRecipient(tn, srv.ID, map[string]any{"method": "CLI", "retrySchedule": "EXPONENTIAL", "maxAttempts": 11})
	gone := env.NewRecipient(tn, srv.ID, map[string]any{"method": "CLI"})
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ deleteRecipient(id: $id){ id } }`, map[string]any{"id": gone}, nil)
	// Another server's recipient gets nothing.
	other := env.NewServer(tn, "other", nil)
	env.NewRecipient(tn, other.ID, map[string]any{"method": "CLI"})

	status, id := send(t, env, http.MethodPost, srv.Key, "", []byte(`{}`), nil)
	require.Equal(t, http.StatusAccepted, status)
	r := storedRequest(t, env, id)
	require.Equal(t, request.StatusPENDING, r.Status)
	require.Len(t, r.Edges.Deliveries, 2, "one per live recipient, none for the deleted one")
	got := map[string]*ent.Delivery{}
	for _, d := range r.Edges.Deliveries {
		got[strconv.Itoa(d.RecipientID)] = d
		require.Equal(t, delivery.StatusPENDING, d.Status)
		require.Equal(t, delivery.TriggerAUTOMATIC, d.Trigger)
		require.Zero(t, d.AttemptCount)
		require.NotNil(t, d.NextAttemptAt, "due at once")
		require.False(t, d.NextAttemptAt.After(r.ReceivedAt.Add(time.Second)))
	}
	require.Contains(t, got, r1)
	require.Contains(t, got, r2)
	require.Equal(t, 3, got[r1].MaxAttempts, "the recipient's attempts are copied in")
	require.Equal(t, 11, got[r2].MaxAttempts)
	require.Equal(t, delivery.RetryScheduleEXPONENTIAL, got[r2].RetrySchedule)

	// With no live recipient at all the request is still stored and paid for, and needs no delivery.
	lonely := env.NewServer(tn, "lonely", nil)
	status, id = send(t, env, http.MethodPost, lonely.Key, "", nil, nil)
	require.Equal(t, http.StatusAccepted, status)
	require.Empty(t, storedRequest(t, env, id).Edges.Deliveries)
}

func TestExpiresAtIsShorterRetention(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	cases := []struct {
		name     string
		plan     int
		server   any // nil: the plan's
		wantDays int
	}{
		{name: "plan only", plan: 7, server: nil, wantDays: 7},
		{name: "server shorter", plan: 7, server: 3, wantDays: 3},
		{name: "plan shorter", plan: 2, server: 5, wantDays: 2},
		{name: "equal", plan: 4, server: 4, wantDays: 4},
	}
	for _, c := range cases {
		tn := env.NewTenant("ret-"+strings.ReplaceAll(c.name, " ", "-"), relaytest.PlanLimits{Credits: 5, RetentionDays: c.plan})
		extra := map[string]any{}
		if c.server != nil {
			extra["retentionDays"] = c.server
		}
		srv := env.NewServer(tn, "ret", extra)
		status, id := send(t, env, http.MethodPost, srv.Key, "", nil, nil)
		require.Equal(t, http.StatusAccepted, status, c.name)
		r := storedRequest(t, env, id)
		require.Equal(t, time.Duration(c.wantDays)*24*time.Hour, r.ExpiresAt.Sub(r.ReceivedAt), c.name)

		var out struct {
			Request struct{ ReceivedAt, ExpiresAt time.Time }
		}
		env.MustGraphQL(tn.Owner, `query($id: ID!){ request(id: $id){ receivedAt expiresAt } }`, map[string]any{"id": id}, &out)
		require.Equal(t, time.Duration(c.wantDays)*24*time.Hour, out.Request.ExpiresAt.Sub(out.Request.ReceivedAt), c.name+" (API)")
	}
}

// startUnreachable starts a process with a tenant "acme" of credits and its server "stripe", whose one
// recipient's URL refuses connections: what is accepted stays to be retried.
func startUnreachable(t *testing.T, credits int) (*relaytest.Env, relaytest.Server) {
	t.Helper()
	env := relaytest.Start(t)
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: credits})
	srv := env.NewServer(tn, "stripe", nil)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": "http://127.0.0.1:1/hook"})
	return env, srv
}

func TestAcceptStoresRequestAndDebits(t *testing.T) {
	t.Parallel()
	env, srv := startUnreachable(t, 5)

	resp := env.Post(srv.Key, "/events/x?y=1", []byte(`{"id":"evt_1"}`))
	defer resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var body struct{ RequestID string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.NotEmpty(t, body.RequestID)

	ctx := viewer.SystemContext(t.Context())
	reqs, err := env.DB.Client.Request.Query().WithDeliveries().All(ctx)
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	require.Equal(t, "/events/x", reqs[0].Path)
	require.Equal(t, request.StatusPENDING, reqs[0].Status)
	require.Len(t, reqs[0].Edges.Deliveries, 1)
	_, _ = io.Copy(io.Discard, resp.Body)
}

// A request the database cannot store as sent — raw non-UTF-8 bytes in its query, which HTTP servers pass
// through but PostgreSQL text columns refuse — is stored with those bytes percent-encoded, and never costs the
// requests that share its batch their acceptance.
func TestRawBytesInQueryDoNotFailTheBatch(t *testing.T) {
	t.Parallel()
	env, srv := startUnreachable(t, 1000)
	addr := strings.TrimPrefix(env.Server.URL, "http://")

	var wg sync.WaitGroup
	statuses := make([]int, 40)
	for i := range statuses {
		wg.Go(func() {
			query := "n=" + strconv.Itoa(i)
			if i%10 == 0 {
				query += "&name=Caf\xe9&ok=\xc3\xa9" // Latin-1 é (invalid UTF-8), then a valid UTF-8 é
			}
			statuses[i] = rawPost(t, addr, "/in/"+srv.Key+"/hook?"+query, `{"i":1}`)
		})
	}
	wg.Wait()
	for i, s := range statuses {
		require.Equal(t, http.StatusAccepted, s, "request %d", i)
	}
	ctx := viewer.SystemContext(t.Context())
	reqs, err := env.DB.Client.Request.Query().All(ctx)
	require.NoError(t, err)
	require.Len(t, reqs, len(statuses))
	odd := 0
	for _, r := range reqs {
		if strings.Contains(r.Query, "name=") {
			odd++
			require.Contains(t, r.Query, "&name=Caf%E9&ok=\xc3\xa9")
		}
	}
	require.Equal(t, 4, odd)
}

// rawPost sends one HTTP/1.1 request with the target written as is (net/http's client would refuse raw
// non-ASCII bytes) and returns the response status.
func rawPost(t *testing.T, addr, target, body string) int {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		target, addr, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Error(err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A request the database refuses outright (a NUL byte in a text column, which only an in-process caller can
// hand over: HTTP servers reject it) fails alone; the requests that shared its batch are still accepted.
func TestRefusedRequestFailsAlone(t *testing.T) {
	t.Parallel()
	env, srv := startUnreachable(t, 1000)

	var wg sync.WaitGroup
	errs := make([]error, 40)
	for i := range errs {
		wg.Go(func() {
			method := http.MethodPost
			if i == 7 {
				method = "PO\x00ST"
			}
			_, errs[i] = env.Relay.Inbound.Accept(t.Context(), srv.Key, inbound.Incoming{Method: method,
				Header: http.Header{}, Body: []byte("{}")})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i != 7 {
			require.NoError(t, err, "request %d", i)
		}
	}
	ctx := viewer.SystemContext(t.Context())
	n, err := env.DB.Client.Request.Query().Count(ctx)
	require.NoError(t, err)
	debits, err := env.DB.Client.LedgerEntry.Query().Where(ledgerentry.ReasonEQ(ledgerentry.ReasonREQUEST_ACCEPTED)).Count(ctx)
	require.NoError(t, err)
	require.Equal(t, n, debits)
	if errs[7] == nil {
		require.Equal(t, len(errs), n) // SQLite stores the NUL
	} else {
		require.Equal(t, len(errs)-1, n)
	}
}

// A panic while intake commits a batch does not end the process: the batch's requests, stored nothing, are
// answered 503 with Retry-After and charged nothing; the committer goes on, and the next request is accepted
// and delivered. A panic after a batch was stored and answered leaves its 202s standing.
func TestIntakeSurvivesAPanickingCommit(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 10)
	received := make(chan string, 10)
	rcv := newCountingReceiver(t, received)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rcv})
	ctx := viewer.SystemContext(t.Context())

	inbound.PanicOnNextCommit(env.Relay.Inbound, false)
	resp := env.Post(srv.Key, "", []byte(`{"first":true}`))
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s", body)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	n, err := env.DB.Client.Request.Query().Count(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing of the panicked batch was stored")
	tenant, err := env.DB.Client.Tenant.Query().Only(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 10, tenant.CreditBalance, "nothing was charged")

	id := env.Send(srv.Key, "", `{"second":true}`)
	requireReceived(t, received, id)

	inbound.PanicOnNextCommit(env.Relay.Inbound, true)
	id = env.Send(srv.Key, "", `{"third":true}`) // answered 202 before the panic: stored, and delivered
	requireReceived(t, received, id)
	relaytest.Eventually(t, 20*time.Second, "both accepted requests to be delivered", func() bool {
		n, err := env.DB.Client.Request.Query().Where(request.StatusEQ(request.StatusDELIVERED)).Count(ctx)
		require.NoError(t, err)
		return n == 2
	})
	n, err = env.DB.Client.Request.Query().Count(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n, "only the accepted requests are stored")
}

// newCountingReceiver starts a recipient that answers 200 and passes on the request ID of every call.
func newCountingReceiver(t *testing.T, received chan<- string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received <- r.Header.Get("X-Adal-Request-Id")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func requireReceived(t *testing.T, received <-chan string, id string) {
	t.Helper()
	select {
	case got := <-received:
		require.Equal(t, id, got)
	case <-time.After(20 * time.Second):
		t.Fatalf("request %s was not delivered", id)
	}
}

// TestIntakeStoresAgainstTheServerAsItIsNow: a request is stored, and handed to a worker, with the server's
// recipients as they are when it is accepted, however recently they changed and whatever intake read for the
// same key before: a new URL is where the next request goes, a recipient added gets it, one deleted does not.
func TestIntakeStoresAgainstTheServerAsItIsNow(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartTenantServer(t, "fresh", 100)
	var mu sync.Mutex
	got := map[string][]string{} // by receiver, the request IDs it was sent
	receiver := func(name string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got[name] = append(got[name], r.Header.Get("X-Adal-Request-Id"))
			mu.Unlock()
		}))
		t.Cleanup(s.Close)
		return s
	}
	a, b := receiver("a"), receiver("b")
	arrived := func(name, id string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Contains(got[name], id)
		}
	}
	direct := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": a.URL})
	before := stateOf(t, env, tn)
	first := env.Send(srv.Key, "", "{}")
	relaytest.Eventually(t, 10*time.Second, "the first request reaches a", arrived("a", first))

	env.MustGraphQL(tn.Owner, `mutation($id: ID!, $url: String!){ updateRecipient(id: $id, input: {url: $url}){ id } }`,
		map[string]any{"id": direct, "url": b.URL}, nil)
	second := env.Send(srv.Key, "", "{}")
	relaytest.Eventually(t, 10*time.Second, "the request after the URL changed reaches b", arrived("b", second))
	require.False(t, arrived("a", second)(), "nothing goes to the old URL")

	cli := env.NewRecipient(tn, srv.ID, map[string]any{"method": "CLI"})
	third := env.Send(srv.Key, "", "{}")
	recipientsOf := func(id string) []int {
		var ids []int
		for _, d := range storedRequest(t, env, id).Edges.Deliveries {
			ids = append(ids, d.RecipientID)
		}
		return ids
	}
	require.Equal(t, []int{relaytest.RowID(t, direct), relaytest.RowID(t, cli)}, recipientsOf(third),
		"a recipient added gets the next request")

	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ deleteRecipient(id: $id){ id } }`, map[string]any{"id": direct}, nil)
	fourth := env.Send(srv.Key, "", "{}")
	require.Equal(t, []int{relaytest.RowID(t, cli)}, recipientsOf(fourth), "a recipient deleted gets nothing more")
	after := stateOf(t, env, tn)
	require.Equal(t, state{requests: 4, deliveries: 5, ledger: before.ledger + 4, balance: before.balance - 4}, after,
		"four requests, each stored and debited once, those stored again after a change included")
}
