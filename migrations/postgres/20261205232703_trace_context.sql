-- +goose Up
-- modify "recipients" table
ALTER TABLE "recipients" ADD COLUMN "send_traceparent" boolean NOT NULL DEFAULT false;
-- modify "requests" table
ALTER TABLE "requests" ADD COLUMN "trace_parent" character varying NOT NULL DEFAULT '';

-- +goose Down
-- reverse: modify "requests" table
ALTER TABLE "requests" DROP COLUMN "trace_parent";
-- reverse: modify "recipients" table
ALTER TABLE "recipients" DROP COLUMN "send_traceparent";
