package delivery_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
)

// hook is a recipient endpoint: it records every call, answers with what status says, and can hold calls
// open until released.
type hook struct {
	*httptest.Server
	status func(n int, r *http.Request) int // n counts calls from 1

	mu    sync.Mutex
	calls []hookCall
	gate  chan struct{} // while non-nil and open, calls wait for it
}

type hookCall struct {
	at     time.Time
	method string
	path   string
	header http.Header
	body   string
}

func newHook(t *testing.T, status func(n int, r *http.Request) int) *hook {
	t.Helper()
	h := &hook{status: status}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.calls = append(h.calls, hookCall{at: time.Now(), method: r.Method, path: r.URL.RequestURI(), header: r.Header.Clone(), body: string(body)})
		n, gate := len(h.calls), h.gate
		h.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		w.WriteHeader(h.status(n, r))
	}))
	t.Cleanup(func() { h.release(); h.Close() })
	return h
}

// always answers code.
func always(code int) func(int, *http.Request) int {
	return func(int, *http.Request) int { return code }
}

// failFirst answers 500 to the first k calls, then 200.
func failFirst(k int) func(int, *http.Request) int {
	return func(n int, _ *http.Request) int {
		if n <= k {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}
}

// hold makes calls wait until release.
func (h *hook) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gate = make(chan struct{})
}

// release lets held calls (and later ones) answer.
func (h *hook) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gate != nil {
		close(h.gate)
		h.gate = nil
	}
}

func (h *hook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.calls)
}

func (h *hook) received() []hookCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookCall(nil), h.calls...)
}

// startFast starts a process whose retries come 5 ms apart, with a tenant of credits and a server of its.
func startFast(t *testing.T, credits int) (*relaytest.Env, relaytest.Tenant, relaytest.Server) {
	t.Helper()
	env, tn, srv := relaytest.StartWithServer(t, credits, retryUnit(5*time.Millisecond))
	return env, tn, srv
}

func retryUnit(unit time.Duration) func(*relay.Config) {
	return func(c *relay.Config) { c.RetryUnit = unit }
}

type attemptView struct {
	Number       int
	Status       string
	HTTPStatus   *int
	ErrorKind    *string
	ErrorMessage string
}

type deliveryView struct {
	ID            string
	Status        string
	Trigger       string
	AttemptCount  int
	MaxAttempts   int
	Superseded    bool
	RecipientID   string
	NextAttemptAt *time.Time
	FinishedAt    *time.Time
	Attempts      []attemptView
	Request       struct{ Status string }
}

type requestView struct {
	ID         string
	Key        string
	Status     string
	Method     string
	Path       string
	Query      string
	Body       string
	ReplayOf   *struct{ ID string }
	Replays    []struct{ ID string }
	Deliveries []deliveryView
}

const deliveryFields = `id status trigger attemptCount maxAttempts superseded recipientID nextAttemptAt finishedAt
	attempts { number status httpStatus errorKind errorMessage } request { status }`

// getRequest reads a request with its deliveries (by ID) and their attempts (by number) through the API.
func getRequest(t *testing.T, env *relaytest.Env, token, id string) requestView {
	t.Helper()
	var out struct{ Request *requestView }
	env.MustGraphQL(token, `query($id: ID!){ request(id: $id){ id key status method path query body
		replayOf { id } replays { id } deliveries { `+deliveryFields+` } } }`, map[string]any{"id": id}, &out)
	require.NotNil(t, out.Request, "request %s not found", id)
	r := *out.Request
	sort.Slice(r.Deliveries, func(i, j int) bool {
		return relaytest.RowID(t, r.Deliveries[i].ID) < relaytest.RowID(t, r.Deliveries[j].ID)
	})
	for _, d := range r.Deliveries {
		sort.Slice(d.Attempts, func(i, j int) bool { return d.Attempts[i].Number < d.Attempts[j].Number })
	}
	return r
}

// waitRequest polls the request until cond holds and returns it.
func waitRequest(t *testing.T, env *relaytest.Env, token, id, what string, cond func(requestView) bool) requestView {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		r := getRequest(t, env, token, id)
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 20s waiting for %s; request %s is now %+v", what, id, r)
		}
		<-tick.C
	}
}

// deliveryTo is the current (not superseded) delivery of r to the recipient.
func deliveryTo(t *testing.T, r requestView, recipientID string) deliveryView {
	t.Helper()
	for _, d := range r.Deliveries {
		if d.RecipientID == recipientID && !d.Superseded {
			return d
		}
	}
	t.Fatalf("request %s has no current delivery to recipient %s: %+v", r.ID, recipientID, r.Deliveries)
	return deliveryView{}
}

func deliveriesTo(r requestView, recipientID string) []deliveryView {
	var out []deliveryView
	for _, d := range r.Deliveries {
		if d.RecipientID == recipientID {
			out = append(out, d)
		}
	}
	return out
}

func balance(t *testing.T, env *relaytest.Env, tn relaytest.Tenant) int {
	t.Helper()
	var out struct {
		Viewer struct{ Tenant struct{ CreditBalance int } }
	}
	env.MustGraphQL(tn.Owner, `{ viewer { tenant { creditBalance } } }`, nil, &out)
	return out.Viewer.Tenant.CreditBalance
}

type ledgerView struct {
	Reason       string
	Amount       int
	BalanceAfter int
	Reference    string
}

// ledger is the tenant's ledger, newest first.
func ledger(t *testing.T, env *relaytest.Env, tn relaytest.Tenant) []ledgerView {
	t.Helper()
	var out struct {
		Ledger struct{ Edges []struct{ Node ledgerView } }
	}
	env.MustGraphQL(tn.Owner, `{ ledger(first: 100) { edges { node { reason amount balanceAfter reference } } } }`, nil, &out)
	entries := make([]ledgerView, len(out.Ledger.Edges))
	for i, e := range out.Ledger.Edges {
		entries[i] = e.Node
	}
	return entries
}

func requestCount(t *testing.T, env *relaytest.Env, token, serverID string) int {
	t.Helper()
	var out struct{ Requests struct{ TotalCount int } }
	env.MustGraphQL(token, `query($s: ID!){ requests(serverId: $s) { totalCount } }`, map[string]any{"s": serverID}, &out)
	return out.Requests.TotalCount
}

// mutateDelivery runs retryDelivery or cancelDelivery and returns the delivery, or the error code.
func mutateDelivery(t *testing.T, env *relaytest.Env, token, mutation, id string) (deliveryView, string) {
	t.Helper()
	resp := env.GraphQL(token, `mutation($id: ID!){ `+mutation+`(id: $id){ `+deliveryFields+` } }`, map[string]any{"id": id})
	if len(resp.Errors) > 0 {
		return deliveryView{}, resp.Code()
	}
	var out map[string]deliveryView
	require.NoError(t, json.Unmarshal(resp.Data, &out))
	return out[mutation], ""
}

func replay(t *testing.T, env *relaytest.Env, token, id string) (requestView, string) {
	t.Helper()
	resp := env.GraphQL(token, `mutation($id: ID!){ replayRequest(id: $id){ id key status replayOf { id } } }`, map[string]any{"id": id})
	if len(resp.Errors) > 0 {
		return requestView{}, resp.Code()
	}
	var out struct{ ReplayRequest requestView }
	require.NoError(t, json.Unmarshal(resp.Data, &out))
	return out.ReplayRequest, ""
}

func setRecipientState(t *testing.T, env *relaytest.Env, tn relaytest.Tenant, mutation, id string) {
	t.Helper()
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ `+mutation+`(id: $id){ id } }`, map[string]any{"id": id}, nil)
}

func terminal(status string) bool {
	return status == "SUCCEEDED" || status == "FAILED" || status == "CANCELED"
}

// throughout runs check repeatedly until the deadline passes: it asserts that something does NOT happen over
// a window, where there is no state to wait for.
func throughout(until time.Time, check func()) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		check()
		if !time.Now().Before(until) {
			return
		}
		<-tick.C
	}
}
