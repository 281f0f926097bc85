package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"

	"github.com/adal-relay/adal/tenancy"
)

// Plan is what an operator sells: monthly credits, how long requests are kept, and size limits.
type Plan struct {
	ent.Schema
}

// Mixin of the Plan.
func (Plan) Mixin() []ent.Mixin { return []ent.Mixin{CreatedMixin{}} }

// Fields of the Plan.
func (Plan) Fields() []ent.Field {
	return []ent.Field{
		field.String("name").NotEmpty().Unique().Annotations(entgql.OrderField("NAME")),
		field.Int64("monthly_credits").NonNegative(),
		field.Int("retention_days").Positive(),
		field.Int("max_servers").Positive(),
		field.Int("max_recipients_per_server").Positive(),
		// max_requests_per_second caps intake across all of a tenant's servers; nil means no cap.
		field.Int("max_requests_per_second").Optional().Nillable().Positive(),
		// selectable plans are the ones a tenant's owner may switch to; the others only an operator assigns.
		field.Bool("selectable").Default(false),
	}
}

// Edges of the Plan.
func (Plan) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("tenants", Tenant.Type).Ref("plan").Annotations(entgql.Skip()),
	}
}

// Policy of the Plan.
func (Plan) Policy() ent.Policy { return tenancy.CatalogPolicy() }

// Annotations of the Plan.
func (Plan) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.QueryField()}
}
