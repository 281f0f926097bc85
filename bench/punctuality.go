package bench

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/adal-relay/adal/relay"
)

// punctuality measures how late due retries start, with PunctualityRows future retries in the table. Most are
// due a day ahead (they only weigh on the indexes the scheduler reads); PunctualityRate per second come due
// during a PunctualityWindow window. The receiver fails the first arrival of one request in ten, so those get
// a retry scheduled by the process itself, on the compressed unit, and are measured too. Lateness is receiver
// arrival − due time; an arrival before its due time is early, and there must be none. The cost is per attempt
// received, from the process's start to the last arrival.
func (b *Runner) punctuality(ctx context.Context) error {
	unit := b.cfg.PunctualityUnit
	s, err := b.startStage("punctuality", Refusal{Attempt: 2, Every: 10}, func(c *relay.Config) { c.RetryUnit = unit },
		layout{tenants: 10, recipients: 10})
	if err != nil {
		return err
	}
	defer s.Close()
	tr, p, fx := s.tr, s.p, s.fx
	window := b.cfg.PunctualityWindow
	due := int64(b.cfg.PunctualityRate * window.Seconds())
	total := int64(b.cfg.PunctualityRows)
	if due > total {
		due = total
	}
	body := []byte(`{"type":"retry"}`)
	b.logf("punctuality: inserting %d future retries", total)
	insertStart := time.Now()
	firstAttempt := time.Now().Add(-time.Minute)
	if total > due {
		err = insertDue(ctx, p.DB, fx, bulkDue{KeyPrefix: "later-", From: 0, To: total - due - 1, Body: body,
			Due: time.Now().Add(24 * time.Hour), Step: time.Microsecond, AttemptCount: 1, FirstAttemptAt: firstAttempt})
		if err != nil {
			return err
		}
	}
	t0 := time.Now().Add(5 * time.Second)
	step := time.Duration(float64(time.Second) / b.cfg.PunctualityRate)
	err = insertDue(ctx, p.DB, fx, bulkDue{KeyPrefix: "soon-", From: 0, To: due - 1, Body: body,
		Due: t0, Step: step, AttemptCount: 1, FirstAttemptAt: firstAttempt})
	if err != nil {
		return err
	}
	b.logf("punctuality: inserted in %v", time.Since(insertStart).Round(time.Second))
	if time.Now().After(t0.Add(-time.Second)) {
		return fmt.Errorf("the window's first retries came due while inserting; lower -punctuality-rows")
	}
	// The due times as stored (microseconds), keyed by request.
	dueOf, err := timesByRequest(ctx, p.DB, `SELECT request_id, next_attempt_at FROM deliveries WHERE next_attempt_at < $1`,
		t0.Add(window+time.Hour))
	if err != nil {
		return err
	}
	if int64(len(dueOf)) != due {
		return fmt.Errorf("found %d rows due in the window, inserted %d", len(dueOf), due)
	}
	b.startMeasure()
	cost := b.startCosts(ctx, p.admin)
	if err := p.Start(); err != nil {
		return err
	}
	retried := int64(0)
	for id := range dueOf {
		if id%10 == 0 {
			retried++
		}
	}
	want := due + retried
	received, err := tr.awaitReceived(ctx, want, time.Until(t0.Add(window+2*time.Minute)))
	if err != nil {
		return err
	}
	// Every attempt received, the failed ones included; the scheduler's polls of the table while nothing is due
	// are part of their cost.
	spent := cost.stop(ctx, received, "attempt")
	rss := peakRSS()
	arrivals, err := tr.Arrivals(ctx)
	if err != nil {
		return err
	}
	// Process-scheduled retries: attempt 3 is due 3² units after attempt 2 ended, as recorded.
	retryDue, err := timesByRequest(ctx, p.DB, `SELECT d.request_id, a.finished_at FROM attempts a
		JOIN deliveries d ON d.id = a.delivery_id WHERE a.number = 2 AND a.status = 'FAILED'`)
	if err != nil {
		return err
	}
	for id, ended := range retryDue {
		retryDue[id] = ended.Add(9 * unit)
	}
	var late, lateRetry []time.Duration
	var early, unexpected int
	for _, a := range arrivals {
		var at time.Time
		var ok bool
		switch a.Attempt {
		case 2:
			at, ok = dueOf[a.RequestID]
		case 3:
			at, ok = retryDue[a.RequestID]
		}
		if !ok {
			unexpected++
			continue
		}
		d := a.At.Sub(at)
		if d < 0 {
			early++
		}
		if a.Attempt == 2 {
			late = append(late, d)
		} else {
			lateRetry = append(lateRetry, d)
		}
	}
	all := append(append([]time.Duration(nil), late...), lateRetry...)
	p50, p99 := Percentile(all, 0.5), Percentile(all, 0.99)
	row := Row{
		Scenario: "punctuality",
		Figure:   fmt.Sprintf("p99 late %s, %d early", ms(p99), early),
		Detail: fmt.Sprintf("p50 late %s; %d due retries from the table (p99 %s) + %d scheduled by the process on the compressed unit (p99 %s); max %s; received %d of %d",
			ms(p50), len(late), ms(Percentile(late, 0.99)), len(lateRetry), ms(Percentile(lateRetry, 0.99)),
			ms(Percentile(all, 1)), received, want),
		Target: fmt.Sprintf("never early: %s; p99 late ≤ 1 s: %s", met(early == 0), met(p99 <= time.Second)),
		Settings: fmt.Sprintf("%d PENDING retries in the table, %d of them due over %v (%.0f/s), the rest a day later; ADAL_RETRY_UNIT %v; 1 in 10 fails once more (retry due 9 units after)",
			total, due, window, b.cfg.PunctualityRate, unit),
		PeakRSS: rss,
		Cost:    spent,
	}
	if unexpected > 0 || int64(len(late)) != due || int64(len(lateRetry)) != int64(len(retryDue)) {
		row.Void = fmt.Sprintf("received %d first retries of %d, %d second of %d, %d unexpected", len(late), due,
			len(lateRetry), len(retryDue), unexpected)
	}
	b.add(row)
	return nil
}

// timesByRequest runs query, whose rows are a request id and a time, and returns the times by request.
func timesByRequest(ctx context.Context, db *sql.DB, query string, args ...any) (map[int64]time.Time, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int64]time.Time{}
	for rows.Next() {
		var id int64
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			return nil, err
		}
		out[id] = at
	}
	return out, rows.Err()
}
