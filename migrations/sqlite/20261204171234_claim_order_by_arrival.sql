-- +goose Up
-- Indexes only: the generated statements rebuilt the deliveries and outbound_jobs tables, a copy of every
-- delivery and outbound job.
-- drop index "delivery_capped_due" from table: "deliveries"
DROP INDEX `delivery_capped_due`;
-- drop index "delivery_direct_due" from table: "deliveries"
DROP INDEX `delivery_direct_due`;
-- create index "delivery_capped_due" to table: "deliveries"
CREATE INDEX `delivery_capped_due` ON `deliveries` (`recipient_id`, `next_attempt_at`, `id`) WHERE status = 'PENDING' AND lane = 'CAPPED';
-- create index "delivery_direct_due" to table: "deliveries"
CREATE INDEX `delivery_direct_due` ON `deliveries` (`tenant_id`, `next_attempt_at`, `id`) WHERE status = 'PENDING' AND lane = 'DIRECT';
-- drop index "outbound_job_pending_due" from table: "outbound_jobs"
DROP INDEX `outbound_job_pending_due`;
-- create index "outbound_job_pending_due" to table: "outbound_jobs"
CREATE INDEX `outbound_job_pending_due` ON `outbound_jobs` (`tenant_id`, `next_attempt_at`, `id`) WHERE status = 'PENDING';

-- +goose Down
-- reverse: create index "outbound_job_pending_due" to table: "outbound_jobs"
DROP INDEX `outbound_job_pending_due`;
-- reverse: drop index "outbound_job_pending_due" from table: "outbound_jobs"
CREATE INDEX `outbound_job_pending_due` ON `outbound_jobs` (`tenant_id`, `next_attempt_at`) WHERE status = 'PENDING';
-- reverse: create index "delivery_direct_due" to table: "deliveries"
DROP INDEX `delivery_direct_due`;
-- reverse: create index "delivery_capped_due" to table: "deliveries"
DROP INDEX `delivery_capped_due`;
-- reverse: drop index "delivery_direct_due" from table: "deliveries"
CREATE INDEX `delivery_direct_due` ON `deliveries` (`tenant_id`, `next_attempt_at`) WHERE status = 'PENDING' AND lane = 'DIRECT';
-- reverse: drop index "delivery_capped_due" from table: "deliveries"
CREATE INDEX `delivery_capped_due` ON `deliveries` (`recipient_id`, `next_attempt_at`) WHERE status = 'PENDING' AND lane = 'CAPPED';
