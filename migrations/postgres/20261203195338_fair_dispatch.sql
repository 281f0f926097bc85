-- +goose Up
-- drop index "delivery_direct_due" from table: "deliveries"
DROP INDEX "delivery_direct_due";
-- create index "delivery_direct_due" to table: "deliveries"
CREATE INDEX "delivery_direct_due" ON "deliveries" ("tenant_id", "next_attempt_at") WHERE (((status)::text = 'PENDING'::text) AND ((lane)::text = 'DIRECT'::text));
-- create index "delivery_capped_due" to table: "deliveries"
CREATE INDEX "delivery_capped_due" ON "deliveries" ("recipient_id", "next_attempt_at") WHERE (((status)::text = 'PENDING'::text) AND ((lane)::text = 'CAPPED'::text));
-- create index "outbound_job_pending_due" to table: "outbound_jobs"
CREATE INDEX "outbound_job_pending_due" ON "outbound_jobs" ("tenant_id", "next_attempt_at") WHERE ((status)::text = 'PENDING'::text);
-- modify "recipients" table
ALTER TABLE "recipients" ADD COLUMN "max_concurrency" bigint NULL, ADD COLUMN "in_flight" bigint NOT NULL DEFAULT 0, ADD COLUMN "cap_changed_at" timestamptz NULL;
-- create index "recipient_cap_changed_at" to table: "recipients"
CREATE INDEX "recipient_cap_changed_at" ON "recipients" ("cap_changed_at");

-- +goose Down
-- reverse: create index "recipient_cap_changed_at" to table: "recipients"
DROP INDEX "recipient_cap_changed_at";
-- reverse: modify "recipients" table
ALTER TABLE "recipients" DROP COLUMN "cap_changed_at", DROP COLUMN "in_flight", DROP COLUMN "max_concurrency";
-- reverse: create index "outbound_job_pending_due" to table: "outbound_jobs"
DROP INDEX "outbound_job_pending_due";
-- reverse: create index "delivery_capped_due" to table: "deliveries"
DROP INDEX "delivery_capped_due";
-- reverse: create index "delivery_direct_due" to table: "deliveries"
DROP INDEX "delivery_direct_due";
-- reverse: drop index "delivery_direct_due" from table: "deliveries"
CREATE INDEX "delivery_direct_due" ON "deliveries" ("next_attempt_at") WHERE (((status)::text = 'PENDING'::text) AND ((lane)::text = 'DIRECT'::text));
