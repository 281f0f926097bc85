package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/adal-relay/adal/tenancy"
)

// Token is an API token Adal issued: its row id is the token's "jti" claim, so it can be listed and revoked.
// Operator tokens belong to no tenant (tenant_id NULL), which the tenant filter of the privacy policy keeps
// out of every tenant's view.
type Token struct {
	ent.Schema
}

// Mixin of the Token.
func (Token) Mixin() []ent.Mixin { return []ent.Mixin{CreatedMixin{}} }

// Fields of the Token.
func (Token) Fields() []ent.Field {
	return []ent.Field{
		field.Int("tenant_id").Optional().Nillable().Immutable().Annotations(entgql.Skip()),
		// role is a viewer.Role; exposed by hand as the Role enum (graph/token.graphqls).
		field.String("role").Immutable().Annotations(entgql.Skip()),
		field.String("subject").Immutable(),
		// issued_by is the subject of whoever minted the token ("server token" for the command line).
		field.String("issued_by").Immutable(),
		field.Time("expires_at").Immutable().Annotations(entgql.OrderField("EXPIRES_AT")),
		field.Time("revoked_at").Optional().Nillable(),
	}
}

// Edges of the Token.
func (Token) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("tenant", Tenant.Type).Field("tenant_id").Unique().Immutable(),
	}
}

// Indexes of the Token.
func (Token) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("tenant_id", "created_at"),
		// Every process reloads the revoked, unexpired ids every few seconds; partial, as revoked tokens are few.
		index.Fields("expires_at").StorageKey("token_revoked").
			Annotations(entsql.IndexWhere("revoked_at IS NOT NULL")),
	}
}

// Policy of the Token: the tenant filter of every tenant-owned row, on a nullable tenant_id.
func (Token) Policy() ent.Policy { return tenancy.TenantOwnedPolicy() }

// Annotations of the Token.
func (Token) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.RelayConnection(), entgql.QueryField()}
}
