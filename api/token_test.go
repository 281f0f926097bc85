package api_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/auth"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
)

// mintedToken is what issueToken returns.
type mintedToken struct {
	ID        string
	Token     string
	ExpiresAt time.Time
}

func mint(t *testing.T, env *relaytest.Env, token string, in map[string]any) mintedToken {
	t.Helper()
	var out struct{ IssueToken mintedToken }
	env.MustGraphQL(token, `mutation($in: IssueTokenInput!){ issueToken(input: $in){ id token expiresAt } }`,
		map[string]any{"in": in}, &out)
	return out.IssueToken
}

const viewerQuery = `{ viewer { role subject } }`

// requireRefused polls until token is refused with UNAUTHENTICATED on env: a revocation reaches a process
// within its refresh interval.
func requireRefused(t *testing.T, env *relaytest.Env, token, what string) {
	t.Helper()
	relaytest.Eventually(t, 10*time.Second, what, func() bool {
		return env.GraphQL(token, viewerQuery, nil).Code() == "UNAUTHENTICATED"
	})
}

func TestRevokeToken(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	a := env.NewTenant("tok-a", relaytest.PlanLimits{Credits: 10})
	b := env.NewTenant("tok-b", relaytest.PlanLimits{Credits: 10})
	tok := mint(t, env, a.Owner, map[string]any{"role": "OWNER", "subject": "deploy-bot"})
	require.Empty(t, env.GraphQL(tok.Token, viewerQuery, nil).Errors)

	const revoke = `mutation($id: ID!){ revokeToken(id: $id){ id subject role issuedBy revokedAt tenant { id } } }`
	vars := map[string]any{"id": tok.ID}
	require.Equal(t, "NOT_FOUND", env.GraphQL(b.Owner, revoke, vars).Code(), "another tenant's owner")
	require.Equal(t, "FORBIDDEN", env.GraphQL(a.Member, revoke, vars).Code(), "the tenant's member")
	require.Equal(t, "UNAUTHENTICATED", env.GraphQL("", revoke, vars).Code(), "no token")
	require.Empty(t, env.GraphQL(tok.Token, viewerQuery, nil).Errors, "denied revocations revoke nothing")

	var out struct {
		RevokeToken struct {
			ID, Subject, Role, IssuedBy string
			RevokedAt                   *time.Time
			Tenant                      struct{ ID string }
		}
	}
	env.MustGraphQL(a.Owner, revoke, vars, &out)
	require.Equal(t, tok.ID, out.RevokeToken.ID)
	require.NotNil(t, out.RevokeToken.RevokedAt)
	require.Equal(t, "deploy-bot", out.RevokeToken.Subject)
	require.Equal(t, "OWNER", out.RevokeToken.Role)
	require.Equal(t, "tok-a-owner", out.RevokeToken.IssuedBy)
	require.Equal(t, a.ID, out.RevokeToken.Tenant.ID)
	requireRefused(t, env, tok.Token, "the revoked token refused")
	require.Empty(t, env.GraphQL(a.Owner, revoke, vars).Errors, "revoking again is harmless")

	// Owners list their tenant's tokens, operators everyone's; both see the revocation.
	const list = `{ tokens(first: 50){ edges { node { id revokedAt } } } }`
	for _, who := range []string{a.Owner, env.AdminToken()} {
		var l struct {
			Tokens struct {
				Edges []struct {
					Node struct {
						ID        string
						RevokedAt *time.Time
					}
				}
			}
		}
		env.MustGraphQL(who, list, nil, &l)
		found := false
		for _, e := range l.Tokens.Edges {
			if e.Node.ID == tok.ID {
				found = e.Node.RevokedAt != nil
			}
		}
		require.True(t, found, "revoked token listed: %+v", l)
	}
	require.Equal(t, "FORBIDDEN", env.GraphQL(a.Member, list, nil).Code(), "members list no tokens")
	// Operators revoke any tenant's token.
	other := mint(t, env, b.Owner, map[string]any{"role": "MEMBER"})
	env.MustGraphQL(env.AdminToken(), revoke, map[string]any{"id": other.ID}, nil)
	requireRefused(t, env, other.Token, "the token an operator revoked refused")
}

// A revocation reaches a second process on the same database within its refresh interval.
func TestRevocationReachesPeer(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	peer := env.Peer(t, func(c *relay.Config) { c.TokenRefresh = 50 * time.Millisecond })
	a := env.NewTenant("peer-a", relaytest.PlanLimits{Credits: 10})
	tok := mint(t, env, a.Owner, map[string]any{"role": "MEMBER"})
	require.Empty(t, peer.GraphQL(tok.Token, viewerQuery, nil).Errors)
	env.MustGraphQL(a.Owner, `mutation($id: ID!){ revokeToken(id: $id){ id } }`, map[string]any{"id": tok.ID}, nil)
	requireRefused(t, peer, tok.Token, "the peer refusing the revoked token")
}

// A tenant's token never mints one that outlives it; an operator's may.
func TestMintedTokenCapped(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	a := env.NewTenant("cap-a", relaytest.PlanLimits{Credits: 10})
	_, parent, err := env.Relay.Auth.VerifyToken(a.Owner)
	require.NoError(t, err)
	year := 366 * 24 * 3600

	child := mint(t, env, a.Owner, map[string]any{"role": "OWNER", "ttlSeconds": year})
	require.True(t, child.ExpiresAt.Equal(parent.ExpiresAt), "capped at the minter's expiry: %v, minter %v", child.ExpiresAt, parent.ExpiresAt)
	_, signed, err := env.Relay.Auth.VerifyToken(child.Token)
	require.NoError(t, err)
	require.True(t, signed.ExpiresAt.Equal(parent.ExpiresAt), "the signed exp is capped too: %v", signed.ExpiresAt)
	grandchild := mint(t, env, child.Token, map[string]any{"role": "MEMBER", "ttlSeconds": year})
	require.True(t, grandchild.ExpiresAt.Equal(parent.ExpiresAt), "and so on down the chain: %v", grandchild.ExpiresAt)

	short := mint(t, env, a.Owner, map[string]any{"role": "MEMBER", "ttlSeconds": 120})
	require.True(t, short.ExpiresAt.Before(parent.ExpiresAt), "a shorter lifetime is kept: %v", short.ExpiresAt)

	long := mint(t, env, env.AdminToken(), map[string]any{"role": "OWNER", "tenantId": a.ID, "ttlSeconds": year})
	require.True(t, long.ExpiresAt.After(time.Now().Add(365*24*time.Hour)), "operators are not capped: %v", long.ExpiresAt)
}

// requireClosedWith waits for the subscription's connection to close and checks the close frame.
func requireClosedWith(t *testing.T, sub *wsSub, reason string) {
	t.Helper()
	for {
		m := sub.next(10 * time.Second)
		require.False(t, m.TimedOut, "connection still open")
		if m.Type == "closed" {
			break
		}
	}
	var ce websocket.CloseError
	require.True(t, errors.As(sub.closeErr, &ce), "close error: %v", sub.closeErr)
	require.Equal(t, websocket.StatusCode(4401), ce.Code)
	require.Equal(t, reason, ce.Reason)
}

// Revoking a token closes its websockets: the live delivery stream and a CLI's stream alike.
func TestWebsocketClosedAtRevocation(t *testing.T) {
	t.Parallel()
	env, a, srv := relaytest.StartTenantServer(t, "ws-rev", 100)
	rcp := env.NewRecipient(a, srv.ID, map[string]any{"method": "CLI"})
	tok := mint(t, env, a.Owner, map[string]any{"role": "MEMBER"})

	cli := subscribe(t, env, tok.Token, `subscription($id: ID!){ cliListen(recipientId: $id){ kind } }`, map[string]any{"id": rcp})
	m := cli.next(10 * time.Second)
	require.Empty(t, m.Errors, "%+v", m)
	require.Contains(t, string(m.Data), "CONNECTED")
	live := subscribe(t, env, tok.Token, `subscription($id: ID!){ deliveryUpdated(serverId: $id){ id } }`, map[string]any{"id": srv.ID})
	untouched := subscribe(t, env, a.Member, `subscription($id: ID!){ deliveryUpdated(serverId: $id){ request { id } } }`, map[string]any{"id": srv.ID})

	env.MustGraphQL(a.Owner, `mutation($id: ID!){ revokeToken(id: $id){ id } }`, map[string]any{"id": tok.ID}, nil)
	requireClosedWith(t, cli, "token revoked")
	requireClosedWith(t, live, "token revoked")

	// Another token's stream goes on: it carries a request accepted after the revocation. The server may
	// still be setting that subscription up, so webhooks are sent until one of them shows up.
	posted := map[string]bool{}
	relaytest.Eventually(t, 10*time.Second, "a later request on the other stream", func() bool {
		posted[postOK(t, env, srv.Key, "", `{}`)] = true
		m := untouched.next(200 * time.Millisecond)
		require.NotEqual(t, "closed", m.Type)
		require.Empty(t, m.Errors, "%+v", m)
		var d struct {
			DeliveryUpdated struct{ Request struct{ ID string } }
		}
		if !m.TimedOut {
			require.NoError(t, json.Unmarshal(m.Data, &d))
		}
		return posted[d.DeliveryUpdated.Request.ID]
	})
}

// A websocket closes once its token expires, by the process's clock.
func TestWebsocketClosedAtExpiry(t *testing.T) {
	t.Parallel()
	env, clock := relaytest.StartAt(t, time.Now().UTC(), func(c *relay.Config) { c.TokenRefresh = 20 * time.Millisecond })
	a := env.NewTenant("ws-exp", relaytest.PlanLimits{Credits: 1000})
	srv := env.NewServer(a, "ws-exp", nil)
	env.NewRecipient(a, srv.ID, map[string]any{"method": "CLI"}) // a pending delivery per webhook: an event
	tok := mint(t, env, a.Owner, map[string]any{"role": "MEMBER", "ttlSeconds": 60})
	sub := subscribe(t, env, tok.Token, `subscription($id: ID!){ deliveryUpdated(serverId: $id){ id } }`, map[string]any{"id": srv.ID})
	// Still valid up to the leeway HTTP requests get too: the stream carries an event.
	clock.Advance(60*time.Second + auth.Leeway - time.Second)
	require.Empty(t, env.GraphQL(tok.Token, viewerQuery, nil).Errors)
	relaytest.Eventually(t, 10*time.Second, "an event on the stream", func() bool {
		postOK(t, env, srv.Key, "", `{}`)
		m := sub.next(200 * time.Millisecond)
		require.NotEqual(t, "closed", m.Type)
		return !m.TimedOut
	})

	clock.Advance(2 * time.Second)
	requireClosedWith(t, sub, "token expired")
	require.Equal(t, "UNAUTHENTICATED", env.GraphQL(tok.Token, viewerQuery, nil).Code())
}
