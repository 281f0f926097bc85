-- +goose Up
-- Indexes and columns only: the generated statements rebuilt both tables, a copy of every delivery.
-- drop index "delivery_direct_due" from table: "deliveries"
DROP INDEX `delivery_direct_due`;
-- create index "delivery_direct_due" to table: "deliveries"
CREATE INDEX `delivery_direct_due` ON `deliveries` (`tenant_id`, `next_attempt_at`) WHERE status = 'PENDING' AND lane = 'DIRECT';
-- create index "delivery_capped_due" to table: "deliveries"
CREATE INDEX `delivery_capped_due` ON `deliveries` (`recipient_id`, `next_attempt_at`) WHERE status = 'PENDING' AND lane = 'CAPPED';
-- create index "outbound_job_pending_due" to table: "outbound_jobs"
CREATE INDEX `outbound_job_pending_due` ON `outbound_jobs` (`tenant_id`, `next_attempt_at`) WHERE status = 'PENDING';
-- modify "recipients" table
ALTER TABLE `recipients` ADD COLUMN `max_concurrency` integer NULL;
ALTER TABLE `recipients` ADD COLUMN `in_flight` integer NOT NULL DEFAULT (0);
ALTER TABLE `recipients` ADD COLUMN `cap_changed_at` datetime NULL;
-- create index "recipient_cap_changed_at" to table: "recipients"
CREATE INDEX `recipient_cap_changed_at` ON `recipients` (`cap_changed_at`);

-- +goose Down
-- reverse: create index "recipient_cap_changed_at" to table: "recipients"
DROP INDEX `recipient_cap_changed_at`;
-- reverse: modify "recipients" table
ALTER TABLE `recipients` DROP COLUMN `cap_changed_at`;
ALTER TABLE `recipients` DROP COLUMN `in_flight`;
ALTER TABLE `recipients` DROP COLUMN `max_concurrency`;
-- reverse: create index "outbound_job_pending_due" to table: "outbound_jobs"
DROP INDEX `outbound_job_pending_due`;
-- reverse: create index "delivery_capped_due" to table: "deliveries"
DROP INDEX `delivery_capped_due`;
-- reverse: create index "delivery_direct_due" to table: "deliveries"
DROP INDEX `delivery_direct_due`;
-- reverse: drop index "delivery_direct_due" from table: "deliveries"
CREATE INDEX `delivery_direct_due` ON `deliveries` (`next_attempt_at`) WHERE status = 'PENDING' AND lane = 'DIRECT';
