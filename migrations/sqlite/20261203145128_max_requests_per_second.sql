-- +goose Up
-- add column "max_requests_per_second" to table: "plans"
ALTER TABLE `plans` ADD COLUMN `max_requests_per_second` integer NULL;
-- add column "max_requests_per_second" to table: "servers"
ALTER TABLE `servers` ADD COLUMN `max_requests_per_second` integer NULL;

-- +goose Down
-- reverse: add column "max_requests_per_second" to table: "servers"
ALTER TABLE `servers` DROP COLUMN `max_requests_per_second`;
-- reverse: add column "max_requests_per_second" to table: "plans"
ALTER TABLE `plans` DROP COLUMN `max_requests_per_second`;
