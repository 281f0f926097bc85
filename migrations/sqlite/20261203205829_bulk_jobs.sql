-- +goose Up
-- create "bulk_jobs" table
CREATE TABLE `bulk_jobs` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `created_at` datetime NOT NULL, `server_id` integer NOT NULL, `kind` text NOT NULL, `status` text NOT NULL DEFAULT ('RUNNING'), `criteria` blob NOT NULL, `total` integer NOT NULL, `done` integer NOT NULL DEFAULT (0), `failed` integer NOT NULL DEFAULT (0), `credits_spent` integer NOT NULL DEFAULT (0), `done_through` integer NOT NULL DEFAULT (0), `lease_owner` text NOT NULL DEFAULT (''), `lease_expires_at` datetime NULL, `created_by` text NOT NULL DEFAULT (''), `error_message` text NOT NULL DEFAULT (''), `updated_at` datetime NOT NULL, `finished_at` datetime NULL, `tenant_id` integer NOT NULL, CONSTRAINT `bulk_jobs_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION);
-- set sequence for "bulk_jobs" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("bulk_jobs", 68719476736);
-- create index "bulkjob_tenant_id" to table: "bulk_jobs"
CREATE INDEX `bulkjob_tenant_id` ON `bulk_jobs` (`tenant_id`);
-- create index "bulk_job_running_lease" to table: "bulk_jobs"
CREATE INDEX `bulk_job_running_lease` ON `bulk_jobs` (`lease_expires_at`) WHERE status = 'RUNNING';
-- create "bulk_job_items" table
CREATE TABLE `bulk_job_items` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `job_id` integer NOT NULL, `delivery_id` integer NOT NULL, `request_id` integer NOT NULL, `recipient_id` integer NOT NULL, `tenant_id` integer NOT NULL, CONSTRAINT `bulk_job_items_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION);
-- set sequence for "bulk_job_items" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("bulk_job_items", 73014444032);
-- create index "bulkjobitem_job_id_delivery_id" to table: "bulk_job_items"
CREATE UNIQUE INDEX `bulkjobitem_job_id_delivery_id` ON `bulk_job_items` (`job_id`, `delivery_id`);

-- +goose Down
-- reverse: create index "bulkjobitem_job_id_delivery_id" to table: "bulk_job_items"
DROP INDEX `bulkjobitem_job_id_delivery_id`;
-- reverse: set sequence for "bulk_job_items" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "bulk_job_items";
-- reverse: create "bulk_job_items" table
DROP TABLE `bulk_job_items`;
-- reverse: create index "bulk_job_running_lease" to table: "bulk_jobs"
DROP INDEX `bulk_job_running_lease`;
-- reverse: create index "bulkjob_tenant_id" to table: "bulk_jobs"
DROP INDEX `bulkjob_tenant_id`;
-- reverse: set sequence for "bulk_jobs" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "bulk_jobs";
-- reverse: create "bulk_jobs" table
DROP TABLE `bulk_jobs`;
