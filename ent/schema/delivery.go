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

// Delivery is one request on its way to one recipient: its own attempts, schedule and outcome.
type Delivery struct {
	ent.Schema
}

// Mixin of the Delivery.
func (Delivery) Mixin() []ent.Mixin { return []ent.Mixin{TenantMixin{History: true}, CreatedMixin{}} }

// Fields of the Delivery.
func (Delivery) Fields() []ent.Field {
	return []ent.Field{
		field.Int("request_id").Immutable(),
		field.Int("recipient_id").Immutable(),
		// expires_at is the request's: on PostgreSQL the history is partitioned by it, and a delivery goes with
		// its request's partition.
		field.Time("expires_at").Immutable().Annotations(entgql.Skip()),
		field.Enum("status").Values("PENDING", "IN_PROGRESS", "SUCCEEDED", "FAILED", "CANCELED").Default("PENDING").
			Annotations(entgql.Type("DeliveryStatus")),
		field.Enum("trigger").Values("AUTOMATIC", "MANUAL_RETRY").Default("AUTOMATIC").Immutable().
			Annotations(entgql.Type("DeliveryTrigger")),
		field.Int("attempt_count").Default(0),
		// max_attempts and retry_schedule are copied from the recipient when the delivery is created, so a
		// later change of the recipient never rewrites a delivery already on its way.
		field.Int("max_attempts").Immutable(),
		field.Enum("retry_schedule").Values("QUADRATIC", "STEPPED", "EXPONENTIAL").Immutable().
			Annotations(entgql.Skip()),
		// next_attempt_at is the earliest start of the next attempt while PENDING.
		field.Time("next_attempt_at").Optional().Nillable(),
		field.Time("first_attempt_at").Optional().Nillable(),
		// The lease of the process running the attempt; the rescuer records an INTERRUPTED attempt once it lapses.
		field.Time("lease_expires_at").Optional().Nillable().Annotations(entgql.Skip()),
		field.String("lease_owner").Default("").Annotations(entgql.Skip()),
		// attempt_started_at is when the attempt in flight began, so a rescued attempt has a true start time.
		field.Time("attempt_started_at").Optional().Nillable().Annotations(entgql.Skip()),
		// backlog marks a CLI delivery created while no CLI was attached and never attempted since.
		field.Bool("backlog").Default(false),
		// lane says which dispatcher takes the delivery when it is due: DIRECT (the scheduler), CAPPED (the
		// scheduler, within its recipient's maxConcurrency), CLI (the CLI hub), PARKED (none while its recipient
		// is paused, disabled or frozen). The claim reads each lane through a partial index of its own, so a
		// parked backlog, or one waiting for a capped recipient's slot, costs it nothing. Set at creation from
		// the recipient, and kept by the scheduler's lane reconciler when the recipient's state or cap changes;
		// a stale lane is repaired within a poll interval. A delivery in flight keeps the lane it was claimed
		// from: an IN_PROGRESS CAPPED delivery is one its recipient's in_flight counts.
		field.Enum("lane").Values("DIRECT", "CAPPED", "CLI", "PARKED").Default("DIRECT").Annotations(entgql.Skip()),
		// superseded is set when a manual retry takes over; request status counts only the newest delivery
		// per recipient.
		field.Bool("superseded").Default(false),
		field.Time("finished_at").Optional().Nillable(),
	}
}

// Edges of the Delivery.
func (Delivery) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("request", Request.Type).Ref("deliveries").Field("request_id").Unique().Required().Immutable(),
		edge.From("recipient", Recipient.Type).Ref("deliveries").Field("recipient_id").Unique().Required().Immutable(),
		edge.To("attempts", Attempt.Type),
	}
}

// Indexes of the Delivery.
//
// Every index but the primary key and request_id is partial, over the rows of one live status. A delivery is
// written two or three times in its life (stored, claimed, finished), each time as a new row version that
// every index matching it must record; a finished delivery, most of the table, then matches none of the
// partial ones. So storing and finishing a delivery writes two to five index entries instead of seven each,
// and the indexes stay the size of the live work rather than of the history.
func (Delivery) Indexes() []ent.Index {
	return []ent.Index{
		// Due pending deliveries in due order (the CLI hub, the next due time, the backlog gauge).
		index.Fields("next_attempt_at").StorageKey("delivery_pending_due").
			Annotations(entsql.IndexWhere("status = 'PENDING'")),
		// The scheduler's claim: each tenant's due direct deliveries in due order, then in order of arrival (the
		// claim takes a few from each tenant, within its share of the workers), parked, capped and CLI ones left
		// out. The id makes the order one that delivery_pending_due cannot give, so that the planner walks this
		// tenant's entries rather than every tenant's due ones, filtered.
		index.Fields("tenant_id", "next_attempt_at", "id").StorageKey("delivery_direct_due").
			Annotations(entsql.IndexWhere("status = 'PENDING' AND lane = 'DIRECT'")),
		// The claim of capped recipients: each one's due deliveries in due order (then arrival, as above), as
		// many as it has slots free.
		index.Fields("recipient_id", "next_attempt_at", "id").StorageKey("delivery_capped_due").
			Annotations(entsql.IndexWhere("status = 'PENDING' AND lane = 'CAPPED'")),
		// A recipient's pending deliveries (in a given lane: the lane reconciler; all: the probe claim, cancelling
		// a deleted recipient's deliveries, the CLI backlog).
		index.Fields("recipient_id", "lane").StorageKey("delivery_pending_lane").
			Annotations(entsql.IndexWhere("status = 'PENDING'")),
		// The rescuer: in-progress deliveries whose lease lapsed.
		index.Fields("lease_expires_at").StorageKey("delivery_in_progress_lease").
			Annotations(entsql.IndexWhere("status = 'IN_PROGRESS'")),
		index.Fields("request_id"),
	}
}

// Annotations of the Delivery.
func (Delivery) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.RelayConnection()}
}
