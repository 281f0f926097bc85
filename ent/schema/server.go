package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
)

// Server is a tenant's inbound endpoint: every request to its key is accepted and fanned out to its recipients.
type Server struct {
	ent.Schema
}

// Mixin of the Server.
func (Server) Mixin() []ent.Mixin { return []ent.Mixin{TenantMixin{}, CreatedMixin{}} }

// Fields of the Server.
func (Server) Fields() []ent.Field {
	return []ent.Field{
		field.String("name").NotEmpty().Annotations(entgql.OrderField("NAME")),
		// inbound_key is the secret part of the inbound URL: 32 random bytes, so it cannot be guessed.
		field.String("inbound_key").Unique().Immutable().Sensitive(),
		field.Bool("deliver_pending_on_connect").Default(false),
		// retention_days shortens the plan's retention for this server's requests; nil means the plan's.
		field.Int("retention_days").Optional().Nillable().Positive(),
		// max_requests_per_second caps intake for this server's key; nil means no cap beyond the plan's.
		field.Int("max_requests_per_second").Optional().Nillable().Positive(),
		// deleted_at stops intake at once while the server's stored requests live out their retention.
		field.Time("deleted_at").Optional().Nillable(),
	}
}

// Edges of the Server.
func (Server) Edges() []ent.Edge {
	return []ent.Edge{
		// Exposed by hand (graph/adal.graphqls) so that deleted recipients stay out of the list.
		edge.To("recipients", Recipient.Type).Annotations(entgql.Skip()),
		edge.To("requests", Request.Type).Annotations(entgql.Skip()),
	}
}

// Annotations of the Server.
func (Server) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.RelayConnection()}
}
