package delivery

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/adal-relay/adal/ent"
)

// maxParamsPerStatement keeps one statement under PostgreSQL's 65,535 bind parameters.
const maxParamsPerStatement = 60_000

// insertPostgres stores the requests and their deliveries in one statement per chunk (one for any intake
// batch): the requests' insert is a data-modifying CTE whose RETURNING feeds the deliveries' insert, so a
// batch costs one round trip where ent's bulk inserts cost two, and none of ent's per-row builders. It sets
// the IDs of reqs and ds, and each delivery's request (ds[k] belongs to reqs[owners[k]]).
//
// The statement writes the rows exactly as StoreBatch built them, under the system's context, where the
// tenant policy ent would apply allows every row: each row's tenant is its server's.
func insertPostgres(ctx context.Context, client *ent.Client, reqs []*ent.Request, ds []*ent.Delivery, owners []int) error {
	k := 0 // next delivery
	for start := 0; start < len(reqs); {
		st := newStatement(len(reqs)-start, len(ds)-k)
		end, firstDelivery := start, k
		for end < len(reqs) && (end == start || st.params() < maxParamsPerStatement) {
			if err := st.request(reqs[end]); err != nil {
				return err
			}
			for k < len(ds) && owners[k] == end {
				st.delivery(k-firstDelivery, reqs[end].Key, ds[k])
				k++
			}
			end++
		}
		if err := st.run(ctx, client, reqs[start:end], ds[firstDelivery:k]); err != nil {
			return err
		}
		for j := firstDelivery; j < k; j++ {
			ds[j].RequestID = reqs[owners[j]].ID
		}
		start = end
	}
	return nil
}

// statement builds the insert of one chunk. Values are parameters, and a value shared by many rows — the
// batch's time, a request's key — is sent once and referred to again. Parameters are sent untyped: PostgreSQL
// types those of the requests' VALUES by their columns, and those of the deliveries' VALUES by the casts of
// the list's first row, so planning the statement does not walk a cast per value.
type statement struct {
	requests, deliveries strings.Builder
	rows                 int // requests written
	args                 []any
	shared               map[any]int
	keys                 []string // for each delivery of the chunk, its request's key
}

// requestColumns and deliveryColumns are the values a row of each takes, at most (shared ones are fewer).
const requestColumns, deliveryColumns = 13, 17

// newStatement starts the statement of a chunk of at most the given requests and deliveries, its buffers
// sized for them: grown as it goes, they were copied over and over.
func newStatement(requests, deliveries int) *statement {
	requests = min(requests, maxParamsPerStatement/requestColumns+1)
	deliveries = min(deliveries, maxParamsPerStatement/deliveryColumns+1)
	st := &statement{shared: map[any]int{},
		args: make([]any, 0, min(requestColumns*requests+deliveryColumns*deliveries, maxParamsPerStatement+deliveryColumns)),
		keys: make([]string, 0, deliveries)}
	st.requests.Grow(256 + 64*requests)
	st.deliveries.Grow(96 * deliveries)
	st.requests.WriteString(`WITH r AS (INSERT INTO requests (tenant_id, server_id, key, method, path, query,
	headers, body, source_addr, received_at, expires_at, status, replay_of_id) VALUES `)
	return st
}

func (st *statement) params() int { return len(st.args) }

// arg is the placeholder of v; typed, it is cast to the column type v's Go type maps to.
func (st *statement) arg(v any, typed bool) string {
	var cast string
	shared := false // a string or a time is often the same for many rows
	switch x := v.(type) {
	case int:
		cast = "bigint"
	case bool:
		cast = "boolean"
	case []byte:
		cast = "bytea"
	case string:
		cast, shared = "varchar", true
	case time.Time:
		cast, shared = "timestamptz", true
	case *time.Time:
		if x == nil {
			return typedNull(typed, "timestamptz")
		}
		return st.arg(*x, typed)
	case *int:
		if x == nil {
			return typedNull(typed, "bigint")
		}
		return st.arg(*x, typed)
	default:
		panic(fmt.Sprintf("delivery: no column type for %T", v))
	}
	var n int
	ok := false
	if shared { // only comparable values go in the map: a []byte key would panic
		n, ok = st.shared[v]
	}
	if !ok {
		st.args = append(st.args, v)
		n = len(st.args)
		if shared {
			st.shared[v] = n
		}
	}
	p := "$" + strconv.Itoa(n)
	if typed {
		p += "::" + cast
	}
	return p
}

func typedNull(typed bool, cast string) string {
	if typed {
		return "NULL::" + cast
	}
	return "NULL"
}

func (st *statement) request(r *ent.Request) error {
	headers, err := json.Marshal(r.Headers)
	if err != nil {
		return fmt.Errorf("request headers: %w", err)
	}
	if st.rows > 0 {
		st.requests.WriteString(", ")
	}
	st.rows++
	a := func(v any) string { return st.arg(v, false) }
	row(&st.requests, a(r.TenantID), a(r.ServerID), a(r.Key), a(r.Method), a(r.Path), a(r.Query), a(headers),
		a(r.Body), a(r.SourceAddr), a(r.ReceivedAt), a(r.ExpiresAt), a(string(r.Status)), a(r.ReplayOfID))
	return nil
}

// delivery adds d, the ord-th delivery of the chunk, going to the request with the given key.
func (st *statement) delivery(ord int, key string, d *ent.Delivery) {
	if ord > 0 {
		st.deliveries.WriteString(", ")
	}
	st.keys = append(st.keys, key)
	a := func(v any) string { return st.arg(v, ord == 0) }
	row(&st.deliveries, strconv.Itoa(ord), a(key), a(d.TenantID), a(d.CreatedAt), a(d.RecipientID),
		a(string(d.Status)), a(string(d.Trigger)), a(d.AttemptCount), a(d.MaxAttempts), a(string(d.RetrySchedule)),
		a(d.NextAttemptAt), a(d.FirstAttemptAt), a(d.LeaseExpiresAt), a(d.LeaseOwner), a(d.AttemptStartedAt),
		a(d.Backlog), a(string(d.Lane)), a(d.Superseded))
}

// run executes the chunk's statement and sets the IDs of its requests and deliveries, matched by the
// request's key and the delivery's (request, recipient) — both unique within a batch — not by the order of
// RETURNING, which SQL does not promise.
func (st *statement) run(ctx context.Context, client *ent.Client, reqs []*ent.Request, ds []*ent.Delivery) error {
	q := st.requests.String() + " RETURNING id, key)"
	if len(ds) > 0 {
		q += `, d AS (INSERT INTO deliveries (tenant_id, created_at, request_id, recipient_id, status, trigger,
	attempt_count, max_attempts, retry_schedule, next_attempt_at, first_attempt_at, lease_expires_at, lease_owner,
	attempt_started_at, backlog, lane, superseded)
SELECT v.tenant_id, v.created_at, r.id, v.recipient_id, v.status, v.trigger, v.attempt_count, v.max_attempts,
	v.retry_schedule, v.next_attempt_at, v.first_attempt_at, v.lease_expires_at, v.lease_owner,
	v.attempt_started_at, v.backlog, v.lane, v.superseded
FROM (VALUES ` + st.deliveries.String() + `) AS v(ord, key, tenant_id, created_at, recipient_id, status, trigger,
	attempt_count, max_attempts, retry_schedule, next_attempt_at, first_attempt_at, lease_expires_at, lease_owner,
	attempt_started_at, backlog, lane, superseded)
JOIN r ON r.key = v.key ORDER BY v.ord
RETURNING id, request_id, recipient_id)
SELECT id, key, 0, 0 FROM r UNION ALL SELECT id, NULL, request_id, recipient_id FROM d`
	} else {
		q += " SELECT id, key, 0, 0 FROM r"
	}
	rows, err := client.QueryContext(ctx, q, st.args...)
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
	requests := 0
	for rows.Next() {
		var row stored
		var key sql.NullString
		if err := rows.Scan(&row.id, &key, &row.requestID, &row.recipientID); err != nil {
			return fmt.Errorf("insert requests: %w", err)
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

// row writes one parenthesised VALUES row of the given expressions.
func row(b *strings.Builder, exprs ...string) {
	b.WriteByte('(')
	for i, e := range exprs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e)
	}
	b.WriteByte(')')
}
