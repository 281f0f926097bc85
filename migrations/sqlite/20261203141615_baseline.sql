-- +goose Up
-- create "attempts" table
CREATE TABLE `attempts` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `number` integer NOT NULL, `started_at` datetime NOT NULL, `finished_at` datetime NOT NULL, `status` text NOT NULL, `http_status` integer NULL, `duration_ms` integer NOT NULL, `error_kind` text NULL, `error_message` text NOT NULL DEFAULT (''), `tenant_id` integer NOT NULL, `delivery_id` integer NOT NULL);
-- create index "attempt_delivery_id_number" to table: "attempts"
CREATE UNIQUE INDEX `attempt_delivery_id_number` ON `attempts` (`delivery_id`, `number`);
-- create "deliveries" table
CREATE TABLE `deliveries` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `created_at` datetime NOT NULL, `status` text NOT NULL DEFAULT ('PENDING'), `trigger` text NOT NULL DEFAULT ('AUTOMATIC'), `attempt_count` integer NOT NULL DEFAULT (0), `max_attempts` integer NOT NULL, `retry_schedule` text NOT NULL, `next_attempt_at` datetime NULL, `first_attempt_at` datetime NULL, `lease_expires_at` datetime NULL, `lease_owner` text NOT NULL DEFAULT (''), `attempt_started_at` datetime NULL, `backlog` bool NOT NULL DEFAULT (false), `lane` text NOT NULL DEFAULT ('DIRECT'), `superseded` bool NOT NULL DEFAULT (false), `finished_at` datetime NULL, `tenant_id` integer NOT NULL, `recipient_id` integer NOT NULL, `request_id` integer NOT NULL);
-- set sequence for "deliveries" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("deliveries", 4294967296);
-- create index "delivery_pending_due" to table: "deliveries"
CREATE INDEX `delivery_pending_due` ON `deliveries` (`next_attempt_at`) WHERE status = 'PENDING';
-- create index "delivery_direct_due" to table: "deliveries"
CREATE INDEX `delivery_direct_due` ON `deliveries` (`next_attempt_at`) WHERE status = 'PENDING' AND lane = 'DIRECT';
-- create index "delivery_pending_lane" to table: "deliveries"
CREATE INDEX `delivery_pending_lane` ON `deliveries` (`recipient_id`, `lane`) WHERE status = 'PENDING';
-- create index "delivery_in_progress_lease" to table: "deliveries"
CREATE INDEX `delivery_in_progress_lease` ON `deliveries` (`lease_expires_at`) WHERE status = 'IN_PROGRESS';
-- create index "delivery_request_id" to table: "deliveries"
CREATE INDEX `delivery_request_id` ON `deliveries` (`request_id`);
-- create "ledger_entries" table
CREATE TABLE `ledger_entries` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `created_at` datetime NOT NULL, `reason` text NOT NULL, `amount` integer NOT NULL, `balance_after` integer NOT NULL, `reference` text NOT NULL DEFAULT (''), `period` text NULL, `tenant_id` integer NOT NULL);
-- set sequence for "ledger_entries" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("ledger_entries", 8589934592);
-- create index "ledgerentry_tenant_id_created_at" to table: "ledger_entries"
CREATE INDEX `ledgerentry_tenant_id_created_at` ON `ledger_entries` (`tenant_id`, `created_at`);
-- create index "ledgerentry_grant_period" to table: "ledger_entries"
CREATE UNIQUE INDEX `ledgerentry_grant_period` ON `ledger_entries` (`tenant_id`, `period`) WHERE period IS NOT NULL;
-- create "outbound_attempts" table
CREATE TABLE `outbound_attempts` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `number` integer NOT NULL, `started_at` datetime NOT NULL, `finished_at` datetime NOT NULL, `status` text NOT NULL, `http_status` integer NULL, `duration_ms` integer NOT NULL, `error_kind` text NULL, `error_message` text NOT NULL DEFAULT (''), `response_body` blob NULL, `response_truncated` bool NOT NULL DEFAULT (false), `tenant_id` integer NOT NULL, `job_id` integer NOT NULL, CONSTRAINT `outbound_attempts_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION, CONSTRAINT `outbound_attempts_outbound_jobs_attempts` FOREIGN KEY (`job_id`) REFERENCES `outbound_jobs` (`id`) ON DELETE NO ACTION);
-- set sequence for "outbound_attempts" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("outbound_attempts", 34359738368);
-- create index "outboundattempt_tenant_id" to table: "outbound_attempts"
CREATE INDEX `outboundattempt_tenant_id` ON `outbound_attempts` (`tenant_id`);
-- create index "outboundattempt_job_id_number" to table: "outbound_attempts"
CREATE UNIQUE INDEX `outboundattempt_job_id_number` ON `outbound_attempts` (`job_id`, `number`);
-- create "outbound_jobs" table
CREATE TABLE `outbound_jobs` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `created_at` datetime NOT NULL, `url` text NOT NULL, `method` text NOT NULL, `headers` json NOT NULL, `body` blob NOT NULL, `idempotency_key` text NULL, `idempotency_claim` text NULL, `store_response_body` bool NOT NULL DEFAULT (false), `status` text NOT NULL DEFAULT ('PENDING'), `attempt_count` integer NOT NULL DEFAULT (0), `max_attempts` integer NOT NULL DEFAULT (10), `next_attempt_at` datetime NULL, `first_attempt_at` datetime NULL, `lease_expires_at` datetime NULL, `lease_owner` text NOT NULL DEFAULT (''), `attempt_started_at` datetime NULL, `expires_at` datetime NOT NULL, `finished_at` datetime NULL, `tenant_id` integer NOT NULL, `duplicate_of_id` integer NULL, CONSTRAINT `outbound_jobs_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION, CONSTRAINT `outbound_jobs_outbound_jobs_duplicates` FOREIGN KEY (`duplicate_of_id`) REFERENCES `outbound_jobs` (`id`) ON DELETE SET NULL);
-- set sequence for "outbound_jobs" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("outbound_jobs", 38654705664);
-- create index "outboundjob_tenant_id" to table: "outbound_jobs"
CREATE INDEX `outboundjob_tenant_id` ON `outbound_jobs` (`tenant_id`);
-- create index "outboundjob_status_next_attempt_at" to table: "outbound_jobs"
CREATE INDEX `outboundjob_status_next_attempt_at` ON `outbound_jobs` (`status`, `next_attempt_at`);
-- create index "outboundjob_status_lease_expires_at" to table: "outbound_jobs"
CREATE INDEX `outboundjob_status_lease_expires_at` ON `outbound_jobs` (`status`, `lease_expires_at`);
-- create index "outboundjob_tenant_id_idempotency_claim" to table: "outbound_jobs"
CREATE UNIQUE INDEX `outboundjob_tenant_id_idempotency_claim` ON `outbound_jobs` (`tenant_id`, `idempotency_claim`);
-- create index "outboundjob_tenant_id_created_at" to table: "outbound_jobs"
CREATE INDEX `outboundjob_tenant_id_created_at` ON `outbound_jobs` (`tenant_id`, `created_at`);
-- create index "outboundjob_expires_at" to table: "outbound_jobs"
CREATE INDEX `outboundjob_expires_at` ON `outbound_jobs` (`expires_at`);
-- create index "outboundjob_duplicate_of_id" to table: "outbound_jobs"
CREATE INDEX `outboundjob_duplicate_of_id` ON `outbound_jobs` (`duplicate_of_id`);
-- create "plans" table
CREATE TABLE `plans` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `created_at` datetime NOT NULL, `name` text NOT NULL, `monthly_credits` integer NOT NULL, `retention_days` integer NOT NULL, `max_servers` integer NOT NULL, `max_recipients_per_server` integer NOT NULL);
-- set sequence for "plans" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("plans", 12884901888);
-- create index "plans_name_key" to table: "plans"
CREATE UNIQUE INDEX `plans_name_key` ON `plans` (`name`);
-- create "recipients" table
CREATE TABLE `recipients` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `created_at` datetime NOT NULL, `name` text NOT NULL, `method` text NOT NULL, `url` text NOT NULL DEFAULT (''), `max_attempts` integer NOT NULL DEFAULT (10), `retry_schedule` text NOT NULL DEFAULT ('QUADRATIC'), `send_idempotency_key` bool NOT NULL DEFAULT (false), `timeout_seconds` integer NOT NULL DEFAULT (30), `state` text NOT NULL DEFAULT ('ACTIVE'), `state_reason` text NOT NULL DEFAULT (''), `state_changed_at` datetime NULL, `consecutive_failures` integer NOT NULL DEFAULT (0), `window_attempts` integer NOT NULL DEFAULT (0), `window_failures` integer NOT NULL DEFAULT (0), `last_success_at` datetime NULL, `next_probe_at` datetime NULL, `cli_seen_until` datetime NULL, `deleted_at` datetime NULL, `tenant_id` integer NOT NULL, `server_id` integer NOT NULL, CONSTRAINT `recipients_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION, CONSTRAINT `recipients_servers_recipients` FOREIGN KEY (`server_id`) REFERENCES `servers` (`id`) ON DELETE NO ACTION);
-- set sequence for "recipients" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("recipients", 17179869184);
-- create index "recipient_tenant_id" to table: "recipients"
CREATE INDEX `recipient_tenant_id` ON `recipients` (`tenant_id`);
-- create index "recipient_server_id" to table: "recipients"
CREATE INDEX `recipient_server_id` ON `recipients` (`server_id`);
-- create index "recipient_state_changed_at" to table: "recipients"
CREATE INDEX `recipient_state_changed_at` ON `recipients` (`state_changed_at`);
-- create "requests" table
CREATE TABLE `requests` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `key` text NOT NULL, `method` text NOT NULL, `path` text NOT NULL DEFAULT (''), `query` text NOT NULL DEFAULT (''), `headers` json NOT NULL, `body` blob NOT NULL, `source_addr` text NOT NULL DEFAULT (''), `received_at` datetime NOT NULL, `expires_at` datetime NOT NULL, `status` text NOT NULL DEFAULT ('PENDING'), `tenant_id` integer NOT NULL, `replay_of_id` integer NULL, `server_id` integer NOT NULL);
-- set sequence for "requests" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("requests", 21474836480);
-- create index "request_server_id_received_at" to table: "requests"
CREATE INDEX `request_server_id_received_at` ON `requests` (`server_id`, `received_at`);
-- create index "request_expires_at" to table: "requests"
CREATE INDEX `request_expires_at` ON `requests` (`expires_at`);
-- create index "request_replays" to table: "requests"
CREATE INDEX `request_replays` ON `requests` (`replay_of_id`) WHERE replay_of_id IS NOT NULL;
-- create "servers" table
CREATE TABLE `servers` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `created_at` datetime NOT NULL, `name` text NOT NULL, `inbound_key` text NOT NULL, `deliver_pending_on_connect` bool NOT NULL DEFAULT (false), `retention_days` integer NULL, `deleted_at` datetime NULL, `tenant_id` integer NOT NULL, CONSTRAINT `servers_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION);
-- set sequence for "servers" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("servers", 25769803776);
-- create index "servers_inbound_key_key" to table: "servers"
CREATE UNIQUE INDEX `servers_inbound_key_key` ON `servers` (`inbound_key`);
-- create index "server_tenant_id" to table: "servers"
CREATE INDEX `server_tenant_id` ON `servers` (`tenant_id`);
-- create "tenants" table
CREATE TABLE `tenants` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `created_at` datetime NOT NULL, `name` text NOT NULL, `credit_balance` integer NOT NULL DEFAULT (0), `plan_id` integer NOT NULL, CONSTRAINT `tenants_plans_plan` FOREIGN KEY (`plan_id`) REFERENCES `plans` (`id`) ON DELETE NO ACTION);
-- set sequence for "tenants" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("tenants", 30064771072);

-- +goose Down
-- reverse: set sequence for "tenants" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "tenants";
-- reverse: create "tenants" table
DROP TABLE `tenants`;
-- reverse: create index "server_tenant_id" to table: "servers"
DROP INDEX `server_tenant_id`;
-- reverse: create index "servers_inbound_key_key" to table: "servers"
DROP INDEX `servers_inbound_key_key`;
-- reverse: set sequence for "servers" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "servers";
-- reverse: create "servers" table
DROP TABLE `servers`;
-- reverse: create index "request_replays" to table: "requests"
DROP INDEX `request_replays`;
-- reverse: create index "request_expires_at" to table: "requests"
DROP INDEX `request_expires_at`;
-- reverse: create index "request_server_id_received_at" to table: "requests"
DROP INDEX `request_server_id_received_at`;
-- reverse: set sequence for "requests" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "requests";
-- reverse: create "requests" table
DROP TABLE `requests`;
-- reverse: create index "recipient_state_changed_at" to table: "recipients"
DROP INDEX `recipient_state_changed_at`;
-- reverse: create index "recipient_server_id" to table: "recipients"
DROP INDEX `recipient_server_id`;
-- reverse: create index "recipient_tenant_id" to table: "recipients"
DROP INDEX `recipient_tenant_id`;
-- reverse: set sequence for "recipients" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "recipients";
-- reverse: create "recipients" table
DROP TABLE `recipients`;
-- reverse: create index "plans_name_key" to table: "plans"
DROP INDEX `plans_name_key`;
-- reverse: set sequence for "plans" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "plans";
-- reverse: create "plans" table
DROP TABLE `plans`;
-- reverse: create index "outboundjob_duplicate_of_id" to table: "outbound_jobs"
DROP INDEX `outboundjob_duplicate_of_id`;
-- reverse: create index "outboundjob_expires_at" to table: "outbound_jobs"
DROP INDEX `outboundjob_expires_at`;
-- reverse: create index "outboundjob_tenant_id_created_at" to table: "outbound_jobs"
DROP INDEX `outboundjob_tenant_id_created_at`;
-- reverse: create index "outboundjob_tenant_id_idempotency_claim" to table: "outbound_jobs"
DROP INDEX `outboundjob_tenant_id_idempotency_claim`;
-- reverse: create index "outboundjob_status_lease_expires_at" to table: "outbound_jobs"
DROP INDEX `outboundjob_status_lease_expires_at`;
-- reverse: create index "outboundjob_status_next_attempt_at" to table: "outbound_jobs"
DROP INDEX `outboundjob_status_next_attempt_at`;
-- reverse: create index "outboundjob_tenant_id" to table: "outbound_jobs"
DROP INDEX `outboundjob_tenant_id`;
-- reverse: set sequence for "outbound_jobs" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "outbound_jobs";
-- reverse: create "outbound_jobs" table
DROP TABLE `outbound_jobs`;
-- reverse: create index "outboundattempt_job_id_number" to table: "outbound_attempts"
DROP INDEX `outboundattempt_job_id_number`;
-- reverse: create index "outboundattempt_tenant_id" to table: "outbound_attempts"
DROP INDEX `outboundattempt_tenant_id`;
-- reverse: set sequence for "outbound_attempts" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "outbound_attempts";
-- reverse: create "outbound_attempts" table
DROP TABLE `outbound_attempts`;
-- reverse: create index "ledgerentry_grant_period" to table: "ledger_entries"
DROP INDEX `ledgerentry_grant_period`;
-- reverse: create index "ledgerentry_tenant_id_created_at" to table: "ledger_entries"
DROP INDEX `ledgerentry_tenant_id_created_at`;
-- reverse: set sequence for "ledger_entries" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "ledger_entries";
-- reverse: create "ledger_entries" table
DROP TABLE `ledger_entries`;
-- reverse: create index "delivery_request_id" to table: "deliveries"
DROP INDEX `delivery_request_id`;
-- reverse: create index "delivery_in_progress_lease" to table: "deliveries"
DROP INDEX `delivery_in_progress_lease`;
-- reverse: create index "delivery_pending_lane" to table: "deliveries"
DROP INDEX `delivery_pending_lane`;
-- reverse: create index "delivery_direct_due" to table: "deliveries"
DROP INDEX `delivery_direct_due`;
-- reverse: create index "delivery_pending_due" to table: "deliveries"
DROP INDEX `delivery_pending_due`;
-- reverse: set sequence for "deliveries" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "deliveries";
-- reverse: create "deliveries" table
DROP TABLE `deliveries`;
-- reverse: create index "attempt_delivery_id_number" to table: "attempts"
DROP INDEX `attempt_delivery_id_number`;
-- reverse: create "attempts" table
DROP TABLE `attempts`;
