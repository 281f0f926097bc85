package schema

import (
	"entgo.io/contrib/entgql"
	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// BulkJob is an action on many deliveries at once — a retry of each, or a cancel — that runs in the background
// in batches. The deliveries it acts on are fixed when it starts (BulkJobItem); done_through says how far it
// got, and moves in the transaction of each batch, so a job taken over after its process died goes on from
// there and never acts twice on a delivery.
type BulkJob struct {
	ent.Schema
}

// Mixin of the BulkJob.
func (BulkJob) Mixin() []ent.Mixin { return []ent.Mixin{TenantMixin{}, CreatedMixin{}} }

// Fields of the BulkJob.
func (BulkJob) Fields() []ent.Field {
	return []ent.Field{
		// server_id is the filter's server (exposed as filter.serverId).
		field.Int("server_id").Immutable().Annotations(entgql.Skip()),
		field.Enum("kind").Values("RETRY", "CANCEL").Immutable().Annotations(entgql.Type("BulkJobKind")),
		field.Enum("status").Values("RUNNING", "SUCCEEDED", "CANCELED", "STOPPED_NO_CREDITS", "FAILED").
			Default("RUNNING").Annotations(entgql.Type("BulkJobStatus")),
		// criteria is the filter the job was started with (the bulk package's Filter as JSON), shown back to
		// users as its filter.
		field.Bytes("criteria").Immutable().Annotations(entgql.Skip()),
		// total is how many deliveries matched when the job started; done those acted on, failed those that
		// could not be when their turn came (retried or finished meanwhile, request expired…).
		field.Int("total").Immutable(),
		field.Int("done").Default(0),
		field.Int("failed").Default(0),
		field.Int64("credits_spent").Default(0),
		// done_through is the largest delivery id of the job's items acted on (or passed over): the items are
		// taken in delivery id order.
		field.Int("done_through").Default(0).Annotations(entgql.Skip()),
		// The lease of the process running the job; once it lapses any process may take the job over.
		field.String("lease_owner").Default("").Annotations(entgql.Skip()),
		field.Time("lease_expires_at").Optional().Nillable().Annotations(entgql.Skip()),
		field.String("created_by").Default("").Immutable(),
		// error_message says why a job stopped short (no credits, or what failed).
		field.String("error_message").Default(""),
		field.Time("updated_at").Default(nowUTC),
		field.Time("finished_at").Optional().Nillable(),
	}
}

// Indexes of the BulkJob.
func (BulkJob) Indexes() []ent.Index {
	return []ent.Index{
		// The claim: running jobs whose lease lapsed (or that never had one).
		index.Fields("lease_expires_at").StorageKey("bulk_job_running_lease").
			Annotations(entsql.IndexWhere("status = 'RUNNING'")),
	}
}

// Annotations of the BulkJob.
func (BulkJob) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.RelayConnection()}
}

// BulkJobItem is one delivery a bulk job acts on, fixed when the job starts. Items go when their job ends.
// Their ids are plain columns, without foreign keys: a delivery may be purged while its job waits.
type BulkJobItem struct {
	ent.Schema
}

// Mixin of the BulkJobItem.
func (BulkJobItem) Mixin() []ent.Mixin { return []ent.Mixin{TenantMixin{History: true}} }

// Fields of the BulkJobItem.
func (BulkJobItem) Fields() []ent.Field {
	return []ent.Field{
		field.Int("job_id").Immutable(),
		field.Int("delivery_id").Immutable(),
		// The delivery's request and recipient, so a job paces itself per recipient and finds its own retries.
		field.Int("request_id").Immutable(),
		field.Int("recipient_id").Immutable(),
	}
}

// Indexes of the BulkJobItem.
func (BulkJobItem) Indexes() []ent.Index {
	return []ent.Index{
		// A job's items in the order it takes them; one item per delivery.
		index.Fields("job_id", "delivery_id", "tenant_id").Unique().StorageKey("bulkjobitem_job_id_delivery_id"),
	}
}

// Annotations of the BulkJobItem.
func (BulkJobItem) Annotations() []schema.Annotation {
	return []schema.Annotation{entgql.Skip(entgql.SkipAll)}
}
