package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// Recipient is one destination of a server's requests, with its own delivery method, retry schedule and health.
type Recipient struct {
	ent.Schema
}

// Mixin of the Recipient.
func (Recipient) Mixin() []ent.Mixin { return []ent.Mixin{TenantMixin{}, CreatedMixin{}} }

// Fields of the Recipient.
func (Recipient) Fields() []ent.Field {
	return []ent.Field{
		field.Int("server_id").Immutable(),
		field.String("name").NotEmpty(),
		field.Enum("method").Values("DIRECT_HTTP", "CLI").Annotations(entgql.Type("DeliveryMethod")),
		// url is where DIRECT_HTTP deliveries go; empty for CLI recipients.
		field.String("url").Default(""),
		field.Int("max_attempts").Default(10),
		field.Enum("retry_schedule").Values("QUADRATIC", "STEPPED", "EXPONENTIAL").Default("QUADRATIC").
			Annotations(entgql.Type("RetrySchedule")),
		field.Bool("send_idempotency_key").Default(false),
		field.Int("timeout_seconds").Default(30),
		field.Enum("state").Values("ACTIVE", "PAUSED", "DISABLED", "FROZEN").Default("ACTIVE").
			Annotations(entgql.Type("RecipientState")),
		field.String("state_reason").Default(""),
		field.Time("state_changed_at").Optional().Nillable(),
		// Health counters for delivery.HealthRules (DISABLED over a failure ratio or a streak of failures, FROZEN
		// after a longer streak), updated in the attempt's transaction so they are exact under concurrency.
		field.Int64("consecutive_failures").Default(0).Annotations(entgql.Skip()),
		field.Int64("window_attempts").Default(0).Annotations(entgql.Skip()),
		field.Int64("window_failures").Default(0).Annotations(entgql.Skip()),
		field.Time("last_success_at").Optional().Nillable(),
		// next_probe_at is when a DISABLED recipient may get its next probe attempt.
		field.Time("next_probe_at").Optional().Nillable(),
		// cli_seen_until is the heartbeat lease of an attached CLI; any process can read it, so
		// cliConnected is true across processes and falls back to false soon after a dropped connection.
		field.Time("cli_seen_until").Optional().Nillable().Annotations(entgql.Skip()),
		field.Time("deleted_at").Optional().Nillable(),
		// max_concurrency bounds the attempts in flight at once to the recipient across all processes (nil: only
		// its tenant's share of each process's workers). A capped recipient's deliveries wait in the CAPPED lane;
		// in_flight counts those in flight, raised by the claim that takes them and lowered by the record of
		// their attempt, both under the recipient's row lock, so processes never pass the cap together.
		field.Int("max_concurrency").Optional().Nillable(),
		field.Int("in_flight").Default(0).Annotations(entgql.Skip()),
		// cap_changed_at is when max_concurrency last changed: the lane reconciler looks at such recipients as it
		// does at those whose state changed.
		field.Time("cap_changed_at").Optional().Nillable().Annotations(entgql.Skip()),
	}
}

// Edges of the Recipient.
func (Recipient) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("server", Server.Type).Ref("recipients").Field("server_id").Unique().Required().Immutable(),
		edge.To("deliveries", Delivery.Type).Annotations(entgql.Skip()),
	}
}

// Indexes of the Recipient.
func (Recipient) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("server_id"),
		// The lane reconciler looks at the recipients whose state changed lately.
		index.Fields("state_changed_at"),
		index.Fields("cap_changed_at"),
	}
}
