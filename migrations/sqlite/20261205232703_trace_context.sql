-- +goose Up
-- add column "send_traceparent" to table: "recipients"
ALTER TABLE `recipients` ADD COLUMN `send_traceparent` bool NOT NULL DEFAULT (false);
-- add column "trace_parent" to table: "requests"
ALTER TABLE `requests` ADD COLUMN `trace_parent` text NOT NULL DEFAULT ('');

-- +goose Down
ALTER TABLE `requests` DROP COLUMN `trace_parent`;
ALTER TABLE `recipients` DROP COLUMN `send_traceparent`;
