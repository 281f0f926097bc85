package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// LedgerEntry is one change of a tenant's credit balance. Entries are only ever appended; the balance is the
// running sum, and balance_after records it at the time so an audit needs no replay.
type LedgerEntry struct {
	ent.Schema
}

// Mixin of the LedgerEntry.
func (LedgerEntry) Mixin() []ent.Mixin {
	return []ent.Mixin{TenantMixin{History: true}, CreatedMixin{}}
}

// Fields of the LedgerEntry.
func (LedgerEntry) Fields() []ent.Field {
	return []ent.Field{
		field.Enum("reason").
			Values("PLAN_GRANT", "CREDIT_GRANT", "REQUEST_ACCEPTED", "MANUAL_RETRY", "REPLAY", "OUTBOUND", "PLAN_CHANGE").
			Immutable().Annotations(entgql.Type("LedgerReason")),
		field.Int64("amount").Immutable(),
		field.Int64("balance_after").Immutable(),
		// reference points at what the entry paid for or came from (a request, a delivery, a plan), as text.
		field.String("reference").Default("").Immutable(),
		// period is set on plan grants only ("2026-11"); a unique index makes a second grant for the same
		// period impossible, whatever the number of processes or cron runs.
		field.String("period").Optional().Nillable().Immutable(),
	}
}

// Indexes of the LedgerEntry.
func (LedgerEntry) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("tenant_id", "created_at"),
		// Partial: debits (the bulk) have no period, and would fill the index with entries nothing looks up.
		index.Fields("tenant_id", "period").Unique().StorageKey("ledgerentry_grant_period").
			Annotations(entsql.IndexWhere("period IS NOT NULL")),
	}
}

// Annotations of the LedgerEntry.
func (LedgerEntry) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.RelayConnection()}
}
