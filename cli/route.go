package cli

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Reports go over HTTP rather than the websocket: gqlgen's websocket transport runs a mutation's response
// handler twice (answer, then end of stream), which entgql.Transactioner does not expect.
const reportMutation = `mutation($input: ReportCliAttemptInput!) { reportCliAttempt(input: $input) }`

// route is one recipient of a listen: where its deliveries go, its journal, and its jobs. The subscription
// state (op … greeting) belongs to the session goroutine; running and reporting are guarded by the
// listener's mutex.
type route struct {
	l *listener
	target
	label   string // names the recipient on each line
	journal *journal
	check   *localCheck // the local service's check; nil when checks are off

	op           string // the subscription on the current connection; "" when none
	attached     bool   // CONNECTED received on the current connection
	everAttached bool
	gone         bool // refused for good after having been attached: no longer listened for
	added        bool // found by a refresh of --server while listening, not named at the start
	backoff      time.Duration
	retryAt      time.Time // when to subscribe again, after the server ended the subscription
	greeting     string

	running   map[jobKey]bool // local calls in flight
	reporting map[jobKey]bool // reports in flight
}

// deliveryEvent is one attempt run against the local service (or reported from the journal).
type deliveryEvent struct {
	eventHead
	RecipientID string `json:"recipientId"`
	Recipient   string `json:"recipient"`
	DeliveryID  string `json:"deliveryId"`
	RequestID   string `json:"requestId,omitempty"`
	Attempt     int    `json:"attempt"`
	Method      string `json:"method"`
	Path        string `json:"path"`
	// Status is the local service's HTTP status; null when it gave none.
	Status     *int   `json:"status"`
	OK         bool   `json:"ok"`
	DurationMs int64  `json:"durationMs"`
	ErrorKind  string `json:"errorKind,omitempty"`
	Error      string `json:"error,omitempty"`
	// FromJournal marks an attempt interrupted by an earlier CLI's death, reported now without running it.
	FromJournal bool `json:"fromJournal,omitempty"`
}

// delivered tells the outcome of e's attempt.
func (r *route) delivered(e *entry, fromJournal bool) {
	o := e.Result
	ev := deliveryEvent{
		eventHead: head("delivery", o.StartedAt), RecipientID: r.RecipientID, Recipient: r.Name, DeliveryID: e.DeliveryID,
		RequestID: e.RequestID, Attempt: e.Attempt, Method: e.Method, Path: e.Path, OK: o.ErrorKind == "",
		DurationMs: o.FinishedAt.Sub(o.StartedAt).Milliseconds(), ErrorKind: o.ErrorKind, FromJournal: fromJournal,
	}
	if o.HTTPStatus != 0 {
		ev.Status = &o.HTTPStatus
	}
	if !ev.OK {
		ev.Error = o.ErrorMessage
	}
	out := r.l.out
	t := green
	if !ev.OK {
		t = red
	}
	text := fmt.Sprintf("%s %s %s → %s  %s  attempt %d", out.paint(cyan, "["+r.label+"]"), e.Method, e.Path,
		out.paint(t, describe(*o)), formatDuration(o.FinishedAt.Sub(o.StartedAt)), e.Attempt)
	if fromJournal {
		ev.eventHead = head("delivery", e.ReceivedAt)
		text += "  (from the journal)"
	}
	out.emit(ev.eventHead.at(), ev, text)
}

func (h eventHead) at() time.Time {
	if h.Time == nil {
		return time.Time{}
	}
	return *h.Time
}

// warnf tells of a problem with this recipient's jobs that the listen survives.
func (r *route) warnf(format string, args ...any) {
	now := r.l.now()
	msg := fmt.Sprintf(format, args...)
	r.l.out.emit(now, errorEvent{eventHead: head("error", now), Message: msg, RecipientID: r.RecipientID},
		r.l.out.paint(yellow, fmt.Sprintf("[%s] %s", r.label, msg)))
}

// reportJournal reports every journaled result; a job with no result whose local call is not running in
// this process was interrupted by the CLI's death, and is reported as such, not run again.
func (r *route) reportJournal(ctx context.Context) error {
	l := r.l
	entries, err := r.journal.list()
	if err != nil {
		return err
	}
	for _, listed := range entries {
		// Re-read under the lock: a local call that finished since the listing wrote its result before it
		// stopped counting as running.
		l.mu.Lock()
		busy := r.running[listed.key()]
		var e *entry
		if !busy {
			e, err = r.journal.get(listed.key())
		}
		l.mu.Unlock()
		if err != nil {
			return err
		}
		if busy || e == nil {
			continue // its goroutine reports it, or it is already reported
		}
		if e.Result == nil {
			now := l.now()
			e.Result = &outcome{StartedAt: now, FinishedAt: now, ErrorKind: "CLI_LOCAL", ErrorMessage: interruptedMessage}
			if err := r.journal.put(e); err != nil {
				return err
			}
			r.delivered(e, true)
		}
		if err := r.report(ctx, e, true); err != nil {
			return err
		}
	}
	return nil
}

// report sends e's result and forgets e once the server has it (or can never take it).
func (r *route) report(ctx context.Context, e *entry, fromJournal bool) error {
	l := r.l
	k := e.key()
	l.mu.Lock()
	if r.reporting[k] {
		l.mu.Unlock()
		return nil
	}
	r.reporting[k] = true
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(r.reporting, k)
		l.mu.Unlock()
	}()
	in := map[string]any{
		"deliveryId": e.DeliveryID, "attempt": e.Attempt, "leaseToken": e.LeaseToken,
		"startedAt": e.Result.StartedAt.UTC().Format(time.RFC3339Nano), "finishedAt": e.Result.FinishedAt.UTC().Format(time.RFC3339Nano),
	}
	if e.Result.HTTPStatus != 0 {
		in["httpStatus"] = e.Result.HTTPStatus
	}
	if e.Result.ErrorKind != "" {
		in["errorKind"] = e.Result.ErrorKind
		in["errorMessage"] = e.Result.ErrorMessage
	}
	if e.Result.RetryAfterSeconds > 0 {
		in["retryAfterSeconds"] = e.Result.RetryAfterSeconds
	}
	var res struct{ ReportCliAttempt bool }
	err := l.api.do(context.WithoutCancel(ctx), reportMutation, map[string]any{"input": in}, &res)
	var gql gqlErrors
	switch {
	case errors.As(err, &gql) && gql.rejects():
		r.warnf("the server refused the result of %s: %v; dropped from the journal", k, err)
	case err != nil:
		return err // kept in the journal for the next try
	case !res.ReportCliAttempt:
		r.warnf("%s was already settled by the server (its lease ran out); result dropped", k)
	case fromJournal:
		l.out.logf(plain, "[%s] reported %s from the journal", r.label, k)
	}
	return r.journal.remove(k)
}

// accept runs a job, unless the journal shows it ran already: then its journaled result is reported.
func (r *route) accept(j *job) {
	l := r.l
	k := j.key()
	l.mu.Lock()
	if r.running[k] {
		l.mu.Unlock()
		return
	}
	e, err := r.journal.get(k)
	if err != nil {
		l.mu.Unlock()
		r.warnf("journal: %v", err)
		return
	}
	if e != nil {
		l.mu.Unlock()
		if e.Result == nil {
			now := l.now()
			e.Result = &outcome{StartedAt: now, FinishedAt: now, ErrorKind: "CLI_LOCAL", ErrorMessage: interruptedMessage}
		}
		e.LeaseToken = j.LeaseToken
		if err := r.journal.put(e); err != nil {
			r.warnf("journal: %v", err)
			return
		}
		l.out.logf(plain, "[%s] %s is in the journal already: reporting its result instead of running it again", r.label, k)
		r.reportLater(e)
		return
	}
	r.running[k] = true
	l.mu.Unlock()
	e = &entry{
		Server: l.api.base, RecipientID: r.RecipientID, DeliveryID: j.DeliveryID, Attempt: j.Attempt, RequestID: j.RequestID,
		LeaseToken: j.LeaseToken, Method: j.Method, Path: displayPath(j.Path, j.Query), ReceivedAt: l.now(),
	}
	l.jobs.Add(1)
	go func() {
		defer l.jobs.Done()
		var o outcome
		body, err := base64.StdEncoding.DecodeString(j.BodyBase64)
		switch {
		case err != nil:
			now := l.now()
			o = outcome{StartedAt: now, FinishedAt: now, ErrorKind: "CLI_LOCAL", ErrorMessage: "undecodable body from the server"}
		default:
			if err := r.journal.put(e); err != nil {
				// Without the journal entry a crash could run the job twice: do not run it.
				now := l.now()
				o = outcome{StartedAt: now, FinishedAt: now, ErrorKind: "CLI_LOCAL", ErrorMessage: "the CLI could not write its journal: " + err.Error()}
				break
			}
			o = forward(context.Background(), l.local, r.Forward, j, body, l.now)
			r.check.observe(o)
		}
		e.Result = &o
		if err := r.journal.put(e); err != nil {
			r.warnf("journal: %v", err)
		}
		l.mu.Lock()
		delete(r.running, k)
		l.mu.Unlock()
		r.delivered(e, false)
		if err := r.report(context.Background(), e, false); err != nil {
			l.out.logf(yellow, "[%s] could not report %s yet (%v); it stays in the journal", r.label, k, err)
		}
	}()
}

// reportLater reports e in the background on the current connection, if any.
func (r *route) reportLater(e *entry) {
	r.l.jobs.Add(1)
	go func() {
		defer r.l.jobs.Done()
		if err := r.report(context.Background(), e, true); err != nil {
			r.l.out.logf(yellow, "[%s] could not report %s yet (%v); it stays in the journal", r.label, e.key(), err)
		}
	}()
}

func displayPath(path, query string) string {
	if path == "" {
		path = "/"
	}
	if query != "" {
		path += "?" + query
	}
	return path
}

// describe is the "→ …" part of a delivery line.
func describe(o outcome) string {
	switch o.ErrorKind {
	case "", "HTTP_STATUS":
		return statusText(o.HTTPStatus)
	}
	return o.ErrorMessage
}

func formatDuration(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

// unreachable tells an outcome where the local service did not take the connection.
func unreachable(o outcome) bool {
	return o.ErrorKind == "CLI_LOCAL" && strings.HasPrefix(o.ErrorMessage, localUnreachable)
}
