package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// Attempt is one try at a delivery. Response headers and bodies are never stored, only the outcome.
type Attempt struct {
	ent.Schema
}

// Mixin of the Attempt.
func (Attempt) Mixin() []ent.Mixin { return []ent.Mixin{TenantMixin{History: true}} }

// Fields of the Attempt.
func (Attempt) Fields() []ent.Field {
	return []ent.Field{
		field.Int("delivery_id").Immutable(),
		field.Int("number").Immutable(),
		// expires_at is the request's: on PostgreSQL the history is partitioned by it, and an attempt goes
		// with its request's partition.
		field.Time("expires_at").Immutable().Annotations(entgql.Skip()),
		field.Time("started_at").Immutable(),
		field.Time("finished_at").Immutable(),
		field.Enum("status").Values("SUCCEEDED", "FAILED").Immutable().Annotations(entgql.Type("AttemptStatus")),
		field.Int("http_status").Optional().Nillable().Immutable(),
		field.Int64("duration_ms").Immutable(),
		field.Enum("error_kind").
			Values("HTTP_STATUS", "TIMEOUT", "DNS", "TLS", "CONNECTION", "CLI_LOCAL", "INTERRUPTED", "BROKER_REFUSED", "TRANSFORM",
				"AUTH").
			Optional().Nillable().Immutable().Annotations(entgql.Type("AttemptErrorKind")),
		field.String("error_message").Default("").Immutable(),
		// answer is what a broker recipient's broker answered: its confirmation, stream sequence, entry id or
		// reason code. Empty for HTTP attempts, whose answer is http_status.
		field.String("answer").Default("").Immutable(),
		// transform_version is the number of the recipient's transformation version that shaped the attempt;
		// null when none ran.
		field.Int("transform_version").Optional().Nillable().Immutable(),
	}
}

// Edges of the Attempt.
func (Attempt) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("delivery", Delivery.Type).Ref("attempts").Field("delivery_id").Unique().Required().Immutable(),
	}
}

// Indexes of the Attempt.
func (Attempt) Indexes() []ent.Index {
	return []ent.Index{
		// One row per attempt number: a double-recorded attempt fails instead of inflating the history. The
		// tenant is part of it, as of every unique index of a tenant's rows, so that the table can be
		// distributed by tenant (see storage.PostgresLayout).
		index.Fields("delivery_id", "number", "tenant_id").Unique().StorageKey("attempt_delivery_id_number"),
	}
}
