-- +goose Up
-- create "tokens" table
CREATE TABLE `tokens` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `created_at` datetime NOT NULL, `role` text NOT NULL, `subject` text NOT NULL, `issued_by` text NOT NULL, `expires_at` datetime NOT NULL, `revoked_at` datetime NULL, `tenant_id` integer NULL, CONSTRAINT `tokens_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE SET NULL);
-- set sequence for "tokens" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("tokens", 42949672960);
-- create index "token_tenant_id_created_at" to table: "tokens"
CREATE INDEX `token_tenant_id_created_at` ON `tokens` (`tenant_id`, `created_at`);
-- create index "token_revoked" to table: "tokens"
CREATE INDEX `token_revoked` ON `tokens` (`expires_at`) WHERE revoked_at IS NOT NULL;

-- +goose Down
-- reverse: create index "token_revoked" to table: "tokens"
DROP INDEX `token_revoked`;
-- reverse: create index "token_tenant_id_created_at" to table: "tokens"
DROP INDEX `token_tenant_id_created_at`;
-- reverse: set sequence for "tokens" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "tokens";
-- reverse: create "tokens" table
DROP TABLE `tokens`;
