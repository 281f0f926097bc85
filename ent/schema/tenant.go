package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	"github.com/adal-relay/adal/tenancy"
)

// Tenant is a customer account: it holds the credit balance every accepted request is paid from.
type Tenant struct {
	ent.Schema
}

// Mixin of the Tenant.
func (Tenant) Mixin() []ent.Mixin { return []ent.Mixin{CreatedMixin{}} }

// Fields of the Tenant.
func (Tenant) Fields() []ent.Field {
	return []ent.Field{
		field.String("name").NotEmpty().Annotations(entgql.OrderField("NAME")),
		field.Int("plan_id"),
		// credit_balance only ever changes through package billing, by a conditional update in the same
		// transaction as its ledger entry, so it can never go below zero or drift from the ledger.
		field.Int64("credit_balance").Default(0).NonNegative().Annotations(entgql.OrderField("CREDIT_BALANCE")),
		// low_credit_threshold: a debit that takes the balance from at least this to under it raises a
		// credits.low alert; nil: none.
		field.Int64("low_credit_threshold").Optional().Nillable().Annotations(entgql.Skip(entgql.SkipWhereInput)),
		// credits_exhausted_at is when intake first refused a request of the tenant for want of credit since
		// its last credit: the credits.exhausted alert is raised once per such stretch. Any credit clears it.
		field.Time("credits_exhausted_at").Optional().Nillable().Annotations(entgql.Skip()),
	}
}

// Edges of the Tenant.
func (Tenant) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("plan", Plan.Type).Field("plan_id").Unique().Required(),
	}
}

// Policy of the Tenant.
func (Tenant) Policy() ent.Policy { return tenancy.TenantPolicy() }

// Annotations of the Tenant.
func (Tenant) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.RelayConnection(), entgql.QueryField()}
}
