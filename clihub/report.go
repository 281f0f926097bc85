package clihub

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/adal-relay/adal/delivery"
	"github.com/adal-relay/adal/ent"
	entdelivery "github.com/adal-relay/adal/ent/delivery"
	"github.com/adal-relay/adal/ent/recipient"
	"github.com/adal-relay/adal/ent/request"
	"github.com/adal-relay/adal/fault"
	"github.com/adal-relay/adal/scheduler"
	"github.com/adal-relay/adal/storage"
	"github.com/adal-relay/adal/tracing"
	"github.com/adal-relay/adal/viewer"
	"github.com/adal-relay/adal/webhook"
)

// maxErrorMessage caps the message a CLI may store on an attempt.
const maxErrorMessage = 1000

// Report is a CLI's account of one job.
type Report struct {
	DeliveryID int
	Attempt    int
	LeaseToken string
	// StartedAt and FinishedAt are by the CLI's clock; only their difference is used (see Hub.Report).
	StartedAt, FinishedAt time.Time
	// HTTPStatus is the local service's status, 0 when it gave none.
	HTTPStatus int
	// ErrorKind is empty for a 2xx answer read completely.
	ErrorKind    delivery.ErrorKind
	ErrorMessage string
	// RetryAfterSeconds is how long the local service asked to wait (webhook.RetryAfterSeconds), counted from
	// FinishedAt; 0: it asked nothing. Only a 429 or a 503 may ask.
	RetryAfterSeconds int
}

// Report records the outcome of a job. client carries the caller's viewer: a delivery of another tenant is
// NOT_FOUND. It answers false, changing nothing, when the lease no longer holds (already reported, or the
// rescuer recorded the attempt as INTERRUPTED after the lease lapsed) — the CLI then forgets the job.
//
// The attempt is placed on the server's clock: it starts when the job was claimed and handed out, and lasts
// as long as the CLI measured, so a CLI whose clock is off cannot move the retry schedule.
func (h *Hub) Report(ctx context.Context, client *ent.Client, in Report) (bool, error) {
	const op = "reportCliAttempt"
	o, err := in.outcome()
	if err != nil {
		return false, err
	}
	if !strings.HasPrefix(in.LeaseToken, LeasePrefix) {
		return false, fault.E(op, fault.InvalidInput, "leaseToken is not a CLI lease token")
	}
	d, err := client.Delivery.Query().
		Where(entdelivery.ID(in.DeliveryID)).
		WithRecipient(func(q *ent.RecipientQuery) { q.Select(recipient.FieldID, recipient.FieldMethod) }).
		WithRequest(func(q *ent.RequestQuery) {
			q.Select(request.FieldID, request.FieldServerID, request.FieldTraceParent)
		}).
		Only(ctx)
	if err != nil {
		return false, storage.Err(op, "delivery", err)
	}
	if d.Edges.Recipient == nil || d.Edges.Recipient.Method != recipient.MethodCLI {
		return false, fault.E(op, fault.InvalidInput, "delivery %d is not to a CLI recipient", d.ID)
	}
	if d.Status != entdelivery.StatusIN_PROGRESS || d.AttemptCount != in.Attempt || d.LeaseOwner != in.LeaseToken {
		return false, nil
	}
	now := h.cfg.Now()
	o.StartedAt = now
	if d.AttemptStartedAt != nil {
		o.StartedAt = *d.AttemptStartedAt
	}
	lease := scheduler.DefaultCLILease
	if d.LeaseExpiresAt != nil {
		lease = d.LeaseExpiresAt.Sub(o.StartedAt)
	}
	took := min(max(in.FinishedAt.Sub(in.StartedAt), 0), lease)
	o.FinishedAt = o.StartedAt.Add(took)
	if o.FinishedAt.After(now) {
		o.FinishedAt = now
		if now.Before(o.StartedAt) {
			o.FinishedAt = o.StartedAt
		}
	}
	if in.RetryAfterSeconds > 0 && webhook.AsksToWait(o.HTTPStatus) {
		o.RetryAfter = webhook.AfterSeconds(o.FinishedAt, uint64(in.RetryAfterSeconds))
	}
	c := delivery.Claim{
		DeliveryID: d.ID, TenantID: d.TenantID, RequestID: d.RequestID, RecipientID: d.RecipientID,
		Attempt: d.AttemptCount, MaxAttempts: d.MaxAttempts, Schedule: delivery.Schedule(d.RetrySchedule),
		FirstAttemptAt: o.StartedAt, StartedAt: o.StartedAt, Owner: d.LeaseOwner, ExpiresAt: d.ExpiresAt,
	}
	if d.FirstAttemptAt != nil {
		c.FirstAttemptAt = *d.FirstAttemptAt
	}
	if d.Edges.Request != nil {
		c.ServerID = d.Edges.Request.ServerID
	}
	// The viewer may see the delivery; recording it touches the attempt, the delivery and the request's
	// derived status, which is the system's bookkeeping rather than the viewer's own write.
	ok, err := h.cfg.Delivery.Record(viewer.SystemContext(ctx), client, c, o)
	if err != nil {
		return false, fault.Wrap(op, fault.Internal, err)
	}
	h.settle(d.RecipientID, in.LeaseToken)
	if ok && d.Edges.Request != nil {
		h.trace(d.Edges.Request.TraceParent, c, o)
	}
	return ok, nil
}

// trace records the reported attempt as a span of its request's trace, on the server's clock as it was
// recorded, under the span ID that the traceparent the CLI sent named (scheduler's loadCLI): derived from the
// lease token, which every process knows of the job.
func (h *Hub) trace(parent string, c delivery.Claim, o delivery.Outcome) {
	if span := delivery.StartAttempt(h.cfg.Tracer, parent, c, o.StartedAt, tracing.SpanIDOf(c.Owner)); span != nil {
		delivery.EndAttempt(span, o, o.FinishedAt)
	}
}

// outcome validates a report and turns it into an attempt outcome (times are set by the caller).
func (in Report) outcome() (delivery.Outcome, error) {
	const op = "reportCliAttempt"
	o := delivery.Outcome{HTTPStatus: in.HTTPStatus, ErrorKind: in.ErrorKind, ErrorMessage: strings.TrimSpace(in.ErrorMessage)}
	switch {
	case in.DeliveryID <= 0 || in.Attempt <= 0:
		return o, fault.E(op, fault.InvalidInput, "deliveryId and attempt are required")
	case in.HTTPStatus != 0 && (in.HTTPStatus < 100 || in.HTTPStatus > 999):
		return o, fault.E(op, fault.InvalidInput, "httpStatus must be an HTTP status code")
	case in.FinishedAt.Before(in.StartedAt):
		return o, fault.E(op, fault.InvalidInput, "finishedAt is before startedAt")
	case in.RetryAfterSeconds < 0:
		return o, fault.E(op, fault.InvalidInput, "retryAfterSeconds must not be negative")
	}
	switch o.ErrorKind {
	case "":
		if o.HTTPStatus == 0 {
			return o, fault.E(op, fault.InvalidInput, "give httpStatus, or errorKind when the local service did not answer")
		}
		if o.HTTPStatus < 200 || o.HTTPStatus > 299 {
			o.ErrorKind = delivery.ErrHTTPStatus
		}
	case delivery.ErrHTTPStatus:
		if o.HTTPStatus == 0 {
			return o, fault.E(op, fault.InvalidInput, "errorKind HTTP_STATUS needs httpStatus")
		}
	case delivery.ErrCLILocal, delivery.ErrTimeout:
	default:
		return o, fault.E(op, fault.InvalidInput, "a CLI reports errorKind CLI_LOCAL, TIMEOUT or HTTP_STATUS, not %s", o.ErrorKind)
	}
	if o.ErrorKind == delivery.ErrHTTPStatus && o.ErrorMessage == "" {
		o.ErrorMessage = "local service answered " + statusText(o.HTTPStatus)
	}
	if o.ErrorKind != "" && o.ErrorMessage == "" {
		o.ErrorMessage = "the adal CLI reported a failed local call"
	}
	if o.ErrorKind == "" {
		o.ErrorMessage = ""
	}
	if utf8.RuneCountInString(o.ErrorMessage) > maxErrorMessage {
		o.ErrorMessage = string([]rune(o.ErrorMessage)[:maxErrorMessage]) + "…"
	}
	o.ErrorMessage = strings.ToValidUTF8(o.ErrorMessage, "\uFFFD")
	return o, nil
}

func statusText(code int) string {
	return strings.TrimSpace(strconv.Itoa(code) + " " + http.StatusText(code))
}

// Backlog counts a recipient's backlog: pending deliveries created while no CLI was attached and never
// attempted. client carries the caller's viewer.
func Backlog(ctx context.Context, client *ent.Client, recipientID int) (int, error) {
	n, err := client.Delivery.Query().
		Where(entdelivery.RecipientID(recipientID), entdelivery.StatusEQ(entdelivery.StatusPENDING),
			entdelivery.Backlog(true), entdelivery.AttemptCount(0)).
		Count(ctx)
	return n, storage.Err("clihub.Backlog", "delivery", err)
}

// Greeting is the status line a CLI shows when it attached: which recipient, and what happens to the
// backlog of deliveries received while no CLI was attached.
func Greeting(rec *ent.Recipient, srv *ent.Server, backlog int) string {
	msg := fmt.Sprintf("recipient %q of server %q", rec.Name, srv.Name)
	switch {
	case backlog == 0:
	case srv.DeliverPendingOnConnect:
		msg += fmt.Sprintf("; %d pending delivery(ies) received while disconnected will be sent now (deliverPendingOnConnect is on)", backlog)
	default:
		msg += fmt.Sprintf("; %d pending delivery(ies) received while disconnected are kept back (deliverPendingOnConnect is off)", backlog)
	}
	if rec.State != recipient.StateACTIVE {
		msg += fmt.Sprintf("; the recipient is %s: nothing is sent until it is active again", rec.State)
	}
	return msg
}
