package api_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/auth"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/viewer"
)

const testSecret = "api-test-secret-api-test-secret-0123456789"

func withSecret(c *relay.Config) { c.JWTSecret = testSecret }

func get(t *testing.T, env *relaytest.Env, path string) (int, string) {
	t.Helper()
	resp, err := env.Server.Client().Get(env.Server.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		status, body := get(t, env, path)
		require.Equal(t, http.StatusOK, status, "%s: %s", path, body)
	}
}

// TestBadTokensAreRefused: a token that is present but unusable is answered 401 in GraphQL error shape, never
// served as anonymous or as someone else.
func TestBadTokensAreRefused(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, withSecret)

	past := func() time.Time { return time.Now().Add(-3 * time.Hour) }
	oldAuth, err := auth.New([]byte(testSecret), past)
	require.NoError(t, err)
	expired, err := oldAuth.Issue(viewer.Viewer{Role: viewer.Admin, Subject: "old"}, time.Hour)
	require.NoError(t, err)
	// Control: the same old issuer with a lifetime reaching past now is accepted, so the refusal below is the
	// expiry and nothing else.
	stillValid, err := oldAuth.Issue(viewer.Viewer{Role: viewer.Admin, Subject: "old"}, 4*time.Hour)
	require.NoError(t, err)
	require.Empty(t, env.GraphQL(stillValid, `{ viewer { role } }`, nil).Errors)

	otherAuth, err := auth.New([]byte("another-secret-another-secret-0123456789"), nil)
	require.NoError(t, err)
	foreign, err := otherAuth.Issue(viewer.Viewer{Role: viewer.Admin, Subject: "elsewhere"}, time.Hour)
	require.NoError(t, err)

	valid := env.AdminToken()
	require.Empty(t, env.GraphQL(valid, `{ viewer { role } }`, nil).Errors, "control: a valid token works")

	for name, token := range map[string]string{
		"garbage":         "not-a-jwt",
		"expired":         expired,
		"other secret":    foreign,
		"tampered":        valid[:len(valid)-2] + flip(valid[len(valid)-2:]),
		"two tokens":      valid + " " + valid,
		"unsigned (none)": noneToken(t),
	} {
		resp := env.GraphQL(token, `{ viewer { role subject } plans { id } }`, nil)
		require.Equal(t, http.StatusUnauthorized, resp.Status, name)
		require.Equal(t, "UNAUTHENTICATED", resp.Code(), "%s: %+v", name, resp.Errors)
		require.True(t, len(resp.Data) == 0 || string(resp.Data) == "null", "%s: no data: %s", name, resp.Data)
	}

	// No Authorization header at all: the operation answers UNAUTHENTICATED (HTTP 200, GraphQL errors).
	resp := env.GraphQL("", `{ viewer { role } }`, nil)
	require.Equal(t, "UNAUTHENTICATED", resp.Code())
}

func flip(s string) string {
	if s[0] == 'A' {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}

// noneToken is a JWT with alg "none" claiming to be an operator.
func noneToken(t *testing.T) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	now := time.Now().Unix()
	return enc(map[string]any{"alg": "none", "typ": "JWT"}) + "." + enc(map[string]any{
		"role": "ADMIN", "iss": auth.Issuer, "aud": auth.Audience, "sub": "x", "iat": now, "exp": now + 3600,
	}) + "."
}

func TestIntrospectionOnlyInDev(t *testing.T) {
	t.Parallel()
	const q = `{ __schema { types { name } } }`
	prod := relaytest.Start(t)
	resp := prod.GraphQL(prod.AdminToken(), q, nil)
	require.NotEmpty(t, resp.Errors, "introspection must be refused without ADAL_DEV: %s", resp.Data)
	require.NotContains(t, string(resp.Data), "Server", "no schema leaks")
	resp = prod.GraphQL(prod.AdminToken(), `{ __type(name: "Server") { fields { name } } }`, nil)
	require.NotEmpty(t, resp.Errors, "__type too: %s", resp.Data)
	// (The panel may answer any path with its own page; what must not be served is the GraphiQL playground.)
	_, body := get(t, prod, "/playground")
	require.NotContains(t, strings.ToLower(body), "graphiql", "no playground without ADAL_DEV")

	dev := relaytest.Start(t, func(c *relay.Config) { c.Dev = true })
	var out struct {
		Schema struct{ Types []struct{ Name string } } `json:"__schema"`
	}
	dev.MustGraphQL(dev.AdminToken(), q, nil, &out)
	var names []string
	for _, typ := range out.Schema.Types {
		names = append(names, typ.Name)
	}
	require.Contains(t, names, "Server")
	require.Contains(t, names, "Delivery")
	status, body := get(t, dev, "/playground")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, strings.ToLower(body), "graphiql")
}

func TestComplexityLimit(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	admin := env.AdminToken()
	// A modest query passes…
	require.Empty(t, env.GraphQL(admin, `{ servers(first: 10){ edges { node { id name recipients { id } } } } }`, nil).Errors)
	// …one that could walk thousands of rows with nested lists does not, before any resolver runs.
	resp := env.GraphQL(admin, `{ servers(first: 1000){ edges { node { id name inboundUrl recipients { id name url state } } } } }`, nil)
	require.NotEmpty(t, resp.Errors)
	require.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", resp.Code(), "%+v", resp.Errors)
	require.True(t, len(resp.Data) == 0 || string(resp.Data) == "null", "%s", resp.Data)
	// The page size counts whether it is a literal or a variable, and so does the length of nodes(ids).
	resp = env.GraphQL(admin, `query($n: Int){ requests(serverId: "1", first: $n){ edges { node { id body headers { name value } } } } }`,
		map[string]any{"n": 5000})
	require.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", resp.Code(), "%+v", resp.Errors)
	ids := make([]string, 3000)
	for i := range ids {
		ids[i] = fmt.Sprint(i + 1)
	}
	resp = env.GraphQL(admin, `query($ids: [ID!]!){ nodes(ids: $ids){ id } }`, map[string]any{"ids": ids})
	require.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", resp.Code(), "%+v", resp.Errors)
}

func TestGraphQLBodyLimit(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	post := func(body []byte) (int, string) {
		req, err := http.NewRequest(http.MethodPost, env.Server.URL+"/graphql", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+env.AdminToken())
		resp, err := env.Server.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Just under 1 MiB (padding in a variable the query ignores) is served.
	pad := func(n int) []byte {
		b, err := json.Marshal(map[string]any{"query": `{ viewer { role } }`, "variables": map[string]any{"pad": strings.Repeat("x", n)}})
		require.NoError(t, err)
		return b
	}
	small := pad(1<<20 - 200)
	require.Less(t, len(small), 1<<20)
	status, body := post(small)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"role":"ADMIN"`)

	big := pad(1 << 20)
	require.Greater(t, len(big), 1<<20)
	status, body = post(big)
	require.Equal(t, http.StatusRequestEntityTooLarge, status, body)
	require.NotContains(t, body, `"role"`)
	var out relaytest.Response
	require.NoError(t, json.Unmarshal([]byte(body), &out), body)
	require.Equal(t, "INVALID_INPUT", out.Code(), body)
}

func TestErrorsCarryCodes(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	admin := env.AdminToken()
	cases := []struct {
		query string
		code  string
	}{
		{`{ server(id: "999999") { id } }`, "NOT_FOUND"},
		{`{ request(id: "999999") { id } }`, "NOT_FOUND"},
		{`{ node(id: "1") { id } }`, "NOT_FOUND"},
		{`mutation { createPlan(input: {name: "", monthlyCredits: 1, retentionDays: 1, maxServers: 1, maxRecipientsPerServer: 1}){ id } }`, "INVALID_INPUT"},
		{`{ nosuchfield }`, "GRAPHQL_VALIDATION_FAILED"},
		{`{ viewer { role }`, "GRAPHQL_PARSE_FAILED"},
	}
	for _, c := range cases {
		resp := env.GraphQL(admin, c.query, nil)
		require.Equal(t, c.code, resp.Code(), "%s: %+v", c.query, resp.Errors)
	}
	// Internal details never reach the client: a duplicate plan name is a CONFLICT with a plain message.
	in := map[string]any{"name": "dup", "monthlyCredits": 1, "retentionDays": 1, "maxServers": 1, "maxRecipientsPerServer": 1}
	q := `mutation($in: CreatePlanInput!){ createPlan(input: $in){ id } }`
	env.MustGraphQL(admin, q, map[string]any{"in": in}, nil)
	resp := env.GraphQL(admin, q, map[string]any{"in": in})
	require.Equal(t, "CONFLICT", resp.Code(), "%+v", resp.Errors)
	msg := strings.ToLower(resp.Errors[0].Message)
	for _, leak := range []string{"sql", "constraint", "unique", "duplicate key", "ent:"} {
		require.NotContains(t, msg, leak, fmt.Sprintf("message leaks internals: %q", resp.Errors[0].Message))
	}
}
