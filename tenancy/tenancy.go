// Package tenancy holds the ent privacy policies that keep each tenant's data its own. They live in the data
// layer so that a query or mutation a resolver forgets to scope is scoped anyway.
package tenancy

import (
	"context"

	"entgo.io/ent"
	"entgo.io/ent/entql"

	"github.com/adal-relay/adal/ent/privacy"
	"github.com/adal-relay/adal/viewer"
)

// TenantOwnedPolicy guards every entity with a tenant_id: operators and the system see all, a tenant's viewers
// see and change only rows of their tenant, and anonymous callers nothing.
func TenantOwnedPolicy() ent.Policy {
	return viewersPolicy(filterByTenant("tenant_id"), denyCreateInOtherTenant(), filterByTenant("tenant_id"))
}

// TenantPolicy guards the tenant rows themselves: a tenant's viewers read their own; only operators and the
// system change them (balances change through package billing, which says so with a narrow decision context).
func TenantPolicy() ent.Policy {
	return viewersPolicy(filterByTenant("id"), privacy.AlwaysDenyRule())
}

// CatalogPolicy guards plans: operators and the system see them all; a tenant's viewers see the plans an owner
// may pick (selectable) and their tenant's current one, so an operator's private plans stay private. Only
// operators and the system change them.
func CatalogPolicy() ent.Policy {
	return viewersPolicy(filterSelectableOrOwn(), privacy.AlwaysDenyRule())
}

// viewersPolicy denies anonymous callers and allows operators and the system; a tenant's viewers get what
// query decides of reads and mutation, in order, of writes.
func viewersPolicy(query privacy.QueryRule, mutation ...privacy.MutationRule) ent.Policy {
	return privacy.Policy{
		Query:    privacy.QueryPolicy{denyIfNoViewer(), allowIfGlobal(), query},
		Mutation: append(privacy.MutationPolicy{denyIfNoViewer(), allowIfGlobal()}, mutation...),
	}
}

// SystemOnlyPolicy guards rows no viewer may touch, not even an operator (sign-in codes): only code running
// under viewer.SystemContext reads or writes them.
func SystemOnlyPolicy() ent.Policy {
	rule := privacy.ContextQueryMutationRule(func(ctx context.Context) error {
		if v, _ := viewer.FromContext(ctx); v.Role == viewer.System {
			return privacy.Allow
		}
		return privacy.Denyf("system only")
	})
	return privacy.Policy{
		Query:    privacy.QueryPolicy{rule},
		Mutation: privacy.MutationPolicy{rule},
	}
}

func denyIfNoViewer() privacy.QueryMutationRule {
	return privacy.ContextQueryMutationRule(func(ctx context.Context) error {
		if _, ok := viewer.FromContext(ctx); !ok {
			return privacy.Denyf("no viewer in context")
		}
		return privacy.Skip
	})
}

func allowIfGlobal() privacy.QueryMutationRule {
	return privacy.ContextQueryMutationRule(func(ctx context.Context) error {
		if v, _ := viewer.FromContext(ctx); v.Global() {
			return privacy.Allow
		}
		return privacy.Skip
	})
}

// filterByTenant narrows queries, updates and deletes to the viewer's tenant by adding a predicate on field.
func filterByTenant(field string) privacy.QueryMutationRule {
	return privacy.FilterFunc(func(ctx context.Context, f privacy.Filter) error {
		v, _ := viewer.FromContext(ctx)
		if v.TenantID == 0 {
			return privacy.Denyf("viewer %q has no tenant", v.Subject)
		}
		f.Where(entql.FieldEQ(field, v.TenantID))
		return privacy.Skip
	})
}

// filterSelectableOrOwn narrows plan queries to selectable plans and the plan of the viewer's tenant.
func filterSelectableOrOwn() privacy.QueryMutationRule {
	return privacy.FilterFunc(func(ctx context.Context, f privacy.Filter) error {
		v, _ := viewer.FromContext(ctx)
		if v.TenantID == 0 {
			return privacy.Denyf("viewer %q has no tenant", v.Subject)
		}
		f.Where(entql.Or(
			entql.FieldEQ("selectable", true),
			entql.HasEdgeWith("tenants", entql.FieldEQ("id", v.TenantID)),
		))
		return privacy.Skip
	})
}

// denyCreateInOtherTenant refuses to create a row whose tenant_id is not the viewer's. Filters cannot guard
// a create (there is no row to filter), so creates are checked on the value being written.
func denyCreateInOtherTenant() privacy.MutationRule {
	return privacy.MutationRuleFunc(func(ctx context.Context, m ent.Mutation) error {
		if !m.Op().Is(ent.OpCreate) {
			return privacy.Skip
		}
		v, _ := viewer.FromContext(ctx)
		got, ok := m.Field("tenant_id")
		if !ok {
			return privacy.Denyf("create without tenant_id")
		}
		if id, ok := got.(int); !ok || id != v.TenantID || id == 0 {
			return privacy.Denyf("create in another tenant")
		}
		return privacy.Allow
	})
}
