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
	"github.com/adal-relay/adal/retention"
	"github.com/adal-relay/adal/storage"
)

// maxChunkBytes bounds the headers and bodies one intake statement carries (its one bytea parameter): a replay
// of many large requests is stored in several statements rather than in one parameter of gigabytes.
const maxChunkBytes = 64 << 20

// insertSQL stores a chunk of requests, their deliveries and their debit in one statement of fixed text, kept
// prepared (storage.Prepared), and decides in it which of them are stored, so that on its own — outside any
// transaction — it is a batch's whole transaction: one round trip and one commit.
//
// It locks the chunk's live servers FOR SHARE (a server deleted meanwhile gets no request, and its deletion
// waits for the requests being stored, then cancels their deliveries), then their tenants as billing.Reserve
// locks them (NO KEY UPDATE, in id order, so that two batches sharing tenants never deadlock), and reads each
// tenant's balance and plan retention under the lock. Each tenant's requests to live servers are granted in
// arrival order as far as its balance goes (g, by billing.GrantedSQL); those are stored, kept for the shorter
// of the plan's and the server's retention, with their deliveries, and billing.DebitItems writes one ledger
// entry each (in the order of the rows, with the balance each leaves) and takes the tenants' balances down by
// their requests stored. The result names the requests stored (with the retention they got), their
// deliveries, the live servers, and, last, the count of entries written, of tenants debited and of credits.low
// alerts raised (billing.DebitItems).
//
// A caller that read its servers before the statement (intake, from a cache) may name their versions as it
// read them ($6, ServerVersionSQL): the requests of a server whose version is no longer that are not stored,
// and the result names the server changed, for the caller to read it again.
//
// The rows travel as two JSON arrays and the requests' headers and bodies as one bytea of them all, which each
// row slices by offset and length: four parameters whatever the size of the batch, so the server neither parses
// nor plans a statement of a thousand placeholders per batch, and the client does not encode a thousand
// parameters. A delivery row of a request not stored joins no request and is not inserted.
var insertSQL = storage.Prepared(`
WITH q AS (
	SELECT * FROM json_to_recordset($1::json) AS q(n int, tenant_id bigint, server_id bigint, key text, method text,
		path text, query text, headers_at int, headers_len int, body_at int, body_len int, source_addr text,
		received_at timestamptz, status text, replay_of_id bigint, filtered_out json, verified boolean,
		trace_parent text, event_type text, schema_error text)
), x AS (
	SELECT * FROM json_to_recordset($6::json) AS x(id bigint, version text)
), s AS MATERIALIZED (
	SELECT id, tenant_id, retention_days,
		CASE WHEN id = ANY(ARRAY(SELECT id FROM x)) THEN ` + ServerVersionSQL("servers") + ` END AS version
	FROM servers
	WHERE id = ANY(ARRAY(SELECT server_id FROM q)) AND deleted_at IS NULL
	ORDER BY id
	FOR SHARE
), c AS MATERIALIZED (
	SELECT s.id FROM s JOIN x ON x.id = s.id WHERE s.version IS DISTINCT FROM x.version
), t AS MATERIALIZED (` + billing.LockTenantsSQL("ARRAY(SELECT tenant_id FROM s)") + `
), g AS MATERIALIZED (
	SELECT q.*, ` + billing.BalanceAfterSQL("t.credit_balance", "q.rank") + ` AS balance_after,
		` + retention.DaysSQL("t.retention_days", "q.server_retention") + ` AS days
	FROM (
		SELECT q.*, s.retention_days AS server_retention,
			row_number() OVER (PARTITION BY q.tenant_id ORDER BY q.n) AS rank
		FROM q JOIN s ON s.id = q.server_id AND s.tenant_id = q.tenant_id
		WHERE q.server_id <> ALL(ARRAY(SELECT id FROM c))
	) AS q
	JOIN t ON t.id = q.tenant_id
	WHERE ` + billing.GrantedSQL("q.rank", "t.credit_balance") + `
), r AS (
	INSERT INTO requests (tenant_id, server_id, key, method, path, query, headers, body, source_addr, received_at,
		expires_at, status, replay_of_id, filtered_out, verified, trace_parent, event_type, schema_error)
	SELECT g.tenant_id, g.server_id, g.key, g.method, g.path, g.query,
		substring($2::bytea FROM g.headers_at FOR g.headers_len), substring($2::bytea FROM g.body_at FOR g.body_len),
		g.source_addr, g.received_at, ` + retention.ExpiresAtSQL("g.received_at", "g.days") + `, g.status, g.replay_of_id,
		convert_to(g.filtered_out::text, 'UTF8'), g.verified, coalesce(g.trace_parent, ''),
		coalesce(g.event_type, ''), coalesce(g.schema_error, '')
	FROM g ORDER BY g.n
	RETURNING id, key, expires_at
), d AS (
	INSERT INTO deliveries (tenant_id, created_at, request_id, recipient_id, status, trigger, attempt_count,
		max_attempts, retry_schedule, next_attempt_at, first_attempt_at, lease_expires_at, lease_owner,
		attempt_started_at, backlog, lane, superseded, expires_at)
	SELECT v.tenant_id, v.created_at, r.id, v.recipient_id, v.status, v.trigger, v.attempt_count, v.max_attempts,
		v.retry_schedule, v.next_attempt_at, v.first_attempt_at, v.lease_expires_at, v.lease_owner,
		v.attempt_started_at, v.backlog, v.lane, v.superseded, r.expires_at
	FROM json_to_recordset($3::json) AS v(n int, key text, tenant_id bigint, created_at timestamptz,
		recipient_id bigint, status text, trigger text, attempt_count bigint, max_attempts bigint,
		retry_schedule text, next_attempt_at timestamptz, first_attempt_at timestamptz,
		lease_expires_at timestamptz, lease_owner text, attempt_started_at timestamptz, backlog boolean, lane text,
		superseded boolean)
	JOIN r ON r.key = v.key
	ORDER BY v.n
	RETURNING id, request_id, recipient_id
), ` + billing.DebitItems{Entries: "e", Debits: "u", Alerts: "lo", From: "g JOIN r ON r.key = g.key", Tenant: "g.tenant_id",
	BalanceAfter: "g.balance_after", Reference: billing.RequestReferenceSQL("r.id"), Order: "g.n",
	Reason: "$4::text", CreatedAt: "$5::timestamptz", Granted: "g"}.SQL() + `
SELECT 'request', r.id, r.key, g.days, 0 FROM r JOIN g ON g.key = r.key
UNION ALL SELECT 'delivery', id, NULL, request_id, recipient_id FROM d
UNION ALL SELECT 'server', id, NULL, 0, 0 FROM s
UNION ALL SELECT 'changed', id, NULL, 0, 0 FROM c
UNION ALL SELECT 'counts', (SELECT count(*) FROM e), NULL, (SELECT count(*) FROM u), (SELECT count(*) FROM lo)`)

// insertPostgres stores what it may of the requests and their deliveries, and debits them (one ledger entry
// per request, with the given reason and time), one statement per chunk (one for any batch OneStatement
// accepts). It sets the IDs of the requests and deliveries stored, their requests' expiry, and each stored
// delivery's request (ds[k] belongs to reqs[owners[k]]); a request or delivery not stored keeps ID 0. It
// returns the servers the batch found live, and of the servers versions (a JSON array of {id, version}) names,
// those that changed since the caller read them (ServerVersionSQL); their requests are not stored.
//
// The statement writes the rows exactly as StoreBatch built them, under the system's context, where the
// tenant policy ent would apply allows every row: each row's tenant is its server's.
func insertPostgres(ctx context.Context, client *ent.Client, reqs []*ent.Request, ds []*ent.Delivery, owners []int, versions []byte, reason ledgerentry.Reason, now time.Time) (live, changed map[int]bool, err error) {
	live, changed = map[int]bool{}, map[int]bool{}
	k := 0 // next delivery
	start := 0
	for _, end := range chunkEnds(reqs) {
		st := newStatement(reqs[start:end], len(ds)-k)
		firstDelivery := k
		for n := start; n < end; n++ {
			if err := st.request(n-start, reqs[n]); err != nil {
				return nil, nil, err
			}
			for k < len(ds) && owners[k] == n {
				st.delivery(k-firstDelivery, reqs[n].Key, ds[k])
				k++
			}
		}
		if err := st.run(ctx, client, reqs[start:end], ds[firstDelivery:k], versions, reason, now, live, changed); err != nil {
			return nil, nil, err
		}
		for j := firstDelivery; j < k; j++ {
			if ds[j].ID != 0 {
				ds[j].RequestID = reqs[owners[j]].ID
			}
		}
		start = end
	}
	return live, changed, nil
}

// ServerVersionSQL is the version of a server as intake reads it, for the servers row named server: a digest of
// its columns and of those of its live recipients that intake uses to store a request and hand its deliveries
// to workers. Any change to one of them changes the version. Health counters are not among them: they change
// with every attempt, and intake does not use them.
func ServerVersionSQL(server string) string {
	return `md5(ROW(` + server + `.id, ` + server + `.tenant_id, ` + server + `.created_at, ` + server + `.name, ` +
		server + `.inbound_key, ` + server + `.deliver_pending_on_connect, ` + server + `.retention_days, ` +
		server + `.previous_inbound_key, ` + server + `.previous_key_expires_at, ` + server + `.kind, ` +
		server + `.event_type_header, ` + server + `.event_type_path, ` + server + `.schema_validation, ` +
		server + `.deleted_at)::text || coalesce((
		SELECT string_agg(ROW(rv.id, rv.tenant_id, rv.server_id, rv.method, rv.url, rv.max_attempts, rv.retry_schedule,
			rv.send_idempotency_key, rv.timeout_seconds, rv.state, rv.cli_seen_until, rv.routing_filter,
			rv.signing_secret, rv.previous_signing_secret, rv.previous_secret_expires_at, rv.signature_headers,
			rv.max_concurrency, rv.send_traceparent, rv.destination_url, rv.destination, rv.event_types,
			rv.transform_version_id, rv.auth)::text, ',' ORDER BY rv.id)
		FROM recipients AS rv WHERE rv.server_id = ` + server + `.id AND rv.deleted_at IS NULL), ''))`
}

// OneStatement reports whether StoreBatch stores items in one statement on PostgreSQL. That statement is then
// the batch's whole transaction: a caller may pass a client outside any, and the batch is stored whole or not
// at all. Items whose headers and bodies pass maxChunkBytes need several, and a transaction around them.
func OneStatement(items []Incoming) bool {
	size := 0
	for _, it := range items {
		size += headerBytes(it.Request.Header) + len(it.Request.Body)
		if size >= maxChunkBytes {
			return false
		}
	}
	return true
}

// chunkEnds splits reqs into chunks whose headers and bodies stay under maxChunkBytes (a request larger than
// that alone is a chunk of its own), and returns where each ends: none for no request.
func chunkEnds(reqs []*ent.Request) []int {
	if len(reqs) == 0 {
		return nil
	}
	var ends []int
	size := 0
	for n, r := range reqs {
		b := headerBytes(r.Headers) + len(r.Body)
		if n > 0 && size+b >= maxChunkBytes {
			ends = append(ends, n)
			size = 0
		}
		size += b
	}
	return append(ends, len(reqs))
}

// headerBytes is about what h takes as JSON in a statement's blob.
func headerBytes(h map[string][]string) int {
	n := 2
	for k, vs := range h {
		n += len(k) + 4
		for _, v := range vs {
			n += len(v) + 3
		}
	}
	return n
}

// statement builds the parameters of one chunk: the requests' and the deliveries' rows as JSON, written by
// hand (encoding/json would reflect over every field of every row), and the bytes the requests slice.
type statement struct {
	requests, deliveries []byte // JSON arrays, without their closing bracket
	blob                 []byte
	keys                 []string // for each delivery of the chunk, its request's key
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
	}
}

// slice appends b to the blob and returns its 1-based offset there, as substring counts.
func (st *statement) slice(b []byte) int {
	at := len(st.blob) + 1
	st.blob = append(st.blob, b...)
	return at
}

// request adds r, the n-th request of the chunk.
func (st *statement) request(n int, r *ent.Request) error {
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
	w.str("status", string(r.Status))
	w.intp("replay_of_id", r.ReplayOfID)
	w.ints("filtered_out", r.FilteredOut)
	if r.Verified != nil { // absent is null: most servers verify nothing
		w.bool("verified", *r.Verified)
	}
	if r.TraceParent != "" { // absent is '' (coalesce): tracing is off unless configured
		w.str("trace_parent", r.TraceParent)
	}
	if r.EventType != "" { // absent is '' (coalesce), as for most servers
		w.str("event_type", r.EventType)
	}
	if r.SchemaError != "" {
		w.str("schema_error", r.SchemaError)
	}
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

// run executes the chunk's statement, sets the IDs of the requests and deliveries it stored and the requests'
// expiry, and adds the servers it found live to live. Rows are matched by the request's key and the delivery's
// (request, recipient) — both unique within a batch — not by the order of RETURNING, which SQL does not
// promise. It checks that the statement wrote what it reports: every delivery of each request stored, one
// ledger entry per request, one debit per tenant.
func (st *statement) run(ctx context.Context, client *ent.Client, reqs []*ent.Request, ds []*ent.Delivery, versions []byte, reason ledgerentry.Reason, now time.Time, live, changed map[int]bool) error {
	// The rows go as bytes, not strings: with binary parameters (storage.Open) the driver sends them as they
	// are, and a json value's binary form is its text; a string would be copied twice on the way.
	rows, err := client.QueryContext(ctx, insertSQL, append(st.requests, ']'), st.blob,
		append(st.deliveries, ']'), string(reason), now, versions)
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
		var kind string
		var row stored
		var key sql.NullString
		if err := rows.Scan(&kind, &row.id, &key, &row.requestID, &row.recipientID); err != nil {
			return fmt.Errorf("insert requests: %w", err)
		}
		switch kind {
		case "request":
			r := reqByKey[key.String]
			if r == nil {
				return fmt.Errorf("insert requests: a key the batch did not hold came back")
			}
			days := row.requestID
			r.ID, r.ExpiresAt = row.id, retention.ExpiresAt(r.ReceivedAt, days) // as the statement computes it
			requests++
		case "delivery":
			delivered = append(delivered, row)
		case "server":
			live[row.id] = true
		case "changed":
			changed[row.id] = true
		case "counts":
			entries, debited = row.id, row.requestID
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("insert requests: %w", err)
	}
	type pair struct{ requestID, recipientID int }
	byPair := make(map[pair]*ent.Delivery, len(ds))
	for j, d := range ds {
		if id := reqByKey[st.keys[j]].ID; id != 0 {
			byPair[pair{id, d.RecipientID}] = d
		}
	}
	tenants := map[int]bool{}
	expires := make(map[int]time.Time, len(reqs))
	for _, r := range reqs {
		if r.ID != 0 {
			tenants[r.TenantID] = true
			expires[r.ID] = r.ExpiresAt
		}
	}
	if len(delivered) != len(byPair) {
		return fmt.Errorf("insert requests: stored %d deliveries of the %d of its %d requests", len(delivered), len(byPair), requests)
	}
	if entries != requests || debited != len(tenants) {
		return fmt.Errorf("insert requests: wrote %d ledger entries for %d requests and debited %d tenants of %d", entries, requests, debited, len(tenants))
	}
	for _, row := range delivered {
		d := byPair[pair{row.requestID, row.recipientID}]
		if d == nil {
			return fmt.Errorf("insert requests: delivery %d matches no row of the batch", row.id)
		}
		d.ID = row.id
		d.ExpiresAt = expires[row.requestID]
	}
	return rows.Close()
}
