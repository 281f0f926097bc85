package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// PendingAlert is an event a tenant may want to hear about (a recipient disabled, a delivery failed for good,
// credits running low), written in the transaction of the change that caused it and taken from here by the
// alert dispatcher (package alerting), which turns it into alerts: an outbox.
type PendingAlert struct {
	ent.Schema
}

// Mixin of the PendingAlert.
func (PendingAlert) Mixin() []ent.Mixin { return []ent.Mixin{TenantMixin{History: true}} }

// Fields of the PendingAlert.
func (PendingAlert) Fields() []ent.Field {
	return []ent.Field{
		// type is the event's dotted name (alert.Type): "recipient.disabled", "credits.low", …
		field.String("type").Immutable(),
		field.Int("recipient_id").Optional().Nillable().Immutable(),
		// data is the event's details as JSON.
		field.Bytes("data").Immutable(),
		field.Time("occurred_at").Immutable(),
		// due_at is when the dispatcher may take the event: when it happened, or the end of the hour a
		// recipient's delivery.failed alerts are held for.
		field.Time("due_at"),
	}
}

// Indexes of the PendingAlert.
func (PendingAlert) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("due_at"),
		index.Fields("recipient_id", "type"),
	}
}

// Annotations of the PendingAlert.
func (PendingAlert) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// AlertSubscription is a URL a tenant subscribed to some alert events: a DIRECT_HTTP recipient of the tenant's
// ALERTS server whose routing filter selects those events, so alerts are delivered, retried, signed and
// recorded as any delivery.
type AlertSubscription struct {
	ent.Schema
}

// Mixin of the AlertSubscription.
func (AlertSubscription) Mixin() []ent.Mixin { return []ent.Mixin{TenantMixin{}, CreatedMixin{}} }

// Fields of the AlertSubscription.
func (AlertSubscription) Fields() []ent.Field {
	return []ent.Field{
		field.Int("recipient_id").Unique().Immutable(),
		// format is how alerts are written for the URL: JSON (type, timestamp, data) or SLACK ({"text": …}).
		field.Enum("format").Values("JSON", "SLACK").Immutable(),
		// events are the dotted names of the events subscribed to. bytea on PostgreSQL, as headers.
		field.Strings("events").Immutable().SchemaType(map[string]string{dialect.Postgres: "bytea"}),
	}
}

// Edges of the AlertSubscription.
func (AlertSubscription) Edges() []ent.Edge {
	return []ent.Edge{
		edge.To("recipient", Recipient.Type).Field("recipient_id").Unique().Required().Immutable(),
	}
}

// Annotations of the AlertSubscription.
func (AlertSubscription) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}
