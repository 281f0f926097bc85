-- +goose Up
-- drop index "delivery_capped_due" from table: "deliveries"
DROP INDEX "delivery_capped_due";
-- drop index "delivery_direct_due" from table: "deliveries"
DROP INDEX "delivery_direct_due";
-- create index "delivery_capped_due" to table: "deliveries"
CREATE INDEX "delivery_capped_due" ON "deliveries" ("recipient_id", "next_attempt_at", "id") WHERE (((status)::text = 'PENDING'::text) AND ((lane)::text = 'CAPPED'::text));
-- create index "delivery_direct_due" to table: "deliveries"
CREATE INDEX "delivery_direct_due" ON "deliveries" ("tenant_id", "next_attempt_at", "id") WHERE (((status)::text = 'PENDING'::text) AND ((lane)::text = 'DIRECT'::text));
-- drop index "outbound_job_pending_due" from table: "outbound_jobs"
DROP INDEX "outbound_job_pending_due";
-- create index "outbound_job_pending_due" to table: "outbound_jobs"
CREATE INDEX "outbound_job_pending_due" ON "outbound_jobs" ("tenant_id", "next_attempt_at", "id") WHERE ((status)::text = 'PENDING'::text);

-- +goose Down
-- reverse: create index "outbound_job_pending_due" to table: "outbound_jobs"
DROP INDEX "outbound_job_pending_due";
-- reverse: drop index "outbound_job_pending_due" from table: "outbound_jobs"
CREATE INDEX "outbound_job_pending_due" ON "outbound_jobs" ("tenant_id", "next_attempt_at") WHERE ((status)::text = 'PENDING'::text);
-- reverse: create index "delivery_direct_due" to table: "deliveries"
DROP INDEX "delivery_direct_due";
-- reverse: create index "delivery_capped_due" to table: "deliveries"
DROP INDEX "delivery_capped_due";
-- reverse: drop index "delivery_direct_due" from table: "deliveries"
CREATE INDEX "delivery_direct_due" ON "deliveries" ("tenant_id", "next_attempt_at") WHERE (((status)::text = 'PENDING'::text) AND ((lane)::text = 'DIRECT'::text));
-- reverse: drop index "delivery_capped_due" from table: "deliveries"
CREATE INDEX "delivery_capped_due" ON "deliveries" ("recipient_id", "next_attempt_at") WHERE (((status)::text = 'PENDING'::text) AND ((lane)::text = 'CAPPED'::text));
