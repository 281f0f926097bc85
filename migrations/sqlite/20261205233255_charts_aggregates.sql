-- The console's charts read aggregates kept as the work is recorded: per recipient and UTC hour the attempts,
-- their successes and a histogram of their durations; per server and hour the requests stored; per tenant and
-- UTC day the credits debited. Triggers keep them in the statement that writes the work, so they are exact and
-- commit or roll back with it, and the hot paths run no statement of their own for them.
--
-- SQLite's triggers are row-level: each inserted row upserts its own aggregate. Times are stored as Go writes
-- them in UTC ("2006-01-02 15:04:05.999999999 +0000 UTC"), which SQLite's date functions do not read: the
-- hour and the day are cut from the text and written back in that form, so that they compare, as text, with
-- the times Go binds. The duration buckets are stats.Bounds, in milliseconds: each counts durations above the
-- bound before it, up to its own.

-- +goose Up
-- create "recipient_hour_stats" table
CREATE TABLE `recipient_hour_stats` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `recipient_id` integer NOT NULL, `hour` datetime NOT NULL, `attempts` integer NOT NULL DEFAULT (0), `successes` integer NOT NULL DEFAULT (0), `le_10` integer NOT NULL DEFAULT (0), `le_25` integer NOT NULL DEFAULT (0), `le_50` integer NOT NULL DEFAULT (0), `le_100` integer NOT NULL DEFAULT (0), `le_250` integer NOT NULL DEFAULT (0), `le_500` integer NOT NULL DEFAULT (0), `le_1000` integer NOT NULL DEFAULT (0), `le_2500` integer NOT NULL DEFAULT (0), `le_5000` integer NOT NULL DEFAULT (0), `le_10000` integer NOT NULL DEFAULT (0), `le_30000` integer NOT NULL DEFAULT (0), `gt_30000` integer NOT NULL DEFAULT (0), `tenant_id` integer NOT NULL, CONSTRAINT `recipient_hour_stats_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION);
-- set sequence for "recipient_hour_stats" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("recipient_hour_stats", 77309411328);
-- create index "recipienthourstat_recipient_hour" to table: "recipient_hour_stats"
CREATE UNIQUE INDEX `recipienthourstat_recipient_hour` ON `recipient_hour_stats` (`recipient_id`, `hour`, `tenant_id`);
-- create index "recipienthourstat_hour" to table: "recipient_hour_stats"
CREATE INDEX `recipienthourstat_hour` ON `recipient_hour_stats` (`hour`);
-- create "server_hour_stats" table
CREATE TABLE `server_hour_stats` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `server_id` integer NOT NULL, `hour` datetime NOT NULL, `requests` integer NOT NULL DEFAULT (0), `replays` integer NOT NULL DEFAULT (0), `tenant_id` integer NOT NULL, CONSTRAINT `server_hour_stats_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION);
-- set sequence for "server_hour_stats" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("server_hour_stats", 81604378624);
-- create index "serverhourstat_server_hour" to table: "server_hour_stats"
CREATE UNIQUE INDEX `serverhourstat_server_hour` ON `server_hour_stats` (`server_id`, `hour`, `tenant_id`);
-- create index "serverhourstat_hour" to table: "server_hour_stats"
CREATE INDEX `serverhourstat_hour` ON `server_hour_stats` (`hour`);
-- create "tenant_day_stats" table
CREATE TABLE `tenant_day_stats` (`id` integer NOT NULL PRIMARY KEY AUTOINCREMENT, `day` datetime NOT NULL, `credits` integer NOT NULL DEFAULT (0), `requests` integer NOT NULL DEFAULT (0), `retries` integer NOT NULL DEFAULT (0), `replays` integer NOT NULL DEFAULT (0), `outbound` integer NOT NULL DEFAULT (0), `tenant_id` integer NOT NULL, CONSTRAINT `tenant_day_stats_tenants_tenant` FOREIGN KEY (`tenant_id`) REFERENCES `tenants` (`id`) ON DELETE NO ACTION);
-- set sequence for "tenant_day_stats" table
INSERT INTO sqlite_sequence (name, seq) VALUES ("tenant_day_stats", 85899345920);
-- create index "tenantdaystat_tenant_day" to table: "tenant_day_stats"
CREATE UNIQUE INDEX `tenantdaystat_tenant_day` ON `tenant_day_stats` (`tenant_id`, `day`);
-- create index "tenantdaystat_day" to table: "tenant_day_stats"
CREATE INDEX `tenantdaystat_day` ON `tenant_day_stats` (`day`);

-- Attempts: an attempt's recipient is its delivery's, read by primary key. WHERE also settles how SQLite parses
-- an upsert after a SELECT.
-- +goose StatementBegin
CREATE TRIGGER `attempts_recipient_hour_stats` AFTER INSERT ON `attempts` BEGIN
	INSERT INTO recipient_hour_stats (tenant_id, recipient_id, hour, attempts, successes, le_10, le_25, le_50,
		le_100, le_250, le_500, le_1000, le_2500, le_5000, le_10000, le_30000, gt_30000)
	SELECT NEW.tenant_id, d.recipient_id, substr(NEW.finished_at, 1, 13) || ':00:00 +0000 UTC', 1,
		NEW.status = 'SUCCEEDED',
		NEW.duration_ms <= 10,
		NEW.duration_ms > 10 AND NEW.duration_ms <= 25,
		NEW.duration_ms > 25 AND NEW.duration_ms <= 50,
		NEW.duration_ms > 50 AND NEW.duration_ms <= 100,
		NEW.duration_ms > 100 AND NEW.duration_ms <= 250,
		NEW.duration_ms > 250 AND NEW.duration_ms <= 500,
		NEW.duration_ms > 500 AND NEW.duration_ms <= 1000,
		NEW.duration_ms > 1000 AND NEW.duration_ms <= 2500,
		NEW.duration_ms > 2500 AND NEW.duration_ms <= 5000,
		NEW.duration_ms > 5000 AND NEW.duration_ms <= 10000,
		NEW.duration_ms > 10000 AND NEW.duration_ms <= 30000,
		NEW.duration_ms > 30000
	FROM deliveries d WHERE d.id = NEW.delivery_id
	ON CONFLICT (recipient_id, hour, tenant_id) DO UPDATE SET
		attempts = attempts + excluded.attempts, successes = successes + excluded.successes,
		le_10 = le_10 + excluded.le_10, le_25 = le_25 + excluded.le_25, le_50 = le_50 + excluded.le_50,
		le_100 = le_100 + excluded.le_100, le_250 = le_250 + excluded.le_250, le_500 = le_500 + excluded.le_500,
		le_1000 = le_1000 + excluded.le_1000, le_2500 = le_2500 + excluded.le_2500,
		le_5000 = le_5000 + excluded.le_5000, le_10000 = le_10000 + excluded.le_10000,
		le_30000 = le_30000 + excluded.le_30000, gt_30000 = gt_30000 + excluded.gt_30000;
END;
-- +goose StatementEnd

-- Requests, by the hour they were received: intake's, replays (also counted apart) and alerts.
-- +goose StatementBegin
CREATE TRIGGER `requests_server_hour_stats` AFTER INSERT ON `requests` BEGIN
	INSERT INTO server_hour_stats (tenant_id, server_id, hour, requests, replays)
	VALUES (NEW.tenant_id, NEW.server_id, substr(NEW.received_at, 1, 13) || ':00:00 +0000 UTC', 1,
		NEW.replay_of_id IS NOT NULL)
	ON CONFLICT (server_id, hour, tenant_id) DO UPDATE SET
		requests = requests + excluded.requests, replays = replays + excluded.replays;
END;
-- +goose StatementEnd

-- Ledger entries: the debits only (grants add, a plan change is zero), by the day they were written.
-- +goose StatementBegin
CREATE TRIGGER `ledger_entries_tenant_day_stats` AFTER INSERT ON `ledger_entries` WHEN NEW.amount < 0 BEGIN
	INSERT INTO tenant_day_stats (tenant_id, day, credits, requests, retries, replays, outbound)
	VALUES (NEW.tenant_id, substr(NEW.created_at, 1, 10) || ' 00:00:00 +0000 UTC', -NEW.amount,
		CASE NEW.reason WHEN 'REQUEST_ACCEPTED' THEN -NEW.amount ELSE 0 END,
		CASE NEW.reason WHEN 'MANUAL_RETRY' THEN -NEW.amount ELSE 0 END,
		CASE NEW.reason WHEN 'REPLAY' THEN -NEW.amount ELSE 0 END,
		CASE NEW.reason WHEN 'OUTBOUND' THEN -NEW.amount ELSE 0 END)
	ON CONFLICT (tenant_id, day) DO UPDATE SET
		credits = credits + excluded.credits, requests = requests + excluded.requests,
		retries = retries + excluded.retries, replays = replays + excluded.replays,
		outbound = outbound + excluded.outbound;
END;
-- +goose StatementEnd

-- +goose Down
-- The triggers may be missing: the tests take a database the automatic migration made down to the baseline.
DROP TRIGGER IF EXISTS `ledger_entries_tenant_day_stats`;
DROP TRIGGER IF EXISTS `requests_server_hour_stats`;
DROP TRIGGER IF EXISTS `attempts_recipient_hour_stats`;
-- reverse: create index "tenantdaystat_day" to table: "tenant_day_stats"
DROP INDEX `tenantdaystat_day`;
-- reverse: create index "tenantdaystat_tenant_day" to table: "tenant_day_stats"
DROP INDEX `tenantdaystat_tenant_day`;
-- reverse: set sequence for "tenant_day_stats" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "tenant_day_stats";
-- reverse: create "tenant_day_stats" table
DROP TABLE `tenant_day_stats`;
-- reverse: create index "serverhourstat_hour" to table: "server_hour_stats"
DROP INDEX `serverhourstat_hour`;
-- reverse: create index "serverhourstat_server_hour" to table: "server_hour_stats"
DROP INDEX `serverhourstat_server_hour`;
-- reverse: set sequence for "server_hour_stats" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "server_hour_stats";
-- reverse: create "server_hour_stats" table
DROP TABLE `server_hour_stats`;
-- reverse: create index "recipienthourstat_hour" to table: "recipient_hour_stats"
DROP INDEX `recipienthourstat_hour`;
-- reverse: create index "recipienthourstat_recipient_hour" to table: "recipient_hour_stats"
DROP INDEX `recipienthourstat_recipient_hour`;
-- reverse: set sequence for "recipient_hour_stats" table
UPDATE sqlite_sequence SET seq = 0 WHERE name = "recipient_hour_stats";
-- reverse: create "recipient_hour_stats" table
DROP TABLE `recipient_hour_stats`;
