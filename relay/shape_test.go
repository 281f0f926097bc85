package relay_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/relay/relaytest"
)

// shapeReceiver is a recipient's HTTP endpoint that keeps what it received.
type shapeReceiver struct {
	*httptest.Server
	mu   sync.Mutex
	got  []*http.Request
	body []string
}

func newShapeReceiver(t *testing.T, answer func(r *http.Request) int) *shapeReceiver {
	rc := &shapeReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, r)
		rc.body = append(rc.body, string(b))
		rc.mu.Unlock()
		status := http.StatusOK
		if answer != nil {
			status = answer(r)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *shapeReceiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

func (rc *shapeReceiver) last() (*http.Request, string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.got[len(rc.got)-1], rc.body[len(rc.body)-1]
}

const orderSchema = `{"type":"object","required":["type","amount"],
	"properties":{"type":{"type":"string"},"amount":{"type":"number","minimum":0}}}`

// TestEventTypesValidateRouteAndFilter names a type with a schema, reads requests' types from their bodies and
// enforces the schema: a body that does not follow it is refused with 422 and its first error, stored nowhere
// and charged nothing; a valid one is stored with its type, listed by it, and delivered only to the recipient
// subscribed to it.
func TestEventTypesValidateRouteAndFilter(t *testing.T) {
	env, tn, srv := relaytest.StartWithServer(t, 10)
	env.MustGraphQL(tn.Owner, `mutation($s: String){ createEventType(input: {name: "order.paid", schema: $s}){ id } }`,
		map[string]any{"s": orderSchema}, nil)
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ updateServer(id: $id, input: {eventTypePath: "type", schemaValidation: ENFORCE}){ id } }`,
		map[string]any{"id": srv.ID}, nil)
	orders, invoices := newShapeReceiver(t, nil), newShapeReceiver(t, nil)
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": orders.URL, "eventTypes": []string{"order.*"}})
	env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": invoices.URL, "eventTypes": []string{"invoice.paid"}})

	// The key cache reads the server's settings within its refresh; poll until the refusal shows.
	var resp *http.Response
	var answer map[string]string
	relaytest.Eventually(t, 10*time.Second, "the schema to be enforced", func() bool {
		resp = env.Post(srv.Key, "", []byte(`{"type":"order.paid","amount":"ten"}`))
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity {
			return false
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
		return true
	})
	require.Equal(t, "/amount", answer["pointer"])
	require.Contains(t, answer["error"], "order.paid")
	require.Empty(t, env.Deliveries(), "a refused body is stored nowhere")

	id := env.Send(srv.Key, "", `{"type":"order.paid","amount":10}`)
	relaytest.Eventually(t, 10*time.Second, "the order to reach its subscriber", func() bool { return orders.count() == 1 })
	var out struct {
		Request struct {
			EventType   string
			SchemaError string
			FilteredOut []struct{ ID string }
		}
		Requests struct{ TotalCount int }
		Viewer   struct{ Tenant struct{ CreditBalance int } }
	}
	env.MustGraphQL(tn.Owner, `query($id: ID!, $srv: ID!){ request(id: $id){ eventType schemaError filteredOut { id } }
		requests(serverId: $srv, where: {eventType: "order.paid"}){ totalCount } viewer { tenant { creditBalance } } }`,
		map[string]any{"id": id, "srv": srv.ID}, &out)
	require.Equal(t, "order.paid", out.Request.EventType)
	require.Empty(t, out.Request.SchemaError)
	require.Len(t, out.Request.FilteredOut, 1, "the invoices recipient is not subscribed")
	require.Equal(t, 1, out.Requests.TotalCount)
	require.Equal(t, 9, out.Viewer.Tenant.CreditBalance, "the refused body cost nothing")
	require.Zero(t, invoices.count())

	// SHADOW accepts the body and marks it.
	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ updateServer(id: $id, input: {schemaValidation: SHADOW}){ id } }`,
		map[string]any{"id": srv.ID}, nil)
	relaytest.Eventually(t, 10*time.Second, "shadow validation", func() bool {
		resp := env.Post(srv.Key, "", []byte(`{"type":"order.paid"}`))
		resp.Body.Close()
		return resp.StatusCode == http.StatusAccepted
	})
	var marked struct {
		Requests struct {
			Edges []struct{ Node struct{ SchemaError string } }
		}
	}
	env.MustGraphQL(tn.Owner, `query($srv: ID!){ requests(serverId: $srv, first: 1){ edges { node { schemaError } } } }`,
		map[string]any{"srv": srv.ID}, &marked)
	require.Contains(t, marked.Requests.Edges[0].Node.SchemaError, "amount")
}

// TestEventTypeInputIsChecked refuses a schema that does not compile, a bad name, a subscription pattern that
// is none, and both sources at once.
func TestEventTypeInputIsChecked(t *testing.T) {
	env, tn, srv := relaytest.StartWithServer(t, 10)
	for _, c := range []struct{ query, want string }{
		{`mutation { createEventType(input: {name: "order.paid", schema: "{\"type\": 12}"}){ id } }`, "schema"},
		{`mutation { createEventType(input: {name: "order paid"}){ id } }`, "name"},
		{`mutation($id: ID!){ updateServer(id: $id, input: {eventTypePath: "type", eventTypeHeader: "X-Type"}){ id } }`, "not both"},
		{`mutation($id: ID!){ updateServer(id: $id, input: {eventTypePath: "a..b"}){ id } }`, "empty field"},
		{`mutation($id: ID!){ createRecipient(input: {serverId: $id, name: "r", method: DIRECT_HTTP, url: "http://127.0.0.1:1/", eventTypes: ["order.*.x*"]}){ id } }`, "eventTypes[0]"},
	} {
		res := env.GraphQL(tn.Owner, c.query, map[string]any{"id": srv.ID})
		require.Equal(t, "INVALID_INPUT", res.Code(), c.query)
		require.Contains(t, res.Errors[0].Message, c.want, c.query)
	}
}

// TestTransformationShapesEachAttempt saves a transformation, tries it on a stored request, and checks that
// attempts carry what it made, name its version, and that a function that cancels, throws or never ends
// sends nothing and frees its worker.
func TestTransformationShapesEachAttempt(t *testing.T) {
	env, tn, srv := relaytest.StartWithServer(t, 20)
	rc := newShapeReceiver(t, nil)
	rec := env.NewRecipient(tn, srv.ID, map[string]any{"method": "DIRECT_HTTP", "url": rc.URL, "maxAttempts": 1})

	res := env.GraphQL(tn.Owner, `mutation($id: ID!){ setRecipientTransform(recipientId: $id, source: "function transform(r) {\n  return r +;\n}"){ id } }`,
		map[string]any{"id": rec})
	require.Equal(t, "INVALID_INPUT", res.Code())
	require.Contains(t, res.Errors[0].Message, "line 2, column 13")

	const source = `function transform(req) {
  if (req.body.skip) return null;
  if (req.body.loop) { while (true) {} }
  if (req.body.boom) throw new Error("no boom allowed");
  req.headers["x-shaped"] = "yes";
  req.path = "/shaped" + req.path;
  req.body = {wrapped: req.body};
  return req;
}`
	stored := env.Send(srv.Key, "/orders", `{"id":1}`) // before the transformation: delivered as sent
	relaytest.Eventually(t, 10*time.Second, "the plain delivery", func() bool { return rc.count() == 1 })

	var tried struct {
		TryTransform struct {
			Cancelled bool
			Path      string
			Body      string
			Headers   []struct{ Name, Value string }
		}
	}
	env.MustGraphQL(tn.Owner, `query($s: String!, $id: ID!){ tryTransform(source: $s, requestId: $id){ cancelled path body headers { name value } } }`,
		map[string]any{"s": source, "id": stored}, &tried)
	require.False(t, tried.TryTransform.Cancelled)
	require.Equal(t, "/shaped/orders", tried.TryTransform.Path)
	require.JSONEq(t, `{"wrapped":{"id":1}}`, tried.TryTransform.Body)

	var set struct {
		SetRecipientTransform struct {
			Transform struct{ Number int }
		}
	}
	env.MustGraphQL(tn.Owner, `mutation($id: ID!, $s: String!){ setRecipientTransform(recipientId: $id, source: $s){ transform { number } } }`,
		map[string]any{"id": rec, "s": source}, &set)
	require.Equal(t, 1, set.SetRecipientTransform.Transform.Number)

	env.Send(srv.Key, "/orders", `{"id":2}`)
	relaytest.Eventually(t, 10*time.Second, "the shaped delivery", func() bool { return rc.count() == 2 })
	r, body := rc.last()
	require.Equal(t, "/shaped/orders", r.URL.Path)
	require.Equal(t, "yes", r.Header.Get("X-Shaped"))
	require.JSONEq(t, `{"wrapped":{"id":2}}`, body)

	t.Cleanup(func() {
		if t.Failed() {
			for _, d := range env.Deliveries() {
				t.Logf("delivery %d %s attempts %d", d.ID, d.Status, len(d.Edges.Attempts))
				for _, a := range d.Edges.Attempts {
					t.Logf("   %v %v %q", a.Status, a.ErrorKind, a.ErrorMessage)
				}
			}
		}
	})
	env.Send(srv.Key, "", `{"skip":true}`)
	env.Send(srv.Key, "", `{"loop":true}`)
	env.Send(srv.Key, "", `{"boom":true}`)
	env.Send(srv.Key, "", `{"id":3}`) // after the loop: its worker came back
	relaytest.Eventually(t, 15*time.Second, "every delivery to end", func() bool {
		return len(env.Deliveries(delivery.StatusIn(delivery.StatusPENDING, delivery.StatusIN_PROGRESS))) == 0 && rc.count() == 3
	})
	kinds := map[string]string{}
	for _, d := range env.Deliveries() {
		if len(d.Edges.Attempts) == 0 {
			continue
		}
		a := d.Edges.Attempts[len(d.Edges.Attempts)-1]
		if a.ErrorKind != nil {
			kinds[a.ErrorMessage] = string(d.Status)
			require.Equal(t, "TRANSFORM", string(*a.ErrorKind))
			require.NotNil(t, a.TransformVersion)
		}
	}
	var cancelled, timedOut, threw bool
	for msg, status := range kinds {
		switch {
		case strings.Contains(msg, "cancelled"):
			cancelled = status == "CANCELED"
		case strings.Contains(strings.ToLower(msg), "time"):
			timedOut = status == "FAILED"
		case strings.Contains(msg, "no boom allowed"):
			threw = status == "FAILED"
		}
	}
	require.True(t, cancelled && timedOut && threw, "outcomes: %v", kinds)
}

// TestRecipientAuthReachesTheReceiver sends custom headers and Basic credentials the recipient was given, and
// never returns them.
func TestRecipientAuthReachesTheReceiver(t *testing.T) {
	env, tn, srv := relaytest.StartWithServer(t, 10)
	rc := newShapeReceiver(t, func(r *http.Request) int {
		if u, p, ok := r.BasicAuth(); !ok || u != "relay" || p != "s3cret" || r.Header.Get("X-Api-Key") != "k-123" {
			return http.StatusUnauthorized
		}
		return http.StatusOK
	})
	var out struct {
		CreateRecipient struct {
			ID   string
			Auth struct {
				HeaderNames   []string
				BasicUsername string
			}
		}
	}
	env.MustGraphQL(tn.Owner, `mutation($in: CreateRecipientInput!){ createRecipient(input: $in){ id auth { headerNames basicUsername } } }`,
		map[string]any{"in": map[string]any{"serverId": srv.ID, "name": "secured", "method": "DIRECT_HTTP", "url": rc.URL,
			"auth": map[string]any{"headers": []map[string]string{{"name": "X-Api-Key", "value": "k-123"}},
				"basic": map[string]string{"username": "relay", "password": "s3cret"}}}}, &out)
	require.Equal(t, []string{"X-Api-Key"}, out.CreateRecipient.Auth.HeaderNames)
	require.Equal(t, "relay", out.CreateRecipient.Auth.BasicUsername)

	env.Send(srv.Key, "", "{}")
	relaytest.Eventually(t, 10*time.Second, "the authenticated delivery", func() bool {
		return len(env.Deliveries(delivery.StatusEQ(delivery.StatusSUCCEEDED))) == 1
	})

	res := env.GraphQL(tn.Owner, `mutation($id: ID!){ updateRecipient(id: $id, input: {auth: {bearer: "t", basic: {username: "a", password: "b"}}}){ id } }`,
		map[string]any{"id": out.CreateRecipient.ID})
	require.Equal(t, "INVALID_INPUT", res.Code(), "one Authorization at a time")
}
