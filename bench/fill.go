package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/lib/pq"
)

// bulkDue describes deliveries inserted straight into the tables (not through intake): one request per
// delivery, spread round robin over the fixture's servers and, within a server, over its recipients.
type bulkDue struct {
	KeyPrefix string // request keys are KeyPrefix + sequence number
	From, To  int64  // sequence numbers, inclusive
	Body      []byte
	// Due is the next_attempt_at of sequence number From; each following one is due Step later.
	Due  time.Time
	Step time.Duration
	// AttemptCount > 0 makes the rows retries: that many attempts were made, the first at FirstAttemptAt.
	AttemptCount   int
	FirstAttemptAt time.Time
	// Traced gives each request a trace of its own, as intake does while tracing is on, so that its claims
	// and attempts are traced.
	Traced bool
}

const bulkDueSQL = `
WITH req AS (
	INSERT INTO requests (key, method, path, query, headers, body, source_addr, received_at, expires_at, status,
	                      tenant_id, server_id, trace_parent)
	SELECT $1 || g, 'POST', '/events', '', '{"Content-Type":["application/json"]}', $2::bytea, '127.0.0.1',
	       $3::timestamptz, $3::timestamptz + interval '7 days', 'PENDING',
	       ($4::bigint[])[1 + g % cardinality($4::bigint[])], ($5::bigint[])[1 + g % cardinality($5::bigint[])],
	       CASE WHEN $14 THEN '00-' || md5($1 || g) || '-' || left(md5(g::text), 16) || '-01' ELSE '' END
	FROM generate_series($6::bigint, $7::bigint) AS g
	RETURNING id, tenant_id, expires_at, substr(key, length($1) + 1)::bigint AS g
)
INSERT INTO deliveries (expires_at, created_at, status, trigger, attempt_count, max_attempts, retry_schedule, next_attempt_at,
                        first_attempt_at, lease_owner, backlog, superseded, tenant_id, recipient_id, request_id)
SELECT expires_at, $3, 'PENDING', 'AUTOMATIC', $8, 10, 'QUADRATIC',
       $9::timestamptz + (g - $6) * $10::bigint * interval '1 microsecond', $11, '', false, false, tenant_id,
       ($12::bigint[])[1 + (g % cardinality($4::bigint[])) * $13 + (g / cardinality($4::bigint[])) % $13], id
FROM req`

// insertDue inserts the rows in chunks and refreshes the planner's statistics, as autovacuum would have on a
// live database.
func insertDue(ctx context.Context, db *sql.DB, fx *Fixture, spec bulkDue) error {
	servers := make([]int64, len(fx.Servers))
	tenants := make([]int64, len(fx.Servers))
	per := len(fx.Servers[0].Recipients)
	var recipients []int64
	for i, s := range fx.Servers {
		servers[i], tenants[i] = s.ID, s.TenantID
		if len(s.Recipients) != per {
			return fmt.Errorf("servers with different recipient counts")
		}
		recipients = append(recipients, s.Recipients...)
	}
	var first any
	if spec.AttemptCount > 0 {
		first = spec.FirstAttemptAt
	}
	const chunk = 50_000
	for from := spec.From; from <= spec.To; from += chunk {
		to := min(from+chunk-1, spec.To)
		due := spec.Due.Add(time.Duration(from-spec.From) * spec.Step)
		_, err := db.ExecContext(ctx, bulkDueSQL, spec.KeyPrefix, spec.Body, time.Now(), pq.Array(tenants),
			pq.Array(servers), from, to, spec.AttemptCount, due, spec.Step.Microseconds(), first,
			pq.Array(recipients), per, spec.Traced)
		if err != nil {
			return fmt.Errorf("insert due deliveries: %w", err)
		}
	}
	_, err := db.ExecContext(ctx, `ANALYZE`)
	return err
}

// insertExpired inserts n requests for the server that expire from expires on (a microsecond apart), each with
// one FAILED delivery per recipient and three attempts per delivery: history for the purge to delete.
func insertExpired(ctx context.Context, db *sql.DB, srv FixtureServer, n int, body []byte, expires time.Time) error {
	_, err := db.ExecContext(ctx, `
		INSERT INTO requests (key, method, path, query, headers, body, source_addr, received_at, expires_at,
		                      status, tenant_id, server_id)
		SELECT 'expired-' || g, 'POST', '/events', '', '{"Content-Type":["application/json"]}', $1::bytea,
		       '127.0.0.1', $2::timestamptz - interval '1 day', $2::timestamptz + g * interval '1 microsecond',
		       'FAILED', $3, $4
		FROM generate_series(1, $5) AS g`, body, expires, srv.TenantID, srv.ID, n)
	if err != nil {
		return fmt.Errorf("insert expired requests: %w", err)
	}
	values := make([]string, len(srv.Recipients))
	for i, id := range srv.Recipients {
		values[i] = fmt.Sprintf("(%d::bigint)", id)
	}
	_, err = db.ExecContext(ctx, `
		INSERT INTO deliveries (created_at, status, trigger, attempt_count, max_attempts, retry_schedule,
		                        lease_owner, backlog, superseded, finished_at, tenant_id, recipient_id, request_id,
		                        expires_at)
		SELECT r.received_at, 'FAILED', 'AUTOMATIC', 3, 3, 'QUADRATIC', '', false, false, r.received_at,
		       r.tenant_id, rc.id, r.id, r.expires_at
		FROM requests r CROSS JOIN (VALUES `+strings.Join(values, ", ")+`) AS rc(id)
		WHERE r.key LIKE 'expired-%' AND r.server_id = $1`, srv.ID)
	if err != nil {
		return fmt.Errorf("insert expired deliveries: %w", err)
	}
	_, err = db.ExecContext(ctx, `
		INSERT INTO attempts (number, started_at, finished_at, status, http_status, duration_ms, error_kind,
		                      error_message, tenant_id, delivery_id, expires_at)
		SELECT g, d.created_at, d.created_at, 'FAILED', 500, 12, 'HTTP_STATUS', 'HTTP 500', d.tenant_id, d.id,
		       d.expires_at
		FROM deliveries d CROSS JOIN generate_series(1, 3) AS g
		WHERE d.status = 'FAILED' AND d.recipient_id = ANY($1)`, pq.Array(srv.Recipients))
	if err != nil {
		return fmt.Errorf("insert expired attempts: %w", err)
	}
	// Vacuumed as well as analyzed, as autovacuum would have done by the time the rows expire: a vacuum
	// still running on a day's tables holds off the purge's drop of that day.
	_, err = db.ExecContext(ctx, `VACUUM ANALYZE requests, deliveries, attempts`)
	return err
}
