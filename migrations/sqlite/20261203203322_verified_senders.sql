-- +goose Up
-- Columns are added in place rather than by rebuilding the servers table: other tables reference it, and a
-- rebuild inside the migration's transaction could not turn foreign keys off.
-- add column "verified" to table: "requests"
ALTER TABLE `requests` ADD COLUMN `verified` bool NULL;
-- modify "servers" table
ALTER TABLE `servers` ADD COLUMN `verification` json NULL;
ALTER TABLE `servers` ADD COLUMN `allowed_methods` json NULL;
ALTER TABLE `servers` ADD COLUMN `response_status` integer NULL;
ALTER TABLE `servers` ADD COLUMN `response_content_type` text NOT NULL DEFAULT ('');
ALTER TABLE `servers` ADD COLUMN `response_body` text NOT NULL DEFAULT ('');
-- create "rejections" table
CREATE TABLE `rejections` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `server_id` integer NOT NULL, `at` datetime NOT NULL, `method` text NOT NULL, `path` text NOT NULL, `source_addr` text NOT NULL, `reason` text NOT NULL, `message` text NOT NULL, `tenant_id` integer NOT NULL, CONSTRAINT `rejections_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION);
-- set sequence for "rejections" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("rejections", 60129542144);
-- create index "rejection_server_id_at" to table: "rejections"
CREATE INDEX `rejection_server_id_at` ON `rejections` (`server_id`, `at`);
-- create "rejection_tallies" table
CREATE TABLE `rejection_tallies` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `server_id` integer NOT NULL, `count` integer NOT NULL, `last_at` datetime NOT NULL, `tenant_id` integer NOT NULL, CONSTRAINT `rejection_tallies_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION);
-- set sequence for "rejection_tallies" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("rejection_tallies", 64424509440);
-- create index "rejection_tallies_server_id_key" to table: "rejection_tallies"
CREATE UNIQUE INDEX `rejection_tallies_server_id_key` ON `rejection_tallies` (`server_id`);

-- +goose Down
DROP INDEX `rejection_tallies_server_id_key`;
UPDATE sqlite_sequence SET seq = 0 WHERE name = "rejection_tallies";
DROP TABLE `rejection_tallies`;
DROP INDEX `rejection_server_id_at`;
UPDATE sqlite_sequence SET seq = 0 WHERE name = "rejections";
DROP TABLE `rejections`;
ALTER TABLE `servers` DROP COLUMN `response_body`;
ALTER TABLE `servers` DROP COLUMN `response_content_type`;
ALTER TABLE `servers` DROP COLUMN `response_status`;
ALTER TABLE `servers` DROP COLUMN `allowed_methods`;
ALTER TABLE `servers` DROP COLUMN `verification`;
ALTER TABLE `requests` DROP COLUMN `verified`;
