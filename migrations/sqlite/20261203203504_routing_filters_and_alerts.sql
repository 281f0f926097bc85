-- +goose Up
-- add column "routing_filter" to table: "recipients"
ALTER TABLE `recipients` ADD COLUMN `routing_filter` text NULL;
-- add column "failure_alerted_at" to table: "recipients"
ALTER TABLE `recipients` ADD COLUMN `failure_alerted_at` datetime NULL;
-- add column "filtered_out" to table: "requests"
ALTER TABLE `requests` ADD COLUMN `filtered_out` json NULL;
-- add column "kind" to table: "servers"
ALTER TABLE `servers` ADD COLUMN `kind` text NOT NULL DEFAULT ('INBOUND');
-- add column "low_credit_threshold" to table: "tenants"
ALTER TABLE `tenants` ADD COLUMN `low_credit_threshold` integer NULL;
-- add column "credits_exhausted_at" to table: "tenants"
ALTER TABLE `tenants` ADD COLUMN `credits_exhausted_at` datetime NULL;
-- create "alert_subscriptions" table
CREATE TABLE `alert_subscriptions` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `created_at` datetime NOT NULL, `format` text NOT NULL, `events` json NOT NULL, `tenant_id` integer NOT NULL, `recipient_id` integer NOT NULL, CONSTRAINT `alert_subscriptions_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION, CONSTRAINT `alert_subscriptions_recipients_recipient` FOREIGN KEY (`recipient_id`) REFERENCES `recipients` (`id`) ON DELETE NO ACTION);
-- set sequence for "alert_subscriptions" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("alert_subscriptions", 51539607552);
-- create index "alertsubscription_tenant_id" to table: "alert_subscriptions"
CREATE INDEX `alertsubscription_tenant_id` ON `alert_subscriptions` (`tenant_id`);
-- create "pending_alerts" table
CREATE TABLE `pending_alerts` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `type` text NOT NULL, `recipient_id` integer NULL, `data` blob NOT NULL, `occurred_at` datetime NOT NULL, `due_at` datetime NOT NULL, `tenant_id` integer NOT NULL, CONSTRAINT `pending_alerts_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION);
-- set sequence for "pending_alerts" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("pending_alerts", 55834574848);
-- create index "pendingalert_due_at" to table: "pending_alerts"
CREATE INDEX `pendingalert_due_at` ON `pending_alerts` (`due_at`);
-- create index "pendingalert_recipient_id_type" to table: "pending_alerts"
CREATE INDEX `pendingalert_recipient_id_type` ON `pending_alerts` (`recipient_id`, `type`);

-- +goose Down
-- reverse: create index "pendingalert_recipient_id_type" to table: "pending_alerts"
DROP INDEX `pendingalert_recipient_id_type`;
-- reverse: create index "pendingalert_due_at" to table: "pending_alerts"
DROP INDEX `pendingalert_due_at`;
-- reverse: set sequence for "pending_alerts" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "pending_alerts";
-- reverse: create "pending_alerts" table
DROP TABLE `pending_alerts`;
-- reverse: create index "alertsubscription_tenant_id" to table: "alert_subscriptions"
DROP INDEX `alertsubscription_tenant_id`;
-- reverse: set sequence for "alert_subscriptions" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "alert_subscriptions";
-- reverse: create "alert_subscriptions" table
DROP TABLE `alert_subscriptions`;
-- reverse: add column "credits_exhausted_at" to table: "tenants"
ALTER TABLE `tenants` DROP COLUMN `credits_exhausted_at`;
-- reverse: add column "low_credit_threshold" to table: "tenants"
ALTER TABLE `tenants` DROP COLUMN `low_credit_threshold`;
-- reverse: add column "kind" to table: "servers"
ALTER TABLE `servers` DROP COLUMN `kind`;
-- reverse: add column "filtered_out" to table: "requests"
ALTER TABLE `requests` DROP COLUMN `filtered_out`;
-- reverse: add column "failure_alerted_at" to table: "recipients"
ALTER TABLE `recipients` DROP COLUMN `failure_alerted_at`;
-- reverse: add column "routing_filter" to table: "recipients"
ALTER TABLE `recipients` DROP COLUMN `routing_filter`;
