package routing_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/relay/relaytest"
)

// secretsIn collects every signingSecret field of a GraphQL answer, wherever it sits, with its value (nil for
// null), so a test sees each way the API hands out a recipient.
func secretsIn(t *testing.T, data json.RawMessage) []*string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(data, &v))
	var out []*string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "signingSecret" {
					if s, ok := e.(string); ok {
						out = append(out, &s)
					} else {
						require.Nil(t, e)
						out = append(out, nil)
					}
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// TestSigningSecretOnlyForManagers: a recipient's signing secret is whsec_ and the base64 of a 32-byte key,
// read by the tenant's owner and by operators; a member gets null wherever the recipient is reached — node,
// nodes, a server's recipients, the servers list, a delivery's recipient.
func TestSigningSecretOnlyForManagers(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 10)
	id := env.NewRecipient(tn, srv.ID, map[string]any{"method": "CLI"})
	reqID := env.Send(srv.Key, "", `{}`) // a CLI recipient's delivery waits, so the request has one

	type query struct {
		doc  string
		vars map[string]any
	}
	queries := map[string]query{
		"node":    {`query($id: ID!){ node(id: $id){ ... on Recipient { signingSecret } } }`, map[string]any{"id": id}},
		"nodes":   {`query($id: ID!){ nodes(ids: [$id]){ ... on Recipient { signingSecret } } }`, map[string]any{"id": id}},
		"server":  {`query($id: ID!){ server(id: $id){ recipients { signingSecret } } }`, map[string]any{"id": srv.ID}},
		"servers": {`{ servers { edges { node { recipients { signingSecret } } } } }`, nil},
		"request": {`query($id: ID!){ request(id: $id){ deliveries { recipient { signingSecret } } } }`, map[string]any{"id": reqID}},
	}
	var secret string
	for name, q := range queries {
		for _, who := range []struct {
			name, token string
			reads       bool
		}{{"owner", tn.Owner, true}, {"operator", env.AdminToken(), true}, {"member", tn.Member, false}} {
			resp := env.GraphQL(who.token, q.doc, q.vars)
			require.Empty(t, resp.Errors, "%s as %s", name, who.name)
			got := secretsIn(t, resp.Data)
			require.Len(t, got, 1, "%s as %s: %s", name, who.name, resp.Data)
			if !who.reads {
				require.Nil(t, got[0], "%s as %s", name, who.name)
				continue
			}
			require.NotNil(t, got[0], "%s as %s", name, who.name)
			if secret == "" {
				secret = *got[0]
			}
			require.Equal(t, secret, *got[0], "%s as %s", name, who.name)
		}
	}
	key, ok := strings.CutPrefix(secret, "whsec_")
	require.True(t, ok, secret)
	raw, err := base64.StdEncoding.DecodeString(key)
	require.NoError(t, err)
	require.Len(t, raw, 32)

	// Every recipient gets its own, and the one it returns at creation is the one it keeps.
	var created struct {
		CreateRecipient struct{ ID, SigningSecret string }
	}
	env.MustGraphQL(tn.Owner, `mutation($in: CreateRecipientInput!){ createRecipient(input: $in){ id signingSecret } }`,
		map[string]any{"in": map[string]any{"serverId": srv.ID, "name": "second", "method": "CLI"}}, &created)
	require.NotEqual(t, secret, created.CreateRecipient.SigningSecret)
	resp := env.GraphQL(tn.Owner, queries["node"].doc, map[string]any{"id": created.CreateRecipient.ID})
	require.Equal(t, created.CreateRecipient.SigningSecret, *secretsIn(t, resp.Data)[0])
}

// TestSignatureHeadersSetting: ADAL by default, STANDARD_WEBHOOKS on request, changeable by update; anything
// else is refused.
func TestSignatureHeadersSetting(t *testing.T) {
	t.Parallel()
	env, tn, srv := relaytest.StartWithServer(t, 10)
	const create = `mutation($in: CreateRecipientInput!){ createRecipient(input: $in){ id signatureHeaders } }`
	var out struct {
		CreateRecipient struct{ ID, SignatureHeaders string }
	}
	env.MustGraphQL(tn.Owner, create, map[string]any{"in": map[string]any{"serverId": srv.ID, "name": "a", "method": "CLI"}}, &out)
	require.Equal(t, "ADAL", out.CreateRecipient.SignatureHeaders)
	env.MustGraphQL(tn.Owner, create, map[string]any{"in": map[string]any{"serverId": srv.ID, "name": "b", "method": "CLI",
		"signatureHeaders": "STANDARD_WEBHOOKS"}}, &out)
	require.Equal(t, "STANDARD_WEBHOOKS", out.CreateRecipient.SignatureHeaders)
	var upd struct {
		UpdateRecipient struct{ SignatureHeaders string }
	}
	const update = `mutation($id: ID!, $in: UpdateRecipientInput!){ updateRecipient(id: $id, input: $in){ signatureHeaders } }`
	env.MustGraphQL(tn.Owner, update, map[string]any{"id": out.CreateRecipient.ID, "in": map[string]any{"signatureHeaders": "ADAL"}}, &upd)
	require.Equal(t, "ADAL", upd.UpdateRecipient.SignatureHeaders)
	env.MustGraphQL(tn.Owner, update, map[string]any{"id": out.CreateRecipient.ID, "in": map[string]any{"name": "renamed"}}, &upd)
	require.Equal(t, "ADAL", upd.UpdateRecipient.SignatureHeaders, "an update that does not name it keeps it")
	resp := env.GraphQL(tn.Owner, update, map[string]any{"id": out.CreateRecipient.ID, "in": map[string]any{"signatureHeaders": "SVIX"}})
	require.NotEmpty(t, resp.Errors, "an unknown mode is refused")
	resp = env.GraphQL(tn.Member, update, map[string]any{"id": out.CreateRecipient.ID, "in": map[string]any{"signatureHeaders": "STANDARD_WEBHOOKS"}})
	require.Equal(t, "FORBIDDEN", resp.Code(), "%+v", resp.Errors)
}

// TestRotateRecipientSecretRefusals: a grace out of bounds, a member, another tenant and a deleted recipient are
// refused, and leave the secret as it was; the default grace is a day.
func TestRotateRecipientSecretRefusals(t *testing.T) {
	t.Parallel()
	env, clock := relaytest.StartAt(t, time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	tn, srv := env.NewTenantServer(10)
	other := env.NewTenant("rotate-other", relaytest.PlanLimits{Credits: 10})
	id := env.NewRecipient(tn, srv.ID, map[string]any{"method": "CLI"})
	const q = `mutation($id: ID!, $grace: Int){ rotateRecipientSecret(id: $id, graceSeconds: $grace){ signingSecret previousSecretExpiresAt } }`
	read := func() string {
		t.Helper()
		var out struct {
			Node struct{ SigningSecret string }
		}
		env.MustGraphQL(tn.Owner, `query($id: ID!){ node(id: $id){ ... on Recipient { signingSecret } } }`, map[string]any{"id": id}, &out)
		return out.Node.SigningSecret
	}
	before := read()
	for _, grace := range []int{-1, 30*24*3600 + 1} {
		resp := env.GraphQL(tn.Owner, q, map[string]any{"id": id, "grace": grace})
		require.Equal(t, "INVALID_INPUT", resp.Code(), "grace %d: %+v", grace, resp.Errors)
	}
	for _, tc := range []struct{ who, token, code string }{
		{"member", tn.Member, "FORBIDDEN"},
		{"another tenant's owner", other.Owner, "NOT_FOUND"},
	} {
		resp := env.GraphQL(tc.token, q, map[string]any{"id": id, "grace": 60})
		require.Equal(t, tc.code, resp.Code(), "%s: %+v", tc.who, resp.Errors)
	}
	require.Equal(t, before, read(), "refused rotations changed nothing")

	var out struct {
		RotateRecipientSecret struct {
			SigningSecret           string
			PreviousSecretExpiresAt time.Time
		}
	}
	env.MustGraphQL(tn.Owner, q, map[string]any{"id": id}, &out)
	require.NotEqual(t, before, out.RotateRecipientSecret.SigningSecret)
	require.Equal(t, out.RotateRecipientSecret.SigningSecret, read())
	require.True(t, clock.Now().Add(24*time.Hour).Equal(out.RotateRecipientSecret.PreviousSecretExpiresAt),
		"the default grace is a day: %v", out.RotateRecipientSecret.PreviousSecretExpiresAt)

	env.MustGraphQL(tn.Owner, `mutation($id: ID!){ deleteRecipient(id: $id){ id } }`, map[string]any{"id": id}, nil)
	resp := env.GraphQL(tn.Owner, q, map[string]any{"id": id})
	require.Equal(t, "NOT_FOUND", resp.Code(), "a deleted recipient: %+v", resp.Errors)
}
