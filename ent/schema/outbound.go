package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// OutboundJob is a standalone HTTP call a tenant submitted through the API: one target, its own attempts on
// the STEPPED schedule, and optionally the response bodies. A submission whose idempotency key is held by a
// live original is stored as a DUPLICATE pointing at it and is never executed.
type OutboundJob struct {
	ent.Schema
}

// Mixin of the OutboundJob.
func (OutboundJob) Mixin() []ent.Mixin { return []ent.Mixin{TenantMixin{}, CreatedMixin{}} }

// Fields of the OutboundJob.
func (OutboundJob) Fields() []ent.Field {
	return []ent.Field{
		field.String("url").Immutable(),
		field.String("method").Immutable(),
		headersField(),
		field.Bytes("body").Immutable().Annotations(entgql.Skip()),
		// idempotency_key is what the client sent, on originals and duplicates alike.
		field.String("idempotency_key").Optional().Nillable().Immutable(),
		// idempotency_claim holds the key on originals only (NULL on duplicates and once released): the
		// unique (tenant_id, idempotency_claim) index makes one live original per key and tenant, and NULLs
		// never collide, so duplicates never conflict. An expired original gives its claim up, and a purged
		// one takes it along, so the key can be used again after retention.
		field.String("idempotency_claim").Optional().Nillable().Annotations(entgql.Skip()),
		field.Int("duplicate_of_id").Optional().Nillable().Immutable().Annotations(entgql.Skip()),
		field.Bool("store_response_body").Default(false).Immutable(),
		field.Enum("status").Values("PENDING", "IN_PROGRESS", "SUCCEEDED", "FAILED", "DUPLICATE").
			Default("PENDING").Annotations(entgql.Type("OutboundStatus")),
		field.Int("attempt_count").Default(0),
		field.Int("max_attempts").Default(10).Immutable(),
		// next_attempt_at is the earliest start of the next attempt while PENDING.
		field.Time("next_attempt_at").Optional().Nillable(),
		field.Time("first_attempt_at").Optional().Nillable(),
		// The lease of the process running the attempt; the rescuer records an INTERRUPTED attempt once it lapses.
		field.Time("lease_expires_at").Optional().Nillable().Annotations(entgql.Skip()),
		field.String("lease_owner").Default("").Annotations(entgql.Skip()),
		// attempt_started_at is when the attempt in flight began, so a rescued attempt has a true start time.
		field.Time("attempt_started_at").Optional().Nillable().Annotations(entgql.Skip()),
		// expires_at is fixed at submission from the tenant's plan retention; nothing extends it.
		field.Time("expires_at").Immutable(),
		field.Time("finished_at").Optional().Nillable(),
	}
}

// Edges of the OutboundJob.
func (OutboundJob) Edges() []ent.Edge {
	return []ent.Edge{
		// Exposed by hand (graph/outbound.graphqls) so that they come in attempt order.
		edge.To("attempts", OutboundAttempt.Type).Annotations(entgql.Skip()),
		// duplicateOf is exposed; the list of an original's duplicates is not (nothing needs it).
		edge.To("duplicates", OutboundJob.Type).Annotations(entgql.Skip()).
			From("duplicate_of").Field("duplicate_of_id").Unique().Immutable(),
	}
}

// Indexes of the OutboundJob.
func (OutboundJob) Indexes() []ent.Index {
	return []ent.Index{
		// The next due time of a pending job.
		index.Fields("status", "next_attempt_at"),
		// The scheduler's claim: each tenant's pending jobs in due order, then in order of arrival (a few from
		// each tenant, within its share of the workers). The id keeps the planner on this index rather than on
		// (status, next_attempt_at), which would walk every tenant's due jobs.
		index.Fields("tenant_id", "next_attempt_at", "id").StorageKey("outbound_job_pending_due").
			Annotations(entsql.IndexWhere("status = 'PENDING'")),
		// The rescuer: in-progress jobs whose lease lapsed.
		index.Fields("status", "lease_expires_at"),
		index.Fields("tenant_id", "idempotency_claim").Unique(),
		index.Fields("tenant_id", "created_at"),
		index.Fields("expires_at"),
		// Purging an original nulls its duplicates' duplicate_of_id.
		index.Fields("duplicate_of_id"),
	}
}

// Annotations of the OutboundJob.
func (OutboundJob) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.RelayConnection()}
}

// OutboundAttempt is one try at an outbound job. The response body is kept only when the job asked for it.
type OutboundAttempt struct {
	ent.Schema
}

// Mixin of the OutboundAttempt.
func (OutboundAttempt) Mixin() []ent.Mixin { return []ent.Mixin{TenantMixin{}} }

// Fields of the OutboundAttempt.
func (OutboundAttempt) Fields() []ent.Field {
	return []ent.Field{
		field.Int("job_id").Immutable().Annotations(entgql.Skip()),
		field.Int("number").Immutable(),
		field.Time("started_at").Immutable(),
		field.Time("finished_at").Immutable(),
		// A second Go enum type cannot share the GraphQL enum of Attempt, hence the Outbound* names; the
		// values are the same.
		field.Enum("status").Values("SUCCEEDED", "FAILED").Immutable().
			Annotations(entgql.Type("OutboundAttemptStatus")),
		field.Int("http_status").Optional().Nillable().Immutable(),
		field.Int64("duration_ms").Immutable(),
		field.Enum("error_kind").
			Values("HTTP_STATUS", "TIMEOUT", "DNS", "TLS", "CONNECTION", "CLI_LOCAL", "INTERRUPTED").
			Optional().Nillable().Immutable().Annotations(entgql.Type("OutboundErrorKind")),
		field.String("error_message").Default("").Immutable(),
		// response_body is at most delivery.MaxStoredResponse bytes; exposed as text by hand.
		field.Bytes("response_body").Optional().Nillable().Immutable().Annotations(entgql.Skip()),
		field.Bool("response_truncated").Default(false).Immutable(),
	}
}

// Edges of the OutboundAttempt.
func (OutboundAttempt) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("job", OutboundJob.Type).Ref("attempts").Field("job_id").Unique().Required().Immutable(),
	}
}

// Indexes of the OutboundAttempt.
func (OutboundAttempt) Indexes() []ent.Index {
	return []ent.Index{
		// One row per attempt number: a double-recorded attempt fails instead of inflating the history.
		index.Fields("job_id", "number", "tenant_id").Unique().StorageKey("outboundattempt_job_id_number"),
	}
}
