-- +goose Up
-- Deliveries and attempts carry their request's expiry (PostgreSQL partitions the history by it), and every
-- unique index of a tenant's rows carries tenant_id. The two history tables are rebuilt (a NOT NULL column
-- without a default cannot be added in place); no foreign key references them.
-- create "new_attempts" table
CREATE TABLE `new_attempts` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `number` integer NOT NULL, `expires_at` datetime NOT NULL, `started_at` datetime NOT NULL, `finished_at` datetime NOT NULL, `status` text NOT NULL, `http_status` integer NULL, `duration_ms` integer NOT NULL, `error_kind` text NULL, `error_message` text NOT NULL DEFAULT (''), `tenant_id` integer NOT NULL, `delivery_id` integer NOT NULL);
-- copy rows from old table "attempts" to new temporary table "new_attempts"
-- an attempt takes its request's expiry (one with no request left expires as it ended, to be purged)
INSERT INTO `new_attempts` (`id`, `number`, `expires_at`, `started_at`, `finished_at`, `status`, `http_status`, `duration_ms`, `error_kind`, `error_message`, `tenant_id`, `delivery_id`) SELECT a.`id`, a.`number`, COALESCE((SELECT q.`expires_at` FROM `deliveries` d JOIN `requests` q ON q.`id` = d.`request_id` WHERE d.`id` = a.`delivery_id`), a.`finished_at`), a.`started_at`, a.`finished_at`, a.`status`, a.`http_status`, a.`duration_ms`, a.`error_kind`, a.`error_message`, a.`tenant_id`, a.`delivery_id` FROM `attempts` a;
-- drop "attempts" table after copying rows
DROP TABLE `attempts`;
-- rename temporary table "new_attempts" to "attempts"
ALTER TABLE `new_attempts` RENAME TO `attempts`;
-- create index "attempt_delivery_id_number" to table: "attempts"
CREATE UNIQUE INDEX `attempt_delivery_id_number` ON `attempts` (`delivery_id`, `number`, `tenant_id`);
-- create "new_deliveries" table: a delivery takes its request's expiry
CREATE TABLE `new_deliveries` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `created_at` datetime NOT NULL, `expires_at` datetime NOT NULL, `status` text NOT NULL DEFAULT ('PENDING'), `trigger` text NOT NULL DEFAULT ('AUTOMATIC'), `attempt_count` integer NOT NULL DEFAULT (0), `max_attempts` integer NOT NULL, `retry_schedule` text NOT NULL, `next_attempt_at` datetime NULL, `first_attempt_at` datetime NULL, `lease_expires_at` datetime NULL, `lease_owner` text NOT NULL DEFAULT (''), `attempt_started_at` datetime NULL, `backlog` bool NOT NULL DEFAULT (false), `lane` text NOT NULL DEFAULT ('DIRECT'), `superseded` bool NOT NULL DEFAULT (false), `finished_at` datetime NULL, `tenant_id` integer NOT NULL, `recipient_id` integer NOT NULL, `request_id` integer NOT NULL);
-- set sequence for "new_deliveries" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("new_deliveries", 4294967296);
-- copy rows from old table "deliveries" to new temporary table "new_deliveries" (one with no request left expires as it was created, to be purged)
INSERT INTO `new_deliveries` (`id`, `created_at`, `expires_at`, `status`, `trigger`, `attempt_count`, `max_attempts`, `retry_schedule`, `next_attempt_at`, `first_attempt_at`, `lease_expires_at`, `lease_owner`, `attempt_started_at`, `backlog`, `lane`, `superseded`, `finished_at`, `tenant_id`, `recipient_id`, `request_id`) SELECT d.`id`, d.`created_at`, COALESCE((SELECT q.`expires_at` FROM `requests` q WHERE q.`id` = d.`request_id`), d.`created_at`), d.`status`, d.`trigger`, d.`attempt_count`, d.`max_attempts`, d.`retry_schedule`, d.`next_attempt_at`, d.`first_attempt_at`, d.`lease_expires_at`, d.`lease_owner`, d.`attempt_started_at`, d.`backlog`, d.`lane`, d.`superseded`, d.`finished_at`, d.`tenant_id`, d.`recipient_id`, d.`request_id` FROM `deliveries` d;
-- drop "deliveries" table after copying rows
DROP TABLE `deliveries`;
-- rename temporary table "new_deliveries" to "deliveries"
ALTER TABLE `new_deliveries` RENAME TO `deliveries`;
CREATE INDEX `delivery_pending_due` ON `deliveries` (`next_attempt_at`) WHERE status = 'PENDING';
CREATE INDEX `delivery_direct_due` ON `deliveries` (`tenant_id`, `next_attempt_at`, `id`) WHERE status = 'PENDING' AND lane = 'DIRECT';
CREATE INDEX `delivery_capped_due` ON `deliveries` (`recipient_id`, `next_attempt_at`, `id`) WHERE status = 'PENDING' AND lane = 'CAPPED';
CREATE INDEX `delivery_pending_lane` ON `deliveries` (`recipient_id`, `lane`) WHERE status = 'PENDING';
CREATE INDEX `delivery_in_progress_lease` ON `deliveries` (`lease_expires_at`) WHERE status = 'IN_PROGRESS';
CREATE INDEX `delivery_request_id` ON `deliveries` (`request_id`);
DROP INDEX `outboundattempt_job_id_number`;
CREATE UNIQUE INDEX `outboundattempt_job_id_number` ON `outbound_attempts` (`job_id`, `number`, `tenant_id`);
DROP INDEX `servers_inbound_key_key`;
DROP INDEX `server_previous_inbound_key`;
-- create index "server_inbound_key" to table: "servers"
CREATE UNIQUE INDEX `server_inbound_key` ON `servers` (`inbound_key`, `tenant_id`);
-- create index "server_previous_inbound_key" to table: "servers"
CREATE UNIQUE INDEX `server_previous_inbound_key` ON `servers` (`previous_inbound_key`, `tenant_id`) WHERE previous_inbound_key IS NOT NULL;
-- drop index "rejection_tallies_server_id_key" from table: "rejection_tallies"
DROP INDEX `rejection_tallies_server_id_key`;
-- create index "rejectiontally_server_id" to table: "rejection_tallies"
CREATE UNIQUE INDEX `rejectiontally_server_id` ON `rejection_tallies` (`server_id`, `tenant_id`);
DROP INDEX `bulkjobitem_job_id_delivery_id`;
CREATE UNIQUE INDEX `bulkjobitem_job_id_delivery_id` ON `bulk_job_items` (`job_id`, `delivery_id`, `tenant_id`);

-- +goose Down
-- Adal never migrates down. This reverses, on the schema ent describes, what the Up section changed of it,
-- for the tests that rebuild the schema of earlier versions.
DROP INDEX `server_inbound_key`;
DROP INDEX `server_previous_inbound_key`;
CREATE UNIQUE INDEX `servers_inbound_key_key` ON `servers` (`inbound_key`);
CREATE UNIQUE INDEX `server_previous_inbound_key` ON `servers` (`previous_inbound_key`) WHERE previous_inbound_key IS NOT NULL;
DROP INDEX `rejectiontally_server_id`;
CREATE UNIQUE INDEX `rejection_tallies_server_id_key` ON `rejection_tallies` (`server_id`);
DROP INDEX `outboundattempt_job_id_number`;
CREATE UNIQUE INDEX `outboundattempt_job_id_number` ON `outbound_attempts` (`job_id`, `number`);
DROP INDEX `bulkjobitem_job_id_delivery_id`;
CREATE UNIQUE INDEX `bulkjobitem_job_id_delivery_id` ON `bulk_job_items` (`job_id`, `delivery_id`);
ALTER TABLE `deliveries` DROP COLUMN `expires_at`;
DROP INDEX `attempt_delivery_id_number`;
ALTER TABLE `attempts` DROP COLUMN `expires_at`;
CREATE UNIQUE INDEX `attempt_delivery_id_number` ON `attempts` (`delivery_id`, `number`);
