package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/auth"
	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/relay"
	"github.com/adal-relay/adal/relay/relaytest"
	"github.com/adal-relay/adal/routing"
	"github.com/adal-relay/adal/viewer"
)

const redeem = `mutation($code: String!){ redeemSignInCode(code: $code){ id token expiresAt } }`

// codeOf is the one-time code a sign-in link carries.
func codeOf(t *testing.T, link string) string {
	t.Helper()
	i := strings.Index(link, "#")
	require.Positive(t, i, link)
	frag, err := url.Parse(link[i+1:])
	require.NoError(t, err)
	require.Equal(t, "/signin", frag.Path)
	code := frag.Query().Get("code")
	require.NotEmpty(t, code, link)
	return code
}

// An empty installation logs one sign-in link; its code, stored only hashed, buys an operator token once.
func TestFirstRunSignInLink(t *testing.T) {
	t.Parallel()
	var logs relaytest.LogBuffer
	env, clock := relaytest.StartAt(t, time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC), relaytest.CaptureLogs(&logs))

	links := logs.SignInLinks()
	require.Len(t, links, 1, "one line with a link:\n%s", logs.String())
	require.True(t, strings.HasPrefix(links[0], env.Server.URL+"/#/signin?code="), links[0])
	code := codeOf(t, links[0])

	rows, err := env.DB.Client.SignInCode.Query().All(viewer.SystemContext(env.Ctx))
	require.NoError(t, err)
	require.Len(t, rows, 1)
	sum := sha256.Sum256([]byte(code))
	require.Equal(t, hex.EncodeToString(sum[:]), rows[0].CodeHash, "only the hash is stored")
	require.Equal(t, clock.Now().Add(auth.SignInCodeTTL), rows[0].ExpiresAt.UTC())
	// Not even an operator reads the codes.
	_, err = env.DB.Client.SignInCode.Query().All(viewer.NewContext(env.Ctx, viewer.Viewer{Role: viewer.Admin}))
	require.Error(t, err)

	var out struct{ RedeemSignInCode mintedToken }
	env.MustGraphQL("", redeem, map[string]any{"code": code}, &out)
	tok := out.RedeemSignInCode
	require.Equal(t, clock.Now().Add(auth.SignInTokenTTL), tok.ExpiresAt.UTC())
	var v struct {
		Viewer struct{ Role, Subject string }
	}
	env.MustGraphQL(tok.Token, viewerQuery, nil, &v)
	require.Equal(t, "ADMIN", v.Viewer.Role)
	require.Equal(t, auth.SignInSubject, v.Viewer.Subject)
	var listed struct {
		Tokens struct {
			Edges []struct {
				Node struct{ ID, IssuedBy, Role string }
			}
		}
	}
	env.MustGraphQL(tok.Token, `{ tokens { edges { node { id issuedBy role } } } }`, nil, &listed)
	require.Len(t, listed.Tokens.Edges, 1)
	require.Equal(t, tok.ID, listed.Tokens.Edges[0].Node.ID)
	require.Equal(t, "sign-in link", listed.Tokens.Edges[0].Node.IssuedBy, "listed and revocable like any token")

	for what, c := range map[string]string{"used": code, "unknown": "NOTACODE", "empty": ""} {
		resp := env.GraphQL("", redeem, map[string]any{"code": c})
		require.Equal(t, "UNAUTHENTICATED", resp.Code(), what)
		require.Contains(t, resp.Errors[0].Message, "server signin-link", what)
	}

	// A later link, once its minutes are over, is refused.
	late, _, err := env.Relay.SignInLink(env.Ctx)
	require.NoError(t, err)
	clock.Advance(auth.SignInCodeTTL)
	require.Equal(t, "UNAUTHENTICATED", env.GraphQL("", redeem, map[string]any{"code": codeOf(t, late)}).Code())
	require.Len(t, logs.SignInLinks(), 1, "links asked for are not logged")
}

// Of redemptions of one code at once, exactly one gets a token.
func TestSignInCodeRedeemedOnce(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	link, _, err := env.Relay.SignInLink(env.Ctx)
	require.NoError(t, err)
	code := codeOf(t, link)
	const n = 6
	codes := env.ConcurrentCodes(n, "", redeem, func(int) map[string]any { return map[string]any{"code": code} })
	won := 0
	for _, c := range codes {
		if c == "" {
			won++
		} else {
			require.Equal(t, "UNAUTHENTICATED", c)
		}
	}
	require.Equal(t, 1, won, "outcomes %v", codes)
}

// An installation with a plan is not empty: a process starting on it logs no link.
func TestNoSignInLinkOnceSetUp(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t)
	env.NewTenant("acme", relaytest.PlanLimits{Credits: 1})
	var logs relaytest.LogBuffer
	env.Peer(t, relaytest.CaptureLogs(&logs))
	require.Empty(t, logs.SignInLinks(), logs.String())
}

// The limits the API reports are the ones it enforces, with the schedule's due times in the unit in force.
func TestLimits(t *testing.T) {
	t.Parallel()
	env := relaytest.Start(t, func(c *relay.Config) { c.RetryUnit = time.Second; c.MaxBodyBytes = 4096 })
	tn := env.NewTenant("acme", relaytest.PlanLimits{Credits: 10})
	const q = `{ limits { nameMaxLength retentionDaysMax urlMaxLength timeoutSecondsMax keyGraceSecondsDefault
		keyGraceSecondsMax tokenTtlSecondsMin tokenTtlSecondsDefault tokenTtlSecondsMax maxBodyBytes
		outboundBodyMaxBytes outboundMaxAttempts creditsPerAction pageSizeMax filterMaxBytes responseBodyMaxBytes
		allowedMethodsMax verificationToleranceSecondsMax verificationSecretMaxBytes
		retrySchedules { schedule minAttempts maxAttempts dueSeconds } } }`
	require.Equal(t, "UNAUTHENTICATED", env.GraphQL("", q, nil).Code())
	var out struct {
		Limits struct {
			NameMaxLength, RetentionDaysMax, URLMaxLength, TimeoutSecondsMax          int
			KeyGraceSecondsDefault, KeyGraceSecondsMax                                int
			TokenTTLSecondsMin, TokenTTLSecondsDefault, TokenTTLSecondsMax            int
			MaxBodyBytes, OutboundBodyMaxBytes, OutboundMaxAttempts, CreditsPerAction int
			PageSizeMax                                                               int
			FilterMaxBytes, ResponseBodyMaxBytes, AllowedMethodsMax                   int
			VerificationToleranceSecondsMax, VerificationSecretMaxBytes               int
			RetrySchedules                                                            []struct {
				Schedule                 string
				MinAttempts, MaxAttempts int
				DueSeconds               []float64
			}
		}
	}
	env.MustGraphQL(tn.Member, q, nil, &out)
	l := out.Limits
	require.Equal(t, 200, l.NameMaxLength)
	require.Equal(t, 3650, l.RetentionDaysMax)
	require.Equal(t, 2048, l.URLMaxLength)
	require.Equal(t, 30, l.TimeoutSecondsMax)
	require.Equal(t, 86400, l.KeyGraceSecondsDefault)
	require.Equal(t, 30*86400, l.KeyGraceSecondsMax)
	require.Equal(t, 60, l.TokenTTLSecondsMin)
	require.Equal(t, 30*86400, l.TokenTTLSecondsDefault)
	require.Equal(t, 366*86400, l.TokenTTLSecondsMax)
	require.Equal(t, 4096, l.MaxBodyBytes)
	require.Equal(t, 1<<20, l.OutboundBodyMaxBytes)
	require.Equal(t, 10, l.OutboundMaxAttempts)
	require.Equal(t, 1, l.CreditsPerAction)
	require.Equal(t, 500, l.PageSizeMax)
	require.Len(t, l.RetrySchedules, 3)
	byName := map[string][]float64{}
	for _, s := range l.RetrySchedules {
		require.Equal(t, 1, s.MinAttempts)
		require.Len(t, s.DueSeconds, s.MaxAttempts)
		byName[s.Schedule] = s.DueSeconds
	}
	require.Equal(t, []float64{0, 4, 13, 29, 54, 90, 139, 203, 284, 384}, byName["QUADRATIC"])
	require.Equal(t, []float64{0, 1, 2, 4, 9, 19, 39, 59, 119, 179}, byName["STEPPED"])
	require.Len(t, byName["EXPONENTIAL"], 12)
	require.InDelta(t, 2047*84.8/60, byName["EXPONENTIAL"][11], 1e-6)

	// Each bound is where the API starts refusing, with the message the console repeats.
	srv := env.NewServer(tn, "s", nil)
	for _, c := range []struct {
		in   map[string]any
		want string
	}{
		{map[string]any{"name": strings.Repeat("x", l.NameMaxLength+1)}, "name must be at most 200 characters"},
		{map[string]any{"retentionDays": l.RetentionDaysMax + 1}, "retentionDays must be between 1 and 3650"},
		{map[string]any{"response": map[string]any{"status": 200, "body": strings.Repeat("x", l.ResponseBodyMaxBytes+1)}},
			fmt.Sprintf("response.body must be at most %d bytes", l.ResponseBodyMaxBytes)},
		{map[string]any{"allowedMethods": methods(l.AllowedMethodsMax + 1)},
			fmt.Sprintf("allowedMethods holds at most %d methods", l.AllowedMethodsMax)},
		{map[string]any{"verification": map[string]any{"kind": "STRIPE", "secrets": []string{"s"}, "toleranceSeconds": l.VerificationToleranceSecondsMax + 1}},
			fmt.Sprintf("verification.toleranceSeconds must be between 1 and %d", l.VerificationToleranceSecondsMax)},
		{map[string]any{"verification": map[string]any{"kind": "API_KEY", "header": "X-Key", "secrets": []string{strings.Repeat("k", l.VerificationSecretMaxBytes+1)}}},
			fmt.Sprintf("verification.secrets: each must be 1 to %d bytes", l.VerificationSecretMaxBytes)},
	} {
		resp := env.GraphQL(tn.Owner, `mutation($id: ID!, $in: UpdateServerInput!){ updateServer(id: $id, input: $in){ id } }`,
			map[string]any{"id": srv.ID, "in": c.in})
		require.Equal(t, "INVALID_INPUT", resp.Code())
		require.Equal(t, c.want, resp.Errors[0].Message)
	}
	resp := env.GraphQL(tn.Owner, `mutation($in: CreateRecipientInput!){ createRecipient(input: $in){ id } }`,
		map[string]any{"in": map[string]any{"serverId": srv.ID, "name": "r", "method": "DIRECT_HTTP",
			"url": "https://example.com/" + strings.Repeat("x", routing.MaxURLLength)}})
	require.Equal(t, "url must be at most 2048 characters", resp.Errors[0].Message)
	resp = env.GraphQL(tn.Owner, `mutation($in: CreateRecipientInput!){ createRecipient(input: $in){ id } }`,
		map[string]any{"in": map[string]any{"serverId": srv.ID, "name": "r", "method": "DIRECT_HTTP", "url": "https://example.com/",
			"filter": map[string]any{"body.note": strings.Repeat("x", l.FilterMaxBytes)}}})
	require.Equal(t, "INVALID_INPUT", resp.Code())
	require.Equal(t, fmt.Sprintf("filter: $: a rule is at most %d bytes", l.FilterMaxBytes), resp.Errors[0].Message)
}

// methods is n distinct method names.
func methods(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "M" + strings.Repeat("X", i)
	}
	return out
}

// What the console links: a ledger entry's tenant, a server's tenant, a tenant's servers and its usage by month.
func TestConsoleLinks(t *testing.T) {
	t.Parallel()
	env, clock := relaytest.StartAt(t, time.Date(2026, 11, 30, 23, 30, 0, 0, time.UTC))
	a := env.NewTenant("acme", relaytest.PlanLimits{Credits: 10})
	b := env.NewTenant("globex", relaytest.PlanLimits{Credits: 20})
	sa := env.NewServer(a, "zeta", nil)
	env.NewServer(a, "alpha", nil)
	deleted := env.NewServer(a, "gone", nil)
	env.MustGraphQL(a.Owner, `mutation($id: ID!){ deleteServer(id: $id){ id } }`, map[string]any{"id": deleted.ID}, nil)
	env.Accept(sa.Key)
	clock.Advance(40 * time.Minute) // into December, within the tokens' hour
	env.Accept(sa.Key)
	env.Accept(sa.Key)

	admin := env.AdminToken()
	var ledger struct {
		Ledger struct {
			Edges []struct {
				Node struct {
					Reason string
					Tenant struct{ ID, Name string }
				}
			}
		}
	}
	env.MustGraphQL(admin, `{ ledger(first: 50) { edges { node { reason tenant { id name } } } } }`, nil, &ledger)
	names := map[string]bool{}
	for _, e := range ledger.Ledger.Edges {
		names[e.Node.Tenant.Name] = true
	}
	require.Equal(t, map[string]bool{"acme": true, "globex": true}, names)
	env.MustGraphQL(b.Owner, `{ ledger(first: 50) { edges { node { reason tenant { id name } } } } }`, nil, &ledger)
	require.NotEmpty(t, ledger.Ledger.Edges)
	for _, e := range ledger.Ledger.Edges {
		require.Equal(t, b.ID, e.Node.Tenant.ID, "a tenant sees its own entries only")
	}

	var srv struct {
		Server struct{ Tenant struct{ ID, Name string } }
	}
	env.MustGraphQL(admin, `query($id: ID!){ server(id: $id){ tenant { id name } } }`, map[string]any{"id": sa.ID}, &srv)
	require.Equal(t, a.ID, srv.Server.Tenant.ID)

	const tenantQ = `query($id: ID!){ node(id: $id){ ... on Tenant { servers { name } usageHistory(months: 3) {
		period requestsAccepted creditsGranted creditsSpent } } } }`
	var tq struct {
		Node struct {
			Servers      []struct{ Name string }
			UsageHistory []billing.Usage
		}
	}
	env.MustGraphQL(admin, tenantQ, map[string]any{"id": a.ID}, &tq)
	require.Equal(t, []struct{ Name string }{{"alpha"}, {"zeta"}}, tq.Node.Servers, "live servers, by name")
	require.Equal(t, []billing.Usage{
		{Period: "2026-10"},
		{Period: "2026-11", RequestsAccepted: 1, CreditsSpent: 1, CreditsGranted: 10},
		{Period: "2026-12", RequestsAccepted: 2, CreditsSpent: 2},
	}, tq.Node.UsageHistory)
	resp := env.GraphQL(a.Owner, `query($id: ID!){ node(id: $id){ ... on Tenant { usageHistory(months: 25) { period } } } }`,
		map[string]any{"id": a.ID})
	require.Equal(t, "INVALID_INPUT", resp.Code())
}
