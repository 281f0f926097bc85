-- The request history is partitioned by range of expiry on PostgreSQL, one partition per UTC day, so that the
-- purge drops a wholly expired day instead of deleting its rows one by one beside intake; and every table of
-- a tenant's rows carries tenant_id in its primary key, its unique indexes and the foreign keys between such
-- tables, so that a sharding engine can distribute them by tenant.
--
-- Each history table is rebuilt: a partitioned parent takes the old name, with its id drawn from a sequence
-- that continues the old identity (a partitioned table cannot have one here), a default partition, and the
-- old rows copied in, deliveries and attempts taking their request's expiry. The day partitions are created
-- by storage.EnsurePartitions, which also moves the rows of their day out of the default partition.

-- +goose Up

-- Requests.
ALTER TABLE "requests" RENAME TO "requests_unpartitioned";
ALTER TABLE "requests_unpartitioned" RENAME CONSTRAINT "requests_pkey" TO "requests_unpartitioned_pkey";
DROP INDEX "request_server_id_received_at";
DROP INDEX "request_expires_at";
DROP INDEX "request_replays";
CREATE SEQUENCE "requests_id_seq1";
SELECT setval('"requests_id_seq1"', last_value, is_called) FROM "requests_id_seq";
CREATE TABLE "requests" (
	"id" bigint NOT NULL DEFAULT nextval('"requests_id_seq1"'),
	"key" character varying NOT NULL,
	"method" character varying NOT NULL,
	"path" character varying NOT NULL DEFAULT '',
	"query" character varying NOT NULL DEFAULT '',
	"headers" bytea NOT NULL,
	"body" bytea NOT NULL,
	"source_addr" character varying NOT NULL DEFAULT '',
	"received_at" timestamptz NOT NULL,
	"expires_at" timestamptz NOT NULL,
	"status" character varying NOT NULL DEFAULT 'PENDING',
	"tenant_id" bigint NOT NULL,
	"replay_of_id" bigint NULL,
	"server_id" bigint NOT NULL,
	"verified" boolean NULL,
	"filtered_out" bytea NULL,
	PRIMARY KEY ("id", "tenant_id", "expires_at")
) PARTITION BY RANGE ("expires_at");
CREATE INDEX "request_server_id_received_at" ON "requests" ("server_id", "received_at");
CREATE INDEX "request_expires_at" ON "requests" ("expires_at");
CREATE INDEX "request_replays" ON "requests" ("replay_of_id") WHERE (replay_of_id IS NOT NULL);
CREATE TABLE "requests_default" PARTITION OF "requests" DEFAULT WITH (fillfactor = 50);
INSERT INTO "requests" SELECT "id", "key", "method", "path", "query", "headers", "body", "source_addr", "received_at",
	"expires_at", "status", "tenant_id", "replay_of_id", "server_id", "verified", "filtered_out"
	FROM "requests_unpartitioned";
DROP TABLE "requests_unpartitioned";
ALTER SEQUENCE "requests_id_seq1" RENAME TO "requests_id_seq";
ALTER SEQUENCE "requests_id_seq" OWNED BY "requests"."id";

-- Deliveries: each takes its request's expiry (one whose request is gone expires as it was created).
ALTER TABLE "deliveries" RENAME TO "deliveries_unpartitioned";
ALTER TABLE "deliveries_unpartitioned" RENAME CONSTRAINT "deliveries_pkey" TO "deliveries_unpartitioned_pkey";
DROP INDEX "delivery_pending_due";
DROP INDEX "delivery_direct_due";
DROP INDEX "delivery_capped_due";
DROP INDEX "delivery_pending_lane";
DROP INDEX "delivery_in_progress_lease";
DROP INDEX "delivery_request_id";
CREATE SEQUENCE "deliveries_id_seq1";
SELECT setval('"deliveries_id_seq1"', last_value, is_called) FROM "deliveries_id_seq";
CREATE TABLE "deliveries" (
	"id" bigint NOT NULL DEFAULT nextval('"deliveries_id_seq1"'),
	"created_at" timestamptz NOT NULL,
	"expires_at" timestamptz NOT NULL,
	"status" character varying NOT NULL DEFAULT 'PENDING',
	"trigger" character varying NOT NULL DEFAULT 'AUTOMATIC',
	"attempt_count" bigint NOT NULL DEFAULT 0,
	"max_attempts" bigint NOT NULL,
	"retry_schedule" character varying NOT NULL,
	"next_attempt_at" timestamptz NULL,
	"first_attempt_at" timestamptz NULL,
	"lease_expires_at" timestamptz NULL,
	"lease_owner" character varying NOT NULL DEFAULT '',
	"attempt_started_at" timestamptz NULL,
	"backlog" boolean NOT NULL DEFAULT false,
	"lane" character varying NOT NULL DEFAULT 'DIRECT',
	"superseded" boolean NOT NULL DEFAULT false,
	"finished_at" timestamptz NULL,
	"tenant_id" bigint NOT NULL,
	"recipient_id" bigint NOT NULL,
	"request_id" bigint NOT NULL,
	PRIMARY KEY ("id", "tenant_id", "expires_at")
) PARTITION BY RANGE ("expires_at");
CREATE INDEX "delivery_pending_due" ON "deliveries" ("next_attempt_at") WHERE ((status)::text = 'PENDING'::text);
CREATE INDEX "delivery_direct_due" ON "deliveries" ("tenant_id", "next_attempt_at", "id") WHERE (((status)::text = 'PENDING'::text) AND ((lane)::text = 'DIRECT'::text));
CREATE INDEX "delivery_capped_due" ON "deliveries" ("recipient_id", "next_attempt_at", "id") WHERE (((status)::text = 'PENDING'::text) AND ((lane)::text = 'CAPPED'::text));
CREATE INDEX "delivery_pending_lane" ON "deliveries" ("recipient_id", "lane") WHERE ((status)::text = 'PENDING'::text);
CREATE INDEX "delivery_in_progress_lease" ON "deliveries" ("lease_expires_at") WHERE ((status)::text = 'IN_PROGRESS'::text);
CREATE INDEX "delivery_request_id" ON "deliveries" ("request_id");
CREATE TABLE "deliveries_default" PARTITION OF "deliveries" DEFAULT;
INSERT INTO "deliveries" SELECT d."id", d."created_at", COALESCE(q."expires_at", d."created_at"), d."status", d."trigger",
	d."attempt_count", d."max_attempts", d."retry_schedule", d."next_attempt_at", d."first_attempt_at",
	d."lease_expires_at", d."lease_owner", d."attempt_started_at", d."backlog", d."lane", d."superseded",
	d."finished_at", d."tenant_id", d."recipient_id", d."request_id"
	FROM "deliveries_unpartitioned" d LEFT JOIN "requests" q ON q."id" = d."request_id";
DROP TABLE "deliveries_unpartitioned";
ALTER SEQUENCE "deliveries_id_seq1" RENAME TO "deliveries_id_seq";
ALTER SEQUENCE "deliveries_id_seq" OWNED BY "deliveries"."id";

-- Attempts: each takes its delivery's expiry (one whose delivery is gone expires as it ended).
ALTER TABLE "attempts" RENAME TO "attempts_unpartitioned";
ALTER TABLE "attempts_unpartitioned" RENAME CONSTRAINT "attempts_pkey" TO "attempts_unpartitioned_pkey";
DROP INDEX "attempt_delivery_id_number";
CREATE SEQUENCE "attempts_id_seq1";
SELECT setval('"attempts_id_seq1"', last_value, is_called) FROM "attempts_id_seq";
CREATE TABLE "attempts" (
	"id" bigint NOT NULL DEFAULT nextval('"attempts_id_seq1"'),
	"number" bigint NOT NULL,
	"expires_at" timestamptz NOT NULL,
	"started_at" timestamptz NOT NULL,
	"finished_at" timestamptz NOT NULL,
	"status" character varying NOT NULL,
	"http_status" bigint NULL,
	"duration_ms" bigint NOT NULL,
	"error_kind" character varying NULL,
	"error_message" character varying NOT NULL DEFAULT '',
	"tenant_id" bigint NOT NULL,
	"delivery_id" bigint NOT NULL,
	PRIMARY KEY ("id", "tenant_id", "expires_at")
) PARTITION BY RANGE ("expires_at");
CREATE UNIQUE INDEX "attempt_delivery_id_number" ON "attempts" ("delivery_id", "number", "tenant_id", "expires_at");
CREATE TABLE "attempts_default" PARTITION OF "attempts" DEFAULT;
INSERT INTO "attempts" SELECT a."id", a."number", COALESCE(d."expires_at", a."finished_at"), a."started_at",
	a."finished_at", a."status", a."http_status", a."duration_ms", a."error_kind", a."error_message", a."tenant_id",
	a."delivery_id"
	FROM "attempts_unpartitioned" a LEFT JOIN "deliveries" d ON d."id" = a."delivery_id";
DROP TABLE "attempts_unpartitioned";
ALTER SEQUENCE "attempts_id_seq1" RENAME TO "attempts_id_seq";
ALTER SEQUENCE "attempts_id_seq" OWNED BY "attempts"."id";

-- The tenant in every primary key. The foreign keys that name a primary key go first, and come back with
-- the tenant in them.
ALTER TABLE "recipients" DROP CONSTRAINT "recipients_servers_recipients";
ALTER TABLE "alert_subscriptions" DROP CONSTRAINT "alert_subscriptions_recipients_recipient";
ALTER TABLE "outbound_attempts" DROP CONSTRAINT "outbound_attempts_outbound_jobs_attempts";
ALTER TABLE "outbound_jobs" DROP CONSTRAINT "outbound_jobs_outbound_jobs_duplicates";
ALTER TABLE "servers" DROP CONSTRAINT "servers_pkey", ADD PRIMARY KEY ("id", "tenant_id");
ALTER TABLE "recipients" DROP CONSTRAINT "recipients_pkey", ADD PRIMARY KEY ("id", "tenant_id");
ALTER TABLE "alert_subscriptions" DROP CONSTRAINT "alert_subscriptions_pkey", ADD PRIMARY KEY ("id", "tenant_id");
ALTER TABLE "bulk_jobs" DROP CONSTRAINT "bulk_jobs_pkey", ADD PRIMARY KEY ("id", "tenant_id");
ALTER TABLE "bulk_job_items" DROP CONSTRAINT "bulk_job_items_pkey", ADD PRIMARY KEY ("id", "tenant_id");
ALTER TABLE "ledger_entries" DROP CONSTRAINT "ledger_entries_pkey", ADD PRIMARY KEY ("id", "tenant_id");
ALTER TABLE "outbound_jobs" DROP CONSTRAINT "outbound_jobs_pkey", ADD PRIMARY KEY ("id", "tenant_id");
ALTER TABLE "outbound_attempts" DROP CONSTRAINT "outbound_attempts_pkey", ADD PRIMARY KEY ("id", "tenant_id");
ALTER TABLE "pending_alerts" DROP CONSTRAINT "pending_alerts_pkey", ADD PRIMARY KEY ("id", "tenant_id");
ALTER TABLE "rejection_tallies" DROP CONSTRAINT "rejection_tallies_pkey", ADD PRIMARY KEY ("id", "tenant_id");
ALTER TABLE "rejections" DROP CONSTRAINT "rejections_pkey", ADD PRIMARY KEY ("id", "tenant_id");
ALTER TABLE "recipients" ADD CONSTRAINT "recipients_servers_recipients" FOREIGN KEY ("server_id", "tenant_id") REFERENCES "servers" ("id", "tenant_id") ON UPDATE NO ACTION ON DELETE NO ACTION;
ALTER TABLE "alert_subscriptions" ADD CONSTRAINT "alert_subscriptions_recipients_recipient" FOREIGN KEY ("recipient_id", "tenant_id") REFERENCES "recipients" ("id", "tenant_id") ON UPDATE NO ACTION ON DELETE NO ACTION;
ALTER TABLE "outbound_attempts" ADD CONSTRAINT "outbound_attempts_outbound_jobs_attempts" FOREIGN KEY ("job_id", "tenant_id") REFERENCES "outbound_jobs" ("id", "tenant_id") ON UPDATE NO ACTION ON DELETE NO ACTION;
-- A purged original leaves its duplicates in place, unlinked: only the link is cleared, never the tenant.
ALTER TABLE "outbound_jobs" ADD CONSTRAINT "outbound_jobs_outbound_jobs_duplicates" FOREIGN KEY ("duplicate_of_id", "tenant_id") REFERENCES "outbound_jobs" ("id", "tenant_id") ON UPDATE NO ACTION ON DELETE SET NULL ("duplicate_of_id");

-- The tenant in every unique index.
DROP INDEX "bulkjobitem_job_id_delivery_id";
CREATE UNIQUE INDEX "bulkjobitem_job_id_delivery_id" ON "bulk_job_items" ("job_id", "delivery_id", "tenant_id");
DROP INDEX "outboundattempt_job_id_number";
CREATE UNIQUE INDEX "outboundattempt_job_id_number" ON "outbound_attempts" ("job_id", "number", "tenant_id");
DROP INDEX "rejection_tallies_server_id_key";
CREATE UNIQUE INDEX "rejectiontally_server_id" ON "rejection_tallies" ("server_id", "tenant_id");
DROP INDEX "server_previous_inbound_key";
DROP INDEX "servers_inbound_key_key";
CREATE UNIQUE INDEX "server_previous_inbound_key" ON "servers" ("previous_inbound_key", "tenant_id") WHERE (previous_inbound_key IS NOT NULL);
CREATE UNIQUE INDEX "server_inbound_key" ON "servers" ("inbound_key", "tenant_id");

-- +goose Down
-- Adal never migrates down. This reverses, on the schema ent describes (unpartitioned, keyed by id), what the
-- Up section changed of it, for the tests that rebuild the schema of earlier versions.
DROP INDEX "server_inbound_key";
DROP INDEX "server_previous_inbound_key";
CREATE UNIQUE INDEX "servers_inbound_key_key" ON "servers" ("inbound_key");
CREATE UNIQUE INDEX "server_previous_inbound_key" ON "servers" ("previous_inbound_key") WHERE (previous_inbound_key IS NOT NULL);
DROP INDEX "rejectiontally_server_id";
CREATE UNIQUE INDEX "rejection_tallies_server_id_key" ON "rejection_tallies" ("server_id");
DROP INDEX "outboundattempt_job_id_number";
CREATE UNIQUE INDEX "outboundattempt_job_id_number" ON "outbound_attempts" ("job_id", "number");
DROP INDEX "bulkjobitem_job_id_delivery_id";
CREATE UNIQUE INDEX "bulkjobitem_job_id_delivery_id" ON "bulk_job_items" ("job_id", "delivery_id");
ALTER TABLE "deliveries" DROP COLUMN "expires_at";
DROP INDEX "attempt_delivery_id_number";
ALTER TABLE "attempts" DROP COLUMN "expires_at";
CREATE UNIQUE INDEX "attempt_delivery_id_number" ON "attempts" ("delivery_id", "number");
