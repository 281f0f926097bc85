package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// The console's charts read aggregates, never the history: a row per recipient and hour, per server and hour,
// per tenant and day. Database triggers keep them (see the migration that creates them), in the statement that
// records the work, so they are exact and transactional and the hot paths carry no code of their own for
// them. Package stats reads them; the retention purge deletes the old ones.

// RecipientHourStat counts a recipient's attempts that finished in one UTC hour, with a histogram of their
// durations (package stats holds the bucket bounds the trigger uses).
type RecipientHourStat struct {
	ent.Schema
}

// Mixin of the RecipientHourStat: found only through its recipient, so no tenant index of its own.
func (RecipientHourStat) Mixin() []ent.Mixin { return []ent.Mixin{TenantMixin{History: true}} }

// Fields of the RecipientHourStat.
func (RecipientHourStat) Fields() []ent.Field {
	fields := []ent.Field{
		field.Int("recipient_id").Immutable(),
		field.Time("hour").Immutable().Comment("Start of the hour, UTC."),
		field.Int64("attempts").Default(0),
		field.Int64("successes").Default(0),
	}
	// Attempts by duration, each bucket counting the durations above the previous bound up to its own, in
	// milliseconds; the last counts those above 30 s.
	for _, name := range []string{"le_10", "le_25", "le_50", "le_100", "le_250", "le_500", "le_1000", "le_2500",
		"le_5000", "le_10000", "le_30000", "gt_30000"} {
		fields = append(fields, field.Int64(name).Default(0))
	}
	return fields
}

// Indexes of the RecipientHourStat: one row per recipient and hour (the tenant in the key as in every unique
// index of a tenant's rows), and the hour alone for the purge of old rows.
func (RecipientHourStat) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("recipient_id", "hour", "tenant_id").Unique().StorageKey("recipienthourstat_recipient_hour"),
		index.Fields("hour"),
	}
}

// Annotations of the RecipientHourStat: read through Recipient.hourlyStats.
func (RecipientHourStat) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// ServerHourStat counts the requests a server stored in one UTC hour (by their received time), replays among
// them.
type ServerHourStat struct {
	ent.Schema
}

// Mixin of the ServerHourStat: found only through its server.
func (ServerHourStat) Mixin() []ent.Mixin { return []ent.Mixin{TenantMixin{History: true}} }

// Fields of the ServerHourStat.
func (ServerHourStat) Fields() []ent.Field {
	return []ent.Field{
		field.Int("server_id").Immutable(),
		field.Time("hour").Immutable().Comment("Start of the hour, UTC."),
		field.Int64("requests").Default(0),
		field.Int64("replays").Default(0),
	}
}

// Indexes of the ServerHourStat: one row per server and hour, and the hour for the purge.
func (ServerHourStat) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("server_id", "hour", "tenant_id").Unique().StorageKey("serverhourstat_server_hour"),
		index.Fields("hour"),
	}
}

// Annotations of the ServerHourStat: read through Server.requestsPerHour.
func (ServerHourStat) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}

// TenantDayStat sums the credits a tenant's ledger debited in one UTC day, in all and by what they paid for.
type TenantDayStat struct {
	ent.Schema
}

// Mixin of the TenantDayStat: its unique index leads with the tenant, so no tenant index of its own.
func (TenantDayStat) Mixin() []ent.Mixin { return []ent.Mixin{TenantMixin{History: true}} }

// Fields of the TenantDayStat.
func (TenantDayStat) Fields() []ent.Field {
	return []ent.Field{
		field.Time("day").Immutable().Comment("Start of the day, UTC."),
		field.Int64("credits").Default(0).Comment("Credits debited, whatever for."),
		field.Int64("requests").Default(0).Comment("Credits debited for accepted requests."),
		field.Int64("retries").Default(0).Comment("Credits debited for manual retries."),
		field.Int64("replays").Default(0).Comment("Credits debited for replays."),
		field.Int64("outbound").Default(0).Comment("Credits debited for outbound jobs."),
	}
}

// Indexes of the TenantDayStat: one row per tenant and day, and the day for the purge.
func (TenantDayStat) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("tenant_id", "day").Unique().StorageKey("tenantdaystat_tenant_day"),
		index.Fields("day"),
	}
}

// Annotations of the TenantDayStat: read through Tenant.creditsPerDay.
func (TenantDayStat) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}
