-- +goose Up
-- Columns are added in place rather than by rebuilding the tables: other tables reference both, and a
-- rebuild inside the migration's transaction could not turn foreign keys off.
-- modify "plans" table
ALTER TABLE `plans` ADD COLUMN `selectable` bool NOT NULL DEFAULT (false);
-- modify "servers" table
ALTER TABLE `servers` ADD COLUMN `previous_inbound_key` text NULL;
ALTER TABLE `servers` ADD COLUMN `previous_key_expires_at` datetime NULL;
-- create index "server_previous_inbound_key" to table: "servers"
CREATE UNIQUE INDEX `server_previous_inbound_key` ON `servers` (`previous_inbound_key`) WHERE previous_inbound_key IS NOT NULL;

-- +goose Down
DROP INDEX `server_previous_inbound_key`;
ALTER TABLE `servers` DROP COLUMN `previous_key_expires_at`;
ALTER TABLE `servers` DROP COLUMN `previous_inbound_key`;
ALTER TABLE `plans` DROP COLUMN `selectable`;
