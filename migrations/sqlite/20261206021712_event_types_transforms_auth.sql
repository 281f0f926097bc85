-- +goose Up
-- add columns to table: "requests"
ALTER TABLE `requests` ADD COLUMN `event_type` text NOT NULL DEFAULT ('');
ALTER TABLE `requests` ADD COLUMN `schema_error` text NOT NULL DEFAULT ('');
-- create index "request_event_type" to table: "requests"
CREATE INDEX `request_event_type` ON `requests` (`server_id`, `event_type`, `received_at`) WHERE event_type <> '';
-- add columns to table: "servers"
ALTER TABLE `servers` ADD COLUMN `event_type_header` text NOT NULL DEFAULT ('');
ALTER TABLE `servers` ADD COLUMN `event_type_path` text NOT NULL DEFAULT ('');
ALTER TABLE `servers` ADD COLUMN `schema_validation` text NOT NULL DEFAULT ('OFF');
-- add column "event_types" to table: "recipients"
ALTER TABLE `recipients` ADD COLUMN `event_types` json NULL;
-- add column "transform_version_id" to table: "recipients"
ALTER TABLE `recipients` ADD COLUMN `transform_version_id` integer NULL;
-- add column "auth" to table: "recipients"
ALTER TABLE `recipients` ADD COLUMN `auth` blob NULL;
-- add column "transform_version" to table: "attempts"
ALTER TABLE `attempts` ADD COLUMN `transform_version` integer NULL;
-- create "event_types" table
CREATE TABLE `event_types` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `created_at` datetime NOT NULL, `name` text NOT NULL, `description` text NOT NULL DEFAULT (''), `schema` text NULL, `updated_at` datetime NOT NULL, `tenant_id` integer NOT NULL, CONSTRAINT `event_types_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION);
-- set sequence for "event_types" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("event_types", 90194313216);
-- create index "eventtype_tenant_id" to table: "event_types"
CREATE INDEX `eventtype_tenant_id` ON `event_types` (`tenant_id`);
-- create index "eventtype_name_tenant_id" to table: "event_types"
CREATE UNIQUE INDEX `eventtype_name_tenant_id` ON `event_types` (`name`, `tenant_id`);
-- create "transform_versions" table
CREATE TABLE `transform_versions` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `created_at` datetime NOT NULL, `recipient_id` integer NOT NULL, `number` integer NOT NULL, `source` text NOT NULL, `created_by` text NOT NULL DEFAULT (''), `tenant_id` integer NOT NULL, CONSTRAINT `transform_versions_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION);
-- set sequence for "transform_versions" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("transform_versions", 94489280512);
-- create index "transformversion_tenant_id" to table: "transform_versions"
CREATE INDEX `transformversion_tenant_id` ON `transform_versions` (`tenant_id`);
-- create index "transformversion_recipient_id_number_tenant_id" to table: "transform_versions"
CREATE UNIQUE INDEX `transformversion_recipient_id_number_tenant_id` ON `transform_versions` (`recipient_id`, `number`, `tenant_id`);

-- +goose Down
DROP INDEX `transformversion_recipient_id_number_tenant_id`;
DROP INDEX `transformversion_tenant_id`;
UPDATE sqlite_sequence SET seq = 0 WHERE name = "transform_versions";
DROP TABLE `transform_versions`;
DROP INDEX `eventtype_name_tenant_id`;
DROP INDEX `eventtype_tenant_id`;
UPDATE sqlite_sequence SET seq = 0 WHERE name = "event_types";
DROP TABLE `event_types`;
ALTER TABLE `attempts` DROP COLUMN `transform_version`;
ALTER TABLE `recipients` DROP COLUMN `auth`;
ALTER TABLE `recipients` DROP COLUMN `transform_version_id`;
ALTER TABLE `recipients` DROP COLUMN `event_types`;
ALTER TABLE `servers` DROP COLUMN `schema_validation`;
ALTER TABLE `servers` DROP COLUMN `event_type_path`;
ALTER TABLE `servers` DROP COLUMN `event_type_header`;
DROP INDEX `request_event_type`;
ALTER TABLE `requests` DROP COLUMN `schema_error`;
ALTER TABLE `requests` DROP COLUMN `event_type`;
