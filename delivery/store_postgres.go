package delivery

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/adal-relay/adal/billing"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/ledgerentry"
	"github.com/adal-relay/adal/storage"
)

// maxChunkBytes bounds the headers and bodies one intake statement carries (its one bytea parameter): a replay
// of many large requests is stored in several statements rather than in one parameter of gigabytes.
const maxChunkBytes = 64 << 20

// insertSQL stores a chunk of paid requests, their deliveries and their debit in one statement of fixed text,
// kept prepared (storage.Prepared): the requests' insert is a data-modifying CTE whose RETURNING feeds the
// deliveries' insert and the ledger's (one entry per request, as billing.Settle writes them, in the order of
// the rows and with the balance each leaves); the tenants' balances go down by their requests in the chunk.
// The tenants are locked by the batch's billing.Reserve. The last row of the result counts the entries and
// the tenants debited. The rows travel as two JSON arrays and the requests' headers and bodies as one bytea of them all,
// which each row slices by offset and length: four parameters whatever the size of the batch, so the server
// neither parses nor plans a statement of a thousand placeholders per batch, and the client does not encode a
// thousand parameters.
var insertSQL = storage.Prepared(`
WITH q AS (
	SELECT * FROM json_to_recordset($1::json) AS q(n int, tenant_id bigint, server_id bigint, key text, method text,
		path text, query text, headers_at int, headers_len int, body_at int, body_len int, source_addr text,
		received_at timestamptz, expires_at timestamptz, status text, replay_of_id bigint, balance_after bigint)
), r AS (
	INSERT INTO requests (tenant_id, server_id, key, method, path, query, headers, body, source_addr, received_at,
		expires_at, status, replay_of_id)
	SELECT q.tenant_id, q.server_id, q.key, q.method, q.path, q.query,
		substring($2::bytea FROM q.headers_at FOR q.headers_len), substring($2::bytea FROM q.body_at FOR q.body_len),
		q.source_addr, q.received_at, q.expires_at, q.status, q.replay_of_id
	FROM q ORDER BY q.n
	RETURNING id, key
), d AS (
	INSERT INTO deliveries (tenant_id, created_at, request_id, recipient_id, status, trigger, attempt_count,
		max_attempts, retry_schedule, next_attempt_at, first_attempt_at, lease_expires_at, lease_owner,
		attempt_started_at, backlog, lane, superseded)
	SELECT v.tenant_id, v.created_at, r.id, v.recipient_id, v.status, v.trigger, v.attempt_count, v.max_attempts,
		v.retry_schedule, v.next_attempt_at, v.first_attempt_at, v.lease_expires_at, v.lease_owner,
		v.attempt_started_at, v.backlog, v.lane, v.superseded
	FROM json_to_recordset($3::json) AS v(n int, key text, tenant_id bigint, created_at timestamptz,
		recipient_id bigint, status text, trigger text, attempt_count bigint, max_attempts bigint,
		retry_schedule text, next_attempt_at timestamptz, first_attempt_at timestamptz,
		lease_expires_at timestamptz, lease_owner text, attempt_started_at timestamptz, backlog boolean, lane text,
		superseded boolean)
	JOIN r ON r.key = v.key
	ORDER BY v.n
	RETURNING id, request_id, recipient_id
), e AS (
	INSERT INTO ledger_entries (tenant_id, created_at, reason, amount, balance_after, reference)
	SELECT q.tenant_id, $5::timestamptz, $4::text, -1, q.balance_after, 'request:' || r.id
	FROM q JOIN r ON r.key = q.key
	ORDER BY q.n
	RETURNING 1
), t AS (
	UPDATE tenants AS t SET credit_balance = t.credit_balance - c.n
	FROM (SELECT tenant_id, count(*) AS n FROM q GROUP BY tenant_id) AS c
	WHERE t.id = c.tenant_id
	RETURNING 1
)
SELECT id, key, 0, 0 FROM r UNION ALL SELECT id, NULL, request_id, recipient_id FROM d
UNION ALL SELECT (SELECT count(*) FROM e), NULL, -1, (SELECT count(*) FROM t)`)

// insertPostgres stores the requests and their deliveries, and debits them (debits[n] is the ledger entry of
// reqs[n], with the given reason and time), one statement per chunk (one for any intake batch). It sets the
// IDs of reqs and ds, and each delivery's request (ds[k] belongs to reqs[owners[k]]).
//
// The statement writes the rows exactly as StoreBatch built them, under the system's context, where the
// tenant policy ent would apply allows every row: each row's tenant is its server's.
func insertPostgres(ctx context.Context, client *ent.Client, reqs []*ent.Request, ds []*ent.Delivery, owners []int, debits []billing.Debit, reason ledgerentry.Reason, now time.Time) error {
	if len(debits) != len(reqs) {
		return fmt.Errorf("insert requests: %d debits for %d requests", len(debits), len(reqs))
	}
	k := 0 // next delivery
	for start := 0; start < len(reqs); {
		st := newStatement(reqs[start:], len(ds)-k)
		end, firstDelivery := start, k
		for end < len(reqs) && (end == start || len(st.blob) < maxChunkBytes) {
			if err := st.request(end-start, reqs[end], debits[end]); err != nil {
				return err
			}
			for k < len(ds) && owners[k] == end {
				st.delivery(k-firstDelivery, reqs[end].Key, ds[k])
				k++
			}
			end++
		}
		if err := st.run(ctx, client, reqs[start:end], ds[firstDelivery:k], reason, now); err != nil {
			return err
		}
		for j := firstDelivery; j < k; j++ {
			ds[j].RequestID = reqs[owners[j]].ID
		}
		start = end
	}
	return nil
}

// statement builds the parameters of one chunk: the requests' and the deliveries' rows as JSON, written by
// hand (encoding/json would reflect over every field of every row), and the bytes the requests slice.
type statement struct {
	requests, deliveries []byte // JSON arrays, without their closing bracket
	blob                 []byte
	keys                 []string // for each delivery of the chunk, its request's key
	tenants              map[int]bool
}

// newStatement starts the statement of a chunk of (at most) reqs and the given number of deliveries, its
// buffers sized for them.
func newStatement(reqs []*ent.Request, deliveries int) *statement {
	blob := 0
	for _, r := range reqs {
		blob += len(r.Body) + 64*len(r.Headers) + 8
		if blob >= maxChunkBytes {
			break
		}
	}
	return &statement{
		requests:   append(make([]byte, 0, 64+512*len(reqs)), '['),
		deliveries: append(make([]byte, 0, 64+576*deliveries), '['),
		blob:       make([]byte, 0, min(blob, maxChunkBytes+1<<20)),
		keys:       make([]string, 0, deliveries),
		tenants:    map[int]bool{},
	}
}

// slice appends b to the blob and returns its 1-based offset there, as substring counts.
func (st *statement) slice(b []byte) int {
	at := len(st.blob) + 1
	st.blob = append(st.blob, b...)
	return at
}

// request adds r, the n-th request of the chunk, and its debit.
func (st *statement) request(n int, r *ent.Request, debit billing.Debit) error {
	if debit.TenantID != r.TenantID {
		return fmt.Errorf("request %q of tenant %d debited to tenant %d", r.Key, r.TenantID, debit.TenantID)
	}
	st.tenants[r.TenantID] = true
	headers, err := json.Marshal(r.Headers)
	if err != nil {
		return fmt.Errorf("request headers: %w", err)
	}
	for _, s := range []string{r.Key, r.Method, r.Path, r.Query, r.SourceAddr} {
		if !utf8.ValidString(s) {
			// As a text parameter it would have failed the statement, and the batch with it.
			return fmt.Errorf("request %q: a text field is not valid UTF-8", r.Key)
		}
	}
	w := jsonRow{b: st.requests}
	w.open()
	w.int("n", n)
	w.int("tenant_id", r.TenantID)
	w.int("server_id", r.ServerID)
	w.str("key", r.Key)
	w.str("method", r.Method)
	w.str("path", r.Path)
	w.str("query", r.Query)
	w.int("headers_at", st.slice(headers))
	w.int("headers_len", len(headers))
	w.int("body_at", st.slice(r.Body))
	w.int("body_len", len(r.Body))
	w.str("source_addr", r.SourceAddr)
	w.time("received_at", &r.ReceivedAt)
	w.time("expires_at", &r.ExpiresAt)
	w.str("status", string(r.Status))
	w.intp("replay_of_id", r.ReplayOfID)
	w.int64("balance_after", debit.BalanceAfter)
	st.requests = w.close()
	return nil
}

// delivery adds d, the n-th delivery of the chunk, going to the request with the given key.
func (st *statement) delivery(n int, key string, d *ent.Delivery) {
	st.keys = append(st.keys, key)
	w := jsonRow{b: st.deliveries}
	w.open()
	w.int("n", n)
	w.str("key", key)
	w.int("tenant_id", d.TenantID)
	w.time("created_at", &d.CreatedAt)
	w.int("recipient_id", d.RecipientID)
	w.str("status", string(d.Status))
	w.str("trigger", string(d.Trigger))
	w.int("attempt_count", d.AttemptCount)
	w.int("max_attempts", d.MaxAttempts)
	w.str("retry_schedule", string(d.RetrySchedule))
	w.time("next_attempt_at", d.NextAttemptAt)
	w.time("first_attempt_at", d.FirstAttemptAt)
	w.time("lease_expires_at", d.LeaseExpiresAt)
	w.str("lease_owner", d.LeaseOwner)
	w.time("attempt_started_at", d.AttemptStartedAt)
	w.bool("backlog", d.Backlog)
	w.str("lane", string(d.Lane))
	w.bool("superseded", d.Superseded)
	st.deliveries = w.close()
}

// run executes the chunk's statement and sets the IDs of its requests and deliveries, matched by the
// request's key and the delivery's (request, recipient) — both unique within a batch — not by the order of
// RETURNING, which SQL does not promise.
func (st *statement) run(ctx context.Context, client *ent.Client, reqs []*ent.Request, ds []*ent.Delivery, reason ledgerentry.Reason, now time.Time) error {
	// The rows go as bytes, not strings: with binary parameters (storage.Open) the driver sends them as they
	// are, and a json value's binary form is its text; a string would be copied twice on the way.
	rows, err := client.QueryContext(ctx, insertSQL, append(st.requests, ']'), st.blob,
		append(st.deliveries, ']'), string(reason), now)
	if err != nil {
		return fmt.Errorf("insert requests: %w", err)
	}
	defer rows.Close()
	reqByKey := make(map[string]*ent.Request, len(reqs))
	for _, r := range reqs {
		reqByKey[r.Key] = r
	}
	type stored struct{ id, requestID, recipientID int }
	var delivered []stored
	requests, entries, debited := 0, -1, -1
	for rows.Next() {
		var row stored
		var key sql.NullString
		if err := rows.Scan(&row.id, &key, &row.requestID, &row.recipientID); err != nil {
			return fmt.Errorf("insert requests: %w", err)
		}
		if !key.Valid && row.requestID == -1 { // the counts of the ledger's CTEs
			entries, debited = row.id, row.recipientID
			continue
		}
		if !key.Valid {
			delivered = append(delivered, row)
			continue
		}
		r := reqByKey[key.String]
		if r == nil {
			return fmt.Errorf("insert requests: a key the batch did not hold came back")
		}
		r.ID = row.id
		requests++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("insert requests: %w", err)
	}
	if requests != len(reqs) || len(delivered) != len(ds) {
		return fmt.Errorf("insert requests: stored %d requests of %d and %d deliveries of %d", requests, len(reqs), len(delivered), len(ds))
	}
	if entries != len(reqs) || debited != len(st.tenants) {
		return fmt.Errorf("insert requests: wrote %d ledger entries of %d and debited %d tenants of %d", entries, len(reqs), debited, len(st.tenants))
	}
	type pair struct{ requestID, recipientID int }
	byPair := make(map[pair]*ent.Delivery, len(ds))
	for j, d := range ds {
		byPair[pair{reqByKey[st.keys[j]].ID, d.RecipientID}] = d
	}
	for _, row := range delivered {
		d := byPair[pair{row.requestID, row.recipientID}]
		if d == nil {
			return fmt.Errorf("insert requests: delivery %d matches no row of the batch", row.id)
		}
		d.ID = row.id
	}
	return rows.Close()
}
