package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// EventType is a kind of request a tenant names ("order.paid"), with an optional JSON Schema its bodies follow.
// A server says where a request's type is read; recipients may subscribe to types; a server may validate
// bodies against their type's schema (package eventtype).
type EventType struct {
	ent.Schema
}

// Mixin of the EventType.
func (EventType) Mixin() []ent.Mixin { return []ent.Mixin{TenantMixin{}, CreatedMixin{}} }

// Fields of the EventType.
func (EventType) Fields() []ent.Field {
	return []ent.Field{
		field.String("name").NotEmpty().Annotations(entgql.OrderField("NAME")),
		field.String("description").Default(""),
		// schema is the JSON Schema (draft 2020-12) of the type's bodies, as its owner wrote it; null: any body.
		field.Text("schema").Optional().Nillable(),
		field.Time("updated_at"),
	}
}

// Indexes of the EventType.
func (EventType) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("name", "tenant_id").Unique(),
	}
}

// Annotations of the EventType.
func (EventType) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.QueryField(), entgql.RelayConnection()}
}

// TransformVersion is one saved version of a recipient's transformation (package transform): kept so that an
// attempt names the version that shaped it, and who saved which.
type TransformVersion struct {
	ent.Schema
}

// Mixin of the TransformVersion.
func (TransformVersion) Mixin() []ent.Mixin { return []ent.Mixin{TenantMixin{}, CreatedMixin{}} }

// Fields of the TransformVersion.
func (TransformVersion) Fields() []ent.Field {
	return []ent.Field{
		field.Int("recipient_id").Immutable(),
		// number counts the recipient's versions from 1.
		field.Int("number").Immutable(),
		// source is the JavaScript, compiled when saved; empty for a version that removed the transformation.
		field.Text("source").Immutable(),
		// created_by is who saved it: the token's subject, or its role.
		field.String("created_by").Default("").Immutable(),
	}
}

// Indexes of the TransformVersion.
func (TransformVersion) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("recipient_id", "number", "tenant_id").Unique(),
	}
}
