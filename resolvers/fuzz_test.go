package resolvers_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

// checkGraphQLAnswer fails unless resp is a proper GraphQL answer to untrusted input: not a 5xx, and every
// error carrying an extensions.code a client can act on — never INTERNAL, which is what a panic or an
// unclassified failure becomes.
func checkGraphQLAnswer(t *testing.T, resp relaytest.Response, what string) {
	t.Helper()
	if resp.Status >= http.StatusInternalServerError {
		t.Fatalf("%s: HTTP %d", what, resp.Status)
	}
	for _, e := range resp.Errors {
		switch e.Code() {
		case "":
			t.Fatalf("%s: error without extensions.code: %+v", what, e)
		case "INTERNAL":
			t.Fatalf("%s: internal error: %+v", what, e)
		}
	}
}

// FuzzCreateServer sends arbitrary createServer inputs, as the tenant's owner and as an operator naming a
// tenant (real, another, or garbage): never a 5xx or a panic, errors carry extensions.code, and a server
// exists exactly when the mutation said it was created.
//
//	go test ./resolvers -run '^$' -fuzz FuzzCreateServer -fuzztime 60s
func FuzzCreateServer(f *testing.F) {
	env := relaytest.Start(f)
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 10, MaxServers: 1_000_000, MaxRecipientsPerServer: 10})
	other := env.NewTenant("other", relaytest.PlanLimits{Credits: 10})
	admin := env.AdminToken()
	ctx := viewer.SystemContext(f.Context())
	servers := &creations{env: env, field: "createServer",
		mutation: `mutation($in: CreateServerInput!){ createServer(input: $in){ id name inboundUrl } }`,
		stored:   func() (int, error) { return env.DB.Client.Server.Query().Count(ctx) }}

	f.Add(uint8(0), "webhooks", int64(7), true, "")
	f.Fuzz(func(t *testing.T, as uint8, name string, retentionDays int64, deliverPending bool, tenantID string) {
		in := map[string]any{"name": name, "retentionDays": retentionDays, "deliverPendingOnConnect": deliverPending}
		token := tn.Owner
		switch as % 4 {
		case 1:
			token = admin
			in["tenantId"] = tn.ID
		case 2:
			token = admin
			in["tenantId"] = tenantID
		case 3:
			in["tenantId"] = other.ID // an owner naming another tenant
		}
		if retentionDays == 0 {
			delete(in, "retentionDays")
		}
		servers.post(t, token, in)
	})
}

// FuzzCreateRecipient sends arbitrary createRecipient inputs for the owner's server, another tenant's server
// or an ID that names nothing: never a 5xx or a panic, errors carry extensions.code, and a recipient exists
// exactly when the mutation said it was created.
//
//	go test ./resolvers -run '^$' -fuzz FuzzCreateRecipient -fuzztime 60s
func FuzzCreateRecipient(f *testing.F) {
	env := relaytest.Start(f)
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 10, MaxRecipientsPerServer: 1_000_000})
	other := env.NewTenant("other", relaytest.PlanLimits{Credits: 10})
	own := env.NewServer(tn, "own", nil)
	foreign := env.NewServer(other, "foreign", nil)
	ctx := viewer.SystemContext(f.Context())
	recipients := &creations{env: env, field: "createRecipient",
		mutation: `mutation($in: CreateRecipientInput!){ createRecipient(input: $in){ id state } }`,
		stored:   func() (int, error) { return env.DB.Client.Recipient.Query().Count(ctx) }}

	f.Add(uint8(0), "billing", "DIRECT_HTTP", "http://127.0.0.1:9/hook", int64(3), "STEPPED", int64(10), true, "")
	f.Fuzz(func(t *testing.T, target uint8, name, method, url string, maxAttempts int64, schedule string,
		timeoutSeconds int64, idempotency bool, serverID string) {
		switch target % 3 {
		case 0:
			serverID = own.ID
		case 1:
			serverID = foreign.ID
		}
		in := map[string]any{"serverId": serverID, "name": name, "method": method, "url": url,
			"sendIdempotencyKey": idempotency}
		if maxAttempts != 0 {
			in["maxAttempts"] = maxAttempts
		}
		if schedule != "" {
			in["retrySchedule"] = schedule
		}
		if timeoutSeconds != 0 {
			in["timeoutSeconds"] = timeoutSeconds
		}
		recipients.post(t, tn.Owner, in)
	})
}

// creations posts one create mutation with untrusted input, and holds the rows stored to the creations the
// answers reported.
type creations struct {
	env      *relaytest.Env
	field    string // the mutation's field, e.g. createServer
	mutation string
	stored   func() (int, error)
	reported int
}

// post sends in as token: the answer must be proper (checkGraphQLAnswer), and the rows stored as many as the
// creations reported so far.
func (c *creations) post(t *testing.T, token string, in map[string]any) {
	t.Helper()
	resp := postGraphQL(t, c.env, token, c.mutation, map[string]any{"in": in})
	checkGraphQLAnswer(t, resp, c.field)
	if len(resp.Errors) == 0 {
		c.reported++
	}
	n, err := c.stored()
	if err != nil {
		t.Fatal(err)
	}
	if n != c.reported {
		t.Fatalf("%s: %d stored, %d reported created", c.field, n, c.reported)
	}
}

// postGraphQL posts one operation as a client would and decodes the answer, failing t (not the fuzz target's
// F) when the answer is not GraphQL.
func postGraphQL(t *testing.T, env *relaytest.Env, token, query string, vars map[string]any) relaytest.Response {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		t.Skip("input not representable as JSON") // NaN and the like: no client can send it
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, env.Server.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := env.Server.Client().Do(req)
	if err != nil {
		t.Fatalf("graphql: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out relaytest.Response
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("graphql: HTTP %d, not a GraphQL answer: %q", resp.StatusCode, raw)
	}
	out.Status = resp.StatusCode
	return out
}
