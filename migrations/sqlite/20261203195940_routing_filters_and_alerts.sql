-- +goose Up
-- disable the enforcement of foreign-keys constraints
PRAGMA foreign_keys = off;
-- add column "routing_filter" to table: "recipients"
ALTER TABLE `recipients` ADD COLUMN `routing_filter` text NULL;
-- add column "failure_alerted_at" to table: "recipients"
ALTER TABLE `recipients` ADD COLUMN `failure_alerted_at` datetime NULL;
-- add column "filtered_out" to table: "requests"
ALTER TABLE `requests` ADD COLUMN `filtered_out` json NULL;
-- create "new_servers" table
CREATE TABLE `new_servers` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `created_at` datetime NOT NULL, `name` text NOT NULL, `inbound_key` text NOT NULL, `previous_inbound_key` text NULL, `previous_key_expires_at` datetime NULL, `deliver_pending_on_connect` bool NOT NULL DEFAULT (false), `retention_days` integer NULL, `max_requests_per_second` integer NULL, `deleted_at` datetime NULL, `kind` text NOT NULL DEFAULT ('INBOUND'), `tenant_id` integer NOT NULL, CONSTRAINT `servers_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION);
-- set sequence for "new_servers" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("new_servers", 25769803776);
-- copy rows from old table "servers" to new temporary table "new_servers"
INSERT INTO `new_servers` (`id`, `created_at`, `name`, `inbound_key`, `previous_inbound_key`, `previous_key_expires_at`, `deliver_pending_on_connect`, `retention_days`, `max_requests_per_second`, `deleted_at`, `tenant_id`) SELECT `id`, `created_at`, `name`, `inbound_key`, `previous_inbound_key`, `previous_key_expires_at`, `deliver_pending_on_connect`, `retention_days`, `max_requests_per_second`, `deleted_at`, `tenant_id` FROM `servers`;
-- drop "servers" table after copying rows
DROP TABLE `servers`;
-- rename temporary table "new_servers" to "servers"
ALTER TABLE `new_servers` RENAME TO `servers`;
-- create index "servers_inbound_key_key" to table: "servers"
CREATE UNIQUE INDEX `servers_inbound_key_key` ON `servers` (`inbound_key`);
-- create index "server_tenant_id" to table: "servers"
CREATE INDEX `server_tenant_id` ON `servers` (`tenant_id`);
-- create index "server_previous_inbound_key" to table: "servers"
CREATE UNIQUE INDEX `server_previous_inbound_key` ON `servers` (`previous_inbound_key`) WHERE previous_inbound_key IS NOT NULL;
-- add column "low_credit_threshold" to table: "tenants"
ALTER TABLE `tenants` ADD COLUMN `low_credit_threshold` integer NULL;
-- add column "credits_exhausted_at" to table: "tenants"
ALTER TABLE `tenants` ADD COLUMN `credits_exhausted_at` datetime NULL;
-- create "alert_events" table
CREATE TABLE `alert_events` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `type` text NOT NULL, `recipient_id` integer NULL, `data` blob NOT NULL, `occurred_at` datetime NOT NULL, `due_at` datetime NOT NULL, `tenant_id` integer NOT NULL, CONSTRAINT `alert_events_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION);
-- set sequence for "alert_events" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("alert_events", 47244640256);
-- create index "alertevent_due_at" to table: "alert_events"
CREATE INDEX `alertevent_due_at` ON `alert_events` (`due_at`);
-- create index "alertevent_recipient_id_type" to table: "alert_events"
CREATE INDEX `alertevent_recipient_id_type` ON `alert_events` (`recipient_id`, `type`);
-- create "alert_subscriptions" table
CREATE TABLE `alert_subscriptions` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `created_at` datetime NOT NULL, `format` text NOT NULL, `events` json NOT NULL, `tenant_id` integer NOT NULL, `recipient_id` integer NOT NULL, CONSTRAINT `alert_subscriptions_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION, CONSTRAINT `alert_subscriptions_recipients_recipient` FOREIGN KEY (`recipient_id`) REFERENCES `recipients` (`id`) ON DELETE NO ACTION);
-- set sequence for "alert_subscriptions" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("alert_subscriptions", 51539607552);
-- create index "alertsubscription_tenant_id" to table: "alert_subscriptions"
CREATE INDEX `alertsubscription_tenant_id` ON `alert_subscriptions` (`tenant_id`);
-- enable back the enforcement of foreign-keys constraints
PRAGMA foreign_keys = on;

-- +goose Down
-- reverse: create index "alertsubscription_tenant_id" to table: "alert_subscriptions"
DROP INDEX `alertsubscription_tenant_id`;
-- reverse: set sequence for "alert_subscriptions" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "alert_subscriptions";
-- reverse: create "alert_subscriptions" table
DROP TABLE `alert_subscriptions`;
-- reverse: create index "alertevent_recipient_id_type" to table: "alert_events"
DROP INDEX `alertevent_recipient_id_type`;
-- reverse: create index "alertevent_due_at" to table: "alert_events"
DROP INDEX `alertevent_due_at`;
-- reverse: set sequence for "alert_events" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "alert_events";
-- reverse: create "alert_events" table
DROP TABLE `alert_events`;
-- reverse: add column "credits_exhausted_at" to table: "tenants"
ALTER TABLE `tenants` DROP COLUMN `credits_exhausted_at`;
-- reverse: add column "low_credit_threshold" to table: "tenants"
ALTER TABLE `tenants` DROP COLUMN `low_credit_threshold`;
-- reverse: create index "server_previous_inbound_key" to table: "servers"
DROP INDEX `server_previous_inbound_key`;
-- reverse: create index "server_tenant_id" to table: "servers"
DROP INDEX `server_tenant_id`;
-- reverse: create index "servers_inbound_key_key" to table: "servers"
DROP INDEX `servers_inbound_key_key`;
-- reverse: set sequence for "new_servers" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "new_servers";
-- reverse: create "new_servers" table
DROP TABLE `new_servers`;
-- reverse: add column "filtered_out" to table: "requests"
ALTER TABLE `requests` DROP COLUMN `filtered_out`;
-- reverse: add column "failure_alerted_at" to table: "recipients"
ALTER TABLE `recipients` DROP COLUMN `failure_alerted_at`;
-- reverse: add column "routing_filter" to table: "recipients"
ALTER TABLE `recipients` DROP COLUMN `routing_filter`;
