package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/adal-relay/adal/destination"
	"github.com/adal-relay/adal/webhook"
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
		field.Enum("method").Values("DIRECT_HTTP", "CLI", "RABBITMQ", "NATS", "REDIS_STREAM", "MQTT").
			Annotations(entgql.Type("DeliveryMethod")),
		// url is where DIRECT_HTTP deliveries go; for a broker recipient, its broker's URL without the password
		// (destination.Redact), as the API shows it; empty for CLI recipients.
		field.String("url").Default(""),
		// destination_url is a broker recipient's URL with its credentials: write-only, never returned by the
		// API. Empty for DIRECT_HTTP and CLI recipients.
		field.String("destination_url").Default("").Sensitive().Annotations(entgql.Skip()),
		// destination is the rest of a broker recipient's settings (exchange, subject, stream, topic, trust);
		// null for DIRECT_HTTP and CLI recipients. Exposed by hand as Recipient.destination.
		field.JSON("destination", &destination.Settings{}).Optional().
			SchemaType(map[string]string{dialect.Postgres: "bytea"}).Annotations(entgql.Skip()),
		field.Int("max_attempts").Default(10),
		field.Enum("retry_schedule").Values("QUADRATIC", "STEPPED", "EXPONENTIAL").Default("QUADRATIC").
			Annotations(entgql.Type("RetrySchedule")),
		field.Bool("send_idempotency_key").Default(false),
		// send_traceparent makes each attempt carry a W3C traceparent naming its own span, so that a receiver
		// that traces continues the request's trace (when tracing is on).
		field.Bool("send_traceparent").Default(false),
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
		// routing_filter is the routing rule (package filter) as JSON text; nil: every request. Exposed by hand
		// as filter (a field named so would clash with the generated Filter method).
		field.Text("routing_filter").Optional().Nillable().Annotations(entgql.Skip()),
		// failure_alerted_at is when the last delivery.failed alert about this recipient went out: at most one
		// an hour (package alerting).
		field.Time("failure_alerted_at").Optional().Nillable().Annotations(entgql.Skip()),
		// signing_secret is the key every delivery to the recipient is signed with (webhook.Signer); it is only
		// ever shown, as whsec_<base64>, to those who manage the recipient.
		field.Bytes("signing_secret").DefaultFunc(webhook.NewKey).Validate(webhook.CheckKey).Sensitive(),
		// previous_signing_secret is the key a rotation replaced: deliveries are signed with it too, after the
		// new key's signature, until previous_secret_expires_at.
		field.Bytes("previous_signing_secret").Optional().Sensitive(),
		field.Time("previous_secret_expires_at").Optional().Nillable().
			Comment("Until when deliveries also carry the signature of the secret a rotation replaced; null when none.").
			Annotations(entgql.Skip(entgql.SkipWhereInput)),
		// signature_headers names the headers of the signature: Adal's own, or the Standard Webhooks ones.
		field.Enum("signature_headers").Values("ADAL", "STANDARD_WEBHOOKS").Default("ADAL").
			Annotations(entgql.Type("SignatureHeaders")),
		// max_concurrency bounds the attempts in flight at once to the recipient across all processes (nil: only
		// its tenant's share of each process's workers). A capped recipient's deliveries wait in the CAPPED lane;
		// in_flight counts those in flight, raised by the claim that takes them and lowered by the record of
		// their attempt, both under the recipient's row lock, so processes never pass the cap together.
		field.Int("max_concurrency").Optional().Nillable(),
		field.Int("in_flight").Default(0).Annotations(entgql.Skip()),
		// cap_changed_at is when max_concurrency last changed: the lane reconciler looks at such recipients as it
		// does at those whose state changed.
		field.Time("cap_changed_at").Optional().Nillable().Annotations(entgql.Skip()),
		// event_types are the event types the recipient subscribes to (eventtype.Matches); empty: every request.
		field.Strings("event_types").Optional().SchemaType(map[string]string{dialect.Postgres: "bytea"}),
		// transform_version_id is the transformation every attempt runs first (a TransformVersion); null: none.
		field.Int("transform_version_id").Optional().Nillable().Annotations(entgql.Skip()),
		// auth is how attempts authenticate to the receiver (destauth.Config as JSON): custom headers, Basic,
		// Bearer, OAuth2 client credentials or a client certificate. Write-only; shown by Recipient.auth.
		field.Bytes("auth").Optional().Sensitive().Annotations(entgql.Skip()),
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
