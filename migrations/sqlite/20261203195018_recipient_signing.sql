-- +goose Up
-- Every recipient signs its deliveries: those from before get a random 32-byte key of their own. The table is
-- rebuilt (a NOT NULL column without a default cannot be added in place); no other table references it.
-- disable the enforcement of foreign-keys constraints
PRAGMA foreign_keys = off;
-- create "new_recipients" table
CREATE TABLE `new_recipients` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `created_at` datetime NOT NULL, `name` text NOT NULL, `method` text NOT NULL, `url` text NOT NULL DEFAULT (''), `max_attempts` integer NOT NULL DEFAULT (10), `retry_schedule` text NOT NULL DEFAULT ('QUADRATIC'), `send_idempotency_key` bool NOT NULL DEFAULT (false), `timeout_seconds` integer NOT NULL DEFAULT (30), `state` text NOT NULL DEFAULT ('ACTIVE'), `state_reason` text NOT NULL DEFAULT (''), `state_changed_at` datetime NULL, `consecutive_failures` integer NOT NULL DEFAULT (0), `window_attempts` integer NOT NULL DEFAULT (0), `window_failures` integer NOT NULL DEFAULT (0), `last_success_at` datetime NULL, `next_probe_at` datetime NULL, `cli_seen_until` datetime NULL, `deleted_at` datetime NULL, `signing_secret` blob NOT NULL, `previous_signing_secret` blob NULL, `previous_secret_expires_at` datetime NULL, `signature_headers` text NOT NULL DEFAULT ('ADAL'), `tenant_id` integer NOT NULL, `server_id` integer NOT NULL, CONSTRAINT `recipients_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION, CONSTRAINT `recipients_servers_recipients` FOREIGN KEY (`server_id`) REFERENCES `servers` (`id`) ON DELETE NO ACTION);
-- set sequence for "new_recipients" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("new_recipients", 17179869184);
-- copy rows from old table "recipients" to new temporary table "new_recipients"
INSERT INTO `new_recipients` (`id`, `created_at`, `name`, `method`, `url`, `max_attempts`, `retry_schedule`, `send_idempotency_key`, `timeout_seconds`, `state`, `state_reason`, `state_changed_at`, `consecutive_failures`, `window_attempts`, `window_failures`, `last_success_at`, `next_probe_at`, `cli_seen_until`, `deleted_at`, `tenant_id`, `server_id`, `signing_secret`) SELECT `id`, `created_at`, `name`, `method`, `url`, `max_attempts`, `retry_schedule`, `send_idempotency_key`, `timeout_seconds`, `state`, `state_reason`, `state_changed_at`, `consecutive_failures`, `window_attempts`, `window_failures`, `last_success_at`, `next_probe_at`, `cli_seen_until`, `deleted_at`, `tenant_id`, `server_id`, randomblob(32) FROM `recipients`;
-- drop "recipients" table after copying rows
DROP TABLE `recipients`;
-- rename temporary table "new_recipients" to "recipients"
ALTER TABLE `new_recipients` RENAME TO `recipients`;
-- create index "recipient_tenant_id" to table: "recipients"
CREATE INDEX `recipient_tenant_id` ON `recipients` (`tenant_id`);
-- create index "recipient_server_id" to table: "recipients"
CREATE INDEX `recipient_server_id` ON `recipients` (`server_id`);
-- create index "recipient_state_changed_at" to table: "recipients"
CREATE INDEX `recipient_state_changed_at` ON `recipients` (`state_changed_at`);
-- enable back the enforcement of foreign-keys constraints
PRAGMA foreign_keys = on;

-- +goose Down
ALTER TABLE `recipients` DROP COLUMN `signature_headers`;
ALTER TABLE `recipients` DROP COLUMN `previous_secret_expires_at`;
ALTER TABLE `recipients` DROP COLUMN `previous_signing_secret`;
ALTER TABLE `recipients` DROP COLUMN `signing_secret`;
