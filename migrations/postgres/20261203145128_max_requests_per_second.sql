-- +goose Up
-- modify "plans" table
ALTER TABLE "plans" ADD COLUMN "max_requests_per_second" bigint NULL;
-- modify "servers" table
ALTER TABLE "servers" ADD COLUMN "max_requests_per_second" bigint NULL;

-- +goose Down
-- reverse: modify "servers" table
ALTER TABLE "servers" DROP COLUMN "max_requests_per_second";
-- reverse: modify "plans" table
ALTER TABLE "plans" DROP COLUMN "max_requests_per_second";
