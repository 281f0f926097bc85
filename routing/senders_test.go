package routing_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/relay/relaytest"
)

const updateSenders = `mutation($id: ID!, $in: UpdateServerInput!){ updateServer(id: $id, input: $in){
	verification { kind enforce headers header queryParameter algorithm encoding prefix toleranceSeconds username secretCount }
	response { status contentType body } allowedMethods } }`

type sendersView struct {
	Verification struct {
		Kind             string
		Enforce          bool
		Headers          []string
		Header           *string
		Algorithm        *string
		Encoding         *string
		Prefix           *string
		ToleranceSeconds *int
		Username         *string
		SecretCount      int
	}
	Response *struct {
		Status      int
		ContentType string
		Body        string
	}
	AllowedMethods []string
}

// Secrets are write-only: the API says how many are set and never what they are; the same kind keeps them
// when they are left out; bad settings are refused naming the field, and change nothing.
func TestSenderSettings(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	tn := env.NewTenant("senders", relaytest.PlanLimits{Credits: 1})
	srv := env.NewServer(tn, "s", nil)
	update := func(in map[string]any) (sendersView, relaytest.Response) {
		t.Helper()
		resp := env.GraphQL(tn.Owner, updateSenders, map[string]any{"id": srv.ID, "in": in})
		var out struct{ UpdateServer sendersView }
		if len(resp.Errors) == 0 {
			require.NoError(t, json.Unmarshal(resp.Data, &out))
		}
		return out.UpdateServer, resp
	}

	var fresh struct{ Server sendersView }
	env.MustGraphQL(tn.Owner, `query($id: ID!){ server(id: $id){ verification { kind enforce headers secretCount } response { status } allowedMethods } }`,
		map[string]any{"id": srv.ID}, &fresh)
	require.Equal(t, "NONE", fresh.Server.Verification.Kind, "a server verifies nothing by default")
	require.Nil(t, fresh.Server.Response)
	require.Nil(t, fresh.Server.AllowedMethods, "all methods by default")

	const secret = "super-secret-signing-key"
	view, resp := update(map[string]any{"verification": map[string]any{
		"kind": "HMAC", "secrets": []string{secret, secret + "-next"}, "header": "x-signature", "prefix": "sha256=",
	}})
	require.Empty(t, resp.Errors)
	require.NotContains(t, string(resp.Data), secret, "never a secret in an answer")
	require.Equal(t, "HMAC", view.Verification.Kind)
	require.True(t, view.Verification.Enforce, "enforce by default")
	require.Equal(t, []string{"X-Signature"}, view.Verification.Headers)
	require.Equal(t, "SHA256", *view.Verification.Algorithm)
	require.Equal(t, "HEX", *view.Verification.Encoding)
	require.Equal(t, "sha256=", *view.Verification.Prefix)
	require.Equal(t, 2, view.Verification.SecretCount)

	view, resp = update(map[string]any{"verification": map[string]any{"kind": "HMAC", "header": "X-Signature", "enforce": false}})
	require.Empty(t, resp.Errors)
	require.False(t, view.Verification.Enforce)
	require.Equal(t, 2, view.Verification.SecretCount, "the same kind keeps the secrets set")

	view, resp = update(map[string]any{"verification": map[string]any{"kind": "STRIPE", "secrets": []string{"whsec_x"}}})
	require.Empty(t, resp.Errors)
	require.Equal(t, []string{"Stripe-Signature"}, view.Verification.Headers)
	require.Equal(t, 300, *view.Verification.ToleranceSeconds)
	require.Equal(t, 1, view.Verification.SecretCount)

	view, resp = update(map[string]any{
		"response":       map[string]any{"status": 200, "body": "thanks"},
		"allowedMethods": []string{"post", "Put", "POST"},
	})
	require.Empty(t, resp.Errors)
	require.Equal(t, 200, view.Response.Status)
	require.Equal(t, "text/plain; charset=utf-8", view.Response.ContentType)
	require.Equal(t, "thanks", view.Response.Body)
	require.Equal(t, []string{"POST", "PUT"}, view.AllowedMethods)
	require.Equal(t, "STRIPE", view.Verification.Kind, "settings left out stay")

	before := view
	for _, c := range []struct {
		in    map[string]any
		field string
	}{
		{map[string]any{"verification": map[string]any{"kind": "SLACK"}}, "verification.secrets"},
		{map[string]any{"verification": map[string]any{"kind": "GITHUB", "secrets": []string{"a", "b", "c"}}}, "verification.secrets"},
		{map[string]any{"verification": map[string]any{"kind": "HMAC", "secrets": []string{"a"}}}, "verification.header"},
		{map[string]any{"verification": map[string]any{"kind": "GITHUB", "secrets": []string{"a"}, "prefix": "x"}}, "verification.prefix"},
		{map[string]any{"verification": map[string]any{"kind": "STANDARD_WEBHOOKS", "secrets": []string{"nope"}}}, "verification.secrets"},
		{map[string]any{"verification": map[string]any{"kind": "SLACK", "secrets": []string{"a"}, "toleranceSeconds": 0}}, "verification.toleranceSeconds"},
		{map[string]any{"verification": map[string]any{"kind": "BASIC", "secrets": []string{"pw"}}}, "verification.username"},
		{map[string]any{"verification": map[string]any{"kind": "API_KEY", "secrets": []string{"k"}}}, "queryParameter"},
		{map[string]any{"response": map[string]any{"status": 302}}, "response.status"},
		{map[string]any{"response": map[string]any{"status": 200, "body": strings.Repeat("x", 1025)}}, "response.body"},
		{map[string]any{"response": map[string]any{"status": 204, "body": "x"}}, "response.body"},
		{map[string]any{"response": map[string]any{"status": 200, "contentType": "not a type"}}, "response.contentType"},
		{map[string]any{"response": map[string]any{"status": 200}, "clearResponse": true}, "clearResponse"},
		{map[string]any{"allowedMethods": []string{}}, "allowedMethods"},
		{map[string]any{"allowedMethods": []string{"GET POST"}}, "allowedMethods"},
	} {
		_, resp := update(c.in)
		require.Equal(t, "INVALID_INPUT", resp.Code(), "%v", c.in)
		require.Contains(t, resp.Errors[0].Message, c.field, "%v", c.in)
	}
	var after struct{ Server sendersView }
	env.MustGraphQL(tn.Owner, `query($id: ID!){ server(id: $id){
		verification { kind enforce headers header queryParameter algorithm encoding prefix toleranceSeconds username secretCount }
		response { status contentType body } allowedMethods } }`, map[string]any{"id": srv.ID}, &after)
	require.Equal(t, before, after.Server, "a refused change changes nothing")

	resp = env.GraphQL(tn.Member, updateSenders, map[string]any{"id": srv.ID, "in": map[string]any{"verification": map[string]any{"kind": "NONE"}}})
	require.Equal(t, "FORBIDDEN", resp.Code(), "only owners and operators change a server")

	view, resp = update(map[string]any{"verification": map[string]any{"kind": "NONE"}})
	require.Empty(t, resp.Errors)
	require.Equal(t, "NONE", view.Verification.Kind)
	require.Zero(t, view.Verification.SecretCount, "turning verification off drops the secrets")

	// createServer takes the same settings, and refuses the same mistakes without creating anything.
	resp = env.GraphQL(tn.Owner, `mutation($in: CreateServerInput!){ createServer(input: $in){ id } }`, map[string]any{"in": map[string]any{
		"name": "bad", "verification": map[string]any{"kind": "GITHUB"},
	}})
	require.Equal(t, "INVALID_INPUT", resp.Code())
	var list struct{ Servers struct{ TotalCount int } }
	env.MustGraphQL(tn.Owner, `{ servers { totalCount } }`, nil, &list)
	require.Equal(t, 1, list.Servers.TotalCount)
	created := env.NewServer(tn, "api-key", map[string]any{
		"verification":   map[string]any{"kind": "API_KEY", "queryParameter": "token", "secrets": []string{"k"}},
		"allowedMethods": []string{http.MethodPost},
	})
	require.NotEmpty(t, created.Key)
}
