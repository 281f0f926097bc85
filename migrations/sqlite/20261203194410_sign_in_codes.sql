-- +goose Up
-- create "sign_in_codes" table
CREATE TABLE `sign_in_codes` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `created_at` datetime NOT NULL, `code_hash` text NOT NULL, `expires_at` datetime NOT NULL, `used_at` datetime NULL);
-- set sequence for "sign_in_codes" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("sign_in_codes", 47244640256);
-- create index "sign_in_codes_code_hash_key" to table: "sign_in_codes"
CREATE UNIQUE INDEX `sign_in_codes_code_hash_key` ON `sign_in_codes` (`code_hash`);

-- +goose Down
-- reverse: create index "sign_in_codes_code_hash_key" to table: "sign_in_codes"
DROP INDEX `sign_in_codes_code_hash_key`;
-- reverse: set sequence for "sign_in_codes" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "sign_in_codes";
-- reverse: create "sign_in_codes" table
DROP TABLE `sign_in_codes`;
