package schema

import (
	"time"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
	"entgo.io/ent/schema/mixin"

	"github.com/adal-relay/adal/tenancy"
)

// TenantMixin gives an entity its owning tenant and the privacy policy that keeps every other tenant out of it.
// The tenant_id column is denormalised onto every tenant-owned table so the filter is one equality, never a
// join, and indexed where a tenant's rows are listed by it.
type TenantMixin struct {
	mixin.Schema
	// History marks a table of the request history (requests, deliveries, attempts, ledger entries): its rows
	// are only ever found through their server, request, delivery or a (tenant_id, …) index of their own, the
	// tenant filter riding along, so a tenant_id index would be written on every insert (and every non-HOT
	// update) of the bulk of all writes and read by nothing.
	History bool
}

// Fields of the TenantMixin.
func (TenantMixin) Fields() []ent.Field {
	return []ent.Field{
		field.Int("tenant_id").Immutable().Annotations(entgql.Skip()),
	}
}

// Edges of the TenantMixin.
func (TenantMixin) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("tenant", Tenant.Type).Field("tenant_id").Unique().Required().Immutable().
			Annotations(entgql.Skip()),
	}
}

// Indexes of the TenantMixin.
func (m TenantMixin) Indexes() []ent.Index {
	if m.History {
		return nil
	}
	return []ent.Index{index.Fields("tenant_id")}
}

// Policy of the TenantMixin.
func (TenantMixin) Policy() ent.Policy {
	return tenancy.TenantOwnedPolicy()
}

// CreatedMixin stamps the creation time.
type CreatedMixin struct {
	mixin.Schema
}

// Fields of the CreatedMixin.
func (CreatedMixin) Fields() []ent.Field {
	return []ent.Field{
		field.Time("created_at").Immutable().Default(nowUTC).
			Annotations(entgql.OrderField("CREATED_AT")),
	}
}

// nowUTC is the default for time columns: one zone everywhere, because SQLite compares stored times as text.
func nowUTC() time.Time { return time.Now().UTC() }
