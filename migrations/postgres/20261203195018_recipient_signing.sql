-- +goose Up
-- modify "recipients" table
-- Every recipient signs its deliveries: those from before get a random key of their own, the 32 bytes of two
-- version-4 UUIDs (244 random bits; gen_random_uuid draws from the server's strong random source, and
-- pgcrypto is not assumed).
ALTER TABLE "recipients" ADD COLUMN "signing_secret" bytea NULL, ADD COLUMN "previous_signing_secret" bytea NULL, ADD COLUMN "previous_secret_expires_at" timestamptz NULL, ADD COLUMN "signature_headers" character varying NOT NULL DEFAULT 'ADAL';
UPDATE "recipients" SET "signing_secret" = uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid());
ALTER TABLE "recipients" ALTER COLUMN "signing_secret" SET NOT NULL;

-- +goose Down
-- reverse: modify "recipients" table
ALTER TABLE "recipients" DROP COLUMN "signature_headers", DROP COLUMN "previous_secret_expires_at", DROP COLUMN "previous_signing_secret", DROP COLUMN "signing_secret";
