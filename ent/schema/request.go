package schema

import (
	"net/http"

	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/edge"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// Request is one accepted inbound HTTP request, stored whole so it can be delivered, retried and replayed.
type Request struct {
	ent.Schema
}

// Mixin of the Request.
func (Request) Mixin() []ent.Mixin { return []ent.Mixin{TenantMixin{History: true}} }

// Fields of the Request.
func (Request) Fields() []ent.Field {
	return []ent.Field{
		field.Int("server_id").Immutable(),
		// key is the request's own random identity, sent as X-Adal-Idempotency; a replay gets a new one. It
		// is 256 random bits (routing.NewKey), unique by construction, and nothing looks a request up by it: a
		// unique index would cost every intake an insert at a random place in a tree of random strings, and
		// after each checkpoint a full-page image of every leaf it lands on, to guard against a collision that
		// cannot happen.
		field.String("key").Immutable(),
		field.String("method").Immutable(),
		// path is what followed /in/{key} ("" or "/..."); query is the raw query string.
		field.String("path").Default("").Immutable(),
		field.String("query").Default("").Immutable(),
		headersField(),
		field.Bytes("body").Immutable().Annotations(entgql.Skip()),
		field.String("source_addr").Default("").Immutable(),
		// trace_parent is the W3C traceparent of the request's intake span when tracing is on, "" otherwise:
		// every claim and attempt of its deliveries, in whichever process, joins that trace.
		field.String("trace_parent").Default("").Immutable().Annotations(entgql.Skip()),
		field.Time("received_at").Default(nowUTC).Immutable().Annotations(entgql.OrderField("RECEIVED_AT")),
		// expires_at is fixed at acceptance (plan and server retention, the shorter); nothing extends it.
		field.Time("expires_at").Immutable(),
		// status is derived from the deliveries and kept current in the transaction that changes one of them,
		// so lists can be filtered and paginated by it.
		field.Enum("status").Values("PENDING", "DELIVERED", "FAILED", "PARTIAL").Default("PENDING").
			Annotations(entgql.Type("RequestStatus")),
		// verified is the outcome of the server's sender verification when the request arrived (a replay keeps
		// its original's); null when the server verified nothing. Deliveries carry it as X-Adal-Verified.
		field.Bool("verified").Optional().Nillable().Immutable(),
		field.Int("replay_of_id").Optional().Nillable().Immutable().Annotations(entgql.Skip()),
		// event_type is the request's type as its server reads it (empty: none).
		field.String("event_type").Default("").Immutable(),
		// schema_error is why the body did not follow its type's schema, under SHADOW validation (empty: it
		// did, or nothing was checked).
		field.String("schema_error").Default("").Immutable(),
		// filtered_out are the recipients whose routing filter the request did not match: they got no
		// delivery of it. bytea on PostgreSQL, as headers (headersField).
		field.Ints("filtered_out").Optional().Immutable().
			SchemaType(map[string]string{dialect.Postgres: "bytea"}).Annotations(entgql.Skip()),
	}
}

// Edges of the Request.
func (Request) Edges() []ent.Edge {
	return []ent.Edge{
		edge.From("server", Server.Type).Ref("requests").Field("server_id").Unique().Required().Immutable(),
		edge.To("replays", Request.Type).From("replay_of").Field("replay_of_id").Unique().Immutable(),
		edge.To("deliveries", Delivery.Type),
	}
}

// Indexes of the Request.
func (Request) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("server_id", "received_at"),
		index.Fields("expires_at"),
		// A server's requests of one event type, newest first; partial: most servers type nothing.
		index.Fields("server_id", "event_type", "received_at").StorageKey("request_event_type").
			Annotations(entsql.IndexWhere("event_type <> ''")),
		// Purging an original sets its replays' replay_of_id to NULL; without this index every purged
		// request would scan the whole table for replays. Partial: most requests are no replay.
		index.Fields("replay_of_id").StorageKey("request_replays").
			Annotations(entsql.IndexWhere("replay_of_id IS NOT NULL")),
	}
}

// Annotations of the Request.
func (Request) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.RelayConnection()}
}

// headersField is the HTTP header set of a stored request or outbound job. On PostgreSQL it is bytea, not
// jsonb: the JSON is only ever stored and read back whole, never queried, and Adal's connections send []byte
// parameters in binary form (one round trip per statement, see storage.openPostgres), which bytea takes as
// the bytes they are and jsonb refuses (its binary form starts with a version byte).
func headersField() ent.Field {
	return field.JSON("headers", http.Header{}).
		SchemaType(map[string]string{dialect.Postgres: "bytea"}).
		Immutable().Annotations(entgql.Skip())
}
