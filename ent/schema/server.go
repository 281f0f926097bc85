package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/adal-relay/adal/verify"
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
		field.String("inbound_key").Sensitive(),
		// previous_inbound_key is the key a rotation replaced: intake still accepts it until
		// previous_key_expires_at, so senders can move to the new URL.
		field.String("previous_inbound_key").Optional().Nillable().Sensitive(),
		field.Time("previous_key_expires_at").Optional().Nillable().
			Comment("When the inbound key a rotation replaced stops being accepted; null when there is none.").
			Annotations(entgql.Skip(entgql.SkipWhereInput)),
		field.Bool("deliver_pending_on_connect").Default(false),
		// retention_days shortens the plan's retention for this server's requests; nil means the plan's.
		field.Int("retention_days").Optional().Nillable().Positive(),
		// max_requests_per_second caps intake for this server's key; nil means no cap beyond the plan's.
		field.Int("max_requests_per_second").Optional().Nillable().Positive(),
		// verification is how intake checks who sent a request (package verify); its secrets never leave the
		// server. Null: none. JSON in bytea on PostgreSQL, as headers are (headersField).
		field.JSON("verification", &verify.Config{}).Optional().Sensitive().
			SchemaType(map[string]string{dialect.Postgres: "bytea"}).Annotations(entgql.Skip()),
		// allowed_methods are the methods intake accepts; null: all.
		field.Strings("allowed_methods").Optional().
			SchemaType(map[string]string{dialect.Postgres: "bytea"}).Annotations(entgql.Skip()),
		// response_status, with its content type and body, is what a sender gets for a stored request instead
		// of 202 {"requestId"}; null: the default answer.
		field.Int("response_status").Optional().Nillable().Annotations(entgql.Skip()),
		field.String("response_content_type").Default("").Annotations(entgql.Skip()),
		field.String("response_body").Default("").Annotations(entgql.Skip()),
		// deleted_at stops intake at once while the server's stored requests live out their retention.
		// event_type_header / event_type_path say where a request's event type is read (eventtype.Source): a
		// header, or a JSON path of the body; both empty: requests have no type.
		field.String("event_type_header").Default(""),
		field.String("event_type_path").Default(""),
		// schema_validation checks bodies against their type's schema: OFF, SHADOW (marks the request) or
		// ENFORCE (refuses it with 422, free, nothing stored).
		field.Enum("schema_validation").Values("OFF", "SHADOW", "ENFORCE").Default("OFF").
			Annotations(entgql.Type("SchemaValidation")),
		field.Time("deleted_at").Optional().Nillable(),
		// kind ALERTS is a tenant's hidden server of alerts: its requests are the alerts Adal raises, its
		// recipients the alert subscriptions. It has no inbound URL, is not listed and counts in no plan limit.
		field.Enum("kind").Values("INBOUND", "ALERTS").Default("INBOUND").Immutable().Annotations(entgql.Skip()),
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

// Indexes of the Server.
func (Server) Indexes() []ent.Index {
	return []ent.Index{
		// Intake finds a server by either key through an index. Partial: most servers have no replaced key,
		// and SQLite's planner, counting those NULLs, would otherwise scan the table.
		// Each unique index carries the tenant, so that the table can be distributed by tenant: a key is unique
		// by construction, and the index still finds a server by its key alone (its first column).
		index.Fields("inbound_key", "tenant_id").Unique().StorageKey("server_inbound_key"),
		index.Fields("previous_inbound_key", "tenant_id").Unique().StorageKey("server_previous_inbound_key").
			Annotations(entsql.IndexWhere("previous_inbound_key IS NOT NULL")),
	}
}

// Annotations of the Server.
func (Server) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.RelayConnection()}
}
