-- +goose Up
-- modify "plans" table
ALTER TABLE "plans" ADD COLUMN "selectable" boolean NOT NULL DEFAULT false;
-- modify "servers" table
ALTER TABLE "servers" ADD COLUMN "previous_inbound_key" character varying NULL, ADD COLUMN "previous_key_expires_at" timestamptz NULL;
-- create index "server_previous_inbound_key" to table: "servers"
CREATE UNIQUE INDEX "server_previous_inbound_key" ON "servers" ("previous_inbound_key") WHERE (previous_inbound_key IS NOT NULL);

-- +goose Down
-- reverse: create index "server_previous_inbound_key" to table: "servers"
DROP INDEX "server_previous_inbound_key";
-- reverse: modify "servers" table
ALTER TABLE "servers" DROP COLUMN "previous_key_expires_at", DROP COLUMN "previous_inbound_key";
-- reverse: modify "plans" table
ALTER TABLE "plans" DROP COLUMN "selectable";
