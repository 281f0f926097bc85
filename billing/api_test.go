package billing_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/relay/relaytest"
)

type ledgerPage struct {
	Ledger struct {
		TotalCount int
		Edges      []struct{ Node ledgerEntry }
	}
}

type ledgerEntry struct {
	ID           string
	Reason       string
	Amount       int
	BalanceAfter int
	Reference    string
	Period       *string
	CreatedAt    time.Time
}

// startWithTenant starts a process with a tenant called name of credits, and gives an operator's token.
func startWithTenant(t *testing.T, name string, credits int) (*relaytest.Env, string, relaytest.Tenant) {
	t.Helper()
	env := relaytest.Start(t)
	return env, env.AdminToken(), env.NewTenant(name, relaytest.PlanLimits{Credits: credits})
}

// newestEntry reads token's ledger, requires it to hold total entries, the newest of reason, amount and
// balance after, and returns that one.
func newestEntry(t *testing.T, env *relaytest.Env, token string, total int, reason string, amount, balanceAfter int) ledgerEntry {
	t.Helper()
	var page ledgerPage
	env.MustGraphQL(token, ledgerQuery, nil, &page)
	require.Equal(t, total, page.Ledger.TotalCount)
	e := page.Ledger.Edges[0].Node
	require.Equal(t, reason, e.Reason)
	require.Equal(t, amount, e.Amount)
	require.Equal(t, balanceAfter, e.BalanceAfter)
	return e
}

const ledgerQuery = `query($t: ID){ ledger(tenantId: $t, first: 50){ totalCount edges { node { id reason amount balanceAfter reference period createdAt } } } }`

func tenantBalance(t *testing.T, env *relaytest.Env, token, id string) (balance int, planID string) {
	t.Helper()
	var out struct {
		Node struct {
			CreditBalance int
			PlanID        string
		}
	}
	env.MustGraphQL(token, `query($id: ID!){ node(id: $id){ ... on Tenant { creditBalance planID } } }`, map[string]any{"id": id}, &out)
	return out.Node.CreditBalance, out.Node.PlanID
}

func TestCreateTenantGrantsPlanCredits(t *testing.T) {
	t.Parallel()
	env, admin, tn := startWithTenant(t, "granted", 250)

	bal, planID := tenantBalance(t, env, admin, tn.ID)
	require.Equal(t, 250, bal)
	require.Equal(t, tn.PlanID, planID)

	e := newestEntry(t, env, tn.Owner, 1, "PLAN_GRANT", 250, 250)
	require.NotNil(t, e.Period)
	require.Equal(t, billing.Period(time.Now()), *e.Period)

	// The viewer sees its balance too.
	var v struct {
		Viewer struct{ Tenant struct{ CreditBalance int } }
	}
	env.MustGraphQL(tn.Member, `{ viewer { tenant { creditBalance } } }`, nil, &v)
	require.Equal(t, 250, v.Viewer.Tenant.CreditBalance)

	// createTenant validates its input.
	resp := env.GraphQL(admin, `mutation($p: ID!){ createTenant(input: {name: "  ", planId: $p}){ id } }`, map[string]any{"p": tn.PlanID})
	require.Equal(t, "INVALID_INPUT", resp.Code(), "%+v", resp.Errors)
	resp = env.GraphQL(admin, `mutation{ createTenant(input: {name: "x", planId: "999999"}){ id } }`, nil)
	require.Equal(t, "NOT_FOUND", resp.Code(), "%+v", resp.Errors)
}

func TestGrantCredits(t *testing.T) {
	t.Parallel()
	env, admin, tn := startWithTenant(t, "grant", 10)
	const q = `mutation($t: ID!, $n: Int!, $ref: String){ grantCredits(tenantId: $t, amount: $n, reference: $ref){ id reason amount balanceAfter reference } }`

	var out struct {
		GrantCredits struct {
			Reason       string
			Amount       int
			BalanceAfter int
			Reference    string
		}
	}
	env.MustGraphQL(admin, q, map[string]any{"t": tn.ID, "n": 15, "ref": "ticket-42"}, &out)
	require.Equal(t, "CREDIT_GRANT", out.GrantCredits.Reason)
	require.Equal(t, 15, out.GrantCredits.Amount)
	require.Equal(t, 25, out.GrantCredits.BalanceAfter)
	require.Equal(t, "ticket-42", out.GrantCredits.Reference)
	bal, _ := tenantBalance(t, env, admin, tn.ID)
	require.Equal(t, 25, bal)

	for _, n := range []int{0, -1, -100} {
		resp := env.GraphQL(admin, q, map[string]any{"t": tn.ID, "n": n})
		require.Equal(t, "INVALID_INPUT", resp.Code(), "amount %d: %+v", n, resp.Errors)
	}
	resp := env.GraphQL(admin, q, map[string]any{"t": "999999", "n": 5})
	require.Equal(t, "NOT_FOUND", resp.Code(), "%+v", resp.Errors)
	bal, _ = tenantBalance(t, env, admin, tn.ID)
	require.Equal(t, 25, bal, "refused grants change nothing")

	var page ledgerPage
	env.MustGraphQL(admin, ledgerQuery, map[string]any{"t": tn.ID}, &page)
	require.Equal(t, 2, page.Ledger.TotalCount)
}

func TestChangeTenantPlan(t *testing.T) {
	t.Parallel()
	env, admin, tn := startWithTenant(t, "switch", 30)
	var p struct{ CreatePlan struct{ ID string } }
	env.MustGraphQL(admin, `mutation{ createPlan(input: {name: "bigger", monthlyCredits: 1000, retentionDays: 30, maxServers: 50, maxRecipientsPerServer: 10, selectable: true}){ id } }`, nil, &p)
	bigger := p.CreatePlan.ID
	const q = `mutation($t: ID!, $p: ID!){ changeTenantPlan(tenantId: $t, planId: $p){ id planID creditBalance plan { name } } }`

	// A member may not.
	resp := env.GraphQL(tn.Member, q, map[string]any{"t": tn.ID, "p": bigger})
	require.Equal(t, "FORBIDDEN", resp.Code(), "%+v", resp.Errors)
	_, planID := tenantBalance(t, env, admin, tn.ID)
	require.Equal(t, tn.PlanID, planID)

	// The owner may: the plan changes at once, credits already granted stay, a PLAN_CHANGE entry records it.
	var out struct {
		ChangeTenantPlan struct {
			PlanID        string
			CreditBalance int
			Plan          struct{ Name string }
		}
	}
	env.MustGraphQL(tn.Owner, q, map[string]any{"t": tn.ID, "p": bigger}, &out)
	require.Equal(t, bigger, out.ChangeTenantPlan.PlanID)
	require.Equal(t, "bigger", out.ChangeTenantPlan.Plan.Name)
	require.Equal(t, 30, out.ChangeTenantPlan.CreditBalance, "the new plan's credits come with the next period")

	e := newestEntry(t, env, tn.Owner, 2, "PLAN_CHANGE", 0, 30)
	require.Contains(t, e.Reference, bigger)

	// The new plan's limits apply at once: retention of new requests is the new plan's.
	srv := env.NewServer(tn, "s", nil)
	resp2 := env.Post(srv.Key, "", []byte("{}"))
	resp2.Body.Close()
	require.Equal(t, http.StatusAccepted, resp2.StatusCode)
	var reqs struct {
		Requests struct {
			Edges []struct {
				Node struct{ ReceivedAt, ExpiresAt time.Time }
			}
		}
	}
	env.MustGraphQL(tn.Owner, `query($s: ID!){ requests(serverId: $s, first: 1){ edges { node { receivedAt expiresAt } } } }`, map[string]any{"s": srv.ID}, &reqs)
	require.Len(t, reqs.Requests.Edges, 1)
	n := reqs.Requests.Edges[0].Node
	require.Equal(t, 30*24*time.Hour, n.ExpiresAt.Sub(n.ReceivedAt))

	// Switching to the current plan is a no-op; an operator may switch back; an unknown plan is NOT_FOUND.
	env.MustGraphQL(tn.Owner, q, map[string]any{"t": tn.ID, "p": bigger}, nil)
	env.MustGraphQL(admin, q, map[string]any{"t": tn.ID, "p": tn.PlanID}, &out)
	require.Equal(t, tn.PlanID, out.ChangeTenantPlan.PlanID)
	resp = env.GraphQL(tn.Owner, q, map[string]any{"t": tn.ID, "p": "999999"})
	require.Equal(t, "NOT_FOUND", resp.Code(), "%+v", resp.Errors)
	var page ledgerPage
	env.MustGraphQL(tn.Owner, ledgerQuery, nil, &page)
	require.Equal(t, 4, page.Ledger.TotalCount, "grant, change, request, change back")
}

// TestOwnersPickOnlySelectablePlans: an owner switching to a plan operators did not open to owners gets
// FORBIDDEN and keeps its plan; a tenant's viewers list only the selectable plans and their own, and cannot
// read another plan by ID; operators see and assign every plan.
func TestOwnersPickOnlySelectablePlans(t *testing.T) {
	t.Parallel()
	env, admin, tn := startWithTenant(t, "picker", 5)
	other := env.NewTenant("neighbour", relaytest.PlanLimits{Credits: 5})
	createPlan := func(name string, selectable *bool) string {
		in := map[string]any{"name": name, "monthlyCredits": 1000000, "retentionDays": 30, "maxServers": 100, "maxRecipientsPerServer": 100}
		if selectable != nil {
			in["selectable"] = *selectable
		}
		var p struct{ CreatePlan struct{ ID string } }
		env.MustGraphQL(admin, `mutation($in: CreatePlanInput!){ createPlan(input: $in){ id } }`, map[string]any{"in": in}, &p)
		return p.CreatePlan.ID
	}
	yes, no := true, false
	private := createPlan("operators-largest", nil) // selectable defaults to false
	closed := createPlan("closed", &no)
	open := createPlan("open", &yes)
	const change = `mutation($t: ID!, $p: ID!){ changeTenantPlan(tenantId: $t, planId: $p){ planID } }`

	// The attack: the owner moves its tenant to a plan it was not offered.
	for _, p := range []string{private, closed, other.PlanID} {
		resp := env.GraphQL(tn.Owner, change, map[string]any{"t": tn.ID, "p": p})
		require.Equal(t, "FORBIDDEN", resp.Code(), "plan %s: %+v", p, resp.Errors)
		_, planID := tenantBalance(t, env, admin, tn.ID)
		require.Equal(t, tn.PlanID, planID, "the plan did not change")
	}

	listPlans := func(token string) []string {
		var out struct {
			Plans []struct {
				ID         string
				Selectable bool
			}
		}
		env.MustGraphQL(token, `{ plans { id selectable } }`, nil, &out)
		var ids []string
		for _, p := range out.Plans {
			ids = append(ids, p.ID)
		}
		return ids
	}
	// Tenant viewers see the selectable plans and their own current one; nothing else, not even by ID.
	for _, token := range []string{tn.Member, tn.Owner} {
		require.ElementsMatch(t, []string{tn.PlanID, open}, listPlans(token))
		for _, p := range []string{private, closed, other.PlanID} {
			resp := env.GraphQL(token, `query($id: ID!){ node(id: $id){ id } }`, map[string]any{"id": p})
			require.Equal(t, "NOT_FOUND", resp.Code(), "plan %s by id: %+v", p, resp.Errors)
		}
	}
	require.Subset(t, listPlans(admin), []string{tn.PlanID, other.PlanID, private, closed, open}, "operators see every plan")

	// A selectable plan is the owner's to pick; once on it the tenant still sees its old plan only if that
	// is selectable.
	env.MustGraphQL(tn.Owner, change, map[string]any{"t": tn.ID, "p": open}, nil)
	require.ElementsMatch(t, []string{open}, listPlans(tn.Member))

	// Operators open and close plans, and assign any plan.
	env.MustGraphQL(admin, `mutation($id: ID!){ updatePlan(id: $id, input: {selectable: true}){ id } }`, map[string]any{"id": closed}, nil)
	env.MustGraphQL(tn.Owner, change, map[string]any{"t": tn.ID, "p": closed}, nil)
	env.MustGraphQL(admin, `mutation($id: ID!){ updatePlan(id: $id, input: {selectable: false}){ id } }`, map[string]any{"id": open}, nil)
	resp := env.GraphQL(tn.Owner, change, map[string]any{"t": tn.ID, "p": open})
	require.Equal(t, "FORBIDDEN", resp.Code(), "a plan closed again: %+v", resp.Errors)
	var out struct{ ChangeTenantPlan struct{ PlanID string } }
	env.MustGraphQL(admin, change, map[string]any{"t": tn.ID, "p": private}, &out)
	require.Equal(t, private, out.ChangeTenantPlan.PlanID)
	require.ElementsMatch(t, []string{closed, private}, listPlans(tn.Member), "its own plan, though not selectable")
}

func TestLedgerNewestFirst(t *testing.T) {
	t.Parallel()
	env, admin, tn := startWithTenant(t, "order", 5)
	other := env.NewTenant("order-other", relaytest.PlanLimits{Credits: 7})
	srv := env.NewServer(tn, "s", nil)
	for i := range 3 {
		env.MustGraphQL(admin, `mutation($t: ID!, $n: Int!){ grantCredits(tenantId: $t, amount: $n){ id } }`,
			map[string]any{"t": tn.ID, "n": i + 1}, nil)
		resp := env.Post(srv.Key, "", []byte("{}"))
		resp.Body.Close()
		require.Equal(t, http.StatusAccepted, resp.StatusCode)
	}

	var page ledgerPage
	env.MustGraphQL(tn.Member, ledgerQuery, nil, &page)
	var reasons []string
	var amounts []int
	for _, e := range page.Ledger.Edges {
		reasons = append(reasons, e.Node.Reason)
		amounts = append(amounts, e.Node.Amount)
	}
	require.Equal(t, []string{"REQUEST_ACCEPTED", "CREDIT_GRANT", "REQUEST_ACCEPTED", "CREDIT_GRANT", "REQUEST_ACCEPTED", "CREDIT_GRANT", "PLAN_GRANT"}, reasons)
	require.Equal(t, []int{-1, 3, -1, 2, -1, 1, 5}, amounts)
	for i := 1; i < len(page.Ledger.Edges); i++ {
		require.False(t, page.Ledger.Edges[i].Node.CreatedAt.After(page.Ledger.Edges[i-1].Node.CreatedAt), "newest first")
	}
	require.Equal(t, 5+6-3, page.Ledger.Edges[0].Node.BalanceAfter)

	// Paging keeps the order.
	var first2, next2 struct {
		Ledger struct {
			Edges    []struct{ Node struct{ ID string } }
			PageInfo struct{ EndCursor string }
		}
	}
	env.MustGraphQL(tn.Owner, `{ ledger(first: 2){ edges { node { id } } pageInfo { endCursor } } }`, nil, &first2)
	env.MustGraphQL(tn.Owner, `query($c: Cursor){ ledger(first: 2, after: $c){ edges { node { id } } pageInfo { endCursor } } }`,
		map[string]any{"c": first2.Ledger.PageInfo.EndCursor}, &next2)
	var paged []string
	for _, e := range append(first2.Ledger.Edges, next2.Ledger.Edges...) {
		paged = append(paged, e.Node.ID)
	}
	var want []string
	for _, e := range page.Ledger.Edges[:4] {
		want = append(want, e.Node.ID)
	}
	require.Equal(t, want, paged)

	// An operator sees a named tenant's ledger, or everyone's.
	env.MustGraphQL(admin, ledgerQuery, map[string]any{"t": other.ID}, &page)
	require.Equal(t, 1, page.Ledger.TotalCount)
	require.Equal(t, 7, page.Ledger.Edges[0].Node.Amount)
	env.MustGraphQL(admin, ledgerQuery, nil, &page)
	require.Equal(t, 8, page.Ledger.TotalCount)
}
