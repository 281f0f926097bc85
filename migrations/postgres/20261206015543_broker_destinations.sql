-- +goose Up
-- modify "attempts" table
ALTER TABLE "attempts" ADD COLUMN "answer" character varying NOT NULL DEFAULT '';
-- modify "recipients" table
ALTER TABLE "recipients" ADD COLUMN "destination_url" character varying NOT NULL DEFAULT '', ADD COLUMN "destination" bytea NULL;

-- +goose Down
-- reverse: modify "recipients" table
ALTER TABLE "recipients" DROP COLUMN "destination", DROP COLUMN "destination_url";
-- reverse: modify "attempts" table
ALTER TABLE "attempts" DROP COLUMN "answer";
