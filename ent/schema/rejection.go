package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// Rejection is a request intake refused because it failed its server's sender verification: when, what and
// why — never its body. Only the newest rejections of each server are kept (package rejection).
type Rejection struct {
	ent.Schema
}

// Mixin of the Rejection: found only through its server, so no tenant index of its own.
func (Rejection) Mixin() []ent.Mixin { return []ent.Mixin{TenantMixin{History: true}} }

// Fields of the Rejection.
func (Rejection) Fields() []ent.Field {
	return []ent.Field{
		field.Int("server_id").Immutable().Annotations(entgql.Skip()),
		field.Time("at").Immutable().Comment("When the request arrived.").Annotations(entgql.OrderField("AT")),
		field.String("method").Immutable(),
		field.String("path").Immutable().Comment("What followed /in/{key}, cut to 1024 bytes."),
		field.String("source_addr").Immutable().Comment("The address the request came from."),
		field.Enum("reason").Values("MISSING", "MALFORMED", "MISMATCH", "STALE").Immutable().
			Annotations(entgql.Type("RejectionReason")),
		field.String("message").Immutable().Comment("What was wrong, in words: which header or check. Never a secret."),
	}
}

// Indexes of the Rejection.
func (Rejection) Indexes() []ent.Index {
	// Listed and trimmed newest first.
	return []ent.Index{index.Fields("server_id", "at")}
}

// Annotations of the Rejection: listed through Server.rejections, never queried on its own.
func (Rejection) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.RelayConnection(), entgql.Skip(entgql.SkipWhereInput)}
}

// RejectionTally counts a server's rejections since it was created: the rejection log keeps only the newest.
type RejectionTally struct {
	ent.Schema
}

// Mixin of the RejectionTally.
func (RejectionTally) Mixin() []ent.Mixin { return []ent.Mixin{TenantMixin{History: true}} }

// Fields of the RejectionTally.
func (RejectionTally) Fields() []ent.Field {
	return []ent.Field{
		field.Int("server_id").Immutable(),
		field.Int64("count"),
		field.Time("last_at"),
	}
}

// Indexes of the RejectionTally: one tally per server, the tenant in the key as in every unique index of a
// tenant's rows.
func (RejectionTally) Indexes() []ent.Index {
	return []ent.Index{index.Fields("server_id", "tenant_id").Unique().StorageKey("rejectiontally_server_id")}
}

// Annotations of the RejectionTally: read through Server.rejectedCount.
func (RejectionTally) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip()}
}
