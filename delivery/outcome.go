package delivery

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lib/pq"

	"github.com/adal-relay/adal/alert"
	"github.com/adal-relay/adal/ent"
	"github.com/adal-relay/adal/ent/attempt"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/storage"
)

// Claim is a delivery taken for one attempt: it is IN_PROGRESS, its attempt_count already counts this
// attempt, and its lease belongs to Owner until the lease expires.
type Claim struct {
	DeliveryID     int
	TenantID       int
	RequestID      int
	ServerID       int
	RecipientID    int
	Attempt        int // the number of this attempt, from 1
	MaxAttempts    int
	Schedule       Schedule
	FirstAttemptAt time.Time
	StartedAt      time.Time
	Owner          string
	// Capped says the delivery was claimed from the CAPPED lane, so its recipient's in_flight counts it: the
	// record of its attempt gives the slot back.
	Capped bool
	// ExpiresAt is the request's expiry, which the attempt row carries (the history's partition key on
	// PostgreSQL). Every claim reads it; Record reads it from the delivery when a caller left it zero.
	ExpiresAt time.Time
}

// Record stores the outcome of a claimed attempt in one transaction: the Attempt row, the delivery's new
// state (SUCCEEDED, FAILED when attempts are used up, else PENDING with its next due time) and, when the
// delivery became final, its request's status. It reports false, changing nothing, when the claim is no
// longer the delivery's current one (the rescuer already recorded it as interrupted).
func (s *Service) Record(ctx context.Context, client *ent.Client, c Claim, o Outcome) (bool, error) {
	var recorded bool
	err := storage.InTx(ctx, client, func(ctx context.Context, tx *ent.Client) error {
		var err error
		recorded, err = s.record(ctx, tx, c, o)
		return err
	})
	return recorded, err
}

func (s *Service) record(ctx context.Context, tx *ent.Client, c Claim, o Outcome) (bool, error) {
	upd := EndLease(tx.Delivery.Update().
		Where(entdelivery.ID(c.DeliveryID), entdelivery.StatusEQ(entdelivery.StatusIN_PROGRESS),
			entdelivery.AttemptCount(c.Attempt), entdelivery.LeaseOwner(c.Owner)))
	status, due := s.next(c, o)
	upd.SetStatus(status)
	if due != nil {
		upd.SetNextAttemptAt(*due)
	} else {
		upd.ClearNextAttemptAt().SetFinishedAt(o.FinishedAt)
	}
	n, err := upd.Save(ctx)
	if err != nil {
		return false, fmt.Errorf("update delivery %d: %w", c.DeliveryID, err)
	}
	if n == 0 {
		return false, nil
	}
	// The recipient's row first, then the attempt, whose insert counts it in the recipient's hourly
	// aggregate (a trigger, package stats): the order recordBatchSQL takes them in, so that the two paths
	// never wait on each other in opposite orders.
	if err := s.updateHealth(ctx, tx, c.RecipientID, o); err != nil {
		return false, err
	}
	if c.Capped {
		if err := tx.Recipient.Update().Where(recipient.ID(c.RecipientID), recipient.InFlightGT(0)).AddInFlight(-1).Exec(ctx); err != nil {
			return false, fmt.Errorf("free a slot of recipient %d: %w", c.RecipientID, err)
		}
	}
	expires := c.ExpiresAt
	if expires.IsZero() {
		d, err := tx.Delivery.Query().Where(entdelivery.ID(c.DeliveryID)).Select(entdelivery.FieldExpiresAt).Only(ctx)
		if err != nil {
			return false, fmt.Errorf("read delivery %d: %w", c.DeliveryID, err)
		}
		expires = d.ExpiresAt
	}
	create := FillAttempt(tx.Attempt.Create().SetTenantID(c.TenantID).SetDeliveryID(c.DeliveryID).SetExpiresAt(expires).SetAnswer(o.Answer).
		SetNillableTransformVersion(o.TransformVersion),
		c.Attempt, o)
	if o.Succeeded() {
		create.SetStatus(attempt.StatusSUCCEEDED)
	} else {
		create.SetStatus(attempt.StatusFAILED).SetErrorKind(attempt.ErrorKind(o.ErrorKind))
	}
	if err := create.Exec(ctx); err != nil {
		return false, fmt.Errorf("insert attempt %d of delivery %d: %w", c.Attempt, c.DeliveryID, err)
	}
	if status == entdelivery.StatusFAILED {
		if err := s.recordAlerts(ctx, tx, failedEvent(c, o)); err != nil {
			return false, err
		}
	}
	if due == nil {
		if err := RefreshRequestStatus(ctx, tx, c.RequestID); err != nil {
			return false, err
		}
	}
	s.notify(ctx, Change{TenantID: c.TenantID, ServerID: c.ServerID, RequestID: c.RequestID,
		DeliveryID: c.DeliveryID, Status: status, Kind: KindAttempt, Due: due})
	return true, nil
}

// next is what follows an attempt of the delivery c claimed (NextAttempt).
func (s *Service) next(c Claim, o Outcome) (entdelivery.Status, *time.Time) {
	if o.Cancelled {
		return entdelivery.StatusCANCELED, nil
	}
	succeeded, due := NextAttempt(c.Attempt, c.MaxAttempts, c.Schedule, c.FirstAttemptAt, o, s.cfg.Unit)
	switch {
	case succeeded:
		return entdelivery.StatusSUCCEEDED, nil
	case due == nil:
		return entdelivery.StatusFAILED, nil
	}
	return entdelivery.StatusPENDING, due
}

// NextAttempt is the record rule of every job tried up to maxAttempts times on a schedule (deliveries and
// outbound jobs alike): success ends it; a failure with attempts left makes the next one due per the schedule,
// counted from the end of this attempt (EXPONENTIAL: from the first); a failure of the last attempt fails it.
//
// A recipient that asked to be called back later (o.RetryAfter) is heeded within bounds: the next attempt is
// never earlier than the schedule says, and never later than twice the wait the schedule gives after this
// attempt, so a recipient cannot park a delivery for days, nor make it retry sooner.
func NextAttempt(attempt, maxAttempts int, schedule Schedule, first time.Time, o Outcome, unit time.Duration) (succeeded bool, due *time.Time) {
	if o.Succeeded() {
		return true, nil
	}
	if attempt >= maxAttempts {
		return false, nil
	}
	at := schedule.NextDue(attempt+1, first, o.FinishedAt, unit)
	if o.RetryAfter.After(at) {
		latest := at.Add(at.Sub(o.FinishedAt)) // the end of this attempt plus twice the scheduled wait
		at = o.RetryAfter
		if at.After(latest) {
			at = latest
		}
	}
	return false, &at
}

// Completion is a finished attempt waiting to be recorded.
type Completion struct {
	Claim   Claim
	Outcome Outcome
}

// RecordBatch records many attempt outcomes in one transaction, each exactly as Record would: its Attempt row,
// the delivery's new state, the recipient's health and, for deliveries that became final, their request's
// status. recorded[i] is false, and nothing of cs[i] is written, when cs[i] is no longer its delivery's current
// claim. An error means nothing of the batch was recorded.
//
// On PostgreSQL the batch costs two statements whatever its size (the completer pattern of River): one updates
// the deliveries, inserts the attempts and locks the recipients' health and the requests that the batch settles
// (recordBatchSQL), one writes the health back and derives the requests' status (settleBatchSQL). With BEGIN and
// COMMIT that is four round trips. Rows are locked in one order — deliveries, recipients by id, requests by id —
// as Record locks them, so batches, single records and intake never deadlock. On SQLite, whose single writer
// makes round trips cheap, the batch is Record's statements in one transaction.
func (s *Service) RecordBatch(ctx context.Context, db *storage.DB, cs []Completion) (recorded []bool, err error) {
	if len(cs) == 0 {
		return nil, nil
	}
	recorded = make([]bool, len(cs))
	err = storage.InTx(ctx, db.Client, func(ctx context.Context, tx *ent.Client) error {
		clear(recorded)
		return s.recordBatch(s, ctx, tx, cs, recorded)
	})
	if err != nil {
		return nil, err
	}
	return recorded, nil
}

// recordEach is RecordBatch as Record's statements, one outcome after another in the order the attempts ended.
func (s *Service) recordEach(ctx context.Context, tx *ent.Client, cs []Completion, recorded []bool) error {
	for _, i := range byFinish(cs) {
		ok, err := s.record(ctx, tx, cs[i].Claim, cs[i].Outcome)
		if err != nil {
			return err
		}
		recorded[i] = ok
	}
	return nil
}

// byFinish returns the indexes of cs in the order the attempts ended: the order in which recording them one by
// one would apply them to their recipients' health.
func byFinish(cs []Completion) []int {
	order := make([]int, len(cs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cs[a].Outcome.FinishedAt.Compare(cs[b].Outcome.FinishedAt) })
	return order
}

// hasDuplicateDelivery reports whether a delivery appears twice in cs: one set-based statement cannot apply two
// outcomes to one row, so such a batch (which the scheduler never forms) is recorded one outcome at a time.
func hasDuplicateDelivery(cs []Completion) bool {
	seen := make(map[int]bool, len(cs))
	for _, c := range cs {
		if seen[c.Claim.DeliveryID] {
			return true
		}
		seen[c.Claim.DeliveryID] = true
	}
	return false
}

// recordBatchSQL moves each delivery that is still under the given claim to its next state and, for exactly
// those, inserts the Attempt row; then it locks, until commit and in id order, what the rest of the batch writes:
// the health of the direct recipients whose outcome counts for it (and the slots of capped recipients that the
// batch frees), and the requests whose delivery became final.
// Each lock waits for the step before it to finish (its ids are read whole into an array, in a subquery that
// first counts that step's rows), so rows are locked in RecordBatch's order in one round trip. The ids come from
// the deliveries' RETURNING, not from a join of the batch with the attempts inserted, which the planner runs as
// a nested loop over rows it cannot count. Each row's first
// column is its kind: rowRecorded (a delivery recorded: its id), rowHealth (a recipient's health as it stands
// under the lock) or rowLocked (the number of requests locked, in the id column).
//
// The requests are only locked here; their status is derived by the next statement, whose snapshot is taken
// once the locks are held, so it sees every delivery change committed by another transaction that held one
// (see RefreshRequestStatus). NO KEY UPDATE on recipients is the lock an UPDATE of their health columns takes:
// it does not block intake, which reads recipients without a lock (their deliveries' recipient_id is not a
// checked foreign key: storage.unenforcedForeignKeys).
var recordBatchSQL = storage.Prepared(`
WITH v AS (
	SELECT * FROM json_to_recordset($1::json) AS v(id bigint, attempt bigint, owner text, status text,
		next_at timestamptz, finished_at timestamptz, tenant_id bigint, started_at timestamptz, duration_ms bigint,
		attempt_status text, error_kind text, http_status bigint, error_message text, answer text,
		transform_version bigint, health boolean, capped boolean)
), upd AS (
	UPDATE deliveries AS d SET
		status = v.status,
		next_attempt_at = v.next_at,
		finished_at = CASE WHEN v.next_at IS NULL THEN v.finished_at ELSE d.finished_at END,
		lease_expires_at = NULL,
		attempt_started_at = NULL,
		lease_owner = ''
	FROM v
	WHERE d.id = v.id AND d.status = 'IN_PROGRESS' AND d.attempt_count = v.attempt AND d.lease_owner = v.owner
	RETURNING d.id, d.recipient_id, d.request_id, d.expires_at, v.health, v.capped, v.next_at IS NULL AS final
), ins AS (
	INSERT INTO attempts (tenant_id, delivery_id, number, started_at, finished_at, duration_ms, status, error_kind,
	                      http_status, error_message, answer, transform_version, expires_at)
	SELECT v.tenant_id, v.id, v.attempt, v.started_at, v.finished_at, v.duration_ms, v.attempt_status, v.error_kind,
	       v.http_status, v.error_message, v.answer, v.transform_version, upd.expires_at
	FROM v JOIN upd ON upd.id = v.id
	RETURNING delivery_id
), h AS MATERIALIZED (
	SELECT id, created_at, state, state_reason, state_changed_at, consecutive_failures, window_attempts,
	       window_failures, last_success_at, next_probe_at, in_flight
	FROM recipients
	WHERE id = ANY(ARRAY(SELECT recipient_id FROM upd WHERE (health OR capped) AND (SELECT count(*) FROM ins) > 0))
	  AND method <> 'CLI'
	ORDER BY id FOR NO KEY UPDATE
), q AS MATERIALIZED (
	SELECT id FROM requests
	WHERE id = ANY(ARRAY(SELECT request_id FROM upd WHERE final AND (SELECT count(*) FROM h) >= 0))
	ORDER BY id FOR NO KEY UPDATE
)
SELECT 0, delivery_id, NULL::timestamptz, '', '', NULL::timestamptz, 0::bigint, 0::bigint, 0::bigint,
       NULL::timestamptz, NULL::timestamptz, 0::bigint FROM ins
UNION ALL
SELECT 1, id, created_at, state, state_reason, state_changed_at, consecutive_failures, window_attempts,
       window_failures, last_success_at, next_probe_at, in_flight FROM h
UNION ALL
SELECT 2, count(*), NULL, '', '', NULL, 0, 0, 0, NULL, NULL, 0 FROM q`)

// The kinds of recordBatchSQL's rows, the literals its three SELECTs start with.
const (
	rowRecorded = 0
	rowHealth   = 1
	rowLocked   = 2
)

// settleBatchSQL writes the recipients' health and slots in flight back, records the alert events of the batch
// (recipients that changed state, deliveries that failed for good: $3, alert.Rows), and derives with
// requestStatusSQL, over the current (not superseded) deliveries, the status of the requests recordBatchSQL
// locked.
var settleBatchSQL = storage.Prepared(`
WITH alerts AS (
	` + alert.InsertRowsSQL("$3") + `
), health AS (
	UPDATE recipients AS r SET
		state = v.state, state_reason = v.state_reason, state_changed_at = v.state_changed_at,
		consecutive_failures = v.consecutive_failures, window_attempts = v.window_attempts,
		window_failures = v.window_failures, last_success_at = v.last_success_at, next_probe_at = v.next_probe_at,
		in_flight = v.in_flight
	FROM json_to_recordset($1::json) AS v(id bigint, state text, state_reason text, state_changed_at timestamptz,
		consecutive_failures bigint, window_attempts bigint, window_failures bigint, last_success_at timestamptz,
		next_probe_at timestamptz, in_flight bigint)
	WHERE r.id = v.id
)
UPDATE requests AS r SET status = x.status
FROM (
	SELECT request_id, ` + requestStatusSQL + ` AS status
	FROM deliveries WHERE request_id = ANY($2) AND NOT superseded
	GROUP BY request_id
) AS x
WHERE r.id = x.request_id AND r.status <> x.status`)

// recordBatchPostgres is RecordBatch in two statements: recordBatchSQL, then, once the recipients' health is
// worked out from the rows it locked, settleBatchSQL.
func (s *Service) recordBatchPostgres(ctx context.Context, tx *ent.Client, cs []Completion, recorded []bool) error {
	if hasDuplicateDelivery(cs) {
		return s.recordEach(ctx, tx, cs, recorded)
	}
	statuses := make([]entdelivery.Status, len(cs))
	dues := make([]*time.Time, len(cs))
	payload := append(make([]byte, 0, 64+512*len(cs)), '[') // a row is 400–500 bytes
	for i, c := range cs {
		o := c.Outcome
		status, due := s.next(c.Claim, o)
		statuses[i], dues[i] = status, due
		w := jsonRow{b: payload}
		w.open()
		w.int("id", c.Claim.DeliveryID)
		w.int("attempt", c.Claim.Attempt)
		w.str("owner", c.Claim.Owner)
		w.str("status", string(status))
		w.time("next_at", due)
		w.time("finished_at", &o.FinishedAt)
		w.int("tenant_id", c.Claim.TenantID)
		w.time("started_at", &o.StartedAt)
		w.int64("duration_ms", o.FinishedAt.Sub(o.StartedAt).Milliseconds())
		if o.Succeeded() {
			w.str("attempt_status", string(attempt.StatusSUCCEEDED))
			w.null("error_kind")
		} else {
			w.str("attempt_status", string(attempt.StatusFAILED))
			w.str("error_kind", string(o.ErrorKind))
		}
		if o.HTTPStatus != 0 {
			w.int("http_status", o.HTTPStatus)
		} else {
			w.null("http_status")
		}
		w.str("error_message", o.ErrorMessage)
		w.str("answer", o.Answer)
		w.intp("transform_version", o.TransformVersion)
		w.bool("health", countsForHealth(o))
		w.bool("capped", c.Claim.Capped)
		payload = w.close()
	}
	payload = append(payload, ']')
	done, recs, locked, err := readRecordBatch(ctx, tx, payload)
	if err != nil {
		return fmt.Errorf("record attempts: %w", err)
	}
	var health []int // indexes into cs whose outcome counts for its recipient's health
	var freed []int  // indexes into cs that give a capped recipient's slot back
	var finalRequests []int
	changes := make([]Change, 0, len(done))
	for i, c := range cs {
		if !done[c.Claim.DeliveryID] {
			continue
		}
		recorded[i] = true
		if countsForHealth(c.Outcome) {
			health = append(health, i)
		}
		if c.Claim.Capped {
			freed = append(freed, i)
		}
		if dues[i] == nil {
			finalRequests = append(finalRequests, c.Claim.RequestID)
		}
		changes = append(changes, Change{TenantID: c.Claim.TenantID, ServerID: c.Claim.ServerID,
			RequestID: c.Claim.RequestID, DeliveryID: c.Claim.DeliveryID, Status: statuses[i], Kind: KindAttempt,
			Due: dues[i]})
	}
	slices.Sort(finalRequests)
	finalRequests = slices.Compact(finalRequests)
	// A request is never gone while its delivery is held. Were it, the batch fails, and the scheduler records
	// its outcomes one at a time.
	if locked != len(finalRequests) {
		return fmt.Errorf("record attempts: %d requests locked for the %d that deliveries made final", locked, len(finalRequests))
	}
	healthPayload, events := s.batchHealth(cs, health, freed, recs)
	for i, c := range cs {
		if recorded[i] && statuses[i] == entdelivery.StatusFAILED {
			events = append(events, failedEvent(c.Claim, c.Outcome))
		}
	}
	alerts, err := alert.Rows(events)
	if err != nil {
		return err
	}
	if len(recs) > 0 || len(finalRequests) > 0 {
		if _, err := tx.ExecContext(ctx, settleBatchSQL, healthPayload, pq.Array(finalRequests), alerts); err != nil {
			return fmt.Errorf("write recipient health and request status: %w", err)
		}
	}
	if len(events) > 0 {
		s.alerted(ctx)
	}
	s.notify(ctx, changes...)
	return nil
}

// readRecordBatch runs recordBatchSQL and sorts its rows: the deliveries recorded, the locked recipients' health
// and the number of requests locked.
func readRecordBatch(ctx context.Context, tx *ent.Client, payload []byte) (done map[int]bool, recs map[int]*ent.Recipient, locked int, err error) {
	rows, err := tx.QueryContext(ctx, recordBatchSQL, payload)
	if err != nil {
		return nil, nil, 0, err
	}
	defer rows.Close()
	done, recs = map[int]bool{}, map[int]*ent.Recipient{}
	var (
		kind      int
		r         ent.Recipient // one row's columns: copied out only for a recipient's health
		createdAt *time.Time
		state     string
	)
	for rows.Next() {
		if err := rows.Scan(&kind, &r.ID, &createdAt, &state, &r.StateReason, &r.StateChangedAt,
			&r.ConsecutiveFailures, &r.WindowAttempts, &r.WindowFailures, &r.LastSuccessAt, &r.NextProbeAt,
			&r.InFlight); err != nil {
			return nil, nil, 0, err
		}
		switch kind {
		case rowRecorded:
			done[r.ID] = true
		case rowHealth:
			h := r
			h.CreatedAt, h.State = *createdAt, recipient.State(state)
			recs[h.ID] = &h
		case rowLocked:
			locked = r.ID
		}
	}
	return done, recs, locked, rows.Err()
}

// batchHealth applies the outcomes cs[idx] to their recipients' health as recordBatchSQL read it under the
// lock, in the order the attempts finished — the same steps updateHealth takes for each, as one Record after
// another would — gives back the slots of cs[freed], and returns the results, as settleBatchSQL's payload, with
// the alert events of the recipients' changes of state.
func (s *Service) batchHealth(cs []Completion, idx, freed []int, recs map[int]*ent.Recipient) ([]byte, []alert.Event) {
	for _, i := range freed {
		if r := recs[cs[i].Claim.RecipientID]; r != nil && r.InFlight > 0 {
			r.InFlight--
		}
	}
	order := slices.Clone(idx)
	slices.SortStableFunc(order, func(a, b int) int { return cs[a].Outcome.FinishedAt.Compare(cs[b].Outcome.FinishedAt) })
	var events []alert.Event
	for _, i := range order {
		if r := recs[cs[i].Claim.RecipientID]; r != nil { // CLI recipients have none: the rules are for direct delivery
			was := r.State
			s.applyHealth(r, cs[i].Outcome)
			if e, ok := healthEvent(r, was, cs[i].Claim.TenantID); ok {
				events = append(events, e)
			}
		}
	}
	ids := make([]int, 0, len(recs))
	for id := range recs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	payload := append(make([]byte, 0, 64+256*len(recs)), '[')
	for _, id := range ids {
		r := recs[id]
		w := jsonRow{b: payload}
		w.open()
		w.int("id", r.ID)
		w.str("state", string(r.State))
		w.str("state_reason", r.StateReason)
		w.time("state_changed_at", r.StateChangedAt)
		w.int64("consecutive_failures", r.ConsecutiveFailures)
		w.int64("window_attempts", r.WindowAttempts)
		w.int64("window_failures", r.WindowFailures)
		w.time("last_success_at", r.LastSuccessAt)
		w.time("next_probe_at", r.NextProbeAt)
		w.int("in_flight", r.InFlight)
		payload = w.close()
	}
	return append(payload, ']'), events
}

// LeaseUpdate is what the updates of claimed deliveries and outbound jobs end the claim's lease with alike.
type LeaseUpdate[U any] interface {
	ClearLeaseExpiresAt() U
	ClearAttemptStartedAt() U
	SetLeaseOwner(string) U
}

// EndLease makes u end the lease of the attempt it records: no expiry, no attempt under way, no owner.
func EndLease[U LeaseUpdate[U]](u U) U {
	return u.ClearLeaseExpiresAt().ClearAttemptStartedAt().SetLeaseOwner("")
}

// AttemptBuilder is what the attempt rows of deliveries and of outbound jobs are written with alike.
type AttemptBuilder[B any] interface {
	SetNumber(int) B
	SetStartedAt(time.Time) B
	SetFinishedAt(time.Time) B
	SetDurationMs(int64) B
	SetErrorMessage(string) B
	SetHTTPStatus(int) B
}

// FillAttempt sets what an attempt row records of its outcome o, as attempt number n: times, duration, error
// message and HTTP status (none when the attempt got no answer). Status and error kind, whose types differ by
// row, are the caller's.
func FillAttempt[B AttemptBuilder[B]](b B, n int, o Outcome) B {
	b.SetNumber(n).SetStartedAt(o.StartedAt).SetFinishedAt(o.FinishedAt).
		SetDurationMs(o.FinishedAt.Sub(o.StartedAt).Milliseconds()).SetErrorMessage(o.ErrorMessage)
	if o.HTTPStatus != 0 {
		b.SetHTTPStatus(o.HTTPStatus)
	}
	return b
}
