-- +goose Up
-- add columns "destination_url" and "destination" to table: "recipients"
ALTER TABLE `recipients` ADD COLUMN `destination_url` text NOT NULL DEFAULT ('');
ALTER TABLE `recipients` ADD COLUMN `destination` json NULL;
-- add column "answer" to table: "attempts"
ALTER TABLE `attempts` ADD COLUMN `answer` text NOT NULL DEFAULT ('');

-- +goose Down
ALTER TABLE `attempts` DROP COLUMN `answer`;
ALTER TABLE `recipients` DROP COLUMN `destination`;
ALTER TABLE `recipients` DROP COLUMN `destination_url`;
