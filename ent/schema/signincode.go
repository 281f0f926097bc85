package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"

	"github.com/adal-relay/adal/tenancy"
)

// SignInCode is a one-time code an operator exchanges for a token by opening a sign-in link: the way into the
// console that needs no token pasted. Only its SHA-256 is stored, so the table gives no one a way in.
type SignInCode struct {
	ent.Schema
}

// Mixin of the SignInCode.
func (SignInCode) Mixin() []ent.Mixin { return []ent.Mixin{CreatedMixin{}} }

// Fields of the SignInCode.
func (SignInCode) Fields() []ent.Field {
	return []ent.Field{
		field.String("code_hash").Unique().Immutable().Sensitive(),
		field.Time("expires_at").Immutable(),
		// used_at is set by the one redemption a code allows.
		field.Time("used_at").Optional().Nillable(),
	}
}

// Policy of the SignInCode: background work only; no viewer reads or writes codes.
func (SignInCode) Policy() ent.Policy { return tenancy.SystemOnlyPolicy() }

// Annotations of the SignInCode: not part of the GraphQL schema.
func (SignInCode) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}
